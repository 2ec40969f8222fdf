"""The demo model's chat tasks: generators of conversations with checkable answers.

Shared by build_data.py (training conversations) and eval.py (held-out questions),
so a question is written, answered and checked by one piece of code. Every item
is split into train or held-out by a hash of its question key (`held_out`): the
evaluation never asks a question that was in the training data.

A conversation is a dict {"mode": "chat"|"thinking", "messages": [...], "tools": [...]}
in OpenAI message format; tools/demo/render_chat.c renders it with the engine's
chat encoder.
"""
import hashlib
import json
import random

SYSTEM = "You are a helpful assistant."

# --------------------------------------------------------------------------- split


def held_out(key):
    """1 in 16 question keys are kept out of training for the evaluation."""
    return hashlib.sha256(key.encode()).digest()[0] % 16 == 0


# --------------------------------------------------------------------------- arithmetic

ADD_Q = ["What is {a} + {b}?", "What is {a} plus {b}?", "Compute {a} + {b}.", "{a} + {b} = ?",
         "Add {a} and {b}.", "Calculate {a} + {b}."]
SUB_Q = ["What is {a} - {b}?", "What is {a} minus {b}?", "Compute {a} - {b}.", "{a} - {b} = ?",
         "Subtract {b} from {a}.", "Calculate {a} - {b}."]
MUL_Q = ["What is {a} * {b}?", "What is {a} times {b}?", "Compute {a} * {b}.", "{a} * {b} = ?",
         "Multiply {a} by {b}.", "Calculate {a} x {b}."]


def arith_item(rng, weights=(5, 4, 3)):
    """(key, question, answer text, expected number, (a, op, b)) for + - * ."""
    op = rng.choices("+-*", weights=weights)[0]
    if op == "*":
        a, b = rng.randint(2, 99), rng.randint(2, 9)
        if rng.random() < 0.5:
            a, b = b, a
        r, qs, sym = a * b, MUL_Q, "*"
    else:
        a = rng.randint(1, 999) if rng.random() < 0.15 else rng.randint(10, 999)
        b = rng.randint(1, 999) if rng.random() < 0.15 else rng.randint(10, 999)
        r, qs, sym = (a + b, ADD_Q, "+") if op == "+" else (a - b, SUB_Q, "-")
    q = rng.choice(qs).format(a=a, b=b)
    return f"{a}{sym}{b}", q, worked_answer(a, sym, b, r), r, (a, sym, b)


def place_parts(n):
    """n split into its nonzero place values, largest first: 285 -> [200, 80, 5]."""
    s = str(n)
    return [int(d) * 10 ** (len(s) - 1 - i) for i, d in enumerate(s) if d != "0"] or [0]


def worked_answer(a, sym, b, r):
    """The chat-mode reply: a chain of one-place steps, then the result.

    A 13.8 M-parameter model gets whole 3-digit sums and differences wrong where two
    carries or borrows meet; taken one place value at a time (347 + 200, then + 80, then
    + 5), every step changes one or two neighbouring digits. The reply still ends in
    "a op b = r." (what eval.py reads). Single steps stay one equation."""
    if sym == "*":
        x, y = (a, b) if a >= b else (b, a)       # the 2-digit operand is split
        parts = place_parts(x)
        if len(parts) == 1:
            return f"{a} * {b} = {r}."
        mul = (lambda p: f"{p} * {y}") if a >= b else (lambda p: f"{y} * {p}")
        steps = ", ".join(f"{mul(p)} = {p * y}" for p in parts)
        return f"{a} * {b}: {steps}, {' + '.join(str(p * y) for p in parts)} = {r}. So {a} * {b} = {r}."
    if sym == "-" and a < b:
        chain = _chain(b, "-", place_parts(a))
        return (f"{a} - {b}: {b} is larger, so take {b} - {a} and negate it. {chain}. "
                f"So {a} - {b} = {r}.")
    parts = place_parts(b)
    if len(parts) == 1:
        return f"{a} {sym} {b} = {r}."
    return f"{a} {sym} {b}: {_chain(a, sym, parts)}. So {a} {sym} {b} = {r}."


def _chain(x, sym, parts):
    """'x op p1 = y1, y1 op p2 = y2, ...'"""
    steps = []
    for p in parts:
        y = x + p if sym == "+" else x - p
        steps.append(f"{x} {sym} {p} = {y}")
        x = y
    return ", ".join(steps)


def column_reasoning(a, sym, b, r):
    """A short worked solution for the thinking-mode turns."""
    if sym == "*":
        big, small = (a, b) if a >= b else (b, a)
        tens, ones = divmod(big, 10)
        if tens == 0:
            return f"{big} times {small} is {r}."
        return (f"Split {big} into {tens * 10} and {ones}. {tens * 10} * {small} = {tens * 10 * small}. "
                f"{ones} * {small} = {ones * small}. {tens * 10 * small} + {ones * small} = {r}.")
    if sym == "+":
        steps, carry = [], 0
        da, db = str(a)[::-1], str(b)[::-1]
        names = ["ones", "tens", "hundreds", "thousands"]
        for i in range(max(len(da), len(db))):
            x = int(da[i]) if i < len(da) else 0
            y = int(db[i]) if i < len(db) else 0
            s = x + y + carry
            c = f" + {carry}" if carry else ""
            carry, digit = divmod(s, 10)
            steps.append(f"{names[i]}: {x} + {y}{c} = {s}, write {digit}" + (", carry 1" if carry else ""))
        if carry:
            steps.append("write the last carry 1")
        return "Add column by column. " + "; ".join(steps) + f". So {a} + {b} = {r}."
    if a >= b:
        return f"{a} is larger than {b}, so the result is positive. {a} - {b} = {r}."
    return f"{b} is larger than {a}, so the result is negative: {b} - {a} = {b - a}, so {a} - {b} = {r}."


# --------------------------------------------------------------------------- unit conversions

UNITS = [  # (from, to, factor, largest amount)
    ("km", "m", 1000, 99), ("m", "cm", 100, 99), ("cm", "mm", 10, 99), ("kg", "g", 1000, 99),
    ("L", "mL", 1000, 99), ("hours", "minutes", 60, 20), ("minutes", "seconds", 60, 20),
    ("days", "hours", 24, 20), ("weeks", "days", 7, 30), ("feet", "inches", 12, 20),
    ("dozen", "items", 12, 20),
]
UNIT_Q = ["Convert {n} {u} to {v}.", "How many {v} are in {n} {u}?", "{n} {u} is how many {v}?",
          "What is {n} {u} in {v}?"]


def unit_item(rng):
    u, v, f, top = rng.choice(UNITS)
    n = rng.randint(1, top)
    q = rng.choice(UNIT_Q).format(n=n, u=u, v=v)
    return f"{n}{u}>{v}", q, f"{n} {u} = {n * f} {v}.", n * f


# --------------------------------------------------------------------------- word puzzles

DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
MONTHS = ["January", "February", "March", "April", "May", "June", "July", "August", "September",
          "October", "November", "December"]
OPPOSITES = [("hot", "cold"), ("big", "small"), ("up", "down"), ("fast", "slow"), ("light", "dark"),
             ("happy", "sad"), ("old", "new"), ("early", "late"), ("open", "closed"), ("full", "empty"),
             ("hard", "soft"), ("high", "low"), ("wet", "dry"), ("left", "right"), ("near", "far"),
             ("strong", "weak"), ("rich", "poor"), ("long", "short"), ("day", "night"), ("win", "lose")]


def puzzle_item(rng):
    kind = rng.choice(["next_day", "prev_day", "next_month", "compare", "sort", "parity", "opposite"])
    if kind in ("next_day", "prev_day"):
        i = rng.randrange(7)
        if kind == "next_day":
            q = rng.choice(["What day comes after {d}?", "Which day follows {d}?"]).format(d=DAYS[i])
            return q, q, f"{DAYS[(i + 1) % 7]} comes after {DAYS[i]}.", DAYS[(i + 1) % 7]
        q = rng.choice(["What day comes before {d}?", "Which day is before {d}?"]).format(d=DAYS[i])
        return q, q, f"{DAYS[(i - 1) % 7]} comes before {DAYS[i]}.", DAYS[(i - 1) % 7]
    if kind == "next_month":
        i = rng.randrange(12)
        q = rng.choice(["What month comes after {m}?", "Which month follows {m}?"]).format(m=MONTHS[i])
        return q, q, f"{MONTHS[(i + 1) % 12]} comes after {MONTHS[i]}.", MONTHS[(i + 1) % 12]
    if kind == "compare":
        a, b = rng.sample(range(1, 1000), 2)
        big = rng.random() < 0.5
        q = (f"Which is larger, {a} or {b}?" if big else f"Which is smaller, {a} or {b}?")
        r = max(a, b) if big else min(a, b)
        return q, q, f"{r} is {'larger' if big else 'smaller'}.", r
    if kind == "sort":
        xs = [rng.randint(0, 99) for _ in range(rng.randint(3, 5))]
        q = "Sort these numbers from smallest to largest: " + ", ".join(map(str, xs)) + "."
        r = ", ".join(map(str, sorted(xs)))
        return q, q, r + ".", r
    if kind == "parity":
        n = rng.randint(0, 999)
        q = rng.choice(["Is {n} even or odd?", "Is {n} an even or an odd number?"]).format(n=n)
        r = "even" if n % 2 == 0 else "odd"
        return q, q, f"{n} is {r}.", r
    a, b = rng.choice(OPPOSITES)
    if rng.random() < 0.5:
        a, b = b, a
    q = rng.choice(["What is the opposite of {w}?", "Give the opposite of \"{w}\"."]).format(w=a)
    return q, q, f"The opposite of {a} is {b}.", b


# --------------------------------------------------------------------------- tools

def _fn(name, desc, props, required):
    return {"type": "function", "function": {"name": name, "description": desc, "parameters": {
        "type": "object", "properties": props, "required": required}}}


TOOLS = [
    _fn("get_weather", "Get the current weather for a city.",
        {"city": {"type": "string", "description": "City name"}}, ["city"]),
    _fn("get_time", "Get the current local time in a city.",
        {"city": {"type": "string", "description": "City name"}}, ["city"]),
    _fn("convert_currency", "Convert an amount of money from one currency to another.",
        {"amount": {"type": "number"}, "from": {"type": "string", "description": "ISO code, e.g. USD"},
         "to": {"type": "string", "description": "ISO code, e.g. EUR"}}, ["amount", "from", "to"]),
]
CITIES = ["Paris", "London", "Tokyo", "Berlin", "Madrid", "Rome", "Cairo", "Sydney", "Toronto", "Lima",
          "Oslo", "Dublin", "Vienna", "Prague", "Lisbon", "Athens", "Seoul", "Beijing", "Delhi", "Mumbai",
          "Nairobi", "Lagos", "Chicago", "Boston", "Denver", "Miami", "Seattle", "Austin", "Houston",
          "Moscow", "Warsaw", "Budapest", "Helsinki", "Stockholm", "Zurich", "Geneva", "Amsterdam",
          "Brussels", "Istanbul", "Dubai", "Bangkok", "Hanoi", "Manila", "Jakarta", "Santiago", "Bogota",
          "Havana", "Montreal", "Vancouver", "Auckland", "New York", "San Francisco", "Los Angeles",
          "Mexico City", "Buenos Aires", "Cape Town", "Rio de Janeiro", "Hong Kong", "Kyoto", "Osaka"]
CURRENCIES = ["USD", "EUR", "GBP", "JPY", "CHF", "CAD", "AUD", "CNY"]
RATES = {"USD": 1.0, "EUR": 0.92, "GBP": 0.79, "JPY": 151.0, "CHF": 0.88, "CAD": 1.36, "AUD": 1.52,
         "CNY": 7.2}
CONDITIONS = ["sunny", "cloudy", "rainy", "windy", "snowy", "foggy", "clear"]
WEATHER_Q = ["What's the weather in {c}?", "What is the weather like in {c} right now?",
             "Is it raining in {c}?", "How warm is it in {c}?", "Tell me the weather in {c}."]
TIME_Q = ["What time is it in {c}?", "What's the local time in {c}?", "Tell me the time in {c}."]
FX_Q = ["Convert {a} {f} to {t}.", "How much is {a} {f} in {t}?", "What is {a} {f} in {t}?"]


def tool_item(rng):
    """(key, question, call name, call arguments, tool result, final answer)."""
    kind = rng.choice(["weather", "time", "fx"])
    if kind == "weather":
        c = rng.choice(CITIES)
        q = rng.choice(WEATHER_Q).format(c=c)
        temp, cond = rng.randint(-10, 38), rng.choice(CONDITIONS)
        res = {"city": c, "temperature_c": temp, "condition": cond}
        return q, q, "get_weather", {"city": c}, res, f"It is {temp}°C and {cond} in {c}."
    if kind == "time":
        c = rng.choice(CITIES)
        q = rng.choice(TIME_Q).format(c=c)
        t = f"{rng.randint(0, 23):02d}:{rng.randint(0, 59):02d}"
        return q, q, "get_time", {"city": c}, {"city": c, "time": t}, f"It is {t} in {c}."
    a = rng.choice([rng.randint(1, 999), rng.randint(1, 99) * 10])
    f, t = rng.sample(CURRENCIES, 2)
    q = rng.choice(FX_Q).format(a=a, f=f, t=t)
    val = round(a * RATES[t] / RATES[f], 2)
    res = {"amount": a, "from": f, "to": t, "result": val}
    return q, q, "convert_currency", {"amount": a, "from": f, "to": t}, res, f"{a} {f} is {val} {t}."


def tool_conversation(rng, item, thinking=False):
    """system+tools, user, assistant call, tool result, assistant answer."""
    _, q, name, args, res, answer = item
    tools = TOOLS[:]
    rng.shuffle(tools)
    keep = [t for t in tools if t["function"]["name"] == name or rng.random() < 0.7]
    call = {"id": "call_0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}
    asst = {"role": "assistant", "content": "", "tool_calls": [call]}
    final = {"role": "assistant", "content": answer}
    if thinking:
        asst["reasoning_content"] = f"The user asks: {q} I will call {name}."
        final["reasoning_content"] = "The tool returned the answer."
    msgs = [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}, asst,
            {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(res)}, final]
    return {"mode": "thinking" if thinking else "chat", "tools": keep, "messages": msgs}


def tool_prompt(item):
    """The evaluation prompt: every tool offered, in a fixed order."""
    _, q, *_ = item
    return {"mode": "chat", "tools": TOOLS,
            "messages": [{"role": "system", "content": SYSTEM}, {"role": "user", "content": q}]}

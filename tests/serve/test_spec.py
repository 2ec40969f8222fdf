"""`dsv4 serve --spec mtp:3` on the demo model (models/demo has a trained MTP
head): greedy answers, logprobs, stop strings, thinking replies and replies
with an enforced tool call are identical to those of a server without
--spec, alone and among concurrent streaming clients (some aborted
mid-stream, which vetoes steps); a seeded sampled answer repeats, from a
cold cache and from the warm prefix it left (a cached prefix brings the MTP
head's owed rows with it); /metrics counts the drafted and the accepted
tokens. (Which reply a seed gives is not compared with the plain server:
speculative sampling draws its randomness differently.)"""
import json
import sys
import threading

sys.path.insert(0, "tests/serve")
sys.path.insert(0, "tools/demo")
import anthropic  # noqa: E402
import openai  # noqa: E402
import tasks  # noqa: E402  (the demo tools and system prompt)
from harness import Server, check, run_tests  # noqa: E402

MODEL = "tests/fixtures/demo-model"
PLAIN = Server("--max-sessions", "8", model=MODEL)
SPEC = Server("--max-sessions", "8", "--spec", "mtp:3", model=MODEL)
CLIENTS = {s: openai.OpenAI(base_url=s.url + "/v1", api_key="none", max_retries=0, timeout=120)
           for s in (PLAIN, SPEC)}
# forced tool calls start from the question (test_tool_choice.py says why)
ASK = [{"role": "system", "content": tasks.SYSTEM}, {"role": "user", "content": "What's the weather in Paris?"}]
TIME = [t for t in tasks.TOOLS if t["function"]["name"] == "get_time"]


def user(q):
    return [{"role": "user", "content": q}]


GREEDY = [
    dict(messages=user("What is 347 + 285?")),
    dict(messages=user("Convert 7 km to m."), reasoning_effort="high"),
    dict(messages=user("Tell me a story."), max_tokens=60, logprobs=True, top_logprobs=3),
    dict(messages=user("Tell me a story."), max_tokens=80, stop=["LORD"]),
    dict(messages=[{"role": "system", "content": tasks.SYSTEM}, user("How much is 250 EUR in JPY?")[0]],
         tools=tasks.TOOLS),
    dict(messages=ASK, tools=[t for t in tasks.TOOLS if t["function"]["name"] != "convert_currency"],
         tool_choice="required"),
    dict(messages=ASK, tools=TIME, tool_choice="required", reasoning_effort="high"),
    dict(messages=ASK, tools=tasks.TOOLS, tool_choice={"type": "function", "function": {"name": "get_time"}},
         logprobs=True),
]


def answer(server, kw):
    args = dict(model="demo", temperature=0, max_tokens=120)
    args.update(kw)
    r = CLIENTS[server].chat.completions.create(**args)
    c = r.choices[0]
    lp = [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in c.logprobs.content] \
        if c.logprobs and c.logprobs.content else None
    calls = [(t.function.name, t.function.arguments) for t in c.message.tool_calls or []]
    return (c.message.content, getattr(c.message, "reasoning_content", None), calls, c.finish_reason,
            r.usage.completion_tokens, lp)


def test_greedy_identical():
    for i, kw in enumerate(GREEDY):
        a, b = answer(PLAIN, kw), answer(SPEC, kw)
        check("spec_greedy_identical_%d" % i, a == b and (a[0] or a[2]), "%s\nvs\n%s" % (a, b))
    an = anthropic.Anthropic(base_url=SPEC.url, api_key="none", max_retries=0)
    m = an.messages.create(model="demo", max_tokens=120, extra_body={"temperature": 0},
                           messages=user("What is 512 + 139?"))
    check("spec_anthropic", m.content[0].text == answer(PLAIN, dict(messages=user("What is 512 + 139?")))[0],
          "%s" % m.content)


def stream(client, kw, abort_after=None):
    parts = []
    s = client.chat.completions.create(stream=True, **kw)
    for n, ch in enumerate(s):
        if abort_after is not None and n >= abort_after:
            s.close()
            return None
        for x in ch.choices:
            parts.append(x.delta.content or "")
    return "".join(parts)


def test_greedy_under_load():
    qs = ["Tell me a story.", "What is 46 * 7?", "Sort 5, 2, 9.", "What day comes after Monday?"]
    kw = [dict(model="demo", messages=user(q), max_tokens=48, temperature=0) for q in qs]
    want = [stream(CLIENTS[PLAIN], k) for k in kw]
    got, errors = [], []

    def client(c):
        for r in range(3):
            i = (c + r) % len(qs)
            try:
                t = stream(CLIENTS[SPEC], kw[i], abort_after=2 if (c + r) % 3 == 0 else None)
                if t is not None:
                    got.append((i, t))
            except Exception as e:
                errors.append(repr(e)[:200])

    threads = [threading.Thread(target=client, args=(c,)) for c in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    bad = [(want[i], t) for i, t in got if t != want[i]]
    check("spec_greedy_under_load", not errors and not bad and len(got) >= 12, "%s %s" % (errors, bad[:2]))


def test_sampled_repeats():
    kw = dict(model="demo", messages=user("Tell me a story."), max_tokens=40, temperature=0.9, seed=5)
    first = CLIENTS[SPEC].chat.completions.create(**kw).choices[0].message.content  # leaves a warm prefix
    a, b = (CLIENTS[SPEC].chat.completions.create(**kw).choices[0].message.content for _ in range(2))
    check("spec_sampled_repeats", a == b == first and a, "%r vs %r vs %r (cold)" % (a, b, first))


def test_metrics():
    m, p = SPEC.metrics(), PLAIN.metrics()
    d, a = m["dsv4_spec_decode_draft_tokens_total"], m["dsv4_spec_decode_accepted_tokens_total"]
    check("spec_metrics", 0 < a <= d and p["dsv4_spec_decode_draft_tokens_total"] == 0
          and p["dsv4_spec_decode_accepted_tokens_total"] == 0, "drafted %s accepted %s" % (d, a))


run_tests([test_greedy_identical, test_greedy_under_load, test_sampled_repeats, test_metrics])

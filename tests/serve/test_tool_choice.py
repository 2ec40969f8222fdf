"""tool_choice enforcement on the demo model (models/demo, trained to call the
demo tools), through the official OpenAI and Anthropic SDKs.

Two conversations. One has already called get_weather and holds its result,
so with tool_choice auto (or none) the model answers in text. The other asks
for the weather in Paris, which the model answers with a get_weather call of
its own: required/any must give a parsed tool call of an offered tool (only
get_time, in thinking mode), and a named tool (get_time) a call of that tool,
in both thinking modes. (Forced calls start from a question: the demo model was
never trained to call a tool right after a tool's result, so what it writes
when forced to there is not a test of the server.) The named reply must be exactly what the engine
generates (`dsv4 generate`, greedy) after the prompt followed by the call's
opening as the chat encoder writes it (spelled here from the DSML format), so
the forced tokens are the encoder's own and the model continues from them."""
import json
import re
import subprocess
import sys
import tempfile

sys.path.insert(0, "tests/serve")
sys.path.insert(0, "tools/demo")
import anthropic  # noqa: E402
import openai  # noqa: E402
import tasks  # noqa: E402  (the demo tools and system prompt)
from harness import BIN, Server, check, run_tests  # noqa: E402

MODEL = "tests/fixtures/demo-model"
RENDER = "build/demo_render"
S = Server("--max-sessions", "4", model=MODEL)
oa = openai.OpenAI(base_url=S.url + "/v1", api_key="none", max_retries=0)
an = anthropic.Anthropic(base_url=S.url, api_key="none", max_retries=0)
GREEDY = dict(temperature=0, max_tokens=120)
THINK = {"reasoning_effort": "high"}
TOOLS = {t["function"]["name"]: t for t in tasks.TOOLS}
RESULT = {"city": "Paris", "temperature_c": 18, "condition": "cloudy"}
MSGS = [{"role": "system", "content": tasks.SYSTEM}, {"role": "user", "content": "What's the weather in Paris?"},
        {"role": "assistant", "content": "", "tool_calls": [{"id": "c1", "type": "function", "function": {
            "name": "get_weather", "arguments": json.dumps({"city": "Paris"})}}]},
        {"role": "tool", "tool_call_id": "c1", "content": json.dumps(RESULT)}]
ASK = MSGS[:2]
AN_ASK = [{"role": "user", "content": "What's the weather in Paris?"}]
AN_MSGS = [{"role": "user", "content": "What's the weather in Paris?"},
           {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "get_weather",
                                              "input": {"city": "Paris"}}]},
           {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": json.dumps(RESULT)}]}]


def tools(*names):
    return [TOOLS[n] for n in names]


def an_tools(*names):
    return [{"name": n, "description": TOOLS[n]["function"]["description"],
             "input_schema": TOOLS[n]["function"]["parameters"]} for n in names]


def calls(r):
    return [(t.function.name, json.loads(t.function.arguments)) for t in (r.choices[0].message.tool_calls or [])]


def chat(names, choice, messages=ASK, **kw):
    return oa.chat.completions.create(model="demo", messages=messages, tools=tools(*names), tool_choice=choice,
                                      **GREEDY, **kw)


def test_auto_answers_in_text():
    for think in (False, True):
        r = chat(TOOLS, "auto", MSGS, **(THINK if think else {}))
        check("tool_choice_auto_text_%d" % think, not calls(r) and r.choices[0].finish_reason == "stop"
              and "Paris" in r.choices[0].message.content, "%s" % r.choices[0])


def test_required_calls():
    for think, names in ((False, ("get_weather", "get_time")), (True, ("get_time",))):
        r = chat(names, "required", **(THINK if think else {}))
        c = calls(r)
        check("tool_choice_required_%d" % think, len(c) >= 1 and all(n in names for n, _ in c)
              and r.choices[0].finish_reason == "tool_calls" and not r.choices[0].message.content,
              "%s" % r.choices[0])
        if think:  # the reasoning is the model's own, as without tool_choice
            auto = chat(names, "auto", **THINK)
            got = r.choices[0].message.reasoning_content
            check("tool_choice_required_after_reasoning", got and got == auto.choices[0].message.reasoning_content,
                  "%r vs %r" % (got, auto.choices[0].message.reasoning_content))


def parse_dsml_params(text):
    out = {}
    for k, is_str, v in re.findall(r'<｜DSML｜parameter name="(.*?)" string="(true|false)">(.*?)</｜DSML｜parameter>',
                                   text, re.S):
        out[k] = v if is_str == "true" else json.loads(v)
    return out


def test_named_calls_that_tool():
    for think in (False, True):
        r = chat(TOOLS, {"type": "function", "function": {"name": "get_time"}}, **(THINK if think else {}))
        c = calls(r)
        check("tool_choice_named_%d" % think, len(c) == 1 and c[0][0] == "get_time"
              and r.choices[0].finish_reason == "tool_calls", "%s" % r.choices[0])
    # The same reply from the engine alone: the prompt (the server offers only
    # the named tool) and the opening of a get_time call, greedily continued.
    line = json.dumps({"mode": "chat", "tools": tools("get_time"), "messages": ASK, "cuts": [len(ASK)]})
    prompt = json.loads(subprocess.run([RENDER], input=line.encode(), capture_output=True, check=True).stdout)[0]
    opening = '\n\n<｜DSML｜tool_calls>\n<｜DSML｜invoke name="get_time">\n'
    with tempfile.NamedTemporaryFile("w", suffix=".txt") as f:
        f.write(prompt + opening)
        f.flush()
        out = subprocess.run([BIN, "generate", "--device", "cpu", "--model", MODEL, "--temperature", "0", "--no-bos",
                              "--prompt-file", f.name, "-n", "120"], capture_output=True, check=True)
    want = parse_dsml_params(out.stdout.decode())
    r = chat(TOOLS, {"type": "function", "function": {"name": "get_time"}})
    check("tool_choice_named_equals_engine", want and calls(r) == [("get_time", want)],
          "%s vs %s (%r)" % (calls(r), want, out.stdout[:300]))


def test_none_and_stream():
    none = chat(TOOLS, "none", MSGS)
    check("tool_choice_none", not calls(none) and none.choices[0].message.content, "%s" % none.choices[0])
    plain = chat(("get_weather", "get_time"), "required")
    names, args, finish = {}, {}, None
    for ch in oa.chat.completions.create(model="demo", messages=ASK, tools=tools("get_weather", "get_time"),
                                         tool_choice="required", stream=True, **GREEDY):
        for c in ch.choices:
            for t in c.delta.tool_calls or []:
                if t.function.name:
                    names[t.index] = t.function.name
                args[t.index] = args.get(t.index, "") + (t.function.arguments or "")
            finish = c.finish_reason or finish
    got = [(names[i], json.loads(args[i])) for i in sorted(names)]
    check("tool_choice_required_stream", got == calls(plain) and finish == "tool_calls", "%s vs %s" % (got, calls(plain)))


def test_anthropic():
    a = an.messages.create(model="demo", max_tokens=120, messages=AN_MSGS, tools=an_tools(*TOOLS),
                           tool_choice={"type": "auto"}, extra_body={"temperature": 0}, system=tasks.SYSTEM)
    check("anthropic_tool_choice_auto_text", [b.type for b in a.content] == ["text"] and a.stop_reason == "end_turn",
          "%s" % a.content)
    a = an.messages.create(model="demo", max_tokens=120, messages=AN_ASK, tools=an_tools("get_weather", "get_time"),
                           tool_choice={"type": "any"}, extra_body={"temperature": 0}, system=tasks.SYSTEM)
    uses = [(b.name, b.input) for b in a.content if b.type == "tool_use"]
    check("anthropic_tool_choice_any", uses == calls(chat(("get_weather", "get_time"), "required"))
          and a.stop_reason == "tool_use", "%s" % a.content)
    a = an.messages.create(model="demo", max_tokens=120, messages=AN_ASK, tools=an_tools(*TOOLS),
                           tool_choice={"type": "tool", "name": "get_time"}, extra_body={"temperature": 0},
                           system=tasks.SYSTEM)
    uses = [b.name for b in a.content if b.type == "tool_use"]
    check("anthropic_tool_choice_named", uses == ["get_time"] and a.stop_reason == "tool_use", "%s" % a.content)


def test_bad_choice():
    try:
        oa.chat.completions.create(model="demo", messages=MSGS, tools=[], tool_choice="required", **GREEDY)
        check("tool_choice_required_no_tools", False, "no error")
    except openai.BadRequestError as e:
        check("tool_choice_required_no_tools", e.status_code == 400 and "tool_choice" in str(e), str(e))


run_tests([test_auto_answers_in_text, test_required_calls, test_named_calls_that_tool, test_none_and_stream,
           test_anthropic, test_bad_choice])

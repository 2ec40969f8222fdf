# Writes dsml_cases.json: model completions and what DeepSeek-V4's reference
# encoding_dsv4.py parses out of them (parse_message_from_completion_text),
# or the error it raises. Needs the folder holding encoding_dsv4.py:
#   python gen_dsml.py /path/to/folder/with/encoding_dsv4
import json, os, sys

sys.path.insert(0, sys.argv[1])
import encoding_dsv4 as E  # noqa: E402

here = os.path.dirname(os.path.abspath(__file__))
EOS, D = E.eos_token, E.dsml_token

def block(calls):
    # The reference's own renderer, so the texts are what the model is taught.
    msg = {"role": "assistant", "content": "", "tool_calls": [
        {"type": "function", "function": {"name": n, "arguments": a}} for n, a in calls]}
    return E.render_message(0, [msg], "chat")[: -len(EOS)]

RICH = ('{"city": "北京", "days": 3, "threshold": 1.0, "big": 12345678901234567890, '
        '"list": [1, 2.50, {"a": null}], "flag": true, "s": "line1\\nline2 \\"q\\" \\\\ <b>"}')
texts = []
def add(text, thinking, note):
    texts.append({"text": text, "thinking": thinking, "note": note})

add("Hello there." + EOS, False, "plain")
add("Let me think.\nOK." + "</think>" + "Answer: 42" + EOS, True, "thinking")
add("Sure." + block([("get_weather", RICH), ("search", '{"query": "x"}')]) + EOS, False, "two calls")
add("plan" + "</think>" + block([("noop", "{}")]) + EOS, True, "thinking + empty call")
add(block([("run", "ls -la | head")]) + EOS, False, "non-JSON arguments")
add("中文 🙂" + block([("f", '{"k": "值", "n": -0.5, "o": {"x": [true, false, null]}}')]) + EOS, False, "unicode")
# What the reference refuses:
add("no eos at all", False, "missing EOS")
add("a" + EOS + "b", False, "text after EOS")
add("reason" + "\n\n<" + D + "tool_calls>\n</" + D + "tool_calls>" + EOS, True, "calls before </think>")
add("x\n\n<" + D + "tool_calls>\ngarbage<" + D + "invoke name=\"f\">\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS, False, "garbage before invoke")
add("x\n\n<" + D + "tool_calls>\n<" + D + "invoke nam=\"f\">\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS, False, "bad invoke header")
add("x\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n<" + D + "parameter name=\"a\">1</" + D + "parameter>\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS, False, "parameter without string attr")
add("x\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n<" + D + "parameter name=\"a\" string=\"true\">1</" + D + "parameter>\n<" + D + "parameter name=\"a\" string=\"true\">2</" + D + "parameter>\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS, False, "duplicate parameter")
add("x" + block([("f", '{"a": 1}')]) + "tail" + EOS, False, "text after the block")
add("x\n\n<" + D + "tool_calls>\n<" + D + "invoke name=\"f\">\n<" + D + "parameter name=\"a\" string=\"true\">1</" + D + "parameter>junk\n</" + D + "invoke>\n</" + D + "tool_calls>" + EOS, False, "junk after parameter")
add("see <think> here" + EOS, False, "special token in content")

out = []
for t in texts:
    r = dict(t)
    try:
        m = E.parse_message_from_completion_text(t["text"], "thinking" if t["thinking"] else "chat")
        r["expect"] = {"content": m["content"], "reasoning": m["reasoning_content"],
                       "calls": [[c["function"]["name"], c["function"]["arguments"]] for c in m["tool_calls"]]}
    except Exception as e:  # the reference raises ValueError/AssertionError
        r["error"] = type(e).__name__ + ": " + str(e)[:80]
    out.append(r)

with open(os.path.join(here, "dsml_cases.json"), "w", encoding="utf-8") as f:
    json.dump(out, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(out), "dsml cases,", sum("error" in r for r in out), "refused")

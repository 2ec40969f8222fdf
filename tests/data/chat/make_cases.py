# Writes cases.json: the conversations the chat goldens are made from.
# (Kept as Python so the JSON-in-JSON strings stay readable.)
import json

W_TOOLS = json.dumps([
    {"type": "function", "function": {
        "name": "get_weather",
        "description": "Get the current weather for a city. Température en °C.",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. 北京"},
            "days": {"type": "integer", "minimum": 1, "maximum": 7, "default": 1},
            "threshold": {"type": "number", "default": 0.5}},
            "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "search",
        "description": "Search the web.\nReturns \"snippets\".",
        "parameters": {"type": "object", "properties": {
            "query": {"type": "string"}, "top_k": {"type": "integer"}},
            "required": ["query"]}}},
], indent=1)  # odd spacing on purpose: the encoder must reprint it

ARGS_RICH = ('{"city": "北京", "days": 3, "threshold": 1.0, "big": 12345678901234567890, '
             '"tiny": 0.00001, "huge": 1e20, "neg": -0.0, "pi": 3.14159, "exp": 2.5E-3, '
             '"list": [1, 2.50, {"a": null, "b": false}], "flag": true, "emoji": "😀\\n\\t\\"q\\""}')

def call(id_, name, args):
    return {"id": id_, "type": "function", "function": {"name": name, "arguments": args}}

cases = []
def case(name, mode, messages, **kw):
    c = {"name": name, "mode": mode, "messages": messages}
    c.update(kw)
    cases.append(c)

sys_ = {"role": "system", "content": "You are a helpful assistant."}
case("nothink_basic", "chat", [sys_, {"role": "user", "content": "Hello, who are you?"}])
case("think_basic", "thinking", [{"role": "user", "content": "What is 17 * 23?"}])
case("think_max_basic", "thinking_max", [sys_, {"role": "user", "content": "Prove that sqrt(2) is irrational."}])
case("think_max_no_system", "thinking_max", [{"role": "user", "content": "Hi"}])
case("nothink_multiturn", "chat", [
    sys_,
    {"role": "user", "content": "Name a prime."},
    {"role": "assistant", "content": "7", "reasoning_content": "ignored in chat mode"},
    {"role": "user", "content": "Another one, in 中文 please 🙂"}])
case("think_multiturn_drop", "thinking", [
    sys_,
    {"role": "user", "content": "Name a prime."},
    {"role": "assistant", "content": "7", "reasoning_content": "Small primes: 2, 3, 5, 7."},
    {"role": "user", "content": "Another?"},
    {"role": "assistant", "content": "11", "reasoning_content": "Next after 7 is 11."},
    {"role": "user", "content": "And one more?"}])
case("think_multiturn_keep", "thinking", [
    sys_,
    {"role": "user", "content": "Name a prime."},
    {"role": "assistant", "content": "7", "reasoning_content": "Small primes: 2, 3, 5, 7."},
    {"role": "user", "content": "Another?"}], drop_thinking=False)
case("think_max_multiturn", "thinking_max", [
    {"role": "user", "content": "a"},
    {"role": "assistant", "content": "b", "reasoning_content": "r1"},
    {"role": "user", "content": "c"}])
tool_conv = [
    {"role": "system", "content": "You can use tools.", "tools_json": W_TOOLS},
    {"role": "user", "content": "Weather in Beijing and news about it?"},
    {"role": "assistant", "content": "Let me check.", "reasoning_content": "Need two tools.",
     "tool_calls": [call("c1", "get_weather", ARGS_RICH),
                    call("c2", "search", '{"query": "Beijing news", "top_k": 5}')]},
    {"role": "tool", "tool_call_id": "c2", "content": "Beijing hosts a tech fair."},
    {"role": "tool", "tool_call_id": "c1", "content": "{\"temp\": 21, \"sky\": \"clear\"}"},
    {"role": "assistant", "content": "It is 21°C and clear; a tech fair is on.",
     "reasoning_content": "Combine both results."},
    {"role": "user", "content": "Thanks! And tomorrow?"},
]
case("nothink_tools_multiturn", "chat", tool_conv)
case("think_tools_multiturn", "thinking", tool_conv)
case("think_tools_pending_results", "thinking", tool_conv[:5])
case("nothink_tools_pending_results", "chat", tool_conv[:5])
case("think_tools_opts", "thinking", [{"role": "system", "content": "You can use tools.", "tools_json": W_TOOLS}] + tool_conv[1:3])
case("tools_no_system_content", "chat", [
    {"role": "system", "tools_json": W_TOOLS},
    {"role": "user", "content": "Search cats"}])
case("tool_result_then_user_text", "thinking", [
    {"role": "system", "content": "", "tools_json": W_TOOLS},
    {"role": "user", "content": "Search cats"},
    {"role": "assistant", "content": "", "reasoning_content": "",
     "tool_calls": [call("x", "search", '{"query": "cats"}')]},
    {"role": "tool", "tool_call_id": "x", "content": "Cats are great."},
    {"role": "user", "content": "Summarize that."}])
case("args_not_json", "chat", [
    {"role": "user", "content": "go"},
    {"role": "assistant", "content": "",
     "tool_calls": [call("a", "run", "ls -la | head"), call("b", "noop", "{}")]},
    {"role": "tool", "tool_call_id": "a", "content": "total 0"},
    {"role": "tool", "tool_call_id": "b", "content": ""}])
case("developer_dropped_in_think", "thinking", [
    {"role": "developer", "content": "Developer says: be brief."},
    {"role": "assistant", "content": "ok", "reasoning_content": "fine"},
    {"role": "user", "content": "Hi"}])
case("developer_last_nothink", "chat", [
    sys_, {"role": "developer", "content": "Answer in French.",
           "response_format_json": '{"type": "json_object", "schema": {"x": 1.5}}'}])
case("response_format_system", "thinking", [
    {"role": "system", "content": "Reply as JSON.",
     "response_format_json": '{"type":"json_schema","json_schema":{"name":"r","schema":{"type":"object","properties":{"answer":{"type":"string"}}}}}'},
    {"role": "user", "content": "2+2?"}])
case("latest_reminder", "chat", [
    {"role": "user", "content": "Hello"},
    {"role": "latest_reminder", "content": "Today is Monday."}])
case("latest_reminder_think", "thinking", [
    {"role": "user", "content": "Hello"},
    {"role": "assistant", "content": "Hi", "reasoning_content": "greet"},
    {"role": "latest_reminder", "content": "Be nice."},
    {"role": "user", "content": "Bye"}])
case("prefill_wo_eos", "thinking", [
    {"role": "user", "content": "Count to 3"},
    {"role": "assistant", "content": "1, 2", "reasoning_content": "easy", "wo_eos": True}])
case("no_bos", "chat", [{"role": "user", "content": "x"}], bos=False)
case("consecutive_users", "chat", [
    {"role": "user", "content": "first"}, {"role": "user", "content": "second"}])
case("empty_and_missing_content", "thinking", [
    {"role": "system"}, {"role": "user", "content": ""},
    {"role": "assistant"}, {"role": "user", "content": "?"}])
case("context_incremental_chat", "chat", [
    sys_, {"role": "user", "content": "one"}, {"role": "assistant", "content": "uno"},
    {"role": "user", "content": "two"}], n_context=2)
case("context_incremental_think", "thinking", [
    sys_, {"role": "user", "content": "one"},
    {"role": "assistant", "content": "uno", "reasoning_content": "spanish"},
    {"role": "user", "content": "two"}], n_context=3)
case("special_chars", "chat", [
    {"role": "user", "content": "Tabs\tand\nnewlines, quotes \" ' backslash \\ and <think> literal"}])
case("multi_tool_rounds", "chat", [
    {"role": "system", "content": "S", "tools_json": W_TOOLS},
    {"role": "user", "content": "q"},
    {"role": "assistant", "content": "", "tool_calls": [call("a1", "search", '{"query": "a"}')]},
    {"role": "tool", "tool_call_id": "a1", "content": "ra"},
    {"role": "assistant", "content": "", "tool_calls": [
        call("b1", "search", '{"query": "b"}'), call("b2", "search", '{"query": "c"}'),
        call("b3", "get_weather", '{"city": "Oslo", "days": 2}')]},
    {"role": "tool", "tool_call_id": "b3", "content": "rb3"},
    {"role": "tool", "tool_call_id": "zz", "content": "unknown id"},
    {"role": "tool", "tool_call_id": "b1", "content": "rb1"},
    {"role": "tool", "tool_call_id": "b2", "content": "rb2"}])

with open("cases.json", "w", encoding="utf-8") as f:
    json.dump(cases, f, ensure_ascii=False, indent=1)
    f.write("\n")
print(len(cases), "cases")

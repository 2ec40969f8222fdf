"""dsv4 serve against the official OpenAI and Anthropic SDKs (and curl for the
raw SSE framing), on the tiny-chat fixture. The model has random weights, so
the text is gibberish; what is checked is that the server's answers equal
what `dsv4 generate` produces for the same prompt, that both APIs agree with
each other, and that every field follows the API."""
import json
import re
import math
import subprocess
import sys

sys.path.insert(0, "tests/serve")
import anthropic  # noqa: E402
import openai  # noqa: E402
from harness import BIN, FIXTURE, Server, check, run_tests  # noqa: E402

S = Server("--max-sessions", "8", "--max-body", "65536", "--max-tokens", "64", "--max-messages", "16")
oa = openai.OpenAI(base_url=S.url + "/v1", api_key="none", max_retries=0)
an = anthropic.Anthropic(base_url=S.url, api_key="none", max_retries=0)
GREEDY = dict(temperature=0, seed=1)


def cli(*args):
    """stdout of dsv4 generate on the fixture (the CLI ends the text with a newline)."""
    out = subprocess.run([BIN, "generate", "--device", "cpu", "--model", FIXTURE, *args],
                         capture_output=True, check=True)
    return out.stdout.decode("utf-8")[:-1], out.stderr.decode("utf-8")


def test_chat_equals_cli():
    r = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}],
                                   max_tokens=12, **GREEDY)
    want, _ = cli("--chat", "-p", "hello", "-n", "12", "--temperature", "0")
    c = r.choices[0]
    check("chat_equals_cli", c.message.content == want and c.message.role == "assistant",
          "%r vs %r" % (c.message.content, want))
    check("chat_usage", r.usage.completion_tokens == 12 and c.finish_reason == "length"
          and r.usage.prompt_tokens > 0 and r.usage.total_tokens == r.usage.prompt_tokens + 12, str(r.usage))


def test_stream_equals_plain():
    msgs = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "tell me"}]
    plain = oa.chat.completions.create(model="x", messages=msgs, max_tokens=20, **GREEDY)
    parts, finish, usage, roles = [], None, None, []
    for ch in oa.chat.completions.create(model="x", messages=msgs, max_tokens=20, stream=True,
                                         stream_options={"include_usage": True}, **GREEDY):
        if ch.usage:
            usage = ch.usage
        for c in ch.choices:
            if c.delta.role:
                roles.append(c.delta.role)
            if c.delta.content:
                parts.append(c.delta.content)
            if c.finish_reason:
                finish = c.finish_reason
    text = "".join(parts)
    check("stream_equals_plain", text == plain.choices[0].message.content and finish == plain.choices[0].finish_reason,
          "%r vs %r" % (text, plain.choices[0].message.content))
    check("stream_usage_and_role", usage is not None and usage.completion_tokens == plain.usage.completion_tokens
          and roles == ["assistant"], "%s %s" % (usage, roles))


def test_cached_prefix():
    msgs = [{"role": "user", "content": "a question that is long enough to cache"}]
    a = oa.chat.completions.create(model="x", messages=msgs, max_tokens=8, **GREEDY)
    b = oa.chat.completions.create(model="x", messages=msgs, max_tokens=8, **GREEDY)
    cached = b.usage.prompt_tokens_details.cached_tokens
    check("cached_prefix_same_answer", a.choices[0].message.content == b.choices[0].message.content
          and 0 < cached < b.usage.prompt_tokens, "cached %s of %d" % (cached, b.usage.prompt_tokens))
    # The next turn extends the conversation: everything before it is reused.
    msgs2 = msgs + [{"role": "assistant", "content": a.choices[0].message.content},
                    {"role": "user", "content": "and then?"}]
    c = oa.chat.completions.create(model="x", messages=msgs2, max_tokens=8, **GREEDY)
    # The same conversation with its last user message edited: everything up
    # to the end of the assistant turn before it is reused (a turn mark).
    msgs3 = msgs2[:-1] + [{"role": "user", "content": "something else entirely"}]
    e = oa.chat.completions.create(model="x", messages=msgs3, max_tokens=8, **GREEDY)
    fresh = Server("--max-sessions", "2")
    try:
        oc = openai.OpenAI(base_url=fresh.url + "/v1", api_key="none", max_retries=0)
        d = oc.chat.completions.create(model="x", messages=msgs2, max_tokens=8, **GREEDY)
        f = oc.chat.completions.create(model="x", messages=msgs3, max_tokens=8, **GREEDY)
    finally:
        fresh.stop()
    check("cached_edited_turn", e.usage.prompt_tokens_details.cached_tokens > c.usage.prompt_tokens_details.cached_tokens
          and e.choices[0].message.content == f.choices[0].message.content,
          "cached %d after an edit (the turn before: %d)" % (e.usage.prompt_tokens_details.cached_tokens,
                                                             c.usage.prompt_tokens_details.cached_tokens))
    check("cached_next_turn_equals_fresh", c.choices[0].message.content == d.choices[0].message.content
          and c.usage.prompt_tokens_details.cached_tokens >= cached
          and d.usage.prompt_tokens_details.cached_tokens == 0,
          "cached %d, fresh cached %d" % (c.usage.prompt_tokens_details.cached_tokens,
                                          d.usage.prompt_tokens_details.cached_tokens))


def test_reasoning_on_off():
    on = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=10,
                                    extra_body={"thinking": {"type": "enabled"}}, **GREEDY)
    want, _ = cli("--chat", "--think", "-p", "hello", "-n", "10", "--temperature", "0")
    m = on.choices[0].message
    rc = getattr(m, "reasoning_content", None)
    # The random model never writes </think>: all of its text is reasoning.
    check("reasoning_on", rc == want and m.content == "", "%r %r vs %r" % (rc, m.content, want))
    off = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=10,
                                     **GREEDY)
    check("reasoning_off", getattr(off.choices[0].message, "reasoning_content", None) is None
          and off.usage.prompt_tokens == on.usage.prompt_tokens, "%s" % off.choices[0].message)
    parts, content = [], []
    for ch in oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=10,
                                         stream=True, extra_body={"thinking": {"type": "enabled"}}, **GREEDY):
        for c in ch.choices:
            if getattr(c.delta, "reasoning_content", None):
                parts.append(c.delta.reasoning_content)
            if c.delta.content:
                content.append(c.delta.content)
    check("reasoning_stream", "".join(parts) == want and not content, "%r vs %r, content %r" % (
        "".join(parts), want, content))


def test_stop_sequences():
    full = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=30,
                                      **GREEDY).choices[0].message.content
    stop = full[8:11]
    want = full[:full.index(stop)]
    r = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=30,
                                   stop=[stop], **GREEDY)
    check("stop_sequence", r.choices[0].message.content == want and r.choices[0].finish_reason == "stop",
          "%r stop %r -> %r" % (full, stop, r.choices[0].message.content))
    parts = []
    for ch in oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=30,
                                         stop=[stop], stream=True, **GREEDY):
        parts += [c.delta.content for c in ch.choices if c.delta.content]
    check("stop_sequence_stream", "".join(parts) == want, "%r vs %r" % ("".join(parts), want))
    a = an.messages.create(model="x", max_tokens=30, messages=[{"role": "user", "content": "hello"}],
                           stop_sequences=[stop], extra_body={"temperature": 0})
    check("stop_sequence_anthropic", a.stop_reason == "stop_sequence" and a.stop_sequence == stop
          and a.content[0].text == want, "%s" % a)


def test_logprobs():
    r = oa.chat.completions.create(model="x", messages=[{"role": "user", "content": "hello"}], max_tokens=6,
                                   logprobs=True, top_logprobs=3, **GREEDY)
    lp = r.choices[0].logprobs.content
    _, err = cli("--chat", "-p", "hello", "-n", "6", "--temperature", "0", "--logprobs", "3")
    ref = [json.loads(line) for line in err.splitlines() if line.startswith("{")]
    ok = len(lp) == 6 == len(ref)
    for e, w in zip(lp, ref):
        ok &= abs(e.logprob - w["logprob"]) < 1e-5 and len(e.top_logprobs) == 3
        ok &= all(abs(t.logprob - x["logprob"]) < 1e-5 for t, x in zip(e.top_logprobs, w["top"]))
        ok &= abs(e.logprob - e.top_logprobs[0].logprob) < 1e-6  # greedy picks the top token
        ok &= sum(math.exp(t.logprob) for t in e.top_logprobs) <= 1 + 1e-5
    check("logprobs_equal_cli", ok, "%s vs %s" % ([e.logprob for e in lp], [w["logprob"] for w in ref]))
    c = oa.completions.create(model="x", prompt="hello world", max_tokens=5, logprobs=2, temperature=0, seed=1)
    lpc = c.choices[0].logprobs
    check("completions_logprobs", len(lpc.tokens) == 5 and len(lpc.top_logprobs) == 5
          and "".join(lpc.tokens) == c.choices[0].text and lpc.text_offset[0] == 0, "%s" % lpc)


def test_completions_equal_cli():
    r = oa.completions.create(model="x", prompt="hello world", max_tokens=16, temperature=0, seed=1)
    want, _ = cli("-p", "hello world", "-n", "16", "--temperature", "0")
    check("completions_equal_cli", r.choices[0].text == want, "%r vs %r" % (r.choices[0].text, want))
    parts = [ch.choices[0].text for ch in oa.completions.create(model="x", prompt="hello world", max_tokens=16,
                                                                 temperature=0, seed=1, stream=True) if ch.choices]
    check("completions_stream", "".join(parts) == want, "%r" % parts)


TOOLS = [{"type": "function", "function": {"name": "get_weather", "description": "Weather of a city",
                                           "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                                          "required": ["city"]}}}]


def test_tool_round_trip():
    """A conversation holding an earlier assistant tool call and its result:
    it renders (DSML in the prompt), runs, and the OpenAI and Anthropic
    spellings of the same conversation give the same prompt and answer."""
    msgs = [{"role": "user", "content": "weather in Paris?"},
            {"role": "assistant", "content": None, "tool_calls": [
                {"id": "call_1", "type": "function", "function": {"name": "get_weather",
                                                                  "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "call_1", "content": "sunny, 21 C"}]
    r = oa.chat.completions.create(model="x", messages=msgs, tools=TOOLS, max_tokens=10, **GREEDY)
    no_tools = oa.chat.completions.create(model="x", messages=msgs, max_tokens=10, **GREEDY)
    a = an.messages.create(model="x", max_tokens=10, tools=[
        {"name": "get_weather", "description": "Weather of a city",
         "input_schema": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}],
        messages=[{"role": "user", "content": "weather in Paris?"},
                  {"role": "assistant", "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather",
                                                     "input": {"city": "Paris"}}]},
                  {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "call_1",
                                                "content": "sunny, 21 C"}]}], extra_body={"seed": 1, "temperature": 0})
    check("tool_round_trip_renders", r.usage.prompt_tokens > no_tools.usage.prompt_tokens + 20
          and r.choices[0].finish_reason in ("length", "stop", "tool_calls"), "%s" % r.usage)
    check("tool_round_trip_apis_agree", a.usage.input_tokens + a.usage.cache_read_input_tokens == r.usage.prompt_tokens
          and a.content[0].text == r.choices[0].message.content,
          "%s vs %s" % (a.usage, r.usage))
    named = oa.chat.completions.create(model="x", messages=msgs, tools=TOOLS, max_tokens=1,
                                       tool_choice={"type": "function", "function": {"name": "get_weather"}}, **GREEDY)
    none = oa.chat.completions.create(model="x", messages=msgs, tools=TOOLS, tool_choice="none", max_tokens=1,
                                      **GREEDY)
    check("tool_choice", named.usage.prompt_tokens == r.usage.prompt_tokens
          and none.usage.prompt_tokens == no_tools.usage.prompt_tokens, "%d %d" % (named.usage.prompt_tokens,
                                                                                 none.usage.prompt_tokens))


def test_anthropic_equals_openai():
    o = oa.chat.completions.create(model="x", messages=[{"role": "system", "content": "sys"},
                                                        {"role": "user", "content": "hi there"}], max_tokens=12, **GREEDY)
    a = an.messages.create(model="x", system="sys", max_tokens=12, extra_body={"temperature": 0},
                           messages=[{"role": "user", "content": "hi there"}])
    check("anthropic_equals_openai", a.content[0].type == "text" and a.content[0].text == o.choices[0].message.content
          and a.stop_reason == "max_tokens" and a.usage.output_tokens == 12 and a.role == "assistant",
          "%s vs %r" % (a, o.choices[0].message.content))
    with an.messages.stream(model="x", system="sys", max_tokens=12, extra_body={"temperature": 0},
                            messages=[{"role": "user", "content": "hi there"}]) as st:
        events = [e.type for e in st]
        final = st.get_final_message()
    check("anthropic_stream", final.content[0].text == a.content[0].text and events[0] == "message_start"
          and events[-1] == "message_stop" and final.stop_reason == "max_tokens", "%s %s" % (events[:4], final))
    t = an.messages.create(model="x", max_tokens=8, extra_body={"temperature": 0}, messages=[{"role": "user", "content": "hello"}],
                           thinking={"type": "enabled", "budget_tokens": 1024})
    want, _ = cli("--chat", "--think", "-p", "hello", "-n", "8", "--temperature", "0")
    check("anthropic_thinking", t.content[0].type == "thinking" and t.content[0].thinking == want, "%s" % t.content)
    with an.messages.stream(model="x", max_tokens=8, extra_body={"temperature": 0}, messages=[{"role": "user", "content": "hello"}],
                            thinking={"type": "enabled", "budget_tokens": 1024}) as st:
        final = st.get_final_message()
    check("anthropic_thinking_stream", final.content[0].type == "thinking" and final.content[0].thinking == want,
          "%s" % final.content)


def expect_error(name, fn, cls, status):
    try:
        fn()
    except cls as e:
        check(name, e.status_code == status, "status %s: %s" % (e.status_code, e))
        return
    except Exception as e:
        check(name, False, "%s: %s" % (type(e).__name__, e))
        return
    check(name, False, "no error")


def test_bad_requests():
    u = [{"role": "user", "content": "x"}]
    expect_error("error_max_tokens", lambda: oa.chat.completions.create(model="x", messages=u, max_tokens=100000),
                 openai.BadRequestError, 400)
    expect_error("error_no_messages", lambda: oa.chat.completions.create(model="x", messages=[]),
                 openai.BadRequestError, 400)
    expect_error("error_bad_role", lambda: oa.chat.completions.create(model="x", messages=[{"role": "bot", "content": "x"}]),
                 openai.BadRequestError, 400)
    expect_error("error_temperature", lambda: oa.chat.completions.create(model="x", messages=u, temperature=7),
                 openai.BadRequestError, 400)
    expect_error("error_n", lambda: oa.chat.completions.create(model="x", messages=u, n=2),
                 openai.BadRequestError, 400)
    expect_error("error_too_many_messages", lambda: oa.chat.completions.create(model="x", messages=u * 40),
                 openai.APIStatusError, 413)
    expect_error("error_body_too_large", lambda: oa.chat.completions.create(
        model="x", messages=[{"role": "user", "content": "y" * 70000}]), openai.APIStatusError, 413)
    try:
        an.post("/v1/messages", body={"model": "x", "messages": u}, cast_to=object)
        check("error_anthropic_format", False, "no error")
    except anthropic.BadRequestError as e:
            check("error_anthropic_format", e.status_code == 400 and e.body["type"] == "error"
              and e.body["error"]["type"] == "invalid_request_error" and "max_tokens" in e.body["error"]["message"],
              str(e.body))
    out = subprocess.run(["curl", "-s", "-w", "\n%{http_code}", S.url + "/v1/chat/completions", "-d", "{not json"],
                         capture_output=True, text=True).stdout
    body, code = out.rsplit("\n", 1)
    check("error_bad_json", code == "400" and json.loads(body)["error"]["type"] == "invalid_request_error", out)
    deep = "[" * 100 + "]" * 100
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", S.url + "/v1/chat/completions",
                          "-d", '{"messages": %s}' % deep], capture_output=True, text=True).stdout
    check("error_too_deep", out == "413", out)
    out = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", S.url + "/v1/nothing"],
                         capture_output=True, text=True).stdout
    check("error_not_found", out == "404", out)
    expect_error("error_response_format", lambda: oa.chat.completions.create(
        model="x", messages=u, response_format={"type": "xml"}), openai.BadRequestError, 400)
    plain = oa.chat.completions.create(model="x", messages=u, max_tokens=1)
    js = oa.chat.completions.create(model="x", messages=u, max_tokens=1, response_format={"type": "json_object"})
    check("response_format_rendered", js.usage.prompt_tokens > plain.usage.prompt_tokens + 5,
          "%d vs %d" % (js.usage.prompt_tokens, plain.usage.prompt_tokens))
    expect_error("error_get_on_post", lambda: oa.get("/chat/completions", cast_to=object), openai.APIStatusError, 405)


def test_api_key():
    k = Server("--api-key", "s3cret-key")
    try:
        good = openai.OpenAI(base_url=k.url + "/v1", api_key="s3cret-key", max_retries=0)
        bad = openai.OpenAI(base_url=k.url + "/v1", api_key="s3cret-kex", max_retries=0)
        ok = good.chat.completions.create(model="x", messages=[{"role": "user", "content": "x"}], max_tokens=2)
        check("api_key_accepted", ok.usage.completion_tokens >= 1, str(ok.usage))
        expect_error("api_key_rejected", lambda: bad.models.list(), openai.AuthenticationError, 401)
        ak = anthropic.Anthropic(base_url=k.url, api_key="s3cret-key", max_retries=0)
        m = ak.messages.create(model="x", max_tokens=2, messages=[{"role": "user", "content": "x"}])
        check("api_key_x_api_key", m.usage.output_tokens >= 1, str(m.usage))
        expect_error("api_key_anthropic_rejected", lambda: anthropic.Anthropic(
            base_url=k.url, api_key="nope", max_retries=0).messages.create(
            model="x", max_tokens=2, messages=[{"role": "user", "content": "x"}]), anthropic.AuthenticationError, 401)
        code = subprocess.run(["curl", "-s", "-o", "/dev/null", "-w", "%{http_code}", k.url + "/health"],
                              capture_output=True, text=True).stdout
        check("api_key_health_open", code == "200", code)
    finally:
        k.stop()


def test_raw_sse_framing():
    out = subprocess.run(["curl", "-sN", S.url + "/v1/chat/completions", "-d", json.dumps(
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "stream": True, "temperature": 0})],
        capture_output=True).stdout.decode()
    events = out.split("\n\n")
    ok = out.endswith("data: [DONE]\n\n") and events[-1] == "" and events[-2] == "data: [DONE]"
    for e in events[:-2]:
        ok &= e.startswith("data: ") and "\n" not in e and json.loads(e[6:])["object"] == "chat.completion.chunk"
    check("sse_framing_openai", ok and len(events) >= 4, repr(out[:400]))
    out = subprocess.run(["curl", "-sN", S.url + "/v1/messages", "-d", json.dumps(
        {"messages": [{"role": "user", "content": "hello"}], "max_tokens": 6, "stream": True})],
        capture_output=True).stdout.decode()
    events = [e for e in out.split("\n\n") if e]
    ok = out.endswith("\n\n")
    names = []
    for e in events:
        lines = e.split("\n")
        ok &= len(lines) == 2 and lines[0].startswith("event: ") and lines[1].startswith("data: ")
        names.append(lines[0][7:])
        ok &= json.loads(lines[1][6:])["type"] == lines[0][7:]
    check("sse_framing_anthropic", ok and names[0] == "message_start" and names[1] == "content_block_start"
          and names[-3:] == ["content_block_stop", "message_delta", "message_stop"], repr(out[:400]))


def test_keepalive_during_prefill():
    """A long prompt read one token per step: the stream stays alive with
    SSE comments (OpenAI) and ping events (Anthropic) before the first token."""
    k = Server("--prefill-chunk", "1", "--keepalive-ms", "20")
    try:
        long_text = " ".join("word%d" % i for i in range(600))
        out = subprocess.run(["curl", "-sN", k.url + "/v1/chat/completions", "-d", json.dumps(
            {"messages": [{"role": "user", "content": long_text}], "max_tokens": 3, "stream": True})],
            capture_output=True).stdout.decode()
        first_data = out.find("data: ")
        check("keepalive_openai", out.startswith(": keep-alive\n\n") and out.endswith("data: [DONE]\n\n")
              and out.count(": keep-alive") >= 2 and out.rfind(": keep-alive") < first_data, repr(out[:200]))
        out = subprocess.run(["curl", "-sN", k.url + "/v1/messages", "-d", json.dumps(
            {"messages": [{"role": "user", "content": "other " + long_text}], "max_tokens": 3, "stream": True})],
            capture_output=True).stdout.decode()
        check("keepalive_anthropic", out.startswith("event: message_start") and "event: ping" in out
              and out.index("event: ping") < out.index("event: content_block_start")
              and out.endswith("event: message_stop\ndata: {\"type\":\"message_stop\"}\n\n"), repr(out[:300]))
    finally:
        k.stop()


def test_models_and_health():
    ms = oa.models.list()
    check("models", [m.id for m in ms.data] == ["tiny-chat"], str(ms))
    code, body = S.get("/health")
    check("health", code == 200 and json.loads(body)["status"] == "ok", body)


def test_metrics_and_log():
    log = S.read_log()  # before the /metrics request, which is logged after it answers
    m = S.metrics()
    n200 = len(re.findall(r"^dsv4 serve: [A-Z]+ \S+ 200 [\d.]+ ms", log, re.M))
    check("metrics_requests", m.get('dsv4_requests_total{status="200"}', 0) == n200 and n200 > 10
          and m.get('dsv4_requests_total{status="400"}', 0) >= 5, "%s vs %d log lines" % (
              {k: v for k, v in m.items() if "requests" in k}, n200))
    check("metrics_gauges", m["dsv4_active_sessions"] == 0 and m["dsv4_queue_depth"] == 0
          and m["dsv4_step_batch_size_count"] == m["dsv4_steps_total"] > 0
          and m["dsv4_prefix_cache_hits_total"] > 0, str(m))


run_tests([test_models_and_health, test_chat_equals_cli, test_stream_equals_plain, test_cached_prefix,
           test_reasoning_on_off, test_stop_sequences, test_logprobs, test_completions_equal_cli,
           test_tool_round_trip, test_anthropic_equals_openai, test_bad_requests, test_api_key,
           test_raw_sse_framing, test_keepalive_during_prefill, test_metrics_and_log])

"""Invariance under load: 32 concurrent streaming clients, several requests
each (sampled with seeds, some sharing conversation prefixes, some with
logprobs), a quarter of them aborted mid-stream by closing the connection.
Every completed response must equal the same request run alone afterwards,
nothing but the aborted requests may fail, and /metrics must add up."""
import random
import sys
import threading
import time

sys.path.insert(0, "tests/serve")
import openai  # noqa: E402
from harness import Server, check, run_tests  # noqa: E402

CLIENTS, PER_CLIENT = 32, 5
S = Server("--max-sessions", "32", "--prefill-chunk", "32", "--cache-mb", "64")
oa = openai.OpenAI(base_url=S.url + "/v1", api_key="none", max_retries=0, timeout=120)
rng = random.Random(7)
TOPICS = ["the sea", "mountains", "a long walk", "bread", "numbers", "the moon", "rain", "music"]


def make_request(i):
    topic = TOPICS[i % len(TOPICS)]
    msgs = [{"role": "system", "content": "You answer in one line."},
            {"role": "user", "content": "Tell me about %s." % topic}]
    if i % 3 == 1:  # a later turn of a conversation others also hold
        msgs += [{"role": "assistant", "content": "It is %s." % topic}, {"role": "user", "content": "More, %d." % i}]
    kw = dict(model="x", messages=msgs, max_tokens=(16, 32, 48)[i * 7 % 3], temperature=0.9, top_p=0.95,
              seed=1000 + i)
    if i % 5 == 0:
        kw.update(logprobs=True, top_logprobs=2)
    if i % 7 == 0:
        kw["stop"] = ["e"]
    return kw


results = {}  # request index -> (text, finish, completion_tokens, logprobs)
errors = []
aborted = []
lock = threading.Lock()


def client(c):
    for k in range(PER_CLIENT):
        i = c * PER_CLIENT + k
        kw = make_request(i)
        abort_after = rng.randint(1, 4) if rng.random() < 0.25 else None
        try:
            parts, finish, usage, lps = [], None, None, []
            stream = oa.chat.completions.create(stream=True, stream_options={"include_usage": True}, **kw)
            n, broke = 0, False
            for ch in stream:
                n += 1
                if abort_after is not None and n >= abort_after:
                    stream.close()  # the client goes away mid-stream
                    broke = True
                    break
                if ch.usage:
                    usage = ch.usage
                for x in ch.choices:
                    if x.delta.content:
                        parts.append(x.delta.content)
                    if x.logprobs and x.logprobs.content:
                        lps += [round(e.logprob, 6) for e in x.logprobs.content]
                    if x.finish_reason:
                        finish = x.finish_reason
            with lock:
                if broke:
                    aborted.append(i)
                else:
                    results[i] = ("".join(parts), finish, usage.completion_tokens, lps)
        except Exception as e:
            with lock:
                errors.append((i, repr(e)[:200]))


def test_load_invariance():
    t0 = time.time()
    threads = [threading.Thread(target=client, args=(c,)) for c in range(CLIENTS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    t_load = time.time() - t0
    check("load_no_errors", not errors, str(errors[:3]))
    check("load_completed", len(results) + len(aborted) == CLIENTS * PER_CLIENT and len(results) > 40,
          "%d completed, %d aborted" % (len(results), len(aborted)))
    mismatched = []
    for i, (text, finish, n_tok, lps) in sorted(results.items()):
        kw = make_request(i)
        r = oa.chat.completions.create(**kw)
        alone_lps = [round(e.logprob, 6) for e in r.choices[0].logprobs.content] if kw.get("logprobs") else []
        if (r.choices[0].message.content, r.choices[0].finish_reason, r.usage.completion_tokens, alone_lps) != \
                (text, finish, n_tok, lps):
            mismatched.append((i, (text, finish, n_tok, lps), (r.choices[0].message.content, r.choices[0].finish_reason,
                                                                r.usage.completion_tokens, alone_lps)))
    check("load_equals_alone", not mismatched, "%d of %d differ, e.g. %r" % (len(mismatched), len(results),
                                                                              mismatched[:1]))
    print("# load: %d requests in %.1f s, %d aborted" % (CLIENTS * PER_CLIENT, t_load, len(aborted)))


def test_load_metrics():
    deadline, polls = time.time() + 10, 0
    while time.time() < deadline:  # aborted jobs retire at the next step
        m = S.metrics()
        polls += 1
        if m["dsv4_active_sessions"] == 0 and m["dsv4_queue_depth"] == 0:
            break
        time.sleep(0.1)
    # every request: the load, each completed one again alone, the earlier polls
    n_http = CLIENTS * PER_CLIENT + len(results) + polls - 1
    check("load_metrics_requests", m.get('dsv4_requests_total{status="200"}') == n_http
          and sum(v for k, v in m.items() if k.startswith("dsv4_requests_total") and '"200"' not in k) == 0,
          "%s vs %d" % ({k: v for k, v in m.items() if k.startswith("dsv4_requests_total")}, n_http))
    check("load_metrics_idle", m["dsv4_active_sessions"] == 0 and m["dsv4_queue_depth"] == 0, str(m))
    done_tokens = 2 * sum(r[2] for r in results.values())  # each completed request also ran alone
    check("load_metrics_tokens", m["dsv4_generation_tokens_total"] >= done_tokens
          and m["dsv4_requests_cancelled_total"] <= len(aborted), "%s vs %d" % (m["dsv4_generation_tokens_total"],
                                                                               done_tokens))
    batched = m["dsv4_step_batch_size_count"] - m['dsv4_step_batch_size_bucket{le="1"}']
    check("load_metrics_batched", m["dsv4_step_batch_size_count"] == m["dsv4_steps_total"] and batched > 10
          and m['dsv4_step_batch_size_bucket{le="32"}'] == m["dsv4_step_batch_size_count"],
          "%d steps had more than one lane" % batched)
    check("load_cancellations_seen", m["dsv4_requests_cancelled_total"] > 0, "no abort reached a running request")
    check("load_prefix_hits", m["dsv4_prefix_cache_hits_total"] > 0, str(m["dsv4_prefix_cache_hits_total"]))
    print("# cancelled %d, vetoed steps %d" % (m["dsv4_requests_cancelled_total"], m["dsv4_step_vetoes_total"]))


run_tests([test_load_invariance, test_load_metrics])

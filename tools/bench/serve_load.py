#!/usr/bin/env python3
"""Load generator for `dsv4 serve`: N concurrent streaming clients, each
sending requests back to back, at several concurrency levels. Per level it
reports time to first token (TTFT), time per output token after the first
(TPOT), both as p50/p90 over requests, and the aggregate output tokens per
second of all clients together.

    python3 tools/bench/serve_load.py --url http://127.0.0.1:8000 \\
        --clients 1,4,16,64 --requests 4 --max-tokens 128 --prompt-tokens 512

--prompt-tokens is the prompt's length as the server counts it
(usage.prompt_tokens, chat template included): two short calibration
requests measure how many tokens the filler text takes. Prompts differ per
request (a request index is part of the text), so the prefix cache only
helps with the shared system prompt. --ignore-eos keeps every request at
--max-tokens output tokens. --level-timeout bounds each level: when it
runs out, the requests still in flight are abandoned (their connections
closed, which cancels them on the server), the level's row reports what
completed (marked *), and the next level starts once the server is idle.
Aggregate tokens/s counts every token the server produced during the level
(its /metrics counter, so abandoned requests' tokens count too) over the
level's wall time. The output is one table row per level (and JSON with
--json) for docs/PERFORMANCE.md. Python's standard library only."""
import argparse
import json
import statistics
import threading
import time
import urllib.request

WORDS = "lorem ipsum dolor sit amet consectetur adipiscing elit".split()


def post(args, body, timeout):
    req = urllib.request.Request(args.url + "/v1/chat/completions", data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json",
                                          "Authorization": "Bearer " + args.api_key})
    return urllib.request.urlopen(req, timeout=timeout)


def messages(i, n_words):
    prompt = "Request %d. " % i + " ".join(WORDS[k % len(WORDS)] for k in range(n_words))
    return [{"role": "system", "content": "You are a benchmark."}, {"role": "user", "content": prompt}]


def prompt_tokens(args, n_words):
    body = {"model": args.model, "messages": messages(-1, n_words), "max_tokens": 1, "temperature": 0}
    with post(args, body, 3600) as r:
        return json.loads(r.read())["usage"]["prompt_tokens"]


def calibrate(args):
    """Filler words for a prompt of --prompt-tokens tokens: the count is
    linear in the words (template overhead + tokens per word)."""
    w1, w2 = 16, 16 + max(16, args.prompt_tokens)
    t1, t2 = prompt_tokens(args, w1), prompt_tokens(args, w2)
    per_word = (t2 - t1) / (w2 - w1)
    return max(0, round(w1 + (args.prompt_tokens - t1) / per_word))


def one_request(args, i, n_words, deadline, rec):
    """Streams one request into rec (ttft, tpot, tokens, prompt tokens);
    returns False when the deadline came first (the connection is closed)."""
    body = {"model": args.model, "messages": messages(i, n_words), "max_tokens": args.max_tokens,
            "temperature": args.temperature, "seed": i, "stream": True, "stream_options": {"include_usage": True}}
    if args.ignore_eos:
        body["ignore_eos"] = True
    t0 = time.perf_counter()
    # the server sends a keep-alive comment every second it has nothing else
    # to say (a long prefill), so reads return often enough to notice the
    # deadline; leaving the block closes the connection
    with post(args, body, 60) as r:
        while True:
            if time.perf_counter() > deadline:
                return False
            line = r.readline()
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data: ") or line == b"data: [DONE]":
                continue
            ch = json.loads(line[6:])
            if ch.get("usage"):
                rec["tokens"] = ch["usage"]["completion_tokens"]
                rec["prompt"] = ch["usage"]["prompt_tokens"]
            d = (ch.get("choices") or [{}])[0].get("delta", {})
            if "ttft" not in rec and (d.get("content") or d.get("reasoning_content")):
                rec["ttft"] = time.perf_counter() - t0
    t1 = time.perf_counter()
    rec.setdefault("ttft", t1 - t0)
    rec["tpot"] = (t1 - (t0 + rec["ttft"])) / max(rec.get("tokens", 1) - 1, 1)
    return True


def metrics(args):
    try:
        with urllib.request.urlopen(urllib.request.Request(
                args.url + "/metrics", headers={"Authorization": "Bearer " + args.api_key}), timeout=10) as r:
            out = {}
            for line in r.read().decode().splitlines():
                if line and not line.startswith("#"):
                    k, v = line.rsplit(" ", 1)
                    out[k] = float(v)
            return out
    except OSError:
        return {}


def wait_idle(args, limit_s=120):
    """Until the server has no request left (abandoned ones retire at its next step)."""
    t_end = time.time() + limit_s
    while time.time() < t_end:
        m = metrics(args)
        if not m.get("dsv4_active_sessions") and not m.get("dsv4_queue_depth"):
            return
        time.sleep(0.2)


def level(args, n_clients, n_words):
    done, partial, started, errors, lock = [], [], [0], [], threading.Lock()
    before = metrics(args)
    t0 = time.perf_counter()
    deadline = t0 + args.level_timeout if args.level_timeout else float("inf")

    def worker(c):
        for k in range(args.requests):
            if time.perf_counter() > deadline:
                return
            with lock:
                started[0] += 1
            rec = {}
            try:
                if not one_request(args, c * 1000 + k, n_words, deadline, rec):
                    with lock:
                        partial.append(rec)
                    return
            except Exception as e:  # counted and reported; the client goes on
                with lock:
                    errors.append(repr(e)[:200])
                continue
            with lock:
                done.append(rec)

    threads = [threading.Thread(target=worker, args=(c,), daemon=True) for c in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = min(time.perf_counter(), deadline) - t0
    after = metrics(args)
    key = "dsv4_generation_tokens_total"
    tokens = after[key] - before[key] if key in before and key in after else sum(r.get("tokens", 0) for r in done)
    wait_idle(args)

    def pct(xs, p):
        return xs[min(len(xs) - 1, int(p * len(xs)))]
    ttft = sorted(r["ttft"] for r in done + partial if "ttft" in r)
    tpot = sorted(r["tpot"] for r in done)
    return {"clients": n_clients, "requests": len(done), "started": started[0], "errors": errors,
            "timed_out": len(done) + len(errors) < n_clients * args.requests, "tokens": tokens, "wall_s": wall,
            "prompt_tokens_mean": statistics.mean(r["prompt"] for r in done) if done else None,
            "ttft_p50_ms": 1e3 * statistics.median(ttft) if ttft else None,
            "ttft_p90_ms": 1e3 * pct(ttft, 0.9) if ttft else None,
            "tpot_p50_ms": 1e3 * statistics.median(tpot) if tpot else None,
            "tpot_p90_ms": 1e3 * pct(tpot, 0.9) if tpot else None, "tok_per_s": tokens / wall}


def num(x, digits):
    return "-" if x is None else "%.*f" % (digits, x)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--model", default="dsv4")
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--requests", type=int, default=4, help="requests per client per level")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=256, help="prompt length in tokens (calibrated)")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--ignore-eos", action="store_true", help="ask the server not to stop at EOS (if supported)")
    ap.add_argument("--level-timeout", type=float, default=0, help="seconds per level (0: no limit)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    n_words = calibrate(args)
    wait_idle(args)
    out = []
    print("| clients | requests | TTFT p50 / p90 (ms) | TPOT p50 / p90 (ms) | aggregate tok/s |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in [int(x) for x in args.clients.split(",")]:
        r = level(args, n, n_words)
        out.append(r)
        print("| %d | %d%s | %s / %s | %s / %s | %.1f |" % (
            r["clients"], r["requests"], "*" if r["timed_out"] else "", num(r["ttft_p50_ms"], 1),
            num(r["ttft_p90_ms"], 1), num(r["tpot_p50_ms"], 2), num(r["tpot_p90_ms"], 2), r["tok_per_s"]), flush=True)
    if any(r["timed_out"] for r in out):
        print("\n\\* the %g s level limit ran out: requests is those that completed (of %s started); TTFT also\n"
              "counts the requests in flight that had their first token, TPOT only the completed ones." % (
                  args.level_timeout, ", ".join("%d" % r["started"] for r in out if r["timed_out"])))
    for r in out:
        if r["errors"]:
            print("%d clients: %d requests failed, e.g. %s" % (r["clients"], len(r["errors"]), r["errors"][0]))
    means = [r["prompt_tokens_mean"] for r in out if r["prompt_tokens_mean"]]
    if means:
        print("prompt tokens per request: %.0f (mean over completed requests)" % statistics.mean(means))
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Load generator for `dsv4 serve`: N concurrent streaming clients (the
official openai SDK), each sending requests back to back for a while, at
several concurrency levels. Per level it reports time to first token (TTFT),
time per output token after the first (TPOT), both as p50/p90 over requests,
and the aggregate output tokens per second of all clients together.

    python3 tools/bench/serve_load.py --url http://127.0.0.1:8000 \\
        --clients 1,4,16,64 --requests 4 --max-tokens 128 --prompt-tokens 512

Prompts differ per request (a request index is part of the text), so the
prefix cache only helps with the shared system prompt. --ignore-eos keeps
every request at --max-tokens output tokens. The output is one table row per
level (and JSON with --json) for docs/PERFORMANCE.md."""
import argparse
import json
import statistics
import threading
import time

import openai


def one_request(client, args, i):
    words = ("lorem ipsum dolor sit amet consectetur adipiscing elit " * (args.prompt_tokens // 8 + 1)).split()
    prompt = "Request %d. " % i + " ".join(words[:args.prompt_tokens])
    t0 = time.perf_counter()
    first, n = None, 0
    extra = {"ignore_eos": True} if args.ignore_eos else {}
    stream = client.chat.completions.create(
        model=args.model, messages=[{"role": "system", "content": "You are a benchmark."},
                                    {"role": "user", "content": prompt}],
        max_tokens=args.max_tokens, temperature=args.temperature, seed=i, stream=True,
        stream_options={"include_usage": True}, extra_body=extra)
    for ch in stream:
        if ch.usage:
            n = ch.usage.completion_tokens
        if first is None and ch.choices and (ch.choices[0].delta.content or
                                             getattr(ch.choices[0].delta, "reasoning_content", None)):
            first = time.perf_counter()
    t1 = time.perf_counter()
    first = first or t1
    return first - t0, (t1 - first) / max(n - 1, 1), n


def level(args, n_clients):
    client = openai.OpenAI(base_url=args.url + "/v1", api_key=args.api_key, max_retries=0, timeout=3600)
    rows, lock = [], threading.Lock()

    def worker(c):
        for k in range(args.requests):
            r = one_request(client, args, c * 1000 + k)
            with lock:
                rows.append(r)

    t0 = time.perf_counter()
    threads = [threading.Thread(target=worker, args=(c,)) for c in range(n_clients)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    wall = time.perf_counter() - t0
    ttft = sorted(r[0] for r in rows)
    tpot = sorted(r[1] for r in rows)
    tokens = sum(r[2] for r in rows)

    def pct(xs, p):
        return xs[min(len(xs) - 1, int(p * len(xs)))]
    return {"clients": n_clients, "requests": len(rows), "tokens": tokens, "wall_s": wall,
            "ttft_p50_ms": 1e3 * statistics.median(ttft), "ttft_p90_ms": 1e3 * pct(ttft, 0.9),
            "tpot_p50_ms": 1e3 * statistics.median(tpot), "tpot_p90_ms": 1e3 * pct(tpot, 0.9),
            "tok_per_s": tokens / wall}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", default="http://127.0.0.1:8000")
    ap.add_argument("--api-key", default="none")
    ap.add_argument("--model", default="dsv4")
    ap.add_argument("--clients", default="1,4,16,64")
    ap.add_argument("--requests", type=int, default=4, help="requests per client per level")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--prompt-tokens", type=int, default=256, help="approximate prompt length in words")
    ap.add_argument("--temperature", type=float, default=0.0)
    ap.add_argument("--ignore-eos", action="store_true", help="ask the server not to stop at EOS (if supported)")
    ap.add_argument("--json", help="also write the rows to this file")
    args = ap.parse_args()
    out = []
    print("| clients | requests | TTFT p50 / p90 (ms) | TPOT p50 / p90 (ms) | aggregate tok/s |")
    print("| ---: | ---: | ---: | ---: | ---: |")
    for n in [int(x) for x in args.clients.split(",")]:
        r = level(args, n)
        out.append(r)
        print("| %d | %d | %.1f / %.1f | %.2f / %.2f | %.1f |" % (
            r["clients"], r["requests"], r["ttft_p50_ms"], r["ttft_p90_ms"], r["tpot_p50_ms"], r["tpot_p90_ms"],
            r["tok_per_s"]), flush=True)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)


if __name__ == "__main__":
    main()

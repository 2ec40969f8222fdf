#!/usr/bin/env python3
"""The demo model's MTP speculative decoding measured through the engine.

  spec_accept.py --model models/demo [--dsv4 build/dsv4] [--render build/demo_render]
                 [--n 40] [--k 1,2,3] [--threads 1] [--out FILE.json]

Held-out prompts (tasks.py, as eval.py draws them: arithmetic chat questions, tool-call
prompts and answer-from-tool-result prompts) go through `dsv4 generate --device cpu
--temperature 0`, once plainly and once with `--spec mtp:K` for every K, one process
at a time. Reported per kind of prompt and K:
  * acceptance: drafts kept / drafts made, from the engine's stderr line;
  * tokens per step: tokens produced / verify steps (each step keeps its accepted
    drafts plus the verified token; the first token comes from the prompt);
  * speed-up: plain wall time / speculative wall time over the same prompts, whole
    processes (load, prompt, decode): what a user of `dsv4 generate` sees.
Greedy speculation must print what plain decoding prints; a difference is an error.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402
from eval import held_out_items, render, answer_conv  # noqa: E402

STATS_RX = re.compile(r"^spec mtp:(\d+): (\d+) verify steps, (\d+) of (\d+) drafts kept", re.M)


def run(a, args, spec_k):
    cmd = [a.dsv4, "generate", "--model", a.model, "--device", "cpu", "--threads", str(a.threads),
           "--temperature", "0", "-n", "160"] + args + (["--spec", f"mtp:{spec_k}"] if spec_k else [])
    t0 = time.perf_counter()
    r = subprocess.run(cmd, capture_output=True, text=True)
    dt = time.perf_counter() - t0
    if r.returncode:
        sys.exit(f"{' '.join(cmd)}: {r.stderr.strip()}")
    st = None
    if spec_k:
        m = STATS_RX.search(r.stderr)
        if not m:
            sys.exit(f"{' '.join(cmd)}: no acceptance line on stderr")
        st = {"steps": int(m.group(2)), "kept": int(m.group(3)), "drafted": int(m.group(4))}
    return r.stdout, dt, st


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--dsv4", default="build/dsv4")
    p.add_argument("--render", default="build/demo_render")
    p.add_argument("--n", type=int, default=40, help="prompts per kind")
    p.add_argument("--k", default="1,2,3", help="draft lengths to measure")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--out")
    a = p.parse_args()
    ks = [int(x) for x in a.k.split(",")]
    rng = random.Random(a.seed)
    tmp = tempfile.mkdtemp()

    def prompt_file(text, tag):
        path = os.path.join(tmp, f"{tag}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return ["--no-bos", "--prompt-file", path]

    arith = held_out_items(tasks.arith_item, a.n, rng)
    tools = held_out_items(tasks.tool_item, a.n, rng)
    kinds = {
        "arithmetic": [["--chat", "-p", it[1]] for it in arith],
        "tool call": [prompt_file(render(a, tasks.tool_prompt(it), 2), f"call{i}") for i, it in enumerate(tools)],
        "tool answer": [prompt_file(render(a, answer_conv(it), 4), f"ans{i}") for i, it in enumerate(tools)],
    }
    report = {}
    for kind, prompts in kinds.items():
        plain = [run(a, args, 0) for args in prompts]
        t_plain = sum(x[1] for x in plain)
        report[kind] = {"prompts": len(prompts), "plain_s": round(t_plain, 3)}
        for k in ks:
            spec = [run(a, args, k) for args in prompts]
            for (want, _, _), (got, _, _), args in zip(plain, spec, prompts):
                if got != want:
                    sys.exit(f"--spec mtp:{k} printed something else than plain decoding for {args}")
            steps = sum(x[2]["steps"] for x in spec)
            kept = sum(x[2]["kept"] for x in spec)
            drafted = sum(x[2]["drafted"] for x in spec)
            t_spec = sum(x[1] for x in spec)
            report[kind][f"mtp:{k}"] = {
                "acceptance": round(kept / drafted, 4) if drafted else None, "drafts": drafted,
                "verify_steps": steps, "tokens_per_step": round((kept + steps) / steps, 3) if steps else None,
                "spec_s": round(t_spec, 3), "speedup": round(t_plain / t_spec, 3)}
    commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
    summary = {"model": a.model, "seed": a.seed, "threads": a.threads, "commit": commit,
               "decoding": "greedy, dsv4 generate --device cpu, one process per prompt", "results": report}
    text = json.dumps(summary, indent=1)
    print(text)
    if a.out:
        with open(a.out, "w") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

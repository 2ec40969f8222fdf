#!/usr/bin/env python3
"""Score the demo model on held-out questions through the engine (`dsv4 generate`).

  eval.py --model models/demo [--dsv4 build/dsv4] [--render build/demo_render]
          [--n 300] [--seed 2026] [--out FILE.json]

Every question comes from tasks.py with a key that `held_out` kept out of the training
data. Decoding is greedy on the CPU backend. Scores:
  * arithmetic (+, -, * ; 2-3 digit operands): the number after "=" is the right result;
  * unit conversions (powers of ten: the held-out ones) and puzzles (compare, sort,
    parity): the reply is exactly the expected sentence;
  * tool calls: the reply is one well-formed DSML block (parsed strictly here) that
    calls the right tool with exactly the right arguments and ends the turn;
  * tool answers: given the tool's result, the reply is exactly the expected sentence.
Prints a JSON summary (and writes it to --out), with a few failures of each kind.
--think-arithmetic scores the same arithmetic questions in thinking mode instead.
"""
import argparse
import json
import os
import random
import re
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import tasks  # noqa: E402

DSML = "｜DSML｜"
CALL_RX = re.compile(
    r"^\n\n<" + DSML + r"tool_calls>\n<" + DSML + r'invoke name="([^"]+)">\n((?:<' + DSML +
    r'parameter name="[^"]+" string="(?:true|false)">.*?</' + DSML + r"parameter>\n)*)</" + DSML +
    r"invoke>\n</" + DSML + r"tool_calls>$", re.S)
PARAM_RX = re.compile(r'<' + DSML + r'parameter name="([^"]+)" string="(true|false)">(.*?)</' + DSML +
                      r"parameter>\n", re.S)


def held_out_items(fn, n, rng, accept=lambda it: True, tries=200000):
    """Up to n distinct held-out questions (fewer when the task has fewer: the held-out
    power-of-ten unit conversions are about 30)."""
    out, seen = [], set()
    for _ in range(tries):
        if len(out) == n:
            break
        it = fn(rng)
        if tasks.held_out(it[0]) and it[0] not in seen and accept(it):
            seen.add(it[0])
            out.append(it)
    return out


def parse_call(text):
    """(name, arguments dict) of a reply that is exactly one DSML invoke, else None."""
    m = CALL_RX.match(text)
    if not m:
        return None
    args = {}
    for k, is_str, v in PARAM_RX.findall(m.group(2)):
        try:
            args[k] = v if is_str == "true" else json.loads(v)
        except json.JSONDecodeError:
            return None
    return m.group(1), args


class Engine:
    def __init__(self, a):
        self.a = a
        self.tmp = tempfile.mkdtemp()

    def chat(self, q):
        return self._gen(["--chat", "-p", q])

    def think(self, q):
        """The reply after the reasoning block (thinking mode)."""
        r = self._gen(["--chat", "--think", "-p", q])
        return r.split("</think>", 1)[1] if "</think>" in r else ""

    def raw(self, text, tag):
        path = os.path.join(self.tmp, f"{tag}.txt")
        with open(path, "w", encoding="utf-8") as f:
            f.write(text)
        return self._gen(["--no-bos", "--prompt-file", path])

    def _gen(self, args):
        cmd = [self.a.dsv4, "generate", "--model", self.a.model, "--device", "cpu", "--threads", "1",
               "--temperature", "0", "-n", "160"] + args
        r = subprocess.run(cmd, capture_output=True, text=True)
        if r.returncode:
            raise RuntimeError(f"{' '.join(cmd)}: {r.stderr.strip()}")
        return r.stdout[:-1] if r.stdout.endswith("\n") else r.stdout


def render(a, conv, cut):
    conv = dict(conv, cuts=[cut])
    out = subprocess.run([a.render], input=json.dumps(conv) + "\n", capture_output=True, text=True, check=True)
    return json.loads(out.stdout)[0]


def answer_conv(item):
    """The tool prompt with the right call made and the tool's result after it."""
    _, q, name, args, res, _ = item
    conv = tasks.tool_prompt(item)
    conv["messages"] += [
        {"role": "assistant", "content": "", "tool_calls": [
            {"id": "call_0", "type": "function", "function": {"name": name, "arguments": json.dumps(args)}}]},
        {"role": "tool", "tool_call_id": "call_0", "content": json.dumps(res)}]
    return conv


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--dsv4", default="build/dsv4")
    p.add_argument("--render", default="build/demo_render")
    p.add_argument("--n", type=int, default=300, help="questions per category (tools: n/2)")
    p.add_argument("--seed", type=int, default=2026)
    p.add_argument("--jobs", type=int, default=2)
    p.add_argument("--out")
    p.add_argument("--think-arithmetic", action="store_true",
                   help="only the arithmetic questions, in thinking mode (reasoning first)")
    a = p.parse_args()
    rng = random.Random(a.seed)
    eng = Engine(a)
    pool = ThreadPoolExecutor(a.jobs)

    arith = held_out_items(tasks.arith_item, a.n, rng)
    units = held_out_items(tasks.unit_item, a.n // 3, rng,
                           accept=lambda it: re.search(r"(km|m|cm|kg|L)>", it[0]) is not None)
    puzzles = held_out_items(tasks.puzzle_item, a.n // 3, rng,
                             accept=lambda it: re.match(r"(Which is|Sort|Is )", it[1]) is not None)
    tools = held_out_items(tasks.tool_item, a.n // 2, rng)

    report, fails = {}, {}

    def score(name, items, ok_fn, replies):
        good = [ok_fn(it, r) for it, r in zip(items, replies)]
        report[name] = {"n": len(items), "correct": sum(good), "accuracy": round(sum(good) / len(items), 4)}
        fails[name] = [{"q": it[1], "reply": r} for it, r, g in zip(items, replies, good) if not g][:5]

    def arith_ok(it, r):
        m = re.search(r"= (-?\d+)\.$", r)
        return m is not None and int(m.group(1)) == it[3]

    replies = list(pool.map(lambda it: (eng.think if a.think_arithmetic else eng.chat)(it[1]), arith))
    score("arithmetic", arith, arith_ok, replies)
    for sym in "+-*":
        sub = [(it, r) for it, r in zip(arith, replies) if it[4][1] == sym]
        score(f"arithmetic {sym}", [s[0] for s in sub], arith_ok, [s[1] for s in sub])
    if a.think_arithmetic:
        print(json.dumps({"mode": "thinking", "scores": report, "failures": fails}, indent=1))
        return
    score("units", units, lambda it, r: r == it[2], list(pool.map(lambda it: eng.chat(it[1]), units)))
    score("puzzles", puzzles, lambda it, r: r == it[2], list(pool.map(lambda it: eng.chat(it[1]), puzzles)))

    prompts = [render(a, tasks.tool_prompt(it), 2) for it in tools]
    calls = list(pool.map(lambda x: eng.raw(x[1], f"call{x[0]}"), enumerate(prompts)))

    def call_ok(it, r):
        return parse_call(r) == (it[2], it[3])

    score("tool calls", tools, call_ok, calls)
    score("tool calls well-formed", tools, lambda it, r: parse_call(r) is not None, calls)

    answers = list(pool.map(lambda x: eng.raw(render(a, answer_conv(x[1]), 4), f"ans{x[0]}"), enumerate(tools)))
    score("tool answers", tools, lambda it, r: r == it[5], answers)

    summary = {"model": a.model, "seed": a.seed, "decoding": "greedy, dsv4 generate --device cpu",
               "scores": report, "failures": fails}
    text = json.dumps(summary, indent=1, ensure_ascii=False)
    print(text)
    if a.out:
        with open(a.out, "w", encoding="utf-8") as f:
            f.write(text + "\n")


if __name__ == "__main__":
    main()

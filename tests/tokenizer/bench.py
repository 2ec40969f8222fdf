#!/usr/bin/env python3
"""Tokenizer encode benchmark: dsv4 (tools/tokbench) vs the HF `tokenizers`
library on the same text in the same run; also checks that both give the
same ids. Usage: bench.py --tokbench build/tokbench --tokenizer tokenizer.json [--mb 20] [--runs 3]"""
import argparse
import os
import platform
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokbench", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--mb", type=float, default=20)
    ap.add_argument("--runs", type=int, default=3)
    a = ap.parse_args()
    import tokenizers
    from tokenizers import Tokenizer

    with tempfile.TemporaryDirectory() as work:
        path = os.path.join(work, "big.txt")
        subprocess.run([sys.executable, os.path.join(HERE, "gen_corpus.py"), path, "--big", str(a.mb)], check=True)
        with open(path, encoding="utf-8", newline="") as f:
            text = f.read()
        nbytes = len(text.encode())

        ids_path = os.path.join(work, "ids.txt")
        out = subprocess.run([a.tokbench, a.tokenizer, path, str(a.runs), "--ids", ids_path],
                             check=True, capture_output=True, text=True).stdout.strip()
        ours = dict(kv.split("=") for kv in out.split())
        with open(ids_path) as f:
            our_ids = [int(x) for x in f]

        t0 = time.perf_counter()
        ref = Tokenizer.from_file(a.tokenizer)
        load_s = time.perf_counter() - t0
        best = 1e30
        for _ in range(a.runs):
            t0 = time.perf_counter()
            ids = ref.encode(text).ids
            best = min(best, time.perf_counter() - t0)
        lines = text.splitlines(keepends=True)
        best_batch = 1e30
        for _ in range(a.runs):
            t0 = time.perf_counter()
            ref.encode_batch(lines)
            best_batch = min(best_batch, time.perf_counter() - t0)

    print(f"machine: {platform.processor() or platform.machine()}, {os.cpu_count()} cores; "
          f"tokenizers {tokenizers.__version__}; text {nbytes / 1e6:.1f} MB, {len(ids)} tokens; best of {a.runs}")
    print(f"dsv4 tokbench (1 thread, whole text):        encode {float(ours['encode_MBps']):7.2f} MB/s  "
          f"load {float(ours['load_s']):.3f} s")
    print(f"tokenizers encode (whole text, 1 call):      encode {nbytes / best / 1e6:7.2f} MB/s  load {load_s:.3f} s")
    print(f"tokenizers encode_batch ({len(lines)} lines, all cores): encode {nbytes / best_batch / 1e6:7.2f} MB/s")
    print("ids identical:", our_ids == ids)
    return 0 if our_ids == ids else 1


if __name__ == "__main__":
    sys.exit(main())

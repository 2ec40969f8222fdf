#!/usr/bin/env python3
"""Compares `dsv4 tokenize` with the Hugging Face `tokenizers` library on a
JSONL corpus, and checks decode(encode(s)) == s through `dsv4 detokenize`.
Prints "PASS tokenizer_parity ..." or "FAIL tokenizer_parity: ..." and exits
non-zero on failure.

Usage: check_parity.py --bin DSV4 --tokenizer tokenizer.json --corpus C.jsonl --workdir DIR [--name NAME]"""
import argparse
import json
import os
import subprocess
import sys


def fail(name, msg):
    print(f"FAIL {name}: {msg}")
    sys.exit(1)


def run(name, cmd):
    p = subprocess.run(cmd, capture_output=True)
    if p.returncode != 0:
        fail(name, f"{' '.join(cmd[:3])} ... exited {p.returncode}: {p.stderr.decode(errors='replace').strip()[:300]}")
    return p.stdout.decode("utf-8")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--name", default="tokenizer_parity")
    a = ap.parse_args()
    name = a.name
    try:
        from tokenizers import Tokenizer
    except ImportError:
        fail(name, "python package 'tokenizers' is missing (pip install tokenizers)")

    ref = Tokenizer.from_file(a.tokenizer)
    with open(a.corpus, encoding="utf-8") as f:
        texts = [json.loads(line) for line in f]
    want = [e.ids for e in ref.encode_batch(texts)]

    got_lines = run(name, [a.bin, "tokenize", "--tokenizer", a.tokenizer, "--jsonl", a.corpus]).split("\n")
    if got_lines and got_lines[-1] == "":
        got_lines.pop()
    if len(got_lines) != len(texts):
        fail(name, f"dsv4 printed {len(got_lines)} lines for {len(texts)} strings")
    got = [[int(x) for x in line.split(",")] if line else [] for line in got_lines]
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    for i in bad[:5]:
        k = next((j for j in range(min(len(got[i]), len(want[i]))) if got[i][j] != want[i][j]),
                 min(len(got[i]), len(want[i])))
        print(f"  mismatch line {i + 1}: {texts[i][:80]!r}\n    first difference at token {k}: "
              f"dsv4 {got[i][k:k + 6]} vs tokenizers {want[i][k:k + 6]}", file=sys.stderr)
    if bad:
        fail(name, f"{len(bad)} of {len(texts)} strings encode differently (first at line {bad[0] + 1})")

    ids_path = os.path.join(a.workdir, name + ".ids.jsonl")
    with open(ids_path, "w") as f:
        for ids in got:
            f.write(json.dumps(ids) + "\n")
    # split("\n"), not splitlines(): the JSON text may hold raw U+2028 etc.
    dec = [json.loads(line) for line in
           run(name, [a.bin, "detokenize", "--tokenizer", a.tokenizer, "--jsonl", ids_path]).split("\n") if line]
    if len(dec) != len(texts):
        fail(name, f"detokenize printed {len(dec)} lines for {len(texts)} strings")
    bad = [i for i in range(len(texts)) if dec[i] != texts[i]]
    if bad:
        i = bad[0]
        fail(name, f"{len(bad)} strings do not round-trip; line {i + 1}: {texts[i][:60]!r} -> {dec[i][:60]!r}")
    ref_dec = ref.decode_batch(want, skip_special_tokens=False)
    bad = [i for i in range(len(texts)) if ref_dec[i] != dec[i]]
    if bad:
        fail(name, f"{len(bad)} decodes differ from tokenizers (first at line {bad[0] + 1})")
    print(f"PASS {name} ({len(texts)} strings: ids identical to tokenizers, decode(encode(s)) == s)")


if __name__ == "__main__":
    main()

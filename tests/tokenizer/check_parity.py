#!/usr/bin/env python3
"""Compares `dsv4 tokenize` with the Hugging Face `tokenizers` library on a
JSONL corpus, and checks decode(encode(s)) == s through `dsv4 detokenize`.
Then repeats the encode comparison for variants of the tokenizer.json that
exercise settings the DeepSeek file does not use (other Split behaviors,
invert, literal patterns, ByteLevel's own regex, special tokens as text).
Prints one "PASS name ..." or "FAIL name: ..." line per check; exits
non-zero if any failed.

Usage: check_parity.py --bin DSV4 --tokenizer tokenizer.json --corpus C.jsonl --workdir DIR"""
import argparse
import copy
import json
import os
import subprocess
import sys


class Fail(Exception):
    pass


def run(cmd):
    p = subprocess.run(cmd, capture_output=True)
    if p.returncode != 0:
        raise Fail(f"{' '.join(cmd[:3])} ... exited {p.returncode}: "
                   f"{p.stderr.decode(errors='replace').strip()[:300]}")
    return p.stdout.decode("utf-8")


def check(a, tok_path, texts, corpus_path, name, no_special=False, roundtrip=True):
    from tokenizers import Tokenizer
    ref = Tokenizer.from_file(tok_path)
    ref.encode_special_tokens = no_special
    want = [e.ids for e in ref.encode_batch(texts)]
    cmd = [a.bin, "tokenize", "--tokenizer", tok_path, "--jsonl", corpus_path] + (["--no-special"] if no_special else [])
    lines = run(cmd).split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    if len(lines) != len(texts):
        raise Fail(f"dsv4 printed {len(lines)} lines for {len(texts)} strings")
    got = [[int(x) for x in line.split(",")] if line else [] for line in lines]
    bad = [i for i in range(len(texts)) if got[i] != want[i]]
    for i in bad[:5]:
        k = next((j for j in range(min(len(got[i]), len(want[i]))) if got[i][j] != want[i][j]),
                 min(len(got[i]), len(want[i])))
        print(f"  {name}: mismatch line {i + 1}: {texts[i][:80]!r}\n    first difference at token {k}: "
              f"dsv4 {got[i][k:k + 6]} vs tokenizers {want[i][k:k + 6]}", file=sys.stderr)
    if bad:
        raise Fail(f"{len(bad)} of {len(texts)} strings encode differently (first at line {bad[0] + 1})")

    ids_path = os.path.join(a.workdir, name + ".ids.jsonl")
    with open(ids_path, "w") as f:
        for ids in got:
            f.write(json.dumps(ids) + "\n")
    # split("\n"), not splitlines(): the JSON text may hold raw U+2028 etc.
    dec = [json.loads(line) for line in
           run([a.bin, "detokenize", "--tokenizer", tok_path, "--jsonl", ids_path]).split("\n") if line]
    if len(dec) != len(texts):
        raise Fail(f"detokenize printed {len(dec)} lines for {len(texts)} strings")
    ref_dec = ref.decode_batch(want, skip_special_tokens=False)
    bad = [i for i in range(len(texts)) if ref_dec[i] != dec[i]]
    if bad:
        raise Fail(f"{len(bad)} decodes differ from tokenizers (first at line {bad[0] + 1})")
    if roundtrip:
        bad = [i for i in range(len(texts)) if dec[i] != texts[i]]
        if bad:
            i = bad[0]
            raise Fail(f"{len(bad)} strings do not round-trip; line {i + 1}: {texts[i][:60]!r} -> {dec[i][:60]!r}")
    return f"{len(texts)} strings: ids identical to tokenizers" + (", decode(encode(s)) == s" if roundtrip else "")


def variants(base):
    """(name, tokenizer.json dict, no_special, roundtrip) for the variant checks."""
    pre = base["pre_tokenizer"]["pretokenizers"]
    out = [("no_special", base, True, True)]
    for i, beh in [(0, "MergedWithPrevious"), (1, "MergedWithNext"), (2, "Contiguous"), (0, "Removed")]:
        j = copy.deepcopy(base)
        j["pre_tokenizer"]["pretokenizers"][i]["behavior"] = beh
        out.append((f"split_{beh}", j, False, beh != "Removed"))
        j = copy.deepcopy(j)
        j["pre_tokenizer"]["pretokenizers"][i]["invert"] = True
        out.append((f"split_{beh}_invert", j, False, beh != "Removed"))
    j = copy.deepcopy(base)
    j["pre_tokenizer"]["pretokenizers"].insert(0, {"type": "Split", "pattern": {"String": "a."},
                                                   "behavior": "Isolated", "invert": False})
    out.append(("split_literal", j, False, True))
    j = copy.deepcopy(base)
    flags = {"<think>": ["lstrip"], "</think>": ["rstrip"], "<｜User｜>": ["single_word"], "｜DSML｜": ["lstrip", "rstrip"],
             "<｜Assistant｜>": ["single_word", "lstrip", "rstrip"], "<｜end▁of▁sentence｜>": ["lstrip", "rstrip"],
             "<｜begin▁of▁sentence｜>": ["single_word"]}
    for t in j["added_tokens"]:
        for flag in flags.get(t["content"], []):
            t[flag] = True
    out.append(("added_flags", j, False, False))
    out.append(("added_flags_no_special", j, True, False))  # lstrip/rstrip drop whitespace
    j = copy.deepcopy(base)
    j["pre_tokenizer"] = dict(pre[-1], use_regex=True)
    out.append(("bytelevel_regex", j, False, True))
    j = copy.deepcopy(base)
    j["pre_tokenizer"]["pretokenizers"][1] = {"type": "Split", "pattern": {"Regex": "x*"},
                                              "behavior": "Isolated", "invert": False}
    out.append(("split_empty_matches", j, False, True))
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--bin", required=True)
    ap.add_argument("--tokenizer", required=True)
    ap.add_argument("--corpus", required=True)
    ap.add_argument("--workdir", required=True)
    ap.add_argument("--variant-lines", type=int, default=1500, help="corpus lines used for each variant")
    a = ap.parse_args()
    try:
        import tokenizers  # noqa: F401
    except ImportError:
        print("FAIL tokenizer_parity: python package 'tokenizers' is missing (pip install tokenizers)")
        return 1
    with open(a.corpus, encoding="utf-8") as f:
        lines = f.read().split("\n")[:-1]
    texts = [json.loads(line) for line in lines]
    failed = 0
    try:
        print("PASS tokenizer_parity (" + check(a, a.tokenizer, texts, a.corpus, "tokenizer_parity") + ")")
    except Fail as e:
        print(f"FAIL tokenizer_parity: {e}")
        failed += 1
    sub_path = os.path.join(a.workdir, "variant_corpus.jsonl")
    with open(sub_path, "w", encoding="utf-8") as f:
        f.write("".join(line + "\n" for line in lines[:a.variant_lines]))
    with open(a.tokenizer, encoding="utf-8") as f:
        base = json.load(f)
    for vname, j, no_special, roundtrip in variants(base):
        name = "tokenizer_parity_" + vname
        path = a.tokenizer
        if j is not base:
            path = os.path.join(a.workdir, vname + ".json")
            with open(path, "w", encoding="utf-8") as f:
                json.dump(j, f, ensure_ascii=False)
        try:
            print(f"PASS {name} (" + check(a, path, texts[:a.variant_lines], sub_path, name, no_special, roundtrip) + ")")
        except Fail as e:
            print(f"FAIL {name}: {e}")
            failed += 1
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""tokenizer.json (byte-level BPE) -> the tokenizer.ggml.* metadata llama.cpp's
convert_hf_to_gguf.py writes, and a metadata-only GGUF file holding it (stdlib only).

Rules of the converter (TextModel._set_vocab_gpt2 / get_vocab_base): tokens by id, ids
without a token become "[PADn]" of type UNUSED (5); added tokens are CONTROL (3) when
special or when they look special (<|...|>, <｜...｜>, <pad>, <mask>, ...), else
USER_DEFINED (4); everything else NORMAL (1); merges as "A B"; model "gpt2"; pre
"joyai-llm", the name the converter's hash table gives DeepSeek-V4's tokenizer.json
(checked with the converter itself, tools/oracle/README.md).

usage: tokenizer_to_gguf.py tokenizer.json OUT.gguf [VOCAB_SIZE] [PRE_NAME]"""
import json
import struct
import sys

NORMAL, CONTROL, USER_DEFINED, UNUSED = 1, 3, 4, 5


def looks_special(t):
    return (t in ("<pad>", "<mask>", "<2mass>", "[@BOS@]") or (t.startswith("<|") and t.endswith("|>"))
            or (t.startswith("<｜") and t.endswith("｜>")))


def tokenizer_kv(tj, vocab_size=None, pre="joyai-llm"):
    """[(key, kind, value)]: kind 'string' or 'array' (of str or int)."""
    vocab = tj["model"]["vocab"]
    added = {a["id"]: a for a in tj.get("added_tokens", [])}
    n = vocab_size or max(list(vocab.values()) + list(added)) + 1
    rev = {i: s for s, i in vocab.items()}
    toks, types = [], []
    for i in range(n):
        if i in added:
            c = added[i]["content"]
            toks.append(c)
            types.append(CONTROL if added[i].get("special") or looks_special(c) else USER_DEFINED)
        elif i in rev:
            toks.append(rev[i])
            types.append(NORMAL)
        else:
            toks.append(f"[PAD{i}]")
            types.append(UNUSED)
    merges = [m if isinstance(m, str) else " ".join(m) for m in tj["model"]["merges"]]
    return [("tokenizer.ggml.model", "string", "gpt2"), ("tokenizer.ggml.pre", "string", pre),
            ("tokenizer.ggml.tokens", "array", toks), ("tokenizer.ggml.token_type", "array", types),
            ("tokenizer.ggml.merges", "array", merges)]


def _s(x):
    b = x.encode("utf-8")
    return struct.pack("<Q", len(b)) + b


def write_gguf(path, kvs):
    out = bytearray(b"GGUF" + struct.pack("<IQQ", 3, 0, len(kvs) + 1))
    out += _s("general.architecture") + struct.pack("<I", 8) + _s("deepseek4")
    for k, kind, v in kvs:
        out += _s(k)
        if kind == "string":
            out += struct.pack("<I", 8) + _s(v)
        elif isinstance(v[0], str):
            out += struct.pack("<IIQ", 9, 8, len(v)) + b"".join(_s(x) for x in v)
        else:
            out += struct.pack("<IIQ", 9, 5, len(v)) + b"".join(struct.pack("<i", x) for x in v)
    out += b"\0" * ((-len(out)) % 32)
    open(path, "wb").write(out)


if __name__ == "__main__":
    tj = json.load(open(sys.argv[1], encoding="utf-8"))
    n = int(sys.argv[3]) if len(sys.argv) > 3 else None
    write_gguf(sys.argv[2], tokenizer_kv(tj, n, sys.argv[4] if len(sys.argv) > 4 else "joyai-llm"))

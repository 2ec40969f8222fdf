#!/usr/bin/env python3
"""Write a tiny byte-level BPE tokenizer.json shaped like DeepSeek-V4's.

It has the real file's layout on a small scale, so the text CLI can be tested
end to end on the tiny oracle checkpoints (tests/fixtures/tiny-chat):
  ids 0-2    <｜begin▁of▁sentence｜>, <｜end▁of▁sentence｜>, <｜▁pad▁｜>
             (special, also in the BPE vocab, as in the real file; the
             checkpoint's config says bos 0, eos 1 like the real one)
  ids 3-258  the 256 byte-level symbols, in the byte-level alphabet's order
  then       a few English merges
  then       the non-special added tokens the chat encoding writes:
             <｜User｜>, <｜Assistant｜>, <think>, </think>, ｜DSML｜,
             <｜latest_reminder｜>
The pre-tokenizer and decoder are the real file's (digit groups, CJK runs,
the word/punctuation split, then ByteLevel). Only the standard library is
used. Usage: make_tiny_tokenizer.py OUT.json  (prints the vocabulary size).
"""
import json
import sys

SPECIAL = ["<｜begin▁of▁sentence｜>", "<｜end▁of▁sentence｜>", "<｜▁pad▁｜>"]
ADDED = ["<｜User｜>", "<｜Assistant｜>", "<think>", "</think>", "｜DSML｜", "<｜latest_reminder｜>"]
# (left, right): merged in this order (rank); "Ġ" is the byte-level space.
MERGES = [("Ġ", "t"), ("h", "e"), ("i", "n"), ("e", "r"), ("Ġ", "a"), ("o", "n"), ("Ġt", "he"),
          ("l", "l"), ("e", "l"), ("Ġ", "w"), ("o", "r"), ("in", "g"), ("Ġ", "h"), ("Ġh", "el"),
          ("Ġhel", "l"), ("Ġhell", "o"), ("Ġw", "or"), ("Ġwor", "l"), ("Ġworl", "d"), ("Ġ", "s")]

PRETOK = {
    "type": "Sequence",
    "pretokenizers": [
        {"type": "Split", "pattern": {"Regex": "\\p{N}{1,3}"}, "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex": "[\u4e00-\u9fa5\u3040-\u309f\u30a0-\u30ff]+"},
         "behavior": "Isolated", "invert": False},
        {"type": "Split", "pattern": {"Regex":
            "[!\"#$%&'()*+,\\-./:;<=>?@\\[\\\\\\]^_`{|}~][A-Za-z]+|[^\r\n\\p{L}\\p{P}\\p{S}]?[\\p{L}\\p{M}]+|"
            " ?[\\p{P}\\p{S}]+[\r\n]*|\\s*[\r\n]+|\\s+(?!\\S)|\\s+"},
         "behavior": "Isolated", "invert": False},
        {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False},
    ],
}


def byte_alphabet():
    """GPT-2's byte -> printable character map, in its own order."""
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + \
        list(range(ord("®"), ord("ÿ") + 1))
    cs = bs[:]
    n = 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return [chr(c) for c in cs]


def build():
    vocab = {}
    for s in SPECIAL:
        vocab[s] = len(vocab)
    for ch in byte_alphabet():
        vocab[ch] = len(vocab)
    merges = []
    for a, b in MERGES:
        assert a in vocab and b in vocab, (a, b)
        vocab[a + b] = len(vocab)
        merges.append(f"{a} {b}")
    added = [{"id": i, "content": s, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for i, s in enumerate(SPECIAL)]
    for s in ADDED:
        added.append({"id": len(vocab) + len(added) - len(SPECIAL), "content": s, "single_word": False,
                      "lstrip": False, "rstrip": False, "normalized": True, "special": False})
    n_ids = len(vocab) + len(ADDED)
    tok = {
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": added,
        "normalizer": {"type": "Sequence", "normalizers": []},
        "pre_tokenizer": PRETOK,
        "post_processor": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False,
                           "use_regex": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
                  "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False,
                  "vocab": vocab, "merges": merges},
    }
    return tok, n_ids


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    tok, n_ids = build()
    with open(sys.argv[1], "w", encoding="utf-8") as f:
        json.dump(tok, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print(n_ids)


if __name__ == "__main__":
    main()

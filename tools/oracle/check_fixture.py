#!/usr/bin/env python3
"""Recompute a fixture's logits with the transformers oracle and compare with logits.f32.

Usage: check_fixture.py DIR [DIR ...]   (exit status 1 if any fixture differs by > --tol)
Loads in fp32 whatever the stored dtype (the oracle cannot run a bf16 load, spec §8.4).
"""

import argparse
import json
import os
import sys

import numpy as np
import torch
from transformers import DeepseekV4ForCausalLM


def check(path):
    with open(os.path.join(path, "tokens.txt")) as f:
        ids = torch.tensor([[int(x) for x in f.read().strip().split(",")]])
    model = DeepseekV4ForCausalLM.from_pretrained(path, dtype=torch.float32).eval()
    with torch.no_grad():
        logits = model(ids, use_cache=False).logits[0].float().numpy()
    ref = np.fromfile(os.path.join(path, "logits.f32"), dtype="<f4").reshape(logits.shape)
    return float(np.abs(logits - ref).max())


def main():
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("dirs", nargs="+")
    p.add_argument("--tol", type=float, default=1e-4)
    a = p.parse_args()
    torch.set_float32_matmul_precision("highest")
    bad = 0
    for d in a.dirs:
        diff = check(d)
        with open(os.path.join(d, "meta.json")) as f:
            seed = json.load(f)["seed_used"]
        ok = diff <= a.tol
        bad += not ok
        print(f"{'OK  ' if ok else 'FAIL'} {d}: seed {seed}, max |logit diff| {diff:.3e}")
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()

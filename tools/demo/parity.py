#!/usr/bin/env python3
"""Oracle parity for the demo checkpoint: transformers' logits vs the engine's.

  parity.py --model models/demo [--dsv4 build/dsv4] [--render build/demo_render] [--n 300]
            [--device auto|cpu|cuda]

Renders a held-out tool-use conversation with the engine's chat encoder, tokenizes it
with the engine, keeps the first N ids (N > 256, so both HCA entries of the 128-ratio
layers are in play), and writes the oracle fixture files next to the checkpoint, in the
form tests/unit/test_oracle.c reads (tokens.txt, logits.f32, meta.json): the reference
is transformers' DeepseekV4ForCausalLM in fp32 on the saved BF16 checkpoint
(`from_pretrained(dir, dtype=torch.float32)`, `use_cache=False`). A checkpoint in the released
FP8/FP4 layout (config.json has a quantization_config; models/demo-fp8) is first dequantized
exactly to BF16 by tools/quant/dequantize.py, so the reference runs on exactly the weights the
engine decodes. Then it scores the same ids with `dsv4 score --cache exact` (transformers'
numerics) and prints the largest logit difference (exit 1 above --tol).
"""
import argparse
import hashlib
import json
import os
import random
import subprocess
import sys
import tempfile

import numpy as np
import torch
import transformers
from transformers import DeepseekV4ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "quant")]
import dequantize  # noqa: E402
import fp8_fp4  # noqa: E402
import tasks  # noqa: E402


def held_out_tool_item(rng):
    while True:
        it = tasks.tool_item(rng)
        if tasks.held_out(it[0]):
            return it


def sha256_file(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
    return h.hexdigest()


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--model", required=True)
    p.add_argument("--dsv4", default="build/dsv4")
    p.add_argument("--render", default="build/demo_render")
    p.add_argument("--n", type=int, default=300)
    p.add_argument("--tol", type=float, default=2e-3)
    p.add_argument("--device", default="auto", help="the engine's backend for `dsv4 score`")
    a = p.parse_args()
    torch.set_float32_matmul_precision("highest")

    conv = tasks.tool_conversation(random.Random(7), held_out_tool_item(random.Random(7)))
    conv["cuts"] = [len(conv["messages"])]
    text = json.loads(subprocess.run([a.render], input=json.dumps(conv) + "\n", capture_output=True,
                                     text=True, check=True).stdout)[0]
    with tempfile.TemporaryDirectory() as tmp:
        tf = os.path.join(tmp, "conv.txt")
        with open(tf, "w", encoding="utf-8") as f:
            f.write(text)
        out = subprocess.run([a.dsv4, "tokenize", "--tokenizer", a.model, "--file", tf], capture_output=True,
                             text=True, check=True).stdout
        ids = [int(x) for x in out.strip().split(",")][: a.n]
        if len(ids) < a.n:
            sys.exit(f"the conversation has only {len(ids)} tokens")

        with open(os.path.join(a.model, "config.json")) as f:
            quantized = "quantization_config" in json.load(f)
        oracle_dir = a.model
        if quantized:
            oracle_dir = os.path.join(tmp, "bf16")
            dequantize.dequantize_dir(a.model, oracle_dir)
        model = DeepseekV4ForCausalLM.from_pretrained(oracle_dir, dtype=torch.float32).eval()
        with torch.no_grad():
            ref = model(torch.tensor([ids]), use_cache=False).logits[0].float().numpy()
        tok_file = os.path.join(tmp, "tokens.txt")
        with open(tok_file, "w") as f:
            f.write(",".join(map(str, ids)) + "\n")
        got_file = os.path.join(tmp, "engine.f32")
        subprocess.run([a.dsv4, "score", "--model", a.model, "--device", a.device, "--cache", "exact",
                        "--tokens-file", tok_file, "--logits-out", got_file],
                       check=True, capture_output=True)
        got = np.fromfile(got_file, dtype="<f4").reshape(ref.shape)

    diff = float(np.abs(got - ref).max())
    argmax_agree = float((got.argmax(-1) == ref.argmax(-1)).mean())
    ref.astype("<f4").tofile(os.path.join(a.model, "logits.f32"))
    with open(os.path.join(a.model, "tokens.txt"), "w") as f:
        f.write(",".join(map(str, ids)) + "\n")
    meta = {"generator": "tools/demo/parity.py", "weights_dtype": "fp8-fp4" if quantized else "bf16",
            "reference": "fp32 full forward model(ids, use_cache=False).logits of " +
                         ("the checkpoint dequantized exactly to BF16 by tools/quant/dequantize.py" if quantized
                          else "the saved BF16 checkpoint"),
            "weights_sha256": {fn: sha256_file(os.path.join(a.model, fn)) for fn in fp8_fp4.shard_files(a.model)},
            "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
            "seq_len": len(ids), "vocab_size": int(ref.shape[1]),
            "logits_sha256": hashlib.sha256(ref.astype("<f4").tobytes()).hexdigest(),
            "engine_device": a.device, "engine_max_abs_diff": diff, "engine_argmax_agreement": argmax_agree,
            "logits_max_abs": float(np.abs(ref).max())}
    with open(os.path.join(a.model, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(json.dumps(meta, indent=1))
    sys.exit(0 if diff <= a.tol else 1)


if __name__ == "__main__":
    main()

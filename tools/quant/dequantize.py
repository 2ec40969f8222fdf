#!/usr/bin/env python3
"""Exactly dequantize a DeepSeek-V4 checkpoint in the released FP8/FP4 layout to BF16.

  dequantize.py SRC_DIR OUT_DIR

Every F8_E4M3 weight (its X.scale a 128x128 grid, F8_E8M0 or F32 powers of two) and every MXFP4
routed expert (I8/U8, X.scale [out, in/32] F8_E8M0) becomes BF16 holding code * scale, which bf16
represents exactly (a 3- or 1-bit mantissa times a power of two); the scales are dropped, every other
tensor is copied as it is. config.json loses quantization_config and expert_dtype. So OUT_DIR is the
same model as SRC_DIR for anything that reads BF16 checkpoints (transformers' DeepseekV4ForCausalLM
in fp32: the oracle of tools/demo/parity.py). Shards, index and tokenizer files as quantize_fp8.py.
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_fp4 as q  # noqa: E402
from quantize_fp8 import COPIED  # noqa: E402


def scale_exponents(name, tensors, rows, cols):
    """The exponents of weight `name`'s scale grid, which must be [rows, cols]."""
    sn = q.scale_name(name)
    if sn not in tensors:
        q.fail(f"{name} is quantized but {sn} is missing")
    dt, s = tensors[sn]
    if list(s.shape) != [rows, cols]:
        q.fail(f"{sn} has shape {list(s.shape)}, expected [{rows}, {cols}]")
    if dt == "F8_E8M0":
        return q.e8m0_exponents(s)
    if dt == "F32":
        m, k = np.frexp(s)
        if np.isfinite(s).all() and (m == 0.5).all():
            return (k - 1).astype(np.int32)
    q.fail(f"{sn} must be F8_E8M0 or F32 powers of two")


def dequantize(tensors):
    """{name: (dtype, array)} of one shard -> entries (name, dtype, shape, bytes) of the BF16 copy."""
    out = []
    for name, (dt, a) in tensors.items():
        if name.endswith(".scale"):
            continue
        if dt == "F8_E4M3":
            R, C = a.shape
            e = scale_exponents(name, tensors, -(-R // q.FP8_BLOCK), -(-C // q.FP8_BLOCK))
            w = q.fp8_dequantize(a, e)
        elif dt in ("I8", "U8"):
            R, C2 = a.shape
            w = q.mxfp4_dequantize(a, scale_exponents(name, tensors, R, 2 * C2 // q.FP4_BLOCK))
        else:
            out.append((name, dt, a.shape, a.tobytes()))
            continue
        b = q.f32_to_bf16(w)
        if not (q.bf16_to_f32(b) == w).all():   # only scales near 2^-127 reach fp32 subnormals bf16 lacks
            q.fail(f"{name}: its dequantized values are not all exact in BF16")
        out.append((name, "BF16", w.shape, b.tobytes()))
    return out


def dequantize_dir(src, out):
    """SRC_DIR (FP8/FP4) -> OUT_DIR (BF16), as the module's docstring says."""
    try:
        with open(os.path.join(src, "config.json")) as f:
            conf = json.load(f)
    except (OSError, ValueError) as ex:
        q.fail(f"{src}/config.json: {ex}")
    conf.pop("quantization_config", None)
    conf.pop("expert_dtype", None)
    os.makedirs(out, exist_ok=True)
    shards = {}
    for fn in q.shard_files(src):
        entries = dequantize(q.read_safetensors(os.path.join(src, fn)))
        q.write_safetensors(os.path.join(out, fn), entries)
        shards[fn] = [e[0] for e in entries]
    if os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        q.write_index(out, shards)
    with open(os.path.join(out, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    for fn in COPIED:
        if os.path.exists(os.path.join(src, fn)):
            shutil.copyfile(os.path.join(src, fn), os.path.join(out, fn))


def main():
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.strip())
    dequantize_dir(sys.argv[1], sys.argv[2])


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Convert a BF16/F32 DeepSeek-V4 checkpoint with official tensor names into the layout of DeepSeek's
released FP8 checkpoints (spec §7; tools/quant/fp8_fp4.py has the formats and which tensor gets which).

  quantize_fp8.py SRC_DIR OUT_DIR

SRC_DIR: config.json (official keys), model.safetensors or model.safetensors.index.json + shards,
tensors named as the official checkpoints name them (embed.weight, layers.L.attn.wq_a.weight,
layers.L.ffn.experts.E.w1.weight, mtp.0.e_proj.weight, ...).

OUT_DIR gets: the same shards (each tensor in the shard file it came from, its .scale beside it) with
FP8 e4m3 + F8_E8M0 [ceil(out/128), ceil(in/128)] dense projections, I8 [out, in/2] + F8_E8M0
[out, in/32] MXFP4 routed experts, BF16 for the rest but F32 mixers/sinks/biases and I64 tid2eid;
model.safetensors.index.json when the source had one; config.json with quantization_config (fmt e4m3,
weight_block_size [128, 128], scale_fmt ue8m0) and expert_dtype fp4; tokenizer.json,
tokenizer_config.json and generation_config.json copied when present; config.json is written last.
Other files already in OUT_DIR are left alone. numpy only; the output is a pure function of the input bytes.
"""
import json
import os
import shutil
import sys

import numpy as np

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import fp8_fp4 as q  # noqa: E402

COPIED = ("tokenizer.json", "tokenizer_config.json", "generation_config.json")


def as_f32(name, dt, a):
    """A float tensor's values as fp32; non-finite weights are refused."""
    if dt == "BF16":
        f = q.bf16_to_f32(a)
    elif dt in ("F32", "F16"):
        f = a.astype(np.float32)
    else:
        q.fail(f"{name} has dtype {dt}; a float tensor (F32/BF16/F16) is expected")
    if not np.isfinite(f).all():
        q.fail(f"{name} has non-finite values")
    return f


def convert(name, dt, a):
    """One source tensor -> the entries (name, dtype, shape, bytes) of the quantized checkpoint."""
    kind = q.storage_kind(name)
    if kind is None:
        q.fail(f"{name} is not an official DeepSeek-V4 tensor name (official-name checkpoints only)")
    if kind == "i64":
        if dt != "I64":
            q.fail(f"{name} has dtype {dt}, expected I64")
        return [(name, "I64", a.shape, a.tobytes())]
    f = as_f32(name, dt, a)
    if kind == "f32":
        return [(name, "F32", f.shape, f.tobytes())]
    if kind == "bf16":
        return [(name, "BF16", f.shape, (a if dt == "BF16" else q.f32_to_bf16(f)).tobytes())]
    if f.ndim != 2:
        q.fail(f"{name} has shape {list(f.shape)}; a matrix is expected")
    if kind == "fp8":
        codes, e = q.fp8_quantize(f)
        return [(name, "F8_E4M3", codes.shape, codes.tobytes()),
                (q.scale_name(name), "F8_E8M0", e.shape, q.e8m0_bytes(e, kind, name).tobytes())]
    if f.shape[1] % q.FP4_BLOCK:
        q.fail(f"{name} has {f.shape[1]} columns; MXFP4 needs a multiple of {q.FP4_BLOCK}")
    packed, e = q.mxfp4_quantize(f)
    return [(name, "I8", packed.shape, packed.tobytes()),
            (q.scale_name(name), "F8_E8M0", e.shape, q.e8m0_bytes(e, kind, name).tobytes())]


def quantized_config(src):
    try:
        with open(os.path.join(src, "config.json")) as f:
            conf = json.load(f)
    except (OSError, ValueError) as ex:
        q.fail(f"{src}/config.json: {ex}")
    if "quantization_config" in conf:
        q.fail(f"{src}/config.json already has a quantization_config: the source must be BF16/F32")
    conf["quantization_config"] = dict(q.QUANTIZATION_CONFIG)
    conf["expert_dtype"] = "fp4"
    return conf


def main():
    if len(sys.argv) != 3 or sys.argv[1].startswith("-"):
        sys.exit(__doc__.strip())
    src, out = sys.argv[1], sys.argv[2]
    if os.path.abspath(src) == os.path.abspath(out):
        q.fail("OUT_DIR must differ from SRC_DIR")
    conf = quantized_config(src)
    files = q.shard_files(src)
    os.makedirs(out, exist_ok=True)
    for fn in os.listdir(out):   # an earlier conversion's shards would shadow the new index
        if fn == "config.json" or fn.startswith("model") and fn.endswith((".safetensors", ".safetensors.index.json")):
            os.remove(os.path.join(out, fn))
    shards = {}
    for fn in files:
        entries = []
        for name, (dt, a) in q.read_safetensors(os.path.join(src, fn)).items():
            entries += convert(name, dt, a)
        q.write_safetensors(os.path.join(out, fn), entries)
        shards[fn] = [e[0] for e in entries]
    if os.path.exists(os.path.join(src, "model.safetensors.index.json")):
        q.write_index(out, shards)
    for fn in COPIED:
        if os.path.exists(os.path.join(src, fn)):
            shutil.copyfile(os.path.join(src, fn), os.path.join(out, fn))
    with open(os.path.join(out, "config.json"), "w") as f:   # last: a make rule's target
        json.dump(conf, f, indent=2)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(out, fn)) for fn in shards)
    print(f"{out}: {sum(len(v) for v in shards.values())} tensors in {len(shards)} file(s), {size} bytes")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Build a tiny DeepSeek-V4 checkpoint in the official FP8/MXFP4 layout and record reference
logits from the transformers oracle on the exactly dequantized weights.

Layout (spec §7): FP8 e4m3 dense matrices with 128x128 block scales (F8_E8M0, or F32 powers of
two with --scale-dtype f32 as Flash-Base ships), MXFP4 routed experts (I8 [out, in/2], low nibble
= even column, F8_E8M0 [out, in/32]), BF16 embedding/head/norms/router/compressor and indexer
projections, F32 hc_*/sinks/ape/gate.bias, I64 tid2eid; official tensor names, official
config.json keys plus quantization_config and expert_dtype "fp4". Hidden sizes default to
non-multiples of 128 (320, 192) so partial scale blocks exist.

Quantization: per 128x128 block scale = 2^ceil(log2(amax/448)), codes = round-to-nearest e4m3;
per 1x32 block scale = 2^ceil(log2(amax/6)), codes = nearest E2M1. The model the reference runs
is the fp32 model whose weights are exactly code * scale (bf16-rounded where stored as BF16).

The reference is `model(ids, use_cache=False).logits` in fp32 of DeepseekV4ForCausalLM with those
weights. The script also loads the written directory with transformers' own FP8 loader
(FineGrainedFP8Config(dequantize=True)) and records, per tensor, whether its dequantization
equals ours (meta.json: hf_fp8_loader). Seeds with near-tied top-k decisions are rejected
(spec §8.5), as in make_fixture.py, whose helpers this script reuses.
"""

import argparse
import json
import math
import os
import shutil
import struct
import sys

import torch
import transformers
from transformers import DeepseekV4ForCausalLM

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import make_fixture as mf  # noqa: E402

E2M1 = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0])


def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--max-seed-tries", type=int, default=200)
    p.add_argument("--seq-len", type=int, default=400, help=">= 3*128 so the HCA layer emits several entries")
    p.add_argument("--layers", default="S,C,H")
    p.add_argument("--hash-layers", type=int, default=1)
    p.add_argument("--vocab", type=int, default=192)
    p.add_argument("--hidden", type=int, default=320)
    p.add_argument("--heads", type=int, default=2)
    p.add_argument("--head-dim", type=int, default=128)
    p.add_argument("--rope-dim", type=int, default=32)
    p.add_argument("--q-lora", type=int, default=192)
    p.add_argument("--o-groups", type=int, default=2)
    p.add_argument("--o-lora", type=int, default=96)
    p.add_argument("--moe-inter", type=int, default=64)
    p.add_argument("--experts", type=int, default=4)
    p.add_argument("--experts-per-tok", type=int, default=2)
    p.add_argument("--hc-mult", type=int, default=2)
    p.add_argument("--index-heads", type=int, default=16)
    p.add_argument("--index-head-dim", type=int, default=32)
    p.add_argument("--index-topk", type=int, default=4)
    p.add_argument("--window", type=int, default=16)
    p.add_argument("--swiglu-limit", type=float, default=1.5)
    p.add_argument("--wo-a", choices=["fp8", "bf16"], default="fp8",
                   help="wo_a as FP8 (checkpoint) or pre-dequantized BF16 (official convert.py)")
    p.add_argument("--scale-dtype", choices=["e8m0", "f32"], default="e8m0",
                   help="FP8 scale container: native F8_E8M0 or F32 powers of two (Flash-Base)")
    p.add_argument("--shards", type=int, default=2)
    p.add_argument("--min-gap", type=float, default=1e-4)
    return p.parse_args(argv)


def base_args(a):
    """make_fixture's argument namespace for the shared helpers (config, rules)."""
    return mf.parse_args([
        "--out", a.out, "--layers", a.layers, "--hash-layers", str(a.hash_layers), "--vocab", str(a.vocab),
        "--hidden", str(a.hidden), "--heads", str(a.heads), "--head-dim", str(a.head_dim),
        "--rope-dim", str(a.rope_dim), "--q-lora", str(a.q_lora), "--o-groups", str(a.o_groups),
        "--o-lora", str(a.o_lora), "--moe-inter", str(a.moe_inter), "--experts", str(a.experts),
        "--experts-per-tok", str(a.experts_per_tok), "--hc-mult", str(a.hc_mult),
        "--index-heads", str(a.index_heads), "--index-head-dim", str(a.index_head_dim),
        "--index-topk", str(a.index_topk), "--window", str(a.window), "--csa-rate", "4", "--hca-rate", "128",
        "--swiglu-limit", str(a.swiglu_limit), "--seq-len", str(a.seq_len)])


# ----------------------------------------------------------------------------- formats

def fp8_quantize(w, blk=128):
    """w [R, C] fp32 -> (e4m3 codes [R, C], scale exponents [ceil(R/blk), ceil(C/blk)] int, dequantized)."""
    R, C = w.shape
    sr, sc = -(-R // blk), -(-C // blk)
    pad = torch.zeros(sr * blk, sc * blk)
    pad[:R, :C] = w
    blocks = pad.view(sr, blk, sc, blk)
    amax = blocks.abs().amax(dim=(1, 3)).clamp(min=1e-4)
    e = torch.ceil(torch.log2(amax / 448.0)).to(torch.int32)
    scale = torch.pow(2.0, e.double()).float()
    codes = (blocks / scale[:, None, :, None]).to(torch.float8_e4m3fn)
    deq = (codes.float() * scale[:, None, :, None]).view(sr * blk, sc * blk)[:R, :C].contiguous()
    return codes.view(sr * blk, sc * blk)[:R, :C].contiguous(), e, deq


def mxfp4_quantize(w):
    """w [..., C] fp32 (C % 32 == 0) -> (packed int8 [..., C/2], E8M0 exponents [..., C/32], dequantized)."""
    shp = w.shape
    blocks = w.reshape(*shp[:-1], shp[-1] // 32, 32)
    amax = blocks.abs().amax(dim=-1).clamp(min=6 * 2.0 ** -126)
    e = torch.ceil(torch.log2(amax / 6.0)).to(torch.int32)
    scale = torch.pow(2.0, e.double()).float()
    v = blocks / scale[..., None]
    codes = (v[..., None] - E2M1).abs().argmin(dim=-1)          # nearest code (first on ties)
    deq = (E2M1[codes] * scale[..., None]).reshape(shp)
    codes = codes.reshape(*shp[:-1], shp[-1] // 2, 2)
    packed = (codes[..., 0] | (codes[..., 1] << 4)).to(torch.uint8).view(torch.int8)
    return packed.contiguous(), e, deq.contiguous()


def kind_of(hf_name, a):
    """Storage format of an HF parameter in the official checkpoint (spec §7.2)."""
    if mf.F32_PATTERNS.search(hf_name):
        return "f32"
    if hf_name.endswith("tid2eid"):
        return "i64"
    if ".mlp.experts." in hf_name:
        return "mxfp4"
    fp8 = (".self_attn.q_a_proj.", ".self_attn.q_b_proj.", ".self_attn.kv_proj.", ".self_attn.o_b_proj.",
           ".indexer.q_b_proj.", ".shared_experts.")
    if any(s in hf_name for s in fp8) or (a.wo_a == "fp8" and ".self_attn.o_a_proj." in hf_name):
        return "fp8"
    return "bf16"


@torch.no_grad()
def quantize_model(model, a):
    """Replace every weight by its stored value; returns HF-named storage dicts (values, scales)."""
    values, scales = {}, {}
    for name, t in list(model.state_dict().items()):
        if name.endswith("inv_freq"):
            continue
        k = kind_of(name, a)
        if k == "fp8":
            codes, e, deq = fp8_quantize(t.float())
            values[name], scales[name] = codes, e
            t.copy_(deq)
        elif k == "mxfp4":
            packed, e, deq = mxfp4_quantize(t.float())
            values[name], scales[name] = packed, e
            t.copy_(deq)
        elif k == "bf16":
            t.copy_(t.to(torch.bfloat16).float())
            values[name] = t.to(torch.bfloat16).clone()
        else:
            values[name] = t.clone()
    return values, scales


# ----------------------------------------------------------------------------- writing

ST_DTYPE = {torch.float32: "F32", torch.bfloat16: "BF16", torch.int64: "I64", torch.float8_e4m3fn: "F8_E4M3",
            torch.int8: "I8"}


def scale_tensor(e, scale_dtype):
    """Scale exponents -> (safetensors dtype, bytes)."""
    if scale_dtype == "f32":
        return "F32", torch.pow(2.0, e.double()).float().contiguous().numpy().tobytes()
    if int(e.min()) < -127 or int(e.max()) > 127:
        sys.exit("scale exponent outside E8M0")
    return "F8_E8M0", (e + 127).to(torch.uint8).contiguous().numpy().tobytes()


def tensor_bytes(t):
    if t.dtype in (torch.bfloat16, torch.float8_e4m3fn):
        return t.contiguous().view(torch.uint8).numpy().tobytes()
    return t.contiguous().numpy().tobytes()


ELEM = {"F32": 4, "I64": 8, "BF16": 2, "F8_E4M3": 1, "F8_E8M0": 1, "I8": 1}


def write_safetensors(path, entries):
    """entries: list of (name, dtype string, shape, bytes). Like safetensors itself, data is laid out
    by element size, largest first, so every tensor is aligned to its elements."""
    entries = sorted(entries, key=lambda e: -ELEM[e[1]])
    hdr, off = {}, 0
    for name, dt, shape, data in entries:
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in entries:
            f.write(data)


def save(out_dir, cfg, a, values, scales):
    official = mf.to_official(values, cfg)
    off_scales = mf.to_official(scales, cfg)
    entries = []
    for name, t in sorted(official.items(), key=lambda kv: mf._layer_order_key(kv[0])):
        dt = "I8" if t.dtype == torch.int8 else ST_DTYPE[t.dtype]
        entries.append((name, dt, t.shape, tensor_bytes(t)))
        if name in off_scales:
            e = off_scales[name]
            mx = ".ffn.experts." in name
            sdt, sb = scale_tensor(e, "e8m0" if mx else a.scale_dtype)
            entries.append((name[: -len(".weight")] + ".scale", sdt, e.shape, sb))
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    total = sum(len(e[3]) for e in entries)
    groups, cur, acc = [], [], 0
    for e in entries:   # weight and scale stay together: a scale follows its weight
        if cur and acc > total * (len(groups) + 1) / a.shards and len(groups) < a.shards - 1 \
                and not e[0].endswith(".scale"):
            groups.append(cur)
            cur = []
        cur.append(e)
        acc += len(e[3])
    groups.append(cur)
    if len(groups) == 1:
        write_safetensors(os.path.join(out_dir, "model.safetensors"), groups[0])
    else:
        wmap = {}
        for i, g in enumerate(groups):
            fn = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
            write_safetensors(os.path.join(out_dir, fn), g)
            wmap.update({e[0]: fn for e in g})
        with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
            f.write("\n")
    conf = mf.official_config(cfg, True)
    conf["quantization_config"] = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                                   "scale_fmt": "ue8m0", "weight_block_size": [128, 128]}
    conf["expert_dtype"] = "fp4"
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(conf, f, indent=2)
        f.write("\n")
    return [(e[0], e[1], list(e[2])) for e in entries]


# ----------------------------------------------------------------------------- transformers' loader

@torch.no_grad()
def hf_loader_check(out_dir, model, ids):
    """Load out_dir with transformers' FP8 loader (dequantize=True) and compare every parameter and
    the logits with ours. Returns a summary for meta.json."""
    from transformers import FineGrainedFP8Config
    try:
        hf = DeepseekV4ForCausalLM.from_pretrained(
            out_dir, dtype=torch.float32, quantization_config=FineGrainedFP8Config(dequantize=True)).eval()
    except Exception as ex:  # noqa: BLE001 - any loader failure is a finding to record
        return {"loaded": False, "error": f"{type(ex).__name__}: {ex}"[:600]}
    # The loader leaves the modules it excludes from FP8 (compressor, indexer projections) in
    # bf16 although dtype=float32 was asked for, and the fp32 forward then fails on the dtype
    # mismatch (spec §8.4). Every loaded value is exact in bf16, so widening loses nothing.
    hf = hf.float()
    ours = model.state_dict()
    same, differ, missing = [], {}, []
    for name, t in hf.state_dict().items():
        if name.endswith("inv_freq"):
            continue
        if name not in ours:
            missing.append(name)
            continue
        d = (t.float() - ours[name].float()).abs().max().item() if t.shape == ours[name].shape else float("inf")
        (same.append(name) if d == 0 else differ.__setitem__(name, d))
    logit_diff = (mf.full_logits(hf, ids) - mf.full_logits(model, ids)).abs().max().item()
    return {"loaded": True, "tensors_equal": len(same), "tensors_differing": differ, "not_in_ours": missing,
            "logits_max_abs_diff_vs_reference": logit_diff}


# ----------------------------------------------------------------------------- main

def main(argv=None):
    a = parse_args(argv)
    torch.set_float32_matmul_precision("highest")
    b = base_args(a)
    cfg = mf.build_config(b)
    attempts = []
    for seed in range(a.seed, a.seed + a.max_seed_tries):
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        model = DeepseekV4ForCausalLM(cfg).to(torch.float32).eval()
        mf.randomize(model, cfg, gen, False)
        values, scales = quantize_model(model, a)
        ids = torch.randint(0, cfg.vocab_size, (1, a.seq_len), generator=gen)
        rec = mf.GapRecorder(model, cfg, a.min_gap)
        rec.active = True
        logits = mf.full_logits(model, ids)
        rec.active = False
        gaps = rec.summary()
        for h in rec.handles:
            h.remove()
        attempts.append({"seed": seed, "indexer_min_gap": (gaps["indexer"] or {}).get("min_gap"),
                         "router_min_gap": (gaps["router"] or {}).get("min_gap")})
        if rec.ok():
            break
        print(f"seed {seed}: near-tie top-k; trying the next seed", file=sys.stderr)
    else:
        sys.exit("no well-conditioned seed found")
    if not torch.isfinite(logits).all():
        sys.exit("non-finite logits")
    cached = {s: (mf.cached_logits(model, ids, [int(x) for x in s.split(",")]) - logits).abs().max().item()
              for s in ("1", "7")}
    listing = save(a.out, cfg, a, values, scales)
    hf = hf_loader_check(a.out, model, ids)
    print("transformers FP8 loader:", json.dumps(hf)[:1500])
    logits.numpy().astype("<f4").tofile(os.path.join(a.out, "logits.f32"))
    with open(os.path.join(a.out, "tokens.txt"), "w") as f:
        f.write(",".join(str(int(x)) for x in ids[0].tolist()) + "\n")
    top2 = torch.topk(logits, 2, dim=-1).values
    meta = {
        "generator": "tools/oracle/make_fp8_fixture.py",
        "argv": sys.argv[1:] if argv is None else argv,
        "seed_used": seed,
        "rejected_seeds": attempts[:-1],
        "reference": "fp32 full forward model(ids, use_cache=False).logits, batch 1, on the exactly "
                     "dequantized weights (code * scale; bf16 values for BF16 tensors)",
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "weights_dtype": "fp8-fp4",
        "seq_len": a.seq_len,
        "vocab_size": cfg.vocab_size,
        "wo_a": a.wo_a,
        "fp8_scale_dtype": a.scale_dtype,
        "hf_fp8_loader": hf,
        "cached_vs_full_max_abs_diff": cached,
        "top1_margin_min": (top2[:, 0] - top2[:, 1]).min().item(),
        "topk_gaps": gaps,
        "compressed_entries_at_end": {f"layer{i}": a.seq_len // cfg.compress_rates[k]
                                      for i, k in enumerate(cfg.layer_types) if k != "sliding_attention"},
        "tensors": listing,
    }
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(a.out, x)) for x in os.listdir(a.out))
    print(json.dumps({"out": a.out, "seed_used": seed, "bytes": size, "cached": cached}))


if __name__ == "__main__":
    main()

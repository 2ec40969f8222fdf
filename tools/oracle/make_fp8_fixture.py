#!/usr/bin/env python3
"""Build a tiny DeepSeek-V4 checkpoint in the official FP8/MXFP4 layout and record reference
logits from the transformers oracle on the exactly dequantized weights.

Layout (spec §7): FP8 e4m3 dense matrices with 128x128 block scales (F8_E8M0, or F32 powers of
two with --scale-dtype f32 as Flash-Base ships), MXFP4 routed experts (I8 [out, in/2], low nibble
= even column, F8_E8M0 [out, in/32]), BF16 embedding/head/norms/router/compressor and indexer
projections, F32 hc_*/sinks/ape/gate.bias, I64 tid2eid; official tensor names, official
config.json keys plus quantization_config and expert_dtype "fp4". Hidden sizes default to
non-multiples of 128 (320, 192) so partial scale blocks exist.

Quantization and storage rules: tools/quant/fp8_fp4.py (shared with tools/quant/quantize_fp8.py):
per 128x128 block scale = 2^ceil(log2(amax/448)), codes = round-to-nearest-even e4m3; per 1x32 block
scale = 2^ceil(log2(amax/6)), codes = nearest-even E2M1. The model the reference runs is the fp32
model whose weights are exactly code * scale (bf16-rounded where stored as BF16).

The reference is `model(ids, use_cache=False).logits` in fp32 of DeepseekV4ForCausalLM with those
weights. The script also loads the written directory with transformers' own FP8 loader
(FineGrainedFP8Config(dequantize=True)) and records, per tensor, whether its dequantization
equals ours (meta.json: hf_fp8_loader). A second reference, logits_official.f32, is the same
forward with the official numerics (spec §8.3) added by tools/oracle/official_cache.py.
Seeds with near-tied top-k decisions in the exact run are rejected (spec §8.5), as in
make_fixture.py, whose helpers this script reuses.

The official reference is only a reference where no FP8/FP4 rounding decision sits within fp32
noise of its boundary: with every matmul input rounded to e4m3, some element of some row lands
that close within a few dozen tokens, and from there on the logits depend on the order of fp32
operations (one e4m3 step of one element moved this model's logits by up to 0.3; the oracle in
float64 and the oracle in float32 then disagree by 0.1-1 for the rest of the sequence, as does
any implementation). The script finds the stable prefix: the positions before the first one where
the oracle's float64 full forward or its float32 cached path (chunks of 7) differs from its
float32 full forward by more than --official-agree; seeds whose stable prefix is shorter than
--min-official-prefix are rejected. test_oracle holds the engine to the official reference there.
"""

import argparse
import json
import os
import shutil
import sys

import numpy as np
import torch
import transformers
from transformers import DeepseekV4ForCausalLM

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "quant")]
import fp8_fp4 as q  # noqa: E402
import make_fixture as mf  # noqa: E402
import official_cache  # noqa: E402


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
    p.add_argument("--official-agree", type=float, default=1e-4,
                   help="the official reference's variants (float64, cached chunks of 7) must agree this "
                        "closely with its float32 full forward over the stable prefix")
    p.add_argument("--min-official-prefix", type=int, default=160,
                   help="reject a seed whose official stable prefix is shorter (160: 33 positions that "
                        "read the first HCA entry)")
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

# storage format -> safetensors dtype of the stored bits
ST_DTYPE = {"fp8": "F8_E4M3", "fp4": "I8", "bf16": "BF16", "f32": "F32", "i64": "I64"}


def kind_of(name, t, cfg, a):
    """Storage format of an HF parameter: that of its official name(s) (spec §7.2)."""
    official = next(iter(mf.to_official({name: t}, cfg)))
    k = q.storage_kind(official, wo_a_fp8=a.wo_a == "fp8")
    if k is None:
        sys.exit(f"no storage format for {name} ({official})")
    return k


@torch.no_grad()
def quantize_model(model, cfg, a):
    """Replace every weight by its stored value; returns HF-named storage dicts: the stored bits
    (torch tensors: e4m3 bytes, packed E2M1 bytes, bf16, f32, int64) and the scale exponents."""
    values, scales = {}, {}
    for name, t in list(model.state_dict().items()):
        if name.endswith("inv_freq"):
            continue
        k = kind_of(name, t, cfg, a)
        if k == "fp8":
            codes, e = q.fp8_quantize(t.float().numpy())
            values[name], scales[name] = torch.from_numpy(codes), torch.from_numpy(e)
            t.copy_(torch.from_numpy(q.fp8_dequantize(codes, e)))
        elif k == "fp4":
            packed, e = q.mxfp4_quantize(t.float().numpy())
            values[name], scales[name] = torch.from_numpy(packed), torch.from_numpy(e)
            t.copy_(torch.from_numpy(q.mxfp4_dequantize(packed, e)))
        elif k == "bf16":
            t.copy_(t.to(torch.bfloat16).float())
            values[name] = t.to(torch.bfloat16).clone()
        else:
            values[name] = t.clone()
    return values, scales


# ----------------------------------------------------------------------------- writing

def tensor_bytes(t):
    return t.contiguous().view(torch.uint8).numpy().tobytes()


def scale_bytes(e, kind, scale_dtype, name):
    """Scale exponents -> (safetensors dtype, bytes): native F8_E8M0, or F32 powers of two."""
    if scale_dtype == "f32":
        return "F32", np.exp2(e).astype(np.float32).tobytes()
    return "F8_E8M0", q.e8m0_bytes(e, kind, name).tobytes()


def save(out_dir, cfg, a, values, scales):
    official = mf.to_official(values, cfg)
    off_scales = mf.to_official(scales, cfg)
    entries = []
    for name, t in sorted(official.items(), key=lambda kv: mf._layer_order_key(kv[0])):
        kind = q.storage_kind(name, wo_a_fp8=a.wo_a == "fp8")
        entries.append((name, ST_DTYPE[kind], t.shape, tensor_bytes(t)))
        if name in off_scales:
            e = off_scales[name].numpy()
            sdt, sb = scale_bytes(e, kind, "e8m0" if kind == "fp4" else a.scale_dtype, name)
            entries.append((q.scale_name(name), sdt, e.shape, sb))
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
        q.write_safetensors(os.path.join(out_dir, "model.safetensors"), groups[0])
    else:
        shards = {}
        for i, g in enumerate(groups):
            fn = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
            q.write_safetensors(os.path.join(out_dir, fn), g)
            shards[fn] = [e[0] for e in g]
        q.write_index(out_dir, shards)
    conf = mf.official_config(cfg, True)
    conf["quantization_config"] = dict(q.QUANTIZATION_CONFIG)
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


# ----------------------------------------------------------------------------- official stability

@torch.no_grad()
def official_variants(model, ids):
    """The official forward (hooks installed) computed in other orders: in float64, and cached in
    chunks of 7. Each differs from the float32 full forward by fp32 noise in every pre-rounding value."""
    model.double()
    f64 = model(ids, use_cache=False).logits[0].float()
    model.float()   # every parameter is an fp32 value: the round trip is exact
    return {"float64_full": f64, "float32_cached7": mf.cached_logits(model, ids, [7])}


def first_divergence(x, ref, tol):
    """The first position whose logits differ from ref's by more than tol (the length if none)."""
    bad = ((x - ref).abs().amax(dim=-1) > tol).nonzero()
    return int(bad[0, 0]) if len(bad) else int(ref.shape[0])


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
        values, scales = quantize_model(model, cfg, a)
        ids = torch.randint(0, cfg.vocab_size, (1, a.seq_len), generator=gen)
        rec = mf.GapRecorder(model, cfg, a.min_gap)
        rec.active = True
        logits = mf.full_logits(model, ids)
        rec.active = False
        gaps = rec.summary()
        # The official run's top-k gaps are recorded, not used to reject: FP4 queries and keys make
        # q.k exact in fp32 (few-bit products, short sums), so its ties are exact and both sides
        # break them alike (lower index); what fp32 noise can flip shows in the stable prefix.
        rec_off = mf.GapRecorder(model, cfg, a.min_gap)
        handles = official_cache.install(model)
        rec_off.active = True
        logits_off = mf.full_logits(model, ids)
        rec_off.active = False
        gaps_off = rec_off.summary()
        for h in rec.handles + rec_off.handles:
            h.remove()
        attempts.append({"seed": seed, "indexer_min_gap": (gaps["indexer"] or {}).get("min_gap"),
                         "router_min_gap": (gaps["router"] or {}).get("min_gap")})
        if rec.ok():
            variants = official_variants(model, ids)
            firsts = {k: first_divergence(v, logits_off, a.official_agree) for k, v in variants.items()}
            prefix = min(firsts.values())
            attempts[-1]["official_stable_prefix"] = prefix
            if prefix >= a.min_official_prefix:
                break
        official_cache.uninstall(model, handles)
        why = "near-tie top-k" if not rec.ok() else f"official stable prefix {prefix} < {a.min_official_prefix}"
        print(f"seed {seed}: {why}; trying the next seed", file=sys.stderr)
    else:
        sys.exit("no well-conditioned seed found")
    official_cache.uninstall(model, handles)
    if not (torch.isfinite(logits).all() and torch.isfinite(logits_off).all()):
        sys.exit("non-finite logits")
    cached = {s: (mf.cached_logits(model, ids, [int(x) for x in s.split(",")]) - logits).abs().max().item()
              for s in ("1", "7")}
    listing = save(a.out, cfg, a, values, scales)
    hf = hf_loader_check(a.out, model, ids)
    print("transformers FP8 loader:", json.dumps(hf)[:1500])
    logits.numpy().astype("<f4").tofile(os.path.join(a.out, "logits.f32"))
    logits_off.numpy().astype("<f4").tofile(os.path.join(a.out, "logits_official.f32"))
    with open(os.path.join(a.out, "tokens.txt"), "w") as f:
        f.write(",".join(str(int(x)) for x in ids[0].tolist()) + "\n")
    top2 = torch.topk(logits, 2, dim=-1).values
    top2o = torch.topk(logits_off, 2, dim=-1).values
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
        "official_cache": {"file": "logits_official.f32",
                           "reference": "the same forward with tools/oracle/official_cache.py installed "
                                        "(FP8 window KV and compressor entries, FP4 Hadamard indexer, "
                                        "FP8 1x128 inputs of the FP8/FP4 matmuls)",
                           "max_abs_diff_vs_exact": (logits_off - logits).abs().max().item(),
                           # test_oracle compares positions < stable_prefix only (see the docstring)
                           "stable_prefix": prefix,
                           "stable_prefix_agreement": a.official_agree,
                           "first_divergence": firsts,
                           "variants_max_abs_diff": {k: (v - logits_off).abs().max().item()
                                                     for k, v in variants.items()},
                           "tolerance": 1e-3},
        "top1_margin_min": (top2[:, 0] - top2[:, 1]).min().item(),
        "top1_margin_min_official": (top2o[:, 0] - top2o[:, 1]).min().item(),
        "topk_gaps": gaps,
        "topk_gaps_official": gaps_off,
        "compressed_entries_at_end": {f"layer{i}": a.seq_len // cfg.compress_rates[k]
                                      for i, k in enumerate(cfg.layer_types) if k != "sliding_attention"},
        "tensors": listing,
    }
    with open(os.path.join(a.out, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    size = sum(os.path.getsize(os.path.join(a.out, x)) for x in os.listdir(a.out))
    print(json.dumps({"out": a.out, "seed_used": seed, "bytes": size, "cached": cached,
                      "official_vs_exact": meta["official_cache"]["max_abs_diff_vs_exact"],
                      "official_stable_prefix": prefix, "official_first_divergence": firsts}))


if __name__ == "__main__":
    main()

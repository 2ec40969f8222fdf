#!/usr/bin/env python3
"""Build a tiny random DeepSeek-V4 checkpoint with the transformers oracle and record
reference logits.

The oracle is transformers' DeepseekV4ForCausalLM (5.17.0). Every parameter and buffer
(except the rotary inv_freq tables, which are derived from the config) is filled with
seeded random values scaled so activations stay O(1). The reference is always the fp32
full forward `model(ids, use_cache=False).logits`; for --dtype bf16 the weights are first
rounded to bf16-representable values and the weight matrices are *stored* as BF16 (the
oracle cannot run in bf16, see spec §8.4).

Seeds whose top-k decisions are nearly tied (lightning-indexer or router top-k, spec §8.5)
are rejected and the next seed is tried, because a near-tie turns harmless rounding
differences into O(1) logit jumps.

Output directory: config.json, model.safetensors (or shards + index), generation_config.json,
tokens.txt, logits.f32 ([seq, vocab] little-endian float32), meta.json.
With --mtp the checkpoint also holds an MTP head (mtp.0.*, official names) and mtp_logits.f32
([seq-1, vocab]) holds its logits at every position from the composed oracle in mtp.py.
With --dspark it holds a DSpark drafter instead (mtp.0/1/2.*, official names, dspark_* keys in
config.json) and dspark_logits.f32 ([seq-1, block, vocab]) / dspark_conf.f32 ([seq-1, block]) hold
its Markov-corrected row logits and confidences for the block after every prefix 1 .. seq-1, from
the composed oracle in dspark.py.
Runs on CPU or CUDA (auto); all math is fp32 with TF32 disabled.
"""

import argparse
import hashlib
import json
import math
import os
import re
import shutil
import sys

import torch
import transformers
from safetensors import safe_open
from safetensors.torch import save_file
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path[:0] = [HERE, os.path.join(HERE, "..", "quant")]
from fp8_fp4 import F32_PATTERNS  # noqa: E402
from dspark import DSpark, prev_tokens  # noqa: E402
from mtp import MtpHead  # noqa: E402

KIND = {"S": "sliding_attention", "C": "compressed_sparse_attention", "H": "heavily_compressed_attention"}
KIND_LETTER = {v: k for k, v in KIND.items()}


# ----------------------------------------------------------------------------- config

def parse_args(argv=None):
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--out", required=True, help="output directory (replaced if it exists)")
    p.add_argument("--seed", type=int, default=1, help="first seed to try")
    p.add_argument("--max-seed-tries", type=int, default=200)
    p.add_argument("--dtype", choices=["f32", "bf16"], default="f32",
                   help="stored weight dtype; bf16 also rounds every float to bf16 before the fp32 reference run")
    p.add_argument("--naming", choices=["save_pretrained", "official", "hf"], default="save_pretrained",
                   help="tensor names: what save_pretrained writes, official DeepSeek names (+ official "
                        "config.json keys), or HF in-memory state_dict names")
    p.add_argument("--shards", type=int, default=1, help="number of safetensors shards (>1 writes an index)")
    p.add_argument("--seq-len", type=int, default=144)
    p.add_argument("--layers", default="S,C,H,C,H",
                   help="comma list of S (sliding only), C (CSA), H (HCA), one per layer")
    p.add_argument("--hash-layers", type=int, default=2, help="the first N layers use hash routing")
    p.add_argument("--vocab", type=int, default=256)
    p.add_argument("--hidden", type=int, default=64)
    p.add_argument("--heads", type=int, default=4)
    p.add_argument("--head-dim", type=int, default=64)
    p.add_argument("--rope-dim", type=int, default=16, help="qk_rope_head_dim (rope on the last dims)")
    p.add_argument("--q-lora", type=int, default=32)
    p.add_argument("--o-groups", type=int, default=2)
    p.add_argument("--o-lora", type=int, default=16)
    p.add_argument("--moe-inter", type=int, default=32)
    p.add_argument("--experts", type=int, default=8)
    p.add_argument("--experts-per-tok", type=int, default=3)
    p.add_argument("--routed-scale", type=float, default=1.5)
    p.add_argument("--swiglu-limit", type=float, default=1.5,
                   help="small on purpose so the clamp actually triggers with O(1) activations")
    p.add_argument("--hc-mult", type=int, default=4)
    p.add_argument("--hc-iters", type=int, default=20)
    p.add_argument("--index-heads", type=int, default=16)
    p.add_argument("--index-head-dim", type=int, default=32)
    p.add_argument("--index-topk", type=int, default=4)
    p.add_argument("--window", type=int, default=10, help="sliding_window (includes the current token)")
    p.add_argument("--csa-rate", type=int, default=4)
    p.add_argument("--hca-rate", type=int, default=16)
    p.add_argument("--rope-theta", type=float, default=10000.0)
    p.add_argument("--compress-rope-theta", type=float, default=160000.0)
    p.add_argument("--yarn-factor", type=float, default=16.0)
    p.add_argument("--yarn-orig-max", type=int, default=4096,
                   help="original_max_position_embeddings; small so the YaRN ramp falls inside the tiny rope dim")
    p.add_argument("--min-gap", type=float, default=1e-4,
                   help="reject a seed if any top-k gap < min_gap * max(1, |k-th score|)")
    p.add_argument("--mtp", action="store_true",
                   help="add a random MTP head (mtp.0.*) and record its logits at every position (mtp_logits.f32)")
    p.add_argument("--dspark", action="store_true",
                   help="add a random DSpark drafter (mtp.0/1/2.*) and record its block logits after every prefix")
    p.add_argument("--dspark-layers", default="0,2", help="dspark_target_layer_ids")
    p.add_argument("--dspark-block", type=int, default=5, help="dspark_block_size")
    p.add_argument("--dspark-rank", type=int, default=16, help="dspark_markov_rank")
    p.add_argument("--dspark-noise", type=int, default=-1, help="dspark_noise_token_id (default vocab - 2)")
    p.add_argument("--schedules", default="1;7;19,7,1",
                   help="cached-path chunk schedules to compare with the full forward, ';'-separated; "
                        "each is a comma list of chunk sizes whose last entry repeats")
    return p.parse_args(argv)


def build_config(a):
    kinds = [KIND[k.strip()] for k in a.layers.split(",")]
    n = len(kinds)
    if not 0 <= a.hash_layers <= n:
        sys.exit("--hash-layers must be between 0 and the number of layers")
    return DeepseekV4Config(
        vocab_size=a.vocab,
        hidden_size=a.hidden,
        moe_intermediate_size=a.moe_inter,
        num_hidden_layers=n,
        num_attention_heads=a.heads,
        num_key_value_heads=1,
        head_dim=a.head_dim,
        q_lora_rank=a.q_lora,
        partial_rotary_factor=a.rope_dim / a.head_dim,
        num_experts_per_tok=a.experts_per_tok,
        n_routed_experts=a.experts,
        n_shared_experts=1,
        routed_scaling_factor=a.routed_scale,
        swiglu_limit=a.swiglu_limit,
        hc_mult=a.hc_mult,
        hc_sinkhorn_iters=a.hc_iters,
        o_groups=a.o_groups,
        o_lora_rank=a.o_lora,
        index_n_heads=a.index_heads,
        index_head_dim=a.index_head_dim,
        index_topk=a.index_topk,
        sliding_window=a.window,
        layer_types=kinds,
        mlp_layer_types=["hash_moe"] * a.hash_layers + ["moe"] * (n - a.hash_layers),
        compress_rates={"compressed_sparse_attention": a.csa_rate, "heavily_compressed_attention": a.hca_rate},
        rope_theta=a.rope_theta,
        compress_rope_theta=a.compress_rope_theta,
        rope_parameters={"rope_type": "yarn", "factor": a.yarn_factor,
                         "original_max_position_embeddings": a.yarn_orig_max, "beta_fast": 32, "beta_slow": 1},
        max_position_embeddings=int(a.yarn_orig_max * a.yarn_factor),
        tie_word_embeddings=False,
    )


# ----------------------------------------------------------------------------- random weights

def _normal(gen, shape, std):
    return torch.randn(shape, generator=gen, dtype=torch.float32) * std


def _fan_in(shape):
    return shape[-1]


# (regex on the HF in-memory name, filler). Every parameter/buffer must match exactly one rule;
# anything unmatched is an error, so no tensor keeps its default init unnoticed.
def _rules(cfg):
    def linear(gen, t):           # y = W x with x of unit RMS -> y of unit RMS
        return _normal(gen, t.shape, 1.0 / math.sqrt(_fan_in(t.shape)))

    def norm_weight(gen, t):      # learned RMSNorm gains around 1
        return 1.0 + _normal(gen, t.shape, 0.1)

    return [
        (r"^model\.embed_tokens\.weight$", lambda g, t: _normal(g, t.shape, 1.0)),
        (r"^lm_head\.weight$", linear),
        (r"(^|\.)(norm|input_layernorm|post_attention_layernorm|q_a_norm|kv_norm)\.weight$", norm_weight),
        # mHC: fn acts on the RMS-normalised 4D-vector, so 1/sqrt(4D) keeps the mixes O(1);
        # base/scale random and non-trivial so pre/post/comb differ per token and per stream.
        (r"\.(attn_hc|ffn_hc)\.fn$|^model\.hc_head\.hc_fn$", linear),
        (r"\.(attn_hc|ffn_hc)\.base$|^model\.hc_head\.hc_base$", lambda g, t: _normal(g, t.shape, 0.5)),
        (r"\.(attn_hc|ffn_hc)\.scale$|^model\.hc_head\.hc_scale$",
         lambda g, t: 0.5 + torch.rand(t.shape, generator=g)),
        (r"\.self_attn\.sinks$", lambda g, t: _normal(g, t.shape, 1.0)),
        (r"\.position_bias$", lambda g, t: _normal(g, t.shape, 0.5)),       # compressor ape
        (r"\.(q_a_proj|q_b_proj|kv_proj|gate_proj|up_proj|down_proj|o_a_proj|o_b_proj|weights_proj)\.weight$",
         linear),
        (r"\.mlp\.gate\.weight$", linear),                                   # router
        (r"\.mlp\.experts\.gate_up_proj$", linear),                          # [E, 2I, D]: fan-in D
        (r"\.mlp\.experts\.down_proj$", linear),                             # [E, D, I]: fan-in I
        (r"\.mlp\.gate\.e_score_correction_bias$", lambda g, t: _normal(g, t.shape, 0.2)),
        (r"\.mlp\.gate\.tid2eid$",
         lambda g, t: torch.stack([torch.randperm(cfg.n_routed_experts, generator=g)[: t.shape[1]]
                                   for _ in range(t.shape[0])]).to(t.dtype)),
    ]


def _is_rope_table(name):
    # The rotary modules own inv_freq / original_inv_freq buffers computed from the config
    # (rope_theta, partial rotary, YaRN). They are not weights (non-persistent, never saved);
    # randomizing them would change the positional encoding itself, so they are skipped.
    return name.endswith("inv_freq")


@torch.no_grad()
def randomize(model, cfg, gen, bf16):
    rules = [(re.compile(rx), fn) for rx, fn in _rules(cfg)]
    handled, unhandled, skipped = [], [], []
    tensors = list(model.named_parameters()) + list(model.named_buffers())
    for name, t in tensors:
        if _is_rope_table(name):
            skipped.append(name)
            continue
        hits = [fn for rx, fn in rules if rx.search(name)]
        if len(hits) != 1:
            unhandled.append((name, len(hits)))
            continue
        t.copy_(hits[0](gen, t))
        if bf16 and t.is_floating_point():
            t.copy_(t.to(torch.bfloat16).to(torch.float32))
        handled.append(name)
    if unhandled:
        for name, k in unhandled:
            print(f"UNHANDLED tensor {name} (matched {k} rules)", file=sys.stderr)
        sys.exit("some parameters/buffers were not randomized; extend _rules()")
    return handled, skipped


@torch.no_grad()
def randomize_drafter(head, cfg, gen, bf16):
    """Every parameter of an MTP head or DSpark drafter by the main model's rules (head.rule_name)."""
    rules = [(re.compile(rx), fn) for rx, fn in _rules(cfg)]
    for name, t in list(head.named_parameters()) + list(head.named_buffers()):
        if _is_rope_table(name):
            continue
        hits = [fn for rx, fn in rules if rx.search(head.rule_name(name))]
        if len(hits) != 1:
            sys.exit(f"drafter tensor {name} matched {len(hits)} rules")
        t.copy_(hits[0](gen, t))
        if bf16 and t.is_floating_point():
            t.copy_(t.to(torch.bfloat16).to(torch.float32))


@torch.no_grad()
def dspark_reference(model, ds, ids, n_prefix):
    """Row logits [n, B, V] and confidences [n, B] of the block after every prefix 1 .. n."""
    m = ds.features(model, ids)
    out = [ds.draft(m, P, prev_tokens(ids, P, ds.block), model.model.embed_tokens, model.lm_head)
           for P in range(1, n_prefix + 1)]
    return torch.stack([o[0] for o in out]), torch.stack([o[1] for o in out])


@torch.no_grad()
def mtp_logits(model, mtp, ids):
    """MTP logits of rows 0..S-2: row i reads the main model's final streams at i and token i+1."""
    seen = {}
    h = model.model.hc_head.register_forward_pre_hook(lambda mod, args: seen.__setitem__("x", args[0]))
    model(ids, use_cache=False)
    h.remove()
    x = seen["x"][:, :-1].float()
    return mtp(x, ids[:, 1:], model.model.embed_tokens, model.lm_head)[0]


def check_rope_tables(model, cfg):
    """Rope tables are derived data: confirm they are what the config says, and that the
    YaRN compress table really differs from a plain table of the same theta."""
    rd = int(cfg.head_dim * cfg.partial_rotary_factor)
    plain = lambda theta: 1.0 / (theta ** (torch.arange(0, rd, 2, dtype=torch.float32) / rd))
    rot = model.model.rotary_emb
    main = rot.main_inv_freq.detach().cpu()
    comp = rot.compress_inv_freq.detach().cpu()
    if not torch.allclose(main, plain(cfg.rope_theta)):
        sys.exit("main rope table differs from the plain theta table")
    comp_plain = plain(cfg.compress_rope_theta)
    ratio = (comp_plain / comp).tolist()
    scaled = [i for i, r in enumerate(ratio) if abs(r - 1.0) > 1e-6]
    if not scaled or all(abs(r - cfg.rope_parameters["compress"]["factor"]) < 1e-4 for r in ratio):
        sys.exit("YaRN has no ramp inside the rope dim (pick --yarn-orig-max so it does)")
    for name, buf in model.named_buffers():
        if name.endswith("compress_inv_freq") and not torch.equal(buf.cpu(), comp):
            sys.exit(f"{name} differs from the model-level compress table")
    return {"main_inv_freq": main.tolist(), "compress_inv_freq": comp.tolist(),
            "compress_plain_over_yarn": ratio}


# ----------------------------------------------------------------------------- conditioning

class GapRecorder:
    """Forward hooks on the indexer scorer and top-k routers: smallest gap between the k-th
    and (k+1)-th candidate, over the candidates that are actually eligible."""

    def __init__(self, model, cfg, tol):
        self.cfg, self.tol = cfg, tol
        self.active = False
        self.per_layer = {}     # "indexer.L" / "router.L" -> [min gap, min normalized gap, count]
        self.handles = []
        for idx, layer in enumerate(model.model.layers):
            attn = layer.self_attn
            if attn.compressor is not None and hasattr(attn.compressor, "indexer"):
                self.handles.append(attn.compressor.indexer.scorer.register_forward_hook(self._indexer_hook(idx)))
            if isinstance(layer.mlp.gate, mdl.DeepseekV4TopKRouter):
                self.handles.append(layer.mlp.gate.register_forward_hook(self._router_hook(idx)))

    def _record(self, key, top):           # top: [N, k+1] sorted descending
        kth, nxt = top[:, -2], top[:, -1]
        gap = (kth - nxt).double()
        norm = gap / torch.clamp(kth.abs().double(), min=1.0)
        slot = self.per_layer.setdefault(key, [math.inf, math.inf, 0])
        slot[0] = min(slot[0], gap.min().item())
        slot[1] = min(slot[1], norm.min().item())
        slot[2] += top.shape[0]

    def _indexer_hook(self, idx):
        def hook(module, inputs, scores):      # scores [B, S, T] (raw, before the causal mask)
            if not self.active:
                return
            k = self.cfg.index_topk
            rate = self.cfg.compress_rates["compressed_sparse_attention"]
            s = scores[0].detach().float()
            rows = []
            for t in range(s.shape[0]):        # full forward: query t sits at position t
                valid = (t + 1) // rate
                if valid > k:
                    rows.append(torch.topk(s[t, :valid], k + 1).values)
            if rows:
                self._record(f"indexer.{idx}", torch.stack(rows))
        return hook

    def _router_hook(self, idx):
        def hook(module, inputs, out):
            if not self.active:
                return
            logits = out[0].detach().float()
            biased = module.score_fn(logits) + module.e_score_correction_bias.float()
            k = module.top_k
            if biased.shape[-1] > k:
                self._record(f"router.{idx}", torch.topk(biased, k + 1, dim=-1).values)
        return hook

    def summary(self):
        layers = {k: {"min_gap": v[0], "min_gap_normalized": v[1], "topk_instances": v[2]}
                  for k, v in sorted(self.per_layer.items())}
        def worst(prefix):
            vals = [v for k, v in self.per_layer.items() if k.startswith(prefix)]
            if not vals:
                return None
            return {"min_gap": min(v[0] for v in vals), "min_gap_normalized": min(v[1] for v in vals),
                    "topk_instances": sum(v[2] for v in vals)}
        return {"indexer": worst("indexer."), "router": worst("router."), "per_layer": layers,
                "criterion": f"gap_k_vs_k+1 >= {self.tol} * max(1, |score_k|)"}

    def ok(self):
        return all(v[1] >= self.tol for v in self.per_layer.values())


# ----------------------------------------------------------------------------- running the oracle

@torch.no_grad()
def full_logits(model, ids):
    return model(ids, use_cache=False).logits[0].float()


@torch.no_grad()
def cached_logits(model, ids, schedule):
    past, outs, pos, i = None, [], 0, 0
    total = ids.shape[1]
    while pos < total:
        n = min(schedule[min(i, len(schedule) - 1)], total - pos)
        out = model(ids[:, pos:pos + n], past_key_values=past, use_cache=True)
        past = out.past_key_values
        outs.append(out.logits[0].float())
        pos, i = pos + n, i + 1
    return torch.cat(outs, dim=0)


# ----------------------------------------------------------------------------- writing

# Tensors the real checkpoint stores in F32 (F32_PATTERNS, spec §7.2); every other float tensor is
# BF16 there (or FP8/FP4, which this tiny unquantized fixture stores as BF16). tid2eid stays int64.


def storage_dtype(name, t, bf16):
    if not t.is_floating_point():
        return t.dtype
    if bf16 and not F32_PATTERNS.search(name):
        return torch.bfloat16
    return torch.float32


def to_official(sd, cfg):
    """HF in-memory state_dict -> official DeepSeek-V4 names (spec §7.2)."""
    top = {
        "model.embed_tokens.weight": "embed.weight",
        "lm_head.weight": "head.weight",
        "model.norm.weight": "norm.weight",
        "model.hc_head.hc_fn": "hc_head_fn",
        "model.hc_head.hc_base": "hc_head_base",
        "model.hc_head.hc_scale": "hc_head_scale",
    }
    per_layer = {
        "input_layernorm.weight": "attn_norm.weight",
        "post_attention_layernorm.weight": "ffn_norm.weight",
        "attn_hc.fn": "hc_attn_fn", "attn_hc.base": "hc_attn_base", "attn_hc.scale": "hc_attn_scale",
        "ffn_hc.fn": "hc_ffn_fn", "ffn_hc.base": "hc_ffn_base", "ffn_hc.scale": "hc_ffn_scale",
        "self_attn.q_a_proj.weight": "attn.wq_a.weight",
        "self_attn.q_a_norm.weight": "attn.q_norm.weight",
        "self_attn.q_b_proj.weight": "attn.wq_b.weight",
        "self_attn.kv_proj.weight": "attn.wkv.weight",
        "self_attn.kv_norm.weight": "attn.kv_norm.weight",
        "self_attn.o_a_proj.weight": "attn.wo_a.weight",
        "self_attn.o_b_proj.weight": "attn.wo_b.weight",
        "self_attn.sinks": "attn.attn_sink",
        "self_attn.compressor.kv_proj.weight": "attn.compressor.wkv.weight",
        "self_attn.compressor.gate_proj.weight": "attn.compressor.wgate.weight",
        "self_attn.compressor.position_bias": "attn.compressor.ape",
        "self_attn.compressor.kv_norm.weight": "attn.compressor.norm.weight",
        "self_attn.compressor.indexer.kv_proj.weight": "attn.indexer.compressor.wkv.weight",
        "self_attn.compressor.indexer.gate_proj.weight": "attn.indexer.compressor.wgate.weight",
        "self_attn.compressor.indexer.position_bias": "attn.indexer.compressor.ape",
        "self_attn.compressor.indexer.kv_norm.weight": "attn.indexer.compressor.norm.weight",
        "self_attn.compressor.indexer.q_b_proj.weight": "attn.indexer.wq_b.weight",
        "self_attn.compressor.indexer.scorer.weights_proj.weight": "attn.indexer.weights_proj.weight",
        "mlp.gate.weight": "ffn.gate.weight",
        "mlp.gate.e_score_correction_bias": "ffn.gate.bias",
        "mlp.gate.tid2eid": "ffn.gate.tid2eid",
        "mlp.shared_experts.gate_proj.weight": "ffn.shared_experts.w1.weight",
        "mlp.shared_experts.up_proj.weight": "ffn.shared_experts.w3.weight",
        "mlp.shared_experts.down_proj.weight": "ffn.shared_experts.w2.weight",
    }
    inter = cfg.moe_intermediate_size
    out = {}
    for name, t in sd.items():
        if name in top:
            out[top[name]] = t
            continue
        m = re.match(r"^model\.layers\.(\d+)\.(.+)$", name)
        if not m:
            sys.exit(f"no official name for {name}")
        L, rest = m.group(1), m.group(2)
        if rest == "mlp.experts.gate_up_proj":      # [E, 2I, D]: rows 0:I = w1 (gate), I:2I = w3 (up)
            for e in range(t.shape[0]):
                out[f"layers.{L}.ffn.experts.{e}.w1.weight"] = t[e, :inter].contiguous()
                out[f"layers.{L}.ffn.experts.{e}.w3.weight"] = t[e, inter:].contiguous()
        elif rest == "mlp.experts.down_proj":        # [E, D, I] = w2 per expert
            for e in range(t.shape[0]):
                out[f"layers.{L}.ffn.experts.{e}.w2.weight"] = t[e].contiguous()
        elif rest in per_layer:
            out[f"layers.{L}.{per_layer[rest]}"] = t
        else:
            sys.exit(f"no official name for {name}")
    return out


def official_config(cfg, bf16):
    """config.json in the spelling the real checkpoints ship (legacy keys, spec §1.1)."""
    rates = cfg.compress_rates
    ratio = {"sliding_attention": 0, "compressed_sparse_attention": rates["compressed_sparse_attention"],
             "heavily_compressed_attention": rates["heavily_compressed_attention"]}
    if ratio["compressed_sparse_attention"] != 4 or ratio["heavily_compressed_attention"] != 128:
        sys.exit("official naming needs --csa-rate 4 --hca-rate 128 (compress_ratios only knows 0/4/128)")
    n_hash = cfg.mlp_layer_types.count("hash_moe")
    if cfg.mlp_layer_types != ["hash_moe"] * n_hash + ["moe"] * (cfg.num_hidden_layers - n_hash):
        sys.exit("official naming needs the hash layers to be a prefix")
    comp = cfg.rope_parameters["compress"]
    return {
        "architectures": ["DeepseekV4ForCausalLM"],
        "model_type": "deepseek_v4",
        "vocab_size": cfg.vocab_size,
        "hidden_size": cfg.hidden_size,
        "moe_intermediate_size": cfg.moe_intermediate_size,
        "num_hidden_layers": cfg.num_hidden_layers,
        "num_attention_heads": cfg.num_attention_heads,
        "num_key_value_heads": 1,
        "head_dim": cfg.head_dim,
        "qk_rope_head_dim": cfg.qk_rope_head_dim,
        "q_lora_rank": cfg.q_lora_rank,
        "o_groups": cfg.o_groups,
        "o_lora_rank": cfg.o_lora_rank,
        "sliding_window": cfg.sliding_window,
        "compress_ratios": [ratio[k] for k in cfg.layer_types] + [0],   # trailing entry: the MTP layer
        "index_n_heads": cfg.index_n_heads,
        "index_head_dim": cfg.index_head_dim,
        "index_topk": cfg.index_topk,
        "n_routed_experts": cfg.n_routed_experts,
        "n_shared_experts": cfg.n_shared_experts,
        "num_experts_per_tok": cfg.num_experts_per_tok,
        "num_hash_layers": n_hash,
        "scoring_func": cfg.scoring_func,
        "topk_method": "noaux_tc",
        "norm_topk_prob": True,
        "routed_scaling_factor": cfg.routed_scaling_factor,
        "swiglu_limit": cfg.swiglu_limit,
        "hc_mult": cfg.hc_mult,
        "hc_sinkhorn_iters": cfg.hc_sinkhorn_iters,
        "hc_eps": cfg.hc_eps,
        "rms_norm_eps": cfg.rms_norm_eps,
        "rope_theta": cfg.rope_theta,
        "compress_rope_theta": cfg.compress_rope_theta,
        "rope_scaling": {"type": "yarn", "factor": comp["factor"],
                         "original_max_position_embeddings": comp["original_max_position_embeddings"],
                         "beta_fast": comp["beta_fast"], "beta_slow": comp["beta_slow"]},
        "max_position_embeddings": cfg.max_position_embeddings,
        "num_nextn_predict_layers": cfg.num_nextn_predict_layers,
        "hidden_act": "silu",
        "bos_token_id": cfg.bos_token_id,
        "eos_token_id": cfg.eos_token_id,
        "tie_word_embeddings": False,
        "torch_dtype": "bfloat16" if bf16 else "float32",
    }


def write_tensors(out_dir, tensors, shards):
    """tensors: ordered dict name -> tensor (already in storage dtype)."""
    names = list(tensors)
    if shards <= 1:
        save_file(tensors, os.path.join(out_dir, "model.safetensors"), metadata={"format": "pt"})
        return
    # Split by bytes, keeping each layer's tensors together where possible (order preserved).
    sizes = [tensors[n].numel() * tensors[n].element_size() for n in names]
    target = sum(sizes) / shards
    groups, cur, acc = [], [], 0
    for n, s in zip(names, sizes):
        if cur and acc + s / 2 > target * (len(groups) + 1) and len(groups) < shards - 1:
            groups.append(cur)
            cur = []
        cur.append(n)
        acc += s
    groups.append(cur)
    weight_map = {}
    for i, g in enumerate(groups):
        fname = f"model-{i + 1:05d}-of-{len(groups):05d}.safetensors"
        save_file({n: tensors[n] for n in g}, os.path.join(out_dir, fname), metadata={"format": "pt"})
        weight_map.update({n: fname for n in g})
    index = {"metadata": {"total_size": sum(sizes)}, "weight_map": dict(sorted(weight_map.items()))}
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump(index, f, indent=2)
        f.write("\n")


def _layer_order_key(name):
    m = re.search(r"layers\.(\d+)\.", name)
    return (1, int(m.group(1)), name) if m else ((0 if "embed" in name else 2), 0, name)


def add_drafter(out_dir, drafter, flag, shards, cfg, bf16):
    """Adds a drafter's tensors (official names, the fixture's storage dtypes) to the fixture's
    single model.safetensors."""
    if shards != 1:
        sys.exit(f"{flag} writes into a single model.safetensors (use --shards 1)")
    path = os.path.join(out_dir, "model.safetensors")
    with safe_open(path, "pt") as f:
        tensors = {n: f.get_tensor(n) for n in f.keys()}
    for n, t in drafter.official_tensors(to_official, cfg).items():
        tensors[n] = t.to(storage_dtype(n, t, bf16)).contiguous()
    save_file(tensors, path, metadata={"format": "pt"})


def save_fixture(model, cfg, a, out_dir):
    bf16 = a.dtype == "bf16"
    if os.path.exists(out_dir):
        shutil.rmtree(out_dir)
    os.makedirs(out_dir)
    cpu_model = model.to("cpu")
    if a.naming == "save_pretrained":
        cpu_model.save_pretrained(out_dir, safe_serialization=True)
        # Re-store the file with per-tensor dtypes (save_pretrained writes the module dtype).
        path = os.path.join(out_dir, "model.safetensors")
        with safe_open(path, "pt") as f:
            written = {n: f.get_tensor(n) for n in f.keys()}
        os.remove(path)
        tensors = {n: t.to(storage_dtype(n, t, bf16)).contiguous()
                   for n, t in sorted(written.items(), key=lambda kv: _layer_order_key(kv[0]))}
        write_tensors(out_dir, tensors, a.shards)
        if bf16:
            with open(os.path.join(out_dir, "config.json")) as f:
                conf = json.load(f)
            conf["dtype"] = "bfloat16"
            with open(os.path.join(out_dir, "config.json"), "w") as f:
                json.dump(conf, f, indent=2, sort_keys=True)
                f.write("\n")
    else:
        sd = {n: t.detach() for n, t in cpu_model.state_dict().items()}
        if a.naming == "official":
            sd = to_official(sd, cfg)
            conf = official_config(cfg, bf16)
        else:
            conf = cfg.to_dict()
            conf["architectures"] = ["DeepseekV4ForCausalLM"]
            conf["dtype"] = "bfloat16" if bf16 else "float32"
        tensors = {n: t.to(storage_dtype(n, t, bf16)).contiguous()
                   for n, t in sorted(sd.items(), key=lambda kv: _layer_order_key(kv[0]))}
        write_tensors(out_dir, tensors, a.shards)
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(conf, f, indent=2)
            f.write("\n")
        cpu_model.generation_config.save_pretrained(out_dir)


def tensor_listing(out_dir):
    files = sorted(f for f in os.listdir(out_dir) if f.endswith(".safetensors"))
    listing = {}
    for fn in files:
        with safe_open(os.path.join(out_dir, fn), "pt") as f:
            for n in f.keys():
                sl = f.get_slice(n)
                listing[n] = {"dtype": sl.get_dtype(), "shape": list(sl.get_shape()), "file": fn}
    return listing


def sha256(path):
    h = hashlib.sha256()
    with open(path, "rb") as f:
        h.update(f.read())
    return h.hexdigest()


# ----------------------------------------------------------------------------- main

def main(argv=None):
    a = parse_args(argv)
    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")
    cfg = build_config(a)
    bf16 = a.dtype == "bf16"

    attempts = []
    for seed in range(a.seed, a.seed + a.max_seed_tries):
        # All random numbers come from a CPU generator so a seed gives the same weights and
        # tokens on any device.
        gen = torch.Generator().manual_seed(seed)
        torch.manual_seed(seed)
        model = DeepseekV4ForCausalLM(cfg).to(torch.float32).eval()
        handled, skipped = randomize(model, cfg, gen, bf16)
        mtp = None
        if a.mtp:
            mtp = MtpHead(cfg).to(torch.float32).eval()
            randomize_drafter(mtp, cfg, gen, bf16)
        ds = None
        if a.dspark:
            noise = a.dspark_noise if a.dspark_noise >= 0 else cfg.vocab_size - 2
            ds = DSpark(cfg, [int(x) for x in a.dspark_layers.split(",")], a.dspark_block, a.dspark_rank,
                        noise).to(torch.float32).eval()
            randomize_drafter(ds, cfg, gen, bf16)
        ids = torch.randint(0, cfg.vocab_size, (1, a.seq_len), generator=gen)
        model.to(device)
        ids_dev = ids.to(device)
        rec = GapRecorder(model, cfg, a.min_gap)
        if mtp is not None:
            mtp.to(device)
            rec.handles.append(mtp.block.mlp.gate.register_forward_hook(rec._router_hook("mtp")))
        if ds is not None:
            ds.to(device)
            for i, r in enumerate(ds.routers()):
                rec.handles.append(r.register_forward_hook(rec._router_hook(f"dspark{i}")))
        rec.active = True
        logits = full_logits(model, ids_dev)
        mtp_ref = mtp_logits(model, mtp, ids_dev) if mtp is not None else None
        ds_ref = dspark_reference(model, ds, ids_dev, a.seq_len - 1) if ds is not None else None
        rec.active = False
        gaps = rec.summary()
        attempts.append({"seed": seed, "indexer_min_gap": (gaps["indexer"] or {}).get("min_gap"),
                         "router_min_gap": (gaps["router"] or {}).get("min_gap")})
        if rec.ok():
            break
        print(f"seed {seed}: near-tie top-k (indexer {attempts[-1]['indexer_min_gap']}, "
              f"router {attempts[-1]['router_min_gap']}); trying the next seed", file=sys.stderr)
    else:
        sys.exit("no well-conditioned seed found")
    for h in rec.handles:
        h.remove()
    print(f"seed {seed}: randomized {len(handled)} parameters/buffers; kept {len(skipped)} derived rope tables")

    rope = check_rope_tables(model, cfg)
    if not torch.isfinite(logits).all():
        sys.exit("non-finite logits")

    # Second check: the oracle's own cached path with several chunk schedules.
    cached = {}
    for sched in a.schedules.split(";"):
        chunks = [int(x) for x in sched.split(",")]
        diff = (cached_logits(model, ids_dev, chunks) - logits).abs().max().item()
        cached[sched] = diff
        print(f"cached schedule {sched}: max |diff| vs full = {diff:.3e}")

    # A prefix run must agree with the full run's first rows (causality of the oracle).
    half = a.seq_len // 2 + 3
    prefix_diff = (full_logits(model, ids_dev[:, :half]) - logits[:half]).abs().max().item()

    out_dir = a.out
    save_fixture(model, cfg, a, out_dir)
    model.to(device)
    if mtp is not None and ds is not None:
        sys.exit("--mtp and --dspark: a checkpoint has one drafter")
    if ds is not None:
        add_drafter(out_dir, ds, "--dspark", a.shards, cfg, bf16)
        with open(os.path.join(out_dir, "config.json")) as f:
            conf = json.load(f)
        conf.update(ds.config_keys())
        with open(os.path.join(out_dir, "config.json"), "w") as f:
            json.dump(conf, f, indent=2, sort_keys=True)
            f.write("\n")
        if not (torch.isfinite(ds_ref[0]).all() and torch.isfinite(ds_ref[1]).all()):
            sys.exit("non-finite DSpark logits")
        # causality of the composed oracle: a prefix of the tokens gives the same blocks (those
        # whose Markov condition does not wrap around the shorter sequence)
        pre = dspark_reference(model, ds, ids_dev[:, :half], half - 1)
        n = half - ds.block
        ds_prefix_diff = max((pre[0][:n] - ds_ref[0][:n]).abs().max().item(),
                             (pre[1][:n] - ds_ref[1][:n]).abs().max().item())
        ds_ref[0].detach().cpu().contiguous().numpy().astype("<f4").tofile(os.path.join(out_dir, "dspark_logits.f32"))
        ds_ref[1].detach().cpu().contiguous().numpy().astype("<f4").tofile(os.path.join(out_dir, "dspark_conf.f32"))
    if mtp is not None:
        add_drafter(out_dir, mtp, "--mtp", a.shards, cfg, bf16)
        if not torch.isfinite(mtp_ref).all():
            sys.exit("non-finite MTP logits")
        # causality of the composed oracle: a prefix gives the same first rows
        pre = mtp_logits(model, mtp, ids_dev[:, :half])
        mtp_prefix_diff = (pre - mtp_ref[:half - 1]).abs().max().item()
        mtp_ref.detach().cpu().contiguous().numpy().astype("<f4").tofile(os.path.join(out_dir, "mtp_logits.f32"))

    # Reload what was written with the oracle itself and confirm the logits are reproduced.
    reloaded, info = DeepseekV4ForCausalLM.from_pretrained(out_dir, dtype=torch.float32, output_loading_info=True)
    bad = {k: v for k, v in info.items() if v and k in ("missing_keys", "unexpected_keys", "mismatched_keys")}
    if bad:
        sys.exit(f"reloading the written checkpoint: {bad}")
    reloaded = reloaded.to(device).eval()
    reload_diff = (full_logits(reloaded, ids_dev) - logits).abs().max().item()
    del reloaded
    if reload_diff > 1e-5:
        sys.exit(f"reloading the written checkpoint changes the logits by {reload_diff}")

    logits_cpu = logits.detach().cpu().contiguous()
    logits_cpu.numpy().astype("<f4").tofile(os.path.join(out_dir, "logits.f32"))
    with open(os.path.join(out_dir, "tokens.txt"), "w") as f:
        f.write(",".join(str(int(x)) for x in ids[0].tolist()) + "\n")

    n_entries = {}
    for i, kind in enumerate(cfg.layer_types):
        if kind != "sliding_attention":
            n_entries[f"layer{i}"] = a.seq_len // cfg.compress_rates[kind]
    meta = {
        "generator": "tools/oracle/make_fixture.py",
        "argv": sys.argv[1:] if argv is None else argv,
        "seed_requested": a.seed,
        "seed_used": seed,
        "rejected_seeds": attempts[:-1],
        "weights_dtype": a.dtype,
        "reference": "fp32 full forward model(ids, use_cache=False).logits, batch 1"
                     + (" on bf16-rounded weights" if bf16 else ""),
        "naming": a.naming,
        "device": str(device) + (f" ({torch.cuda.get_device_name()})" if device.type == "cuda" else ""),
        "versions": {"transformers": transformers.__version__, "torch": torch.__version__},
        "seq_len": a.seq_len,
        "vocab_size": cfg.vocab_size,
        "logits_file": {"name": "logits.f32", "dtype": "float32 little-endian", "shape": [a.seq_len, cfg.vocab_size],
                        "sha256": sha256(os.path.join(out_dir, "logits.f32"))},
        "logits_stats": {"max_abs": logits_cpu.abs().max().item(), "std": logits_cpu.std().item()},
        "config_summary": {
            "layers": "".join(KIND_LETTER[k] for k in cfg.layer_types),
            "layer_types": cfg.layer_types,
            "mlp_layer_types": cfg.mlp_layer_types,
            "compress_rates": cfg.compress_rates,
            "compressed_entries_at_end": n_entries,
            "hidden": cfg.hidden_size, "heads": cfg.num_attention_heads, "head_dim": cfg.head_dim,
            "rope_dim": cfg.qk_rope_head_dim, "q_lora": cfg.q_lora_rank, "o_groups": cfg.o_groups,
            "o_lora": cfg.o_lora_rank, "moe_inter": cfg.moe_intermediate_size,
            "experts": cfg.n_routed_experts, "experts_per_tok": cfg.num_experts_per_tok,
            "index_heads": cfg.index_n_heads, "index_head_dim": cfg.index_head_dim,
            "index_topk": cfg.index_topk, "sliding_window": cfg.sliding_window,
            "hc_mult": cfg.hc_mult, "routed_scaling_factor": cfg.routed_scaling_factor,
            "swiglu_limit": cfg.swiglu_limit, "rope_parameters": cfg.rope_parameters,
        },
        "rope_tables": rope,
        "topk_gaps": gaps,
        "cached_vs_full_max_abs_diff": cached,
        "prefix_vs_full_max_abs_diff": {f"prefix_{half}": prefix_diff},
        "reload_vs_full_max_abs_diff": reload_diff,
        "randomized_tensors": len(handled),
        "skipped_tensors (derived rope tables)": skipped,
        "tensors": tensor_listing(out_dir),
    }
    if mtp is not None:
        meta["mtp"] = {
            "oracle": "tools/oracle/mtp.py: transformers modules composed as spec §5.2",
            "logits_file": {"name": "mtp_logits.f32", "dtype": "float32 little-endian",
                            "shape": [a.seq_len - 1, cfg.vocab_size],
                            "rows": "row i: main streams at position i + token i+1, predicts token i+2",
                            "sha256": sha256(os.path.join(out_dir, "mtp_logits.f32"))},
            "prefix_vs_full_max_abs_diff": mtp_prefix_diff,
            "logits_stats": {"max_abs": mtp_ref.abs().max().item(), "std": mtp_ref.std().item()},
        }
    if ds is not None:
        meta["dspark"] = {
            "oracle": "tools/oracle/dspark.py: transformers modules composed as docs/DSPARK.md §4",
            "config": ds.config_keys(),
            "logits_file": {"name": "dspark_logits.f32", "dtype": "float32 little-endian",
                            "shape": [a.seq_len - 1, ds.block, cfg.vocab_size],
                            "rows": "[P-1][i]: the block after positions 0..P-1 (row 0 holds token P), row i "
                                    "Markov-conditioned on token (P+i) mod seq_len",
                            "sha256": sha256(os.path.join(out_dir, "dspark_logits.f32"))},
            "conf_file": {"name": "dspark_conf.f32", "dtype": "float32 little-endian",
                          "shape": [a.seq_len - 1, ds.block],
                          "sha256": sha256(os.path.join(out_dir, "dspark_conf.f32"))},
            "prefix_vs_full_max_abs_diff": ds_prefix_diff,
            "logits_stats": {"max_abs": ds_ref[0].abs().max().item(), "std": ds_ref[0].std().item()},
        }
    with open(os.path.join(out_dir, "meta.json"), "w") as f:
        json.dump(meta, f, indent=1)
        f.write("\n")
    print(json.dumps({"out": out_dir, "seed_used": seed, "indexer": gaps["indexer"], "router": gaps["router"],
                      "cached": cached, "prefix": prefix_diff, "reload": reload_diff}, indent=1))


if __name__ == "__main__":
    main()

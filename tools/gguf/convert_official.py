#!/usr/bin/env python3
"""An official-layout DeepSeek-V4 checkpoint (FP8 dense + MXFP4 experts, safetensors) to a
GGUF the way llama.cpp's convert_hf_to_gguf.py (DeepseekV4Model) writes it: its metadata
keys, its tensor names, routed experts repacked from the official MXFP4 bytes into ggml
MXFP4 blocks (lossless), tid2eid as I32, 1-D tensors F32, BF16 matrices BF16. FP8
matrices are dequantized and stored as Q8_0 like llama.cpp does (--fp8 q8_0, lossy) or
as F32 (--fp8 f32, lossless: the file decodes to exactly the checkpoint's weights, so
dsv4 must reproduce the checkpoint's own oracle logits). A tokenizer.json in the checkpoint
is written as tokenizer.ggml.* (tests/tokenizer/tokenizer_to_gguf.py's rules, with
tokenizer_config.json's pad/add_bos/add_eos). On a checkpoint that converter accepts, the
result has its metadata and (with --fp8 q8_0) its very tensor bytes, checked on
tests/fixtures/gguf-llamacpp-converter's source (tools/oracle/README.md); only general.* and
the tensor order differ.

usage: convert_official.py CHECKPOINT_DIR OUT.gguf [--fp8 f32|q8_0]"""
import argparse
import glob
import json
import os
import sys

import numpy as np
import torch
import gguf
from gguf import quants
from gguf.constants import GGMLQuantizationType as Q
from safetensors import safe_open

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "tokenizer"))
from tokenizer_to_gguf import tokenizer_kv  # noqa: E402

LAYER = {
    "hc_attn_fn": "hc_attn_fn.weight", "hc_attn_base": "hc_attn_base.weight", "hc_attn_scale": "hc_attn_scale.weight",
    "hc_ffn_fn": "hc_ffn_fn.weight", "hc_ffn_base": "hc_ffn_base.weight", "hc_ffn_scale": "hc_ffn_scale.weight",
    "attn.attn_sink": "attn_sinks.weight", "attn.wq_a.weight": "attn_q_a.weight", "attn.wq_b.weight": "attn_q_b.weight",
    "attn.q_norm.weight": "attn_q_a_norm.weight", "attn.wkv.weight": "attn_kv.weight",
    "attn.kv_norm.weight": "attn_kv_a_norm.weight", "attn.wo_a.weight": "attn_output_a.weight",
    "attn.wo_b.weight": "attn_output_b.weight", "attn.compressor.ape": "attn_compressor_ape.weight",
    "attn.compressor.wkv.weight": "attn_compressor_kv.weight", "attn.compressor.wgate.weight": "attn_compressor_gate.weight",
    "attn.compressor.norm.weight": "attn_compressor_norm.weight", "attn.indexer.wq_b.weight": "indexer.attn_q_b.weight",
    "attn.indexer.weights_proj.weight": "indexer.proj.weight", "attn.indexer.compressor.ape": "indexer_compressor_ape.weight",
    "attn.indexer.compressor.wkv.weight": "indexer_compressor_kv.weight",
    "attn.indexer.compressor.wgate.weight": "indexer_compressor_gate.weight",
    "attn.indexer.compressor.norm.weight": "indexer_compressor_norm.weight", "attn_norm.weight": "attn_norm.weight",
    "ffn_norm.weight": "ffn_norm.weight", "ffn.gate.weight": "ffn_gate_inp.weight", "ffn.gate.bias": "exp_probs_b.bias",
    "ffn.gate.tid2eid": "ffn_gate_tid2eid.weight", "ffn.shared_experts.w1.weight": "ffn_gate_shexp.weight",
    "ffn.shared_experts.w2.weight": "ffn_down_shexp.weight", "ffn.shared_experts.w3.weight": "ffn_up_shexp.weight",
}
TOP = {"embed.weight": "token_embd.weight", "norm.weight": "output_norm.weight", "head.weight": "output.weight",
       "hc_head_fn": "output_hc_fn.weight", "hc_head_base": "output_hc_base.weight", "hc_head_scale": "output_hc_scale.weight"}
EXPERT = {"w1": "ffn_gate_exps.weight", "w2": "ffn_down_exps.weight", "w3": "ffn_up_exps.weight"}


def e8m0(s):
    return torch.exp2(s.view(torch.uint8).float() - 127.0)


def dequant_fp8(w, s, block):
    r, c = w.shape
    sf = e8m0(s).repeat_interleave(block[0], 0)[:r].repeat_interleave(block[1], 1)[:, :c]
    return (w.float() * sf).numpy()


def pack_mxfp4(w, s):
    """official MXFP4 rows (two E2M1 codes per byte, low nibble first) + E8M0 per 32 ->
    ggml blocks: e, then qs[j] = code[j] | code[j+16] << 4."""
    packed = w.contiguous().view(torch.uint8).numpy()
    rows, half = packed.shape
    nb = half * 2 // 32
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(rows, nb, 32)
    qs = codes[:, :, :16] | (codes[:, :, 16:] << 4)
    e = s.contiguous().view(torch.uint8).numpy().reshape(rows, nb, 1)
    return np.concatenate([e, qs.astype(np.uint8)], axis=-1).reshape(rows, nb * 17)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("ckpt")
    ap.add_argument("out")
    ap.add_argument("--fp8", choices=["f32", "q8_0"], default="q8_0")
    a = ap.parse_args()
    cfg = json.load(open(os.path.join(a.ckpt, "config.json")))
    block = cfg.get("quantization_config", {}).get("weight_block_size", [128, 128])
    T = {}
    for f in sorted(glob.glob(os.path.join(a.ckpt, "*.safetensors"))):
        with safe_open(f, "pt") as sf:
            for k in sf.keys():
                T[k] = sf.get_tensor(k)
    n = cfg["num_hidden_layers"]
    w = gguf.GGUFWriter(a.out, "deepseek4")
    A = "deepseek4."
    rs = cfg.get("rope_scaling") or {}
    for k, v in [("context_length", cfg["max_position_embeddings"]), ("embedding_length", cfg["hidden_size"]),
                 ("block_count", n), ("attention.head_count", cfg["num_attention_heads"]),
                 ("attention.head_count_kv", 1), ("attention.key_length", cfg["head_dim"]),
                 ("attention.value_length", cfg["head_dim"]), ("expert_count", cfg["n_routed_experts"]),
                 ("expert_used_count", cfg["num_experts_per_tok"]), ("rope.dimension_count", cfg["qk_rope_head_dim"]),
                 ("attention.q_lora_rank", cfg["q_lora_rank"]), ("attention.sliding_window", cfg["sliding_window"]),
                 ("expert_feed_forward_length", cfg["moe_intermediate_size"]),
                 ("expert_shared_count", cfg["n_shared_experts"]), ("attention.indexer.head_count", cfg["index_n_heads"]),
                 ("attention.indexer.key_length", cfg["index_head_dim"]), ("attention.indexer.top_k", cfg["index_topk"]),
                 ("attention.output_group_count", cfg["o_groups"]), ("attention.output_lora_rank", cfg["o_lora_rank"]),
                 ("hyper_connection.count", cfg["hc_mult"]), ("hyper_connection.sinkhorn_iterations", cfg["hc_sinkhorn_iters"]),
                 ("hash_layer_count", cfg["num_hash_layers"]), ("expert_gating_func", 4),
                 ("rope.scaling.original_context_length", rs["original_max_position_embeddings"])]:
        w.add_uint32(A + k, int(v))
    for k, v in [("attention.layer_norm_rms_epsilon", cfg["rms_norm_eps"]), ("rope.freq_base", cfg["rope_theta"]),
                 ("expert_weights_scale", cfg["routed_scaling_factor"]), ("hyper_connection.epsilon", cfg["hc_eps"]),
                 ("attention.compress_rope_freq_base", cfg["compress_rope_theta"]), ("rope.scaling.factor", rs["factor"]),
                 ("rope.scaling.yarn_beta_fast", rs.get("beta_fast", 32)), ("rope.scaling.yarn_beta_slow", rs.get("beta_slow", 1))]:
        w.add_float32(A + k, float(v))
    w.add_string(A + "rope.scaling.type", "yarn")
    w.add_bool(A + "expert_weights_norm", True)
    w.add_array(A + "swiglu_clamp_exp", [float(cfg["swiglu_limit"])] * n)
    w.add_array(A + "swiglu_clamp_shexp", [float(cfg["swiglu_limit"])] * n)
    w.add_array(A + "attention.compress_ratios", [int(x) for x in cfg["compress_ratios"]])  # MTP entries too
    w.add_uint32(A + "embedding_length_out", cfg["hidden_size"] * cfg["hc_mult"])
    w.add_uint32("tokenizer.ggml.bos_token_id", cfg["bos_token_id"])
    w.add_uint32("tokenizer.ggml.eos_token_id", cfg["eos_token_id"])
    tj = os.path.join(a.ckpt, "tokenizer.json")
    if os.path.exists(tj):
        for k, kind, v in tokenizer_kv(json.load(open(tj, encoding="utf-8")), cfg["vocab_size"]):
            getattr(w, "add_" + kind)(k, v)
        tc = os.path.join(a.ckpt, "tokenizer_config.json")
        tc = json.load(open(tc, encoding="utf-8")) if os.path.exists(tc) else {}
        pad = tc.get("pad_token")
        pad = pad.get("content") if isinstance(pad, dict) else pad
        vocab = {x["content"]: x["id"] for x in json.load(open(tj, encoding="utf-8")).get("added_tokens", [])}
        if pad in vocab:
            w.add_uint32("tokenizer.ggml.padding_token_id", vocab[pad])
        w.add_bool("tokenizer.ggml.add_bos_token", bool(tc.get("add_bos_token", False)))
        w.add_bool("tokenizer.ggml.add_eos_token", bool(tc.get("add_eos_token", False)))

    def put(name, t):
        if t.dtype in (torch.int64, torch.int32):
            w.add_tensor(name, t.to(torch.int32).numpy())
        elif t.dim() < 2 or t.dtype == torch.float32:
            w.add_tensor(name, t.float().numpy())
        else:  # BF16 matrix
            w.add_tensor(name, t.contiguous().view(torch.int16).numpy().view(np.uint8), raw_dtype=Q.BF16)

    for k, name in TOP.items():
        put(name, T[k])
    for L in range(n):
        for k, name in LAYER.items():
            full = f"layers.{L}.{k}"
            if full not in T:
                continue
            t = T[full]
            sc = full[:-len(".weight")] + ".scale" if full.endswith(".weight") else None
            if sc in T and t.dtype == torch.float8_e4m3fn:
                x = dequant_fp8(t, T[sc], block)
                if a.fp8 == "q8_0":
                    w.add_tensor(f"blk.{L}.{name}", quants.quantize(x, Q.Q8_0), raw_dtype=Q.Q8_0)
                else:
                    w.add_tensor(f"blk.{L}.{name}", x.astype(np.float32))
            else:
                put(f"blk.{L}.{name}", t)
        for p, name in EXPERT.items():
            E = cfg["n_routed_experts"]
            blocks = [pack_mxfp4(T[f"layers.{L}.ffn.experts.{e}.{p}.weight"], T[f"layers.{L}.ffn.experts.{e}.{p}.scale"])
                      for e in range(E)]
            w.add_tensor(f"blk.{L}.{name}", np.stack(blocks), raw_dtype=Q.MXFP4)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()

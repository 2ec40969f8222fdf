#!/usr/bin/env python3
"""Decode speed of transformers' DeepseekV4ForCausalLM (eager, bf16) at the
synthetic shapes `dsv4 bench --synthetic` uses, for the ratio in its report.

usage: hf_decode.py [--preset flash|pro] [--layers N] [--experts N] [--decode N] [--context N]
Prints one line: `hf_ms_per_token <float>`.

The model is built directly in bf16 (from_config, then .to(bf16)): loading a
checkpoint with dtype=bf16 trips over the fp32-kept norm modules (spec §8.4),
but a model cast as a whole runs. Weights are the default random init."""
import argparse, time

import torch
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--preset', default='flash', choices=['flash', 'pro'])
    ap.add_argument('--layers', type=int, default=4)
    ap.add_argument('--experts', type=int, default=16)
    ap.add_argument('--decode', type=int, default=16)
    ap.add_argument('--context', type=int, default=8, help='prompt tokens before timing')
    a = ap.parse_args()
    flash = a.preset == 'flash'
    L = a.layers
    ratios = [(0 if flash else 128) if i < 2 else (4 if i % 2 == 0 else 128) for i in range(L)] + [0]
    cfg = DeepseekV4Config(
        vocab_size=129280, hidden_size=4096 if flash else 7168, num_hidden_layers=L,
        num_attention_heads=64 if flash else 128, head_dim=512, qk_rope_head_dim=64,
        q_lora_rank=1024 if flash else 1536, o_groups=8 if flash else 16, o_lora_rank=1024,
        sliding_window=128, compress_ratios=ratios, index_n_heads=64, index_head_dim=128,
        index_topk=512 if flash else 1024, n_routed_experts=a.experts, num_experts_per_tok=6,
        moe_intermediate_size=2048 if flash else 3072, num_hash_layers=min(3, L),
        routed_scaling_factor=1.5 if flash else 2.5,
        rope_scaling={'type': 'yarn', 'factor': 16, 'original_max_position_embeddings': 65536,
                      'beta_fast': 32, 'beta_slow': 1})
    dev = 'cuda' if torch.cuda.is_available() else 'cpu'
    torch.manual_seed(0)
    with torch.device(dev):
        model = DeepseekV4ForCausalLM(cfg)
    model = model.to(torch.bfloat16).eval()
    ids = torch.randint(0, cfg.vocab_size, (1, a.context), device=dev)
    with torch.no_grad():
        out = model(ids, use_cache=True)
        cache = out.past_key_values
        tok = out.logits[:, -1:].argmax(-1)
        times = []
        for i in range(a.decode + 2):
            if dev == 'cuda':
                torch.cuda.synchronize()
            t = time.perf_counter()
            out = model(tok, past_key_values=cache, use_cache=True)
            tok = out.logits[:, -1:].argmax(-1)
            if dev == 'cuda':
                torch.cuda.synchronize()
            if i >= 2:
                times.append(time.perf_counter() - t)
    print('hf_ms_per_token %.3f' % (1e3 * sum(times) / len(times)))


main()

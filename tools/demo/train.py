#!/usr/bin/env python3
"""Train the demo DeepSeek-V4 model (transformers' DeepseekV4ForCausalLM + an MTP head).

  train.py --data DIR --out DIR [--budget-s 420] [--batch 64] [--tiny] [--seed 1] [--init-from CKPT]

DIR (from build_data.py) holds train.npz and tokenizer.json. Training runs for a fixed
wall-clock budget (the learning-rate schedule follows elapsed time, so any device speed
gives a complete schedule) and writes OUT/config.json, the BF16 checkpoint in official
DeepSeek-V4 tensor names (2 safetensors shards + index, `mtp.0.*` included) and
OUT/train_log.json.

Every feature the engine implements is in the model: mHC with 4 streams and Sinkhorn,
sliding-window layers, CSA (ratio 4, lightning indexer, top-k) and HCA (ratio 128; rows
are 640 tokens so each row has 5 HCA entries), hash-routed MoE in the first layers and
top-k MoE with a shared expert after them, YaRN on the compress RoPE.

MTP (spec §5.2): transformers has no MTP module, so it is composed here from its own
modules as the official MTPBlock is: e = enorm(embed(tok[i+1])), h = hnorm(X_main[i])
per stream, X0 = e_proj(e) + h_proj(h), one decoder block (sliding-window attention,
top-k MoE), its own hc_head and final norm, the shared LM head; row i predicts token
i+2 at position id i. Its loss (next-next-token cross entropy) is added with weight 0.3
and its gradient reaches the main model through X_main, as DeepSeek trains it.

Routing balance is DeepSeek's auxiliary-loss-free one: after every step each top-k
router's e_score_correction_bias moves by 1e-3 against the sign of its experts' load
error. Hash layers route by a fixed random tid2eid table (distinct experts per token).
"""
import argparse
import copy
import json
import math
import os
import sys
import time

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F
import transformers
from transformers import DeepseekV4Config, DeepseekV4ForCausalLM
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "oracle"))
import make_fixture as mf  # noqa: E402  (official names, config spelling, shard writer)

MTP_WEIGHT = 0.3
BIAS_RATE = 1e-3


def build_config(tiny):
    """The demo model. ~13 M parameters: BF16 checkpoint about 27 MB."""
    kinds = ["sliding_attention", "sliding_attention", "compressed_sparse_attention",
             "heavily_compressed_attention", "compressed_sparse_attention", "heavily_compressed_attention"]
    d = dict(hidden=256, heads=8, moe_inter=192, experts=8, layers=kinds)
    if tiny:  # a CPU smoke test of the same code path
        d = dict(hidden=64, heads=2, moe_inter=32, experts=4, layers=kinds[1:4])
    n = len(d["layers"])
    cfg = DeepseekV4Config(
        vocab_size=4096, hidden_size=d["hidden"], moe_intermediate_size=d["moe_inter"],
        num_hidden_layers=n, num_attention_heads=d["heads"], num_key_value_heads=1, head_dim=64,
        q_lora_rank=128, partial_rotary_factor=16 / 64, num_experts_per_tok=2,
        n_routed_experts=d["experts"], n_shared_experts=1, routed_scaling_factor=1.5, swiglu_limit=10.0,
        hc_mult=4, hc_sinkhorn_iters=20, o_groups=4, o_lora_rank=64,
        index_n_heads=16, index_head_dim=32, index_topk=16, sliding_window=128,
        layer_types=d["layers"], mlp_layer_types=["hash_moe"] * 2 + ["moe"] * (n - 2),
        compress_rates={"compressed_sparse_attention": 4, "heavily_compressed_attention": 128},
        rope_theta=10000.0, compress_rope_theta=160000.0,
        rope_parameters={"rope_type": "yarn", "factor": 16.0, "original_max_position_embeddings": 4096,
                         "beta_fast": 32, "beta_slow": 1},
        max_position_embeddings=65536, tie_word_embeddings=False, bos_token_id=0, eos_token_id=1,
        num_nextn_predict_layers=1)
    return cfg


def mtp_config(cfg):
    """One sliding-window, top-k MoE block (official MTP layer: compress ratio 0, not hash)."""
    c = copy.deepcopy(cfg)
    c.num_hidden_layers = 1
    c.layer_types = ["sliding_attention"]
    c.mlp_layer_types = ["moe"]
    return c


class MTP(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = mtp_config(cfg)
        D = cfg.hidden_size
        self.enorm = mdl.DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)
        self.hnorm = mdl.DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)
        self.e_proj = nn.Linear(D, D, bias=False)
        self.h_proj = nn.Linear(D, D, bias=False)
        self.block = mdl.DeepseekV4DecoderLayer(self.cfg, 0)
        self.hc_head = mdl.DeepseekV4HyperHead(cfg)
        self.norm = mdl.DeepseekV4RMSNorm(D, eps=cfg.rms_norm_eps)

    def forward(self, model, x_main, ids):
        """x_main [B,T,4,D] (main streams before hc_head), ids [B,T] -> logits [B,T-1,V];
        row i predicts ids[:, i+2]."""
        e = self.e_proj(self.enorm(model.model.embed_tokens(ids[:, 1:])))
        h = self.h_proj(self.hnorm(x_main[:, :-1]))
        x = (e.unsqueeze(2) + h).to(x_main.dtype)
        pos = torch.arange(x.shape[1], device=x.device).unsqueeze(0)
        mask = create_sliding_window_causal_mask(config=self.cfg, inputs_embeds=e, attention_mask=None,
                                                 past_key_values=None, position_ids=pos)
        pe = {"main": model.model.rotary_emb(e, position_ids=pos, layer_type="main")}
        x = self.block(x, position_embeddings=pe, position_ids=pos, attention_mask=mask, input_ids=None,
                       past_key_values=None)
        return model.lm_head(self.norm(self.hc_head(x)))


def init_model(cfg, seed):
    torch.manual_seed(seed)
    model = DeepseekV4ForCausalLM(cfg).float()
    mtp = MTP(cfg).float()
    for m in mtp.modules():        # transformers' own initialisation for the composed block
        model._init_weights(m)
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for layer in list(model.model.layers):
            gate = layer.mlp.gate
            if isinstance(gate, mdl.DeepseekV4HashRouter):   # distinct random experts per token id
                t = torch.stack([torch.randperm(cfg.n_routed_experts, generator=g)[:cfg.num_experts_per_tok]
                                 for _ in range(cfg.vocab_size)])
                gate.tid2eid.copy_(t)
    return model, mtp


def official_state(model, mtp, cfg):
    """Main model and MTP head in official DeepSeek-V4 names (spec §5.2, §7.2)."""
    sd = {n: t.detach().cpu() for n, t in model.state_dict().items()}
    out = mf.to_official(sd, cfg)
    blk = {f"model.layers.0.{n}": t.detach().cpu() for n, t in mtp.block.state_dict().items()}
    for n, t in mf.to_official(blk, mtp.cfg).items():
        out["mtp.0." + n[len("layers.0."):]] = t
    out["mtp.0.enorm.weight"] = mtp.enorm.weight.detach().cpu()
    out["mtp.0.hnorm.weight"] = mtp.hnorm.weight.detach().cpu()
    out["mtp.0.norm.weight"] = mtp.norm.weight.detach().cpu()
    out["mtp.0.e_proj.weight"] = mtp.e_proj.weight.detach().cpu()
    out["mtp.0.h_proj.weight"] = mtp.h_proj.weight.detach().cpu()
    out["mtp.0.hc_head_fn"] = mtp.hc_head.hc_fn.detach().cpu()
    out["mtp.0.hc_head_base"] = mtp.hc_head.hc_base.detach().cpu()
    out["mtp.0.hc_head_scale"] = mtp.hc_head.hc_scale.detach().cpu()
    return out


@torch.no_grad()
def load_official(model, mtp, cfg, ckpt_dir):
    """Continue from a checkpoint this script wrote: official_state's tensors are views of
    the (CPU) parameters and buffers, so copying into them loads the model in place."""
    from safetensors import safe_open
    views = official_state(model, mtp, cfg)
    seen = set()
    for fn in sorted(f for f in os.listdir(ckpt_dir) if f.endswith(".safetensors")):
        with safe_open(os.path.join(ckpt_dir, fn), "pt") as f:
            for name in f.keys():
                views[name].copy_(f.get_tensor(name))
                seen.add(name)
    if seen != set(views):
        sys.exit(f"{ckpt_dir}: tensors missing: {sorted(set(views) - seen)[:5]}")
    again = official_state(model, mtp, cfg)
    with safe_open(os.path.join(ckpt_dir, fn), "pt") as f:   # in place really happened
        for name in f.keys():
            if not torch.equal(again[name].to(f.get_tensor(name).dtype), f.get_tensor(name)):
                sys.exit(f"{name}: loading did not reach the model's parameter")


def save(model, mtp, cfg, out_dir, shards):
    os.makedirs(out_dir, exist_ok=True)
    sd = official_state(model, mtp, cfg)
    tensors = {n: t.to(mf.storage_dtype(n, t, True)).contiguous()
               for n, t in sorted(sd.items(), key=lambda kv: mf._layer_order_key(kv[0]))}
    mf.write_tensors(out_dir, tensors, shards)
    with open(os.path.join(out_dir, "config.json"), "w") as f:
        json.dump(mf.official_config(cfg, True), f, indent=2)
        f.write("\n")
    return sum(t.numel() * t.element_size() for t in tensors.values())


class BiasBalancer:
    """Aux-loss-free balancing: counts each top-k router's picks during the step."""

    def __init__(self, routers):
        self.routers = routers
        self.counts = [None] * len(routers)
        for i, r in enumerate(routers):
            r.register_forward_hook(self._hook(i))

    def _hook(self, i):
        def hook(mod, inp, out):
            c = torch.bincount(out[2].reshape(-1), minlength=mod.num_experts).float()
            self.counts[i] = c if self.counts[i] is None else self.counts[i] + c
        return hook

    @torch.no_grad()
    def update(self):
        for r, c in zip(self.routers, self.counts):
            if c is not None:
                r.e_score_correction_bias.add_(BIAS_RATE * torch.sign(c.mean() - c))
        self.counts = [None] * len(self.routers)


@torch.no_grad()
def reload_check(model, out_dir, x):
    """The written checkpoint, reloaded by transformers, must have every tensor and give
    the trained model's logits up to BF16 rounding."""
    try:
        re_model, info = DeepseekV4ForCausalLM.from_pretrained(out_dir, dtype=torch.float32,
                                                               output_loading_info=True)
        re_model.to(x.device).eval()
        want = model(input_ids=x, use_cache=False).logits[0]
        got = re_model(input_ids=x, use_cache=False).logits[0]
        return {"missing": sorted(info["missing_keys"]), "unexpected": list(info["unexpected_keys"])[:5],
                "max_abs_diff_vs_fp32": float((got - want).abs().max()),
                "argmax_agreement": float((got.argmax(-1) == want.argmax(-1)).float().mean())}
    except Exception as e:  # reported, the checkpoint is already written
        return {"error": f"{type(e).__name__}: {e}"}


def masked_ce(logits, targets, mask):
    ce = F.cross_entropy(logits.reshape(-1, logits.shape[-1]).float(), targets.reshape(-1), reduction="none")
    m = mask.reshape(-1).float()
    return (ce * m).sum() / m.sum().clamp(min=1)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True)
    p.add_argument("--out", required=True)
    p.add_argument("--budget-s", type=float, default=420.0, help="training wall-clock seconds")
    p.add_argument("--max-steps", type=int, default=0, help="stop after N steps too (0: budget only)")
    p.add_argument("--batch", type=int, default=64)
    p.add_argument("--lr", type=float, default=2e-3)
    p.add_argument("--warmup", type=int, default=150)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--tiny", action="store_true", help="small CPU configuration for testing the script")
    p.add_argument("--init-from", help="continue from a checkpoint directory written by this script")
    p.add_argument("--experts-impl", default="auto", help="auto|eager|grouped_mm")
    a = p.parse_args()
    t_start = time.time()
    dev = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    torch.backends.cuda.matmul.allow_tf32 = True
    torch.backends.cudnn.allow_tf32 = True

    rows = np.load(os.path.join(a.data, "train.npz"))["rows"]
    ids_all = torch.from_numpy((rows & 0x7FFF).astype(np.int64)).to(dev)
    mask_all = torch.from_numpy((rows >> 15).astype(np.bool_)).to(dev)
    N, T = ids_all.shape
    cfg = build_config(a.tiny)
    model, mtp = init_model(cfg, a.seed)
    if a.init_from:
        load_official(model, mtp, cfg, a.init_from)
    mf.check_rope_tables(model, cfg)
    model.to(dev).train()
    mtp.to(dev).train()
    n_params = sum(p.numel() for p in model.parameters()) + sum(p.numel() for p in mtp.parameters())
    print(f"params {n_params / 1e6:.2f} M; data {N} rows x {T}; device {dev}", flush=True)

    captured = {}
    model.model.hc_head.register_forward_pre_hook(lambda mod, args: captured.__setitem__("x", args[0]))
    routers = [m for m in list(model.modules()) + list(mtp.modules()) if isinstance(m, mdl.DeepseekV4TopKRouter)]
    balancer = BiasBalancer(routers)

    params = list(model.parameters()) + list(mtp.parameters())
    decay = [p for p in params if p.ndim >= 2]
    no_decay = [p for p in params if p.ndim < 2]
    opt = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                            lr=a.lr, betas=(0.9, 0.95), eps=1e-8, fused=dev.type == "cuda")
    gen = torch.Generator(device="cpu").manual_seed(a.seed)

    def batch():
        idx = torch.randint(0, N, (a.batch,), generator=gen).to(dev)
        return ids_all[idx], mask_all[idx]

    def step_loss(x, m):
        out = model(input_ids=x, use_cache=False)
        l_main = masked_ce(out.logits[:, :-1], x[:, 1:], m[:, 1:])
        mtp_logits = mtp(model, captured["x"], x)
        l_mtp = masked_ce(mtp_logits[:, :-1], x[:, 2:], m[:, 2:])
        return l_main, l_mtp

    def set_impl(name):
        model.config._experts_implementation = name
        mtp.cfg._experts_implementation = name

    # Pick the faster MoE implementation that gives the same loss (timed on a few steps).
    impls = ["eager", "grouped_mm"] if a.experts_impl == "auto" else [a.experts_impl]
    if len(impls) > 1:
        x, m = batch()
        timing, ref = {}, None
        for name in impls:
            try:
                set_impl(name)
                with torch.no_grad():
                    l = step_loss(x, m)[0].item()
                if ref is not None and abs(l - ref) > 1e-3 * max(1, abs(ref)):
                    print(f"experts {name}: loss {l} differs from eager {ref}; not used", flush=True)
                    continue
                ref = l if ref is None else ref
                for i in range(4):
                    if i == 1:
                        if dev.type == "cuda":
                            torch.cuda.synchronize()
                        t0 = time.time()
                    l_main, l_mtp = step_loss(x, m)
                    (l_main + MTP_WEIGHT * l_mtp).backward()
                    opt.zero_grad(set_to_none=True)
                if dev.type == "cuda":
                    torch.cuda.synchronize()
                timing[name] = (time.time() - t0) / 3
                print(f"experts {name}: {timing[name] * 1000:.1f} ms/step", flush=True)
            except Exception as e:  # an implementation this torch cannot run
                print(f"experts {name}: unavailable ({type(e).__name__}: {str(e)[:120]})", flush=True)
        impls = [min(timing, key=timing.get)]
    set_impl(impls[0])
    print(f"experts implementation: {impls[0]}", flush=True)

    log, step, t0 = [], 0, time.time()
    ema = None
    while True:
        el = time.time() - t0
        if el >= a.budget_s or (a.max_steps and step >= a.max_steps):
            break
        frac = min(1.0, el / a.budget_s)
        lr = a.lr * min(1.0, (step + 1) / a.warmup) * (0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * frac)))
        for g in opt.param_groups:
            g["lr"] = lr
        x, m = batch()
        l_main, l_mtp = step_loss(x, m)
        loss = l_main + MTP_WEIGHT * l_mtp
        opt.zero_grad(set_to_none=True)
        loss.backward()
        gn = torch.nn.utils.clip_grad_norm_(params, 1.0)
        opt.step()
        balancer.update()
        step += 1
        if step % 25 == 0 or step == 1:
            lm, lt = l_main.item(), l_mtp.item()
            ema = lm if ema is None else 0.8 * ema + 0.2 * lm
            rec = {"step": step, "t": round(time.time() - t0, 1), "lr": lr, "loss": round(lm, 4),
                   "mtp_loss": round(lt, 4), "grad_norm": round(float(gn), 3)}
            log.append(rec)
            print(json.dumps(rec), flush=True)
    train_s = time.time() - t0
    model.eval()
    mtp.eval()
    nbytes = save(model, mtp, cfg, a.out, shards=1 if a.tiny else 2)
    reload = reload_check(model, a.out, ids_all[:1, :300])
    print(json.dumps({"reload": reload}), flush=True)
    info = {"steps": step, "train_seconds": round(train_s, 1), "total_seconds": round(time.time() - t_start, 1),
            "batch": a.batch, "seq": T, "tokens_seen": step * a.batch * T, "params": n_params,
            "checkpoint_bytes": nbytes, "reload": reload, "experts_implementation": impls[0], "args": vars(a),
            "versions": {"torch": torch.__version__, "transformers": transformers.__version__},
            "device": torch.cuda.get_device_name() if dev.type == "cuda" else "cpu", "log": log}
    with open(os.path.join(a.out, "train_log.json"), "w") as f:
        json.dump(info, f, indent=1)
        f.write("\n")
    print(json.dumps({k: v for k, v in info.items() if k != "log"}), flush=True)


if __name__ == "__main__":
    main()

"""The DSpark drafter oracle (docs/DSPARK.md §4), composed from transformers' own DeepSeek-V4 modules.

transformers 5.17 has no DSpark (and drops `mtp.*` at load), so the reference is built from its
pieces as docs/DSPARK.md writes the drafter of DeepSeek-V4-Flash-0731:

    c_j    = concat over l in target_layer_ids of mean_over_streams(X^l_j)   X^l = output of main layer l
    m_j    = RMSNorm_main_norm(main_proj c_j)                                 [D], one per verified position
    X_0    = Embed[[b, n, ..., n]] on every stream                           B rows at positions P .. P+B-1
    X_s+1  = Stage_s(X_s)                                                     three V4 blocks (SWA attention,
                                                                              top-k routed MoE with bias)
    h      = RMSNorm_norm(HyperHead(X_3))                                     own hc head and final norm (last stage)
    base   = lm_head(h)                                                       shared head
    e_i    = markov_w1[prev_i];  logits_i = base_i + markov_w2 e_i            rank-R bigram bias (serial part)
    conf_i = sigmoid(confidence_proj [h_i, e_i])

Stage_s is DeepseekV4DecoderLayer's own submodules with one change at the attention call: the
attention module runs over [m_j of the last W context positions ; the B block rows] so the context
rows become keys through the stage's own kv_proj / kv_norm / rope at their positions j, and the
mask lets every block row see every context key and every block row (bidirectional); the context
rows' own outputs are dropped. P is the number of verified positions before the block (the block's
first row holds the token at P).
"""

import torch
from torch import nn
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

from mtp import mtp_config


class Stage(nn.Module):
    """One drafter block: a DeepseekV4DecoderLayer whose attention also reads context keys."""

    def __init__(self, cfg):
        super().__init__()
        self.layer = mdl.DeepseekV4DecoderLayer(cfg, 0)

    def forward(self, x, ctx, pe, pos, mask, ids):
        ly = self.layer
        n = ctx.shape[1]
        post, comb, collapsed = ly.attn_hc(x)
        rows = torch.cat([ctx, ly.input_layernorm(collapsed)], dim=1)
        out, _ = ly.self_attn(rows, position_embeddings=pe, position_ids=pos, attention_mask=mask)
        out = out[:, n:]
        x = post.unsqueeze(-1) * out.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), x)
        post, comb, collapsed = ly.ffn_hc(x)
        y = ly.mlp(ly.post_attention_layernorm(collapsed), input_ids=ids)
        return post.unsqueeze(-1) * y.unsqueeze(-2) + torch.matmul(comb.transpose(-1, -2), x)


class DSpark(nn.Module):
    def __init__(self, cfg, target_layers, block, rank, noise_id, stages=3):
        super().__init__()
        self.cfg = mtp_config(cfg)
        self.cfg._attn_implementation = getattr(cfg, "_attn_implementation", None) or "eager"
        self.cfg._experts_implementation = getattr(cfg, "_experts_implementation", None) or "eager"
        D, eps, V = cfg.hidden_size, cfg.rms_norm_eps, cfg.vocab_size
        self.target_layers, self.block, self.rank, self.noise_id = list(target_layers), block, rank, noise_id
        self.window = cfg.sliding_window
        self.main_proj = nn.Linear(len(self.target_layers) * D, D, bias=False)
        self.main_norm = mdl.DeepseekV4RMSNorm(D, eps=eps)
        self.stages = nn.ModuleList(Stage(self.cfg) for _ in range(stages))
        self.hc_head = mdl.DeepseekV4HyperHead(self.cfg)
        self.norm = mdl.DeepseekV4RMSNorm(D, eps=eps)
        self.markov_w1 = nn.Embedding(V, rank)
        self.markov_w2 = nn.Linear(rank, V, bias=False)
        self.confidence = nn.Linear(D + rank, 1, bias=False)
        self.rotary = mdl.DeepseekV4RotaryEmbedding(self.cfg)

    @torch.no_grad()
    def features(self, model, ids):
        """m_j for every position of ids [1, S] from the main model's full forward: [1, S, D]."""
        seen = {}
        hooks = [model.model.layers[l].register_forward_hook(
            lambda mod, args, out, l=l: seen.__setitem__(l, out.mean(dim=2))) for l in self.target_layers]
        model(ids, use_cache=False)
        for h in hooks:
            h.remove()
        c = torch.cat([seen[l] for l in self.target_layers], dim=-1)
        return self.main_norm(self.main_proj(c))

    @torch.no_grad()
    def block_forward(self, m, P, bonus, embed):
        """The block after P verified positions (context m[:, :P]): (h [B, D], base logits input)."""
        n = min(P, self.window)
        ctx = m[:, P - n:P]
        ids = torch.full((1, self.block), self.noise_id, dtype=torch.long, device=m.device)
        ids[0, 0] = bonus
        e = embed(ids)
        x = e.unsqueeze(2).expand(-1, -1, self.cfg.hc_mult, -1).contiguous()
        pos = torch.arange(P - n, P + self.block, device=m.device).unsqueeze(0)
        pe = {"main": self.rotary(e, position_ids=pos, layer_type="main"),
              "compress": self.rotary(e, position_ids=pos, layer_type="compress")}
        mask = torch.zeros(1, 1, n + self.block, n + self.block, device=m.device)
        for s in self.stages:
            x = s(x, ctx, pe, pos, mask, ids)
        return self.norm(self.hc_head(x))[0]

    @torch.no_grad()
    def draft(self, m, P, prev, embed, lm_head):
        """Row logits (Markov-corrected) and confidences of the block after P, the Markov head
        conditioned on prev [B] (prev[0] is the block's first token): ([B, V], [B])."""
        h = self.block_forward(m, P, int(prev[0]), embed)
        e = self.markov_w1(prev)
        logits = lm_head(h) + self.markov_w2(e)
        conf = torch.sigmoid(self.confidence(torch.cat([h, e], dim=-1)))[:, 0]
        return logits.float(), conf.float()

    def rule_name(self, name):
        """The name the main model's randomization rules know this parameter by."""
        if name.startswith("stages."):
            return "model.layers.0." + name.split(".", 3)[3]
        if name.startswith("hc_head."):
            return "model." + name
        if name in ("main_norm.weight", "norm.weight"):
            return "model.norm.weight"
        if name == "markov_w1.weight":
            return "model.embed_tokens.weight"
        return "lm_head.weight"   # main_proj, markov_w2, confidence: plain linears (fan-in scaled)

    def routers(self):
        return [s.layer.mlp.gate for s in self.stages]

    def official_tensors(self, to_official, cfg):
        """mtp.<s>.* in the official spelling (docs/DSPARK.md §3)."""
        sd = {n: t.detach().cpu() for n, t in self.state_dict().items() if not n.startswith("rotary.")}
        out, last = {}, f"mtp.{len(self.stages) - 1}."
        for s in range(len(self.stages)):
            pre = f"stages.{s}.layer."
            block = to_official({"model.layers.0." + n[len(pre):]: t for n, t in sd.items()
                                 if n.startswith(pre)}, cfg)
            for n, t in block.items():
                out[f"mtp.{s}." + n[len("layers.0."):]] = t
        out["mtp.0.main_proj.weight"] = sd["main_proj.weight"]
        out["mtp.0.main_norm.weight"] = sd["main_norm.weight"]
        out[last + "hc_head_fn"] = sd["hc_head.hc_fn"]
        out[last + "hc_head_base"] = sd["hc_head.hc_base"]
        out[last + "hc_head_scale"] = sd["hc_head.hc_scale"]
        out[last + "norm.weight"] = sd["norm.weight"]
        out[last + "markov_head.markov_w1.weight"] = sd["markov_w1.weight"]
        out[last + "markov_head.markov_w2.weight"] = sd["markov_w2.weight"]
        out[last + "confidence_head.proj.weight"] = sd["confidence.weight"]
        return out

    def config_keys(self):
        return {"dspark_block_size": self.block, "dspark_target_layer_ids": self.target_layers,
                "dspark_markov_rank": self.rank, "dspark_noise_token_id": self.noise_id,
                "dspark_markov_head_type": "vanilla", "dspark_window_size": self.window}


def prev_tokens(ids, P, block):
    """The Markov condition the fixture records for the block after P: the tokens that follow in ids
    (cyclically), so the reference does not depend on what the drafter would pick."""
    S = ids.shape[-1]
    return torch.tensor([int(ids[0, (P + i) % S]) for i in range(block)], dtype=torch.long, device=ids.device)

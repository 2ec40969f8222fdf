"""The MTP head oracle (spec §5.2), composed from transformers' own DeepSeek-V4 modules.

transformers 5.17 drops `mtp.*` at load and has no MTP forward, so the reference is built
from its pieces exactly as spec §5.2 writes the official MTPBlock:

    e   = RMSNorm_enorm(Embed[tok'])                      shared embedding
    Hn  = RMSNorm_hnorm(X_main)                           per stream, X_main = the main model's
                                                          final streams (the input of hc_head)
    X0  = (e_proj e)[:, :, None, :] + h_proj Hn           [B, S, hc, D]
    X1  = DeepseekV4DecoderLayer(X0)                      sliding-window attention (main rope),
                                                          top-k routed MoE with bias
    logits = lm_head(RMSNorm_norm(DeepseekV4HyperHead(X1)))   own hc head and norm, shared head

Row i stands for position i: it reads X_main[i] and the token at i + 1 and predicts i + 2.
"""

import torch
from torch import nn
from transformers import DeepseekV4Config
from transformers.masking_utils import create_sliding_window_causal_mask
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl


def mtp_config(cfg):
    d = cfg.to_dict()
    d.update(num_hidden_layers=1, layer_types=["sliding_attention"], mlp_layer_types=["moe"])
    for k in ("architectures", "transformers_version", "dtype", "torch_dtype"):
        d.pop(k, None)
    return DeepseekV4Config(**d)


class MtpHead(nn.Module):
    def __init__(self, cfg):
        super().__init__()
        self.cfg = mtp_config(cfg)
        # standalone modules: dispatch attention and experts like the main model does
        self.cfg._attn_implementation = getattr(cfg, "_attn_implementation", None) or "eager"
        self.cfg._experts_implementation = getattr(cfg, "_experts_implementation", None) or "eager"
        D, eps = cfg.hidden_size, cfg.rms_norm_eps
        self.e_proj = nn.Linear(D, D, bias=False)
        self.h_proj = nn.Linear(D, D, bias=False)
        self.enorm = mdl.DeepseekV4RMSNorm(D, eps=eps)
        self.hnorm = mdl.DeepseekV4RMSNorm(D, eps=eps)
        self.norm = mdl.DeepseekV4RMSNorm(D, eps=eps)
        self.block = mdl.DeepseekV4DecoderLayer(self.cfg, 0)
        self.hc_head = mdl.DeepseekV4HyperHead(self.cfg)
        self.rotary = mdl.DeepseekV4RotaryEmbedding(self.cfg)

    @torch.no_grad()
    def forward(self, x_main, next_ids, embed, lm_head):
        """x_main [1, S, hc, D], next_ids [1, S] -> (logits [S, V], streams X1 [1, S, hc, D])."""
        e = self.enorm(embed(next_ids))
        x0 = self.e_proj(e).unsqueeze(2) + self.h_proj(self.hnorm(x_main))
        pos = torch.arange(e.shape[1], device=e.device).unsqueeze(0)
        mask = create_sliding_window_causal_mask(config=self.cfg, inputs_embeds=e, attention_mask=None,
                                                 past_key_values=None, position_ids=pos)
        pe = {"main": self.rotary(e, position_ids=pos, layer_type="main"),
              "compress": self.rotary(e, position_ids=pos, layer_type="compress")}
        x1 = self.block(x0, position_embeddings=pe, position_ids=pos, attention_mask=mask, input_ids=next_ids,
                        past_key_values=None)
        return lm_head(self.norm(self.hc_head(x1)))[0].float(), x1

    def rule_name(self, name):
        """The name the main model's randomization rules know this parameter by."""
        if name.startswith("block."):
            return "model.layers.0." + name[len("block."):]
        if name.startswith("hc_head."):
            return "model." + name
        if name in ("enorm.weight", "hnorm.weight", "norm.weight"):
            return "model.norm.weight"
        if name in ("e_proj.weight", "h_proj.weight"):
            return "model.layers.0.self_attn.kv_proj.weight"   # a plain linear: same filler
        return name

    def official_tensors(self, to_official, cfg):
        """mtp.0.* in the official spelling (spec §5.2 key patterns)."""
        sd = {n: t.detach().cpu() for n, t in self.state_dict().items() if not n.startswith("rotary.")}
        out = {}
        block = to_official({"model.layers.0." + n[len("block."):]: t for n, t in sd.items()
                             if n.startswith("block.")}, cfg)
        for n, t in block.items():
            out["mtp.0." + n[len("layers.0."):]] = t
        for n in ("e_proj.weight", "h_proj.weight", "enorm.weight", "hnorm.weight", "norm.weight"):
            out["mtp.0." + n] = sd[n]
        out["mtp.0.hc_head_fn"] = sd["hc_head.hc_fn"]
        out["mtp.0.hc_head_base"] = sd["hc_head.hc_base"]
        out["mtp.0.hc_head_scale"] = sd["hc_head.hc_scale"]
        return out

"""The official cache numerics (spec §8.3) applied inside transformers' DeepseekV4ForCausalLM.

transformers computes the session state in full precision; DeepSeek's reference (and training)
passes it through low-precision formats. `install(model)` adds those quantize -> dequantize steps
without touching transformers' code:

* window KV and main-compressor entries: the attention interface is replaced by one that first
  passes its key (= value) rows through FP8 e4m3 for dims [0, head_dim - rope_dim) in blocks of
  64 with scale 2^ceil(log2(max(amax, 1e-4) / 448)) and rounds the rope dims to bf16, then runs
  transformers' eager attention. The key tensor is the window KV with the compressed entries
  appended; both get the same per-row treatment (applied twice it changes nothing, so entries
  are treated exactly once in effect).
* indexer queries and keys: a forward pre-hook on the indexer scorer rotates both by the
  Sylvester-order Hadamard matrix scaled by head_dim^-1/2 and passes them through FP4 E2M1 in
  blocks of 32 with scale 2^ceil(log2(max(amax, 6 * 2^-126) / 6)).

Rounding is to nearest, ties to even, in both formats. Scales are computed from the fp32 value
amax / 448 (or / 6) with an exact ceil(log2) (frexp), as the engine does.
"""

import torch
from transformers import AttentionInterface
from transformers.masking_utils import ALL_MASK_ATTENTION_FUNCTIONS
from transformers.models.deepseek_v4 import modeling_deepseek_v4 as mdl

E2M1_MID = torch.tensor([0.25, 0.75, 1.25, 1.75, 2.5, 3.5, 5.0])
E2M1_MAG = torch.tensor([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0])


def pow2_ceil(v):
    """2^ceil(log2(v)) for positive finite fp32 v, exactly."""
    m, e = torch.frexp(v)
    e = torch.where(m == 0.5, e - 1, e)
    return torch.ldexp(torch.ones_like(v), e)


def fp8_rows(x, n_fp8, blk=64):
    """x [..., width] fp32: dims [0, n_fp8) through e4m3 blocks of blk, the rest rounded to bf16."""
    out = x.clone()
    for c in range(0, n_fp8, blk):
        b = x[..., c:min(c + blk, n_fp8)]
        amax = b.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4)
        s = pow2_ceil(amax / 448.0)
        out[..., c:min(c + blk, n_fp8)] = (b / s).to(torch.float8_e4m3fn).float() * s
    out[..., n_fp8:] = x[..., n_fp8:].to(torch.bfloat16).float()
    return out


def e2m1_round(v):
    """Nearest E2M1 value, ties to the even code (0.25->0, 0.75->1, 1.25->1, 1.75->2, 2.5->2, ...)."""
    a = v.abs()
    code = torch.zeros_like(a, dtype=torch.long)
    for c in range(7):   # code c+1 when above the midpoint, or on it with c+1 even
        mid = float(E2M1_MID[c])
        code = torch.where((a > mid) | ((a == mid) & ((c + 1) % 2 == 0)), torch.full_like(code, c + 1), code)
    return torch.where(torch.signbit(v), -E2M1_MAG[code], E2M1_MAG[code])


def hadamard(n):
    h = torch.ones(1, 1)
    while h.shape[0] < n:
        h = torch.cat([torch.cat([h, h], 1), torch.cat([h, -h], 1)], 0)
    return h


def fp4_rows(x):
    """x [..., width]: Hadamard rotation (scaled width^-1/2), then E2M1 in blocks of 32."""
    n = x.shape[-1]
    y = (x.double() @ hadamard(n).double().T).float() * (1.0 / n ** 0.5)
    out = torch.empty_like(y)
    for c in range(0, n, 32):
        b = y[..., c:c + 32]
        amax = b.abs().amax(dim=-1, keepdim=True).clamp(min=6.0 * 2.0 ** -126)
        s = pow2_ceil(amax / 6.0)
        out[..., c:c + 32] = e2m1_round(b / s) * s
    return out


def _official_attention(module, query, key, value, attention_mask, scaling, dropout=0.0, **kwargs):
    n_fp8 = module.head_dim - module.config.qk_rope_head_dim
    kv = fp8_rows(key.float(), n_fp8).to(key.dtype)
    return mdl.eager_attention_forward(module, query, kv, kv, attention_mask, scaling, dropout, **kwargs)


def _scorer_pre_hook(module, args):
    q, keys, hidden = args
    return (fp4_rows(q.float()), fp4_rows(keys.float()), hidden)


def install(model):
    """Switch model to the official cache numerics; returns the hook handles."""
    AttentionInterface.register("dsv4_official_cache", _official_attention)
    # a custom implementation gets no mask unless it names its mask builder: the eager one
    ALL_MASK_ATTENTION_FUNCTIONS.register("dsv4_official_cache", ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    model.set_attn_implementation("dsv4_official_cache")
    handles = []
    for layer in model.model.layers:
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            handles.append(comp.indexer.scorer.register_forward_pre_hook(_scorer_pre_hook))
    return handles


def uninstall(model, handles):
    for h in handles:
        h.remove()
    model.set_attn_implementation("eager")

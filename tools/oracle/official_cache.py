"""The official numerics (spec §8.3) applied inside transformers' DeepseekV4ForCausalLM.

transformers computes the session state and the matmul inputs in full precision; DeepSeek's
reference (and training) passes them through low-precision formats. `install(model)` adds those
quantize -> dequantize steps without touching transformers' code:

* window KV and main-compressor entries: the attention interface is replaced by one that first
  passes its key (= value) rows through FP8 e4m3 for dims [0, head_dim - rope_dim) in blocks of
  64 with scale 2^ceil(log2(max(amax, 1e-4) / 448)) and rounds the rope dims to bf16, then runs
  transformers' eager attention. The key tensor is the window KV with the compressed entries
  appended; both get the same per-row treatment (applied twice it changes nothing, so entries
  are treated exactly once in effect).
* indexer queries and keys: a forward pre-hook on the indexer scorer rotates both by the
  Sylvester-order Hadamard matrix scaled by head_dim^-1/2 and passes them through FP4 E2M1 in
  blocks of 32 with scale 2^ceil(log2(max(amax, 6 * 2^-126) / 6)).
* the inputs of the matmuls whose weights the reference keeps in FP8 or FP4 (its `linear()` runs
  `act_quant(x, 128, "ue8m0")` before `fp8_gemm` / `fp4_gemm`): FP8 e4m3 in blocks of 128 along the
  input (the last block partial when the width is not a multiple, which the reference never has),
  scale 2^ceil(log2(max(amax, 1e-4) / 448)). Forward pre-hooks on q_a_proj, q_b_proj, kv_proj,
  o_b_proj, the indexer's q_b_proj and the shared expert's three projections; the routed experts'
  forward is replaced by one that rounds the token rows before gate_up_proj and, as DeepSeek's
  Expert.forward does, multiplies the SwiGLU output by the routing weight *before* rounding it and
  applying down_proj. Not rounded, as in the reference: o_a_proj (a bf16 einsum there), the
  compressors' and the indexer's kv/gate projections (fp32), the indexer's weights_proj (bf16), the
  router (fp32) and the output head (fp32).

Rounding is to nearest, ties to even, in both formats. Scales are computed from the fp32 value
amax / 448 (or / 6) with an exact ceil(log2) (frexp), as the engine does.
"""

import types

import torch
import torch.nn.functional as F
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


def fp8_act(x, blk=128):
    """x [..., width] fp32 through e4m3 in blocks of blk along the last dim (the matmul inputs)."""
    out = torch.empty_like(x)
    for c in range(0, x.shape[-1], blk):
        b = x[..., c:c + blk]
        amax = b.abs().amax(dim=-1, keepdim=True).clamp(min=1e-4)
        s = pow2_ceil(amax / 448.0)
        out[..., c:c + blk] = (b / s).to(torch.float8_e4m3fn).float() * s
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


def _fp8_input_pre_hook(module, args):
    return (fp8_act(args[0].float()).to(args[0].dtype),) + tuple(args[1:])


def _official_experts_forward(self, hidden_states, top_k_index, top_k_weights):
    """transformers' DeepseekV4Experts.forward with DeepSeek's order: w2 sees round(weight * SwiGLU)."""
    final = torch.zeros_like(hidden_states)
    mask = F.one_hot(top_k_index, num_classes=self.num_experts).permute(2, 1, 0)
    hit = torch.greater(mask.sum(dim=(-1, -2)), 0).nonzero()
    x = fp8_act(hidden_states.float()).to(hidden_states.dtype)
    for expert_idx in hit:
        expert_idx = expert_idx[0]
        top_k_pos, token_idx = torch.where(mask[expert_idx])
        h = self._apply_gate(F.linear(x[token_idx], self.gate_up_proj[expert_idx]))
        h = fp8_act((h * top_k_weights[token_idx, top_k_pos, None]).float()).to(h.dtype)
        final.index_add_(0, token_idx, F.linear(h, self.down_proj[expert_idx]).to(final.dtype))
    return final


def _fp8_linears(model):
    """The modules whose weights DeepSeek's reference keeps in FP8: their inputs are rounded."""
    for layer in model.model.layers:
        att, mlp = layer.self_attn, layer.mlp
        yield from (att.q_a_proj, att.q_b_proj, att.kv_proj, att.o_b_proj)
        if att.compressor is not None and hasattr(att.compressor, "indexer"):
            yield att.compressor.indexer.q_b_proj
        sh = mlp.shared_experts
        yield from (sh.gate_proj, sh.up_proj, sh.down_proj)


def install(model):
    """Switch model to the official numerics; returns the hook handles."""
    AttentionInterface.register("dsv4_official_cache", _official_attention)
    # a custom implementation gets no mask unless it names its mask builder: the eager one
    ALL_MASK_ATTENTION_FUNCTIONS.register("dsv4_official_cache", ALL_MASK_ATTENTION_FUNCTIONS["eager"])
    model.set_attn_implementation("dsv4_official_cache")
    handles = []
    for layer in model.model.layers:
        comp = layer.self_attn.compressor
        if comp is not None and hasattr(comp, "indexer"):
            handles.append(comp.indexer.scorer.register_forward_pre_hook(_scorer_pre_hook))
        layer.mlp.experts.forward = types.MethodType(_official_experts_forward, layer.mlp.experts)
    handles += [m.register_forward_pre_hook(_fp8_input_pre_hook) for m in _fp8_linears(model)]
    return handles


def uninstall(model, handles):
    for h in handles:
        h.remove()
    for layer in model.model.layers:
        del layer.mlp.experts.forward  # back to the class's forward
    model.set_attn_implementation("eager")

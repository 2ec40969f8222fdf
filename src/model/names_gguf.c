/* Official DeepSeek-V4 tensor names -> llama.cpp's GGUF names. Per-layer
 * tensors move from "layers.L.<official>" to "blk.L.<gguf>"; the MTP head
 * ("mtp.0.<official>") is block n_layers: its own tensors as nextn.*
 * (llama.cpp's deepseek4 loader and converter), its block like any layer. */
#include "model/names_gguf.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const k_top[][2] = {
    {"embed.weight", "token_embd.weight"},
    {"head.weight", "output.weight"},
    {"norm.weight", "output_norm.weight"},
    {"hc_head_fn", "output_hc_fn.weight"},
    {"hc_head_base", "output_hc_base.weight"},
    {"hc_head_scale", "output_hc_scale.weight"},
};

static const char *const k_layer[][2] = {
    {"attn_norm.weight", "attn_norm.weight"},
    {"ffn_norm.weight", "ffn_norm.weight"},
    {"hc_attn_fn", "hc_attn_fn.weight"},
    {"hc_attn_base", "hc_attn_base.weight"},
    {"hc_attn_scale", "hc_attn_scale.weight"},
    {"hc_ffn_fn", "hc_ffn_fn.weight"},
    {"hc_ffn_base", "hc_ffn_base.weight"},
    {"hc_ffn_scale", "hc_ffn_scale.weight"},
    {"attn.attn_sink", "attn_sinks.weight"},
    {"attn.wq_a.weight", "attn_q_a.weight"},
    {"attn.q_norm.weight", "attn_q_a_norm.weight"},
    {"attn.wq_b.weight", "attn_q_b.weight"},
    {"attn.wkv.weight", "attn_kv.weight"},
    {"attn.kv_norm.weight", "attn_kv_a_norm.weight"},
    {"attn.wo_a.weight", "attn_output_a.weight"},
    {"attn.wo_b.weight", "attn_output_b.weight"},
    {"attn.compressor.wkv.weight", "attn_compressor_kv.weight"},
    {"attn.compressor.wgate.weight", "attn_compressor_gate.weight"},
    {"attn.compressor.ape", "attn_compressor_ape.weight"},
    {"attn.compressor.norm.weight", "attn_compressor_norm.weight"},
    {"attn.indexer.wq_b.weight", "indexer.attn_q_b.weight"},
    {"attn.indexer.weights_proj.weight", "indexer.proj.weight"},
    {"attn.indexer.compressor.wkv.weight", "indexer_compressor_kv.weight"},
    {"attn.indexer.compressor.wgate.weight", "indexer_compressor_gate.weight"},
    {"attn.indexer.compressor.ape", "indexer_compressor_ape.weight"},
    {"attn.indexer.compressor.norm.weight", "indexer_compressor_norm.weight"},
    {"ffn.gate.weight", "ffn_gate_inp.weight"},
    {"ffn.gate.bias", "exp_probs_b.bias"},
    {"ffn.gate.tid2eid", "ffn_gate_tid2eid.weight"},
    {"ffn.shared_experts.w1.weight", "ffn_gate_shexp.weight"},
    {"ffn.shared_experts.w2.weight", "ffn_down_shexp.weight"},
    {"ffn.shared_experts.w3.weight", "ffn_up_shexp.weight"},
    {GGUF_EXPERTS_GATE, "ffn_gate_exps.weight"},
    {GGUF_EXPERTS_UP, "ffn_up_exps.weight"},
    {GGUF_EXPERTS_DOWN, "ffn_down_exps.weight"},
};

static const char *const k_mtp[][2] = {
    {"e_proj.weight", "nextn.e_proj.weight"},
    {"h_proj.weight", "nextn.h_proj.weight"},
    {"enorm.weight", "nextn.enorm.weight"},
    {"hnorm.weight", "nextn.hnorm.weight"},
    {"norm.weight", "nextn.shared_head_norm.weight"},
    {"hc_head_fn", "nextn.hc_head_fn.weight"},
    {"hc_head_base", "nextn.hc_head_base.weight"},
    {"hc_head_scale", "nextn.hc_head_scale.weight"},
};

int gguf_spelling(const char *pre, const char *name, int n_layers, char *out, size_t n)
{
    int layer = -1;
    if (!strcmp(pre, "mtp.0.")) {
        layer = n_layers;
        for (size_t i = 0; i < sizeof k_mtp / sizeof k_mtp[0]; i++)
            if (!strcmp(name, k_mtp[i][0])) return snprintf(out, n, "blk.%d.%s", layer, k_mtp[i][1]) < (int)n;
    } else if (*pre && (sscanf(pre, "layers.%d.", &layer) != 1 || layer < 0)) {
        return 0;
    }
    if (*pre) {
        for (size_t i = 0; i < sizeof k_layer / sizeof k_layer[0]; i++)
            if (!strcmp(name, k_layer[i][0])) return snprintf(out, n, "blk.%d.%s", layer, k_layer[i][1]) < (int)n;
        return 0;
    }
    for (size_t i = 0; i < sizeof k_top / sizeof k_top[0]; i++)
        if (!strcmp(name, k_top[i][0])) return snprintf(out, n, "%s", k_top[i][1]) < (int)n;
    return 0;
}

int gguf_is_mtp_name(const char *name, int n_layers)
{
    if (strncmp(name, "blk.", 4)) return 0;
    char *end;
    long l = strtol(name + 4, &end, 10);
    return end != name + 4 && *end == '.' && l >= n_layers;
}

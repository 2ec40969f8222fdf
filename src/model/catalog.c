/* The tensor catalog (see catalog.h). Spellings:
 *   official DeepSeek  layers.L.attn.kv_norm.weight, embed.weight, hc_head_fn
 *   transformers       layers.L.self_attn.kv_norm.weight, embed_tokens.weight
 *   save_pretrained    a hybrid: official per-layer names except that the main
 *                      kv_norm becomes attn.norm.weight, plus embed_tokens and
 *                      hc_head.hc_fn kept from transformers.
 * Any of them may carry a leading "model."; per-layer names follow
 * "layers.L.". */
#include "model/catalog.h"

#define TOP(f) CAT_TOP, offsetof(dsv4_model, f)
#define MTP(f) CAT_MTP, offsetof(dsv4_model, mtp.f)
#define HEAD(f) CAT_DRAFT_HEAD, offsetof(dsv4_model, mtp.f)
#define DSI(f) CAT_DSPARK_IN, offsetof(dsv4_model, dspark.f)
#define DSO(f) CAT_DSPARK_OUT, offsetof(dsv4_model, dspark.f)
#define LW(w, f) w, offsetof(dsv4_layer_w, f)

const cat_tensor k_catalog[] = {
    {{"embed.weight", "embed_tokens.weight"}, TOP(embed), DM_VOCAB, DM_DIM, Q_PLAIN, 0},
    {{"head.weight", "lm_head.weight"}, TOP(head), DM_VOCAB, DM_DIM, Q_DENSE, 1},
    {{"norm.weight"}, TOP(norm), DM_DIM, DM_NONE, Q_PLAIN, 1},
    {{"hc_head_fn", "hc_head.hc_fn"}, TOP(hc_head_fn), DM_HC, DM_HC_DIM, Q_PLAIN, 1},
    {{"hc_head_base", "hc_head.hc_base"}, TOP(hc_head_base), DM_HC, DM_NONE, Q_PLAIN, 0},
    {{"hc_head_scale", "hc_head.hc_scale"}, TOP(hc_head_scale), DM_1, DM_NONE, Q_PLAIN, 0},

    /* the MTP head's input fusion (FP8 in the released checkpoints, spec
     * §5.2) and the drafter's own hc head and norm; a plain decode step
     * reads none of the drafter's tensors */
    {{"e_proj.weight"}, MTP(e_proj), DM_DIM, DM_DIM, Q_DENSE, 0},
    {{"h_proj.weight"}, MTP(h_proj), DM_DIM, DM_DIM, Q_DENSE, 0},
    {{"enorm.weight"}, MTP(enorm), DM_DIM, DM_NONE, Q_PLAIN, 0},
    {{"hnorm.weight"}, MTP(hnorm), DM_DIM, DM_NONE, Q_PLAIN, 0},
    {{"norm.weight"}, HEAD(norm), DM_DIM, DM_NONE, Q_PLAIN, 0},
    {{"hc_head_fn", "hc_head.hc_fn"}, HEAD(hc_head_fn), DM_HC, DM_HC_DIM, Q_PLAIN, 0},
    {{"hc_head_base", "hc_head.hc_base"}, HEAD(hc_head_base), DM_HC, DM_NONE, Q_PLAIN, 0},
    {{"hc_head_scale", "hc_head.hc_scale"}, HEAD(hc_head_scale), DM_1, DM_NONE, Q_PLAIN, 0},

    /* DSpark (docs/DSPARK.md §3): the context fusion of stage 0 (FP8
     * main_proj in the release), the Markov head (BF16 tables) and the
     * confidence head of the last stage */
    {{"main_proj.weight"}, DSI(main_proj), DM_DIM, DM_DSPARK_CTX, Q_DENSE, 0},
    {{"main_norm.weight"}, DSI(main_norm), DM_DIM, DM_NONE, Q_PLAIN, 0},
    {{"markov_head.markov_w1.weight"}, DSO(markov_w1), DM_VOCAB, DM_MARKOV, Q_PLAIN, 0},
    {{"markov_head.markov_w2.weight"}, DSO(markov_w2), DM_VOCAB, DM_MARKOV, Q_DENSE, 0},
    {{"confidence_head.proj.weight"}, DSO(conf), DM_1, DM_CONF_IN, Q_PLAIN, 0},

    {{"attn_norm.weight", "input_layernorm.weight"}, LW(CAT_LAYER, attn_norm), DM_DIM, DM_NONE, Q_PLAIN, 1},
    {{"ffn_norm.weight", "post_attention_layernorm.weight"}, LW(CAT_LAYER, ffn_norm), DM_DIM, DM_NONE, Q_PLAIN, 1},
    {{"hc_attn_fn", "attn_hc.fn"}, LW(CAT_LAYER, hc_attn_fn), DM_MIX, DM_HC_DIM, Q_PLAIN, 1},
    {{"hc_attn_base", "attn_hc.base"}, LW(CAT_LAYER, hc_attn_base), DM_MIX, DM_NONE, Q_PLAIN, 0},
    {{"hc_attn_scale", "attn_hc.scale"}, LW(CAT_LAYER, hc_attn_scale), DM_3, DM_NONE, Q_PLAIN, 0},
    {{"hc_ffn_fn", "ffn_hc.fn"}, LW(CAT_LAYER, hc_ffn_fn), DM_MIX, DM_HC_DIM, Q_PLAIN, 1},
    {{"hc_ffn_base", "ffn_hc.base"}, LW(CAT_LAYER, hc_ffn_base), DM_MIX, DM_NONE, Q_PLAIN, 0},
    {{"hc_ffn_scale", "ffn_hc.scale"}, LW(CAT_LAYER, hc_ffn_scale), DM_3, DM_NONE, Q_PLAIN, 0},
    {{"attn.wq_a.weight", "self_attn.q_a_proj.weight"}, LW(CAT_LAYER, wq_a), DM_QLORA, DM_DIM, Q_DENSE, 1},
    {{"attn.q_norm.weight", "self_attn.q_a_norm.weight"}, LW(CAT_LAYER, q_norm), DM_QLORA, DM_NONE, Q_PLAIN, 1},
    {{"attn.wq_b.weight", "self_attn.q_b_proj.weight"}, LW(CAT_LAYER, wq_b), DM_HEADS_HD, DM_QLORA, Q_DENSE, 1},
    {{"attn.wkv.weight", "self_attn.kv_proj.weight"}, LW(CAT_LAYER, wkv), DM_HD, DM_DIM, Q_DENSE, 1},
    {{"attn.kv_norm.weight", "self_attn.kv_norm.weight", "attn.norm.weight"}, LW(CAT_LAYER, kv_norm), DM_HD,
     DM_NONE, Q_PLAIN, 1},
    {{"attn.wo_a.weight", "self_attn.o_a_proj.weight"}, LW(CAT_LAYER, wo_a), DM_OA_ROWS, DM_OA_COLS, Q_DENSE, 1},
    {{"attn.wo_b.weight", "self_attn.o_b_proj.weight"}, LW(CAT_LAYER, wo_b), DM_DIM, DM_OA_ROWS, Q_DENSE, 1},
    {{"attn.attn_sink", "self_attn.sinks"}, LW(CAT_LAYER, sinks), DM_HEADS, DM_NONE, Q_PLAIN, 0},

    {{"attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"}, LW(CAT_COMP, comp.wkv), DM_COMP_W,
     DM_DIM, Q_DENSE, 1},
    {{"attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"}, LW(CAT_COMP, comp.wgate),
     DM_COMP_W, DM_DIM, Q_DENSE, 1},
    {{"attn.compressor.ape", "self_attn.compressor.position_bias"}, LW(CAT_COMP, comp.ape), DM_RATIO, DM_COMP_W,
     Q_PLAIN, 0},
    {{"attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"}, LW(CAT_COMP, comp.norm), DM_HD,
     DM_NONE, Q_PLAIN, 1},

    {{"attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"},
     LW(CAT_CSA, idx_comp.wkv), DM_IDX_W, DM_DIM, Q_DENSE, 1},
    {{"attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"},
     LW(CAT_CSA, idx_comp.wgate), DM_IDX_W, DM_DIM, Q_DENSE, 1},
    {{"attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"}, LW(CAT_CSA, idx_comp.ape),
     DM_RATIO, DM_IDX_W, Q_PLAIN, 0},
    {{"attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"},
     LW(CAT_CSA, idx_comp.norm), DM_IDX_HD, DM_NONE, Q_PLAIN, 1},
    {{"attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"}, LW(CAT_CSA, idx_wq_b),
     DM_IDX_Q, DM_QLORA, Q_DENSE, 1},
    {{"attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"},
     LW(CAT_CSA, idx_wproj), DM_IDX_HEADS, DM_DIM, Q_DENSE, 1},

    {{"ffn.gate.weight", "mlp.gate.weight"}, LW(CAT_LAYER, gate), DM_EXPERTS, DM_DIM, Q_DENSE, 1},
    {{"ffn.gate.bias", "mlp.gate.e_score_correction_bias"}, LW(CAT_ROUTED, gate_bias), DM_EXPERTS, DM_NONE,
     Q_PLAIN, 0},
    /* transformers sizes the shared expert like one routed expert */
    {{"ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"}, LW(CAT_LAYER, sh_w1), DM_INTER,
     DM_DIM, Q_DENSE, 1},
    {{"ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"}, LW(CAT_LAYER, sh_w2), DM_DIM,
     DM_INTER, Q_DENSE, 1},
    {{"ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"}, LW(CAT_LAYER, sh_w3), DM_INTER,
     DM_DIM, Q_DENSE, 1},
};
const int k_catalog_count = (int)(sizeof k_catalog / sizeof k_catalog[0]);

int64_t catalog_dim(const dsv4_config *c, int l, int dm)
{
    int64_t hc = c->hc_mult, H = c->n_heads, hd = c->head_dim;
    switch (dm) {
    case DM_1: return 1;
    case DM_3: return 3;
    case DM_VOCAB: return c->vocab;
    case DM_DIM: return c->dim;
    case DM_HC: return hc;
    case DM_HC_DIM: return hc * c->dim;
    case DM_MIX: return (2 + hc) * hc;
    case DM_QLORA: return c->q_lora;
    case DM_HD: return hd;
    case DM_HEADS: return H;
    case DM_HEADS_HD: return H * hd;
    case DM_OA_ROWS: return (int64_t)c->o_groups * c->o_lora;
    case DM_OA_COLS: return H * hd / c->o_groups;
    case DM_COMP_W: return config_comp_width(c, l, 0);
    case DM_RATIO: return config_ratio(c, l);
    case DM_IDX_HD: return c->idx_head_dim;
    case DM_IDX_W: return config_comp_width(c, l, 1);
    case DM_IDX_Q: return (int64_t)c->idx_heads * c->idx_head_dim;
    case DM_IDX_HEADS: return c->idx_heads;
    case DM_EXPERTS: return c->n_experts;
    case DM_INTER: return c->moe_inter;
    case DM_DSPARK_CTX: return (int64_t)c->dspark_n_targets * c->dim;
    case DM_MARKOV: return c->dspark_rank;
    case DM_CONF_IN: return (int64_t)c->dim + c->dspark_rank;
    default: return 0;
    }
}

int catalog_per_layer(const cat_tensor *t) { return t->where >= CAT_LAYER; }

int catalog_present(const dsv4_config *c, int l, const cat_tensor *t)
{
    switch (t->where) {
    case CAT_COMP: return config_kind(c, l) != ATTN_SWA;
    case CAT_CSA: return config_kind(c, l) == ATTN_CSA;
    case CAT_ROUTED: return !(l < c->n_layers && c->hash_layer[l]); /* the MTP block routes by score */
    default: return 1;
    }
}

dsv4_mat *catalog_slot(dsv4_model *m, int l, const cat_tensor *t)
{
    char *base = catalog_per_layer(t) ? (char *)&m->layers[l] : (char *)m;
    return (dsv4_mat *)(base + t->off);
}

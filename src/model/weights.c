/* Binding checkpoint tensors to the model's weight slots.
 *
 * Three spellings exist in the wild and each tensor is looked up under all of
 * them, with or without a leading "model.":
 *   official DeepSeek  layers.L.attn.kv_norm.weight, embed.weight, hc_head_fn
 *   transformers       layers.L.self_attn.kv_norm.weight, embed_tokens.weight
 *   save_pretrained    a hybrid: official per-layer names except that the main
 *                      kv_norm becomes attn.norm.weight, plus embed_tokens and
 *                      hc_head.hc_fn kept from transformers.
 * Routed experts come per expert (ffn.experts.E.w1.weight) or merged
 * (mlp.experts.gate_up_proj [E, 2I, D], mlp.experts.down_proj [E, D, I]). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/model.h"

#define MAX_ALT 4

typedef struct {
    dsv4_model *m;
    unsigned char *used; /* per archive tensor: bound to a slot */
} binder;

static int tensor_index(const st_archive *a, const st_tensor *t)
{
    return (int)(t - st_get(a, 0));
}

/* Looks up `names` (NULL-terminated alternatives) under prefix `pre`. */
static const st_tensor *lookup(binder *b, const char *pre, const char *const *names, char *tried, size_t tried_len)
{
    char full[512];
    for (int i = 0; names[i]; i++) {
        for (int mp = 0; mp < 2; mp++) {
            snprintf(full, sizeof full, "%s%s%s", mp ? "model." : "", pre, names[i]);
            const st_tensor *t = st_find(b->m->st, full);
            if (t) return t;
        }
    }
    snprintf(tried, tried_len, "%s%s", pre, names[0]);
    return NULL;
}

static int is_float(dsv4_dtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16; }

/* Bind one float tensor with the exact expected shape (d1 = 0 for 1-D). */
static dsv4_status bind(binder *b, dsv4_mat *out, const char *pre, const char *const *names,
                        int64_t d0, int64_t d1)
{
    char tried[512];
    const st_tensor *t = lookup(b, pre, names, tried, sizeof tried);
    if (!t) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s'", tried);
    if (t->dtype == DT_F8_E4M3 || t->dtype == DT_F8_E8M0 || t->dtype == DT_I8 || t->dtype == DT_U8)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED,
                         "checkpoint: tensor '%s' is %s: FP8/FP4 weights are not supported yet "
                         "(use a BF16/F32 checkpoint)", t->name, dtype_name(t->dtype));
    if (!is_float(t->dtype))
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has dtype %s, expected F32/BF16/F16",
                         t->name, dtype_name(t->dtype));
    int want_nd = d1 ? 2 : 1;
    int ok = t->ndim == want_nd && t->shape[0] == d0 && (!d1 || t->shape[1] == d1);
    if (!ok) {
        char got[128] = "", *p = got;
        for (int i = 0; i < t->ndim && p < got + 100; i++)
            p += snprintf(p, (size_t)(got + sizeof got - p), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
        if (d1)
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has shape [%s], config expects [%lld, %lld]",
                             t->name, got, (long long)d0, (long long)d1);
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has shape [%s], config expects [%lld]",
                         t->name, got, (long long)d0);
    }
    if ((uintptr_t)t->data % (uintptr_t)dtype_size(t->dtype))
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' data is not aligned to its %d-byte elements",
                         t->name, dtype_size(t->dtype));
    b->used[tensor_index(b->m->st, t)] = 1;
    out->dtype = t->dtype;
    out->rows = d1 ? d0 : 1;
    out->cols = d1 ? d1 : d0;
    out->data = t->data;
    return DSV4_OK;
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})
#define TRY(x) do { dsv4_status st_ = (x); if (st_) return st_; } while (0)

static dsv4_status bind_comp(binder *b, dsv4_comp_w *c, const char *pre, int indexer, int width,
                             int ratio, int overlap)
{
    const dsv4_config *cf = &b->m->cfg;
    int cw = width * (overlap ? 2 : 1);
    if (indexer) {
        TRY(bind(b, &c->wkv, pre, NAMES("attn.indexer.compressor.wkv.weight", "self_attn.compressor.indexer.kv_proj.weight"), cw, cf->dim));
        TRY(bind(b, &c->wgate, pre, NAMES("attn.indexer.compressor.wgate.weight", "self_attn.compressor.indexer.gate_proj.weight"), cw, cf->dim));
        TRY(bind(b, &c->ape, pre, NAMES("attn.indexer.compressor.ape", "self_attn.compressor.indexer.position_bias"), ratio, cw));
        TRY(bind(b, &c->norm, pre, NAMES("attn.indexer.compressor.norm.weight", "self_attn.compressor.indexer.kv_norm.weight"), width, 0));
    } else {
        TRY(bind(b, &c->wkv, pre, NAMES("attn.compressor.wkv.weight", "self_attn.compressor.kv_proj.weight"), cw, cf->dim));
        TRY(bind(b, &c->wgate, pre, NAMES("attn.compressor.wgate.weight", "self_attn.compressor.gate_proj.weight"), cw, cf->dim));
        TRY(bind(b, &c->ape, pre, NAMES("attn.compressor.ape", "self_attn.compressor.position_bias"), ratio, cw));
        TRY(bind(b, &c->norm, pre, NAMES("attn.compressor.norm.weight", "self_attn.compressor.kv_norm.weight"), width, 0));
    }
    return DSV4_OK;
}

/* tid2eid: integer [vocab, n_active]; converted once to int32 after checking
 * every entry is a valid expert id (a bad table must not index out of range). */
static dsv4_status bind_tid2eid(binder *b, dsv4_layer_w *lw, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    char tried[512];
    const st_tensor *t = lookup(b, pre, NAMES("ffn.gate.tid2eid", "mlp.gate.tid2eid"), tried, sizeof tried);
    if (!t) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s' (hash-routed layer)", tried);
    if (t->dtype != DT_I64 && t->dtype != DT_I32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has dtype %s, expected I64 or I32",
                         t->name, dtype_name(t->dtype));
    if (t->ndim != 2 || t->shape[0] != cf->vocab || t->shape[1] != cf->n_active)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' must have shape [%d, %d]", t->name,
                         cf->vocab, cf->n_active);
    size_t n = (size_t)cf->vocab * (size_t)cf->n_active;
    int32_t *tab = malloc(n * sizeof *tab);
    if (!tab) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for '%s'", t->name);
    for (size_t i = 0; i < n; i++) {
        int64_t v;
        if (t->dtype == DT_I64) memcpy(&v, (const char *)t->data + 8 * i, 8);
        else { int32_t v32; memcpy(&v32, (const char *)t->data + 4 * i, 4); v = v32; }
        if (v < 0 || v >= cf->n_experts) {
            free(tab);
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s'[%zu][%zu] = %lld is not an expert id (0..%d)",
                             t->name, i / (size_t)cf->n_active, i % (size_t)cf->n_active, (long long)v,
                             cf->n_experts - 1);
        }
        tab[i] = (int32_t)v;
    }
    b->used[tensor_index(b->m->st, t)] = 1;
    lw->tid2eid = tab;
    return DSV4_OK;
}

/* Merged 3-D expert tensors, viewed as 2-D [E·rows, cols]. */
static const st_tensor *find_merged(binder *b, const char *pre, const char *name, int64_t e, int64_t r, int64_t c,
                                    dsv4_status *st)
{
    char tried[512];
    const st_tensor *t = lookup(b, pre, (const char *const[]){name, NULL}, tried, sizeof tried);
    *st = DSV4_OK;
    if (!t) return NULL;
    if (!is_float(t->dtype)) {
        *st = dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: tensor '%s' is %s: only F32/BF16/F16 experts are supported yet",
                        t->name, dtype_name(t->dtype));
        return NULL;
    }
    if (t->ndim != 3 || t->shape[0] != e || t->shape[1] != r || t->shape[2] != c) {
        *st = dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' must have shape [%lld, %lld, %lld]", t->name,
                        (long long)e, (long long)r, (long long)c);
        return NULL;
    }
    b->used[tensor_index(b->m->st, t)] = 1;
    return t;
}

static dsv4_status bind_experts(binder *b, dsv4_layer_w *lw, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    int E = cf->n_experts, I = cf->moe_inter, D = cf->dim;
    lw->w1 = calloc((size_t)E, sizeof *lw->w1);
    lw->w2 = calloc((size_t)E, sizeof *lw->w2);
    lw->w3 = calloc((size_t)E, sizeof *lw->w3);
    if (!lw->w1 || !lw->w2 || !lw->w3) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory binding experts");
    dsv4_status st;
    const st_tensor *gu = find_merged(b, pre, "mlp.experts.gate_up_proj", E, 2 * I, D, &st);
    if (st) return st;
    if (gu) {
        const st_tensor *dn = find_merged(b, pre, "mlp.experts.down_proj", E, D, I, &st);
        if (st) return st;
        if (!dn) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: '%smlp.experts.gate_up_proj' without down_proj", pre);
        dsv4_mat all_gu = {gu->dtype, (int64_t)E * 2 * I, D, gu->data};
        dsv4_mat all_dn = {dn->dtype, (int64_t)E * D, I, dn->data};
        for (int e = 0; e < E; e++) {
            lw->w1[e] = mat_rows(&all_gu, (int64_t)e * 2 * I, I);
            lw->w3[e] = mat_rows(&all_gu, (int64_t)e * 2 * I + I, I);
            lw->w2[e] = mat_rows(&all_dn, (int64_t)e * D, D);
        }
        return DSV4_OK;
    }
    char n1[96], n2[96], n3[96];
    for (int e = 0; e < E; e++) {
        snprintf(n1, sizeof n1, "ffn.experts.%d.w1.weight", e);
        snprintf(n2, sizeof n2, "ffn.experts.%d.w2.weight", e);
        snprintf(n3, sizeof n3, "ffn.experts.%d.w3.weight", e);
        TRY(bind(b, &lw->w1[e], pre, NAMES(n1), I, D));
        TRY(bind(b, &lw->w2[e], pre, NAMES(n2), D, I));
        TRY(bind(b, &lw->w3[e], pre, NAMES(n3), I, D));
    }
    return DSV4_OK;
}

/* Layer l's block under prefix pre ("layers.L.", or "mtp.0." for the MTP
 * block, l = n_layers: its attention kind from the config, routed MoE). */
static dsv4_status bind_layer(binder *b, int l, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    dsv4_layer_w *lw = &b->m->layers[l];
    int D = cf->dim, H = cf->n_heads, hd = cf->head_dim, hc = cf->hc_mult, mix = (2 + hc) * hc;
    TRY(bind(b, &lw->attn_norm, pre, NAMES("attn_norm.weight", "input_layernorm.weight"), D, 0));
    TRY(bind(b, &lw->ffn_norm, pre, NAMES("ffn_norm.weight", "post_attention_layernorm.weight"), D, 0));
    TRY(bind(b, &lw->hc_attn_fn, pre, NAMES("hc_attn_fn", "attn_hc.fn"), mix, (int64_t)hc * D));
    TRY(bind(b, &lw->hc_attn_base, pre, NAMES("hc_attn_base", "attn_hc.base"), mix, 0));
    TRY(bind(b, &lw->hc_attn_scale, pre, NAMES("hc_attn_scale", "attn_hc.scale"), 3, 0));
    TRY(bind(b, &lw->hc_ffn_fn, pre, NAMES("hc_ffn_fn", "ffn_hc.fn"), mix, (int64_t)hc * D));
    TRY(bind(b, &lw->hc_ffn_base, pre, NAMES("hc_ffn_base", "ffn_hc.base"), mix, 0));
    TRY(bind(b, &lw->hc_ffn_scale, pre, NAMES("hc_ffn_scale", "ffn_hc.scale"), 3, 0));
    TRY(bind(b, &lw->wq_a, pre, NAMES("attn.wq_a.weight", "self_attn.q_a_proj.weight"), cf->q_lora, D));
    TRY(bind(b, &lw->q_norm, pre, NAMES("attn.q_norm.weight", "self_attn.q_a_norm.weight"), cf->q_lora, 0));
    TRY(bind(b, &lw->wq_b, pre, NAMES("attn.wq_b.weight", "self_attn.q_b_proj.weight"), (int64_t)H * hd, cf->q_lora));
    TRY(bind(b, &lw->wkv, pre, NAMES("attn.wkv.weight", "self_attn.kv_proj.weight"), hd, D));
    TRY(bind(b, &lw->kv_norm, pre, NAMES("attn.kv_norm.weight", "attn.norm.weight", "self_attn.kv_norm.weight"), hd, 0));
    TRY(bind(b, &lw->wo_a, pre, NAMES("attn.wo_a.weight", "self_attn.o_a_proj.weight"),
             (int64_t)cf->o_groups * cf->o_lora, (int64_t)H * hd / cf->o_groups));
    TRY(bind(b, &lw->wo_b, pre, NAMES("attn.wo_b.weight", "self_attn.o_b_proj.weight"), D,
             (int64_t)cf->o_groups * cf->o_lora));
    TRY(bind(b, &lw->sinks, pre, NAMES("attn.attn_sink", "self_attn.sinks"), H, 0));
    int kind = config_kind(cf, l);
    if (kind != ATTN_SWA)
        TRY(bind_comp(b, &lw->comp, pre, 0, hd, config_ratio(cf, l), kind == ATTN_CSA));
    if (kind == ATTN_CSA) {
        TRY(bind_comp(b, &lw->idx_comp, pre, 1, cf->idx_head_dim, config_ratio(cf, l), 1));
        TRY(bind(b, &lw->idx_wq_b, pre, NAMES("attn.indexer.wq_b.weight", "self_attn.compressor.indexer.q_b_proj.weight"),
                 (int64_t)cf->idx_heads * cf->idx_head_dim, cf->q_lora));
        TRY(bind(b, &lw->idx_wproj, pre,
                 NAMES("attn.indexer.weights_proj.weight", "self_attn.compressor.indexer.scorer.weights_proj.weight"),
                 cf->idx_heads, D));
    }
    TRY(bind(b, &lw->gate, pre, NAMES("ffn.gate.weight", "mlp.gate.weight"), cf->n_experts, D));
    if (l < cf->n_layers && cf->hash_layer[l])
        TRY(bind_tid2eid(b, lw, pre));
    else
        TRY(bind(b, &lw->gate_bias, pre, NAMES("ffn.gate.bias", "mlp.gate.e_score_correction_bias"), cf->n_experts, 0));
    TRY(bind_experts(b, lw, pre));
    int I = cf->moe_inter; /* transformers sizes the shared expert like one routed expert */
    TRY(bind(b, &lw->sh_w1, pre, NAMES("ffn.shared_experts.w1.weight", "mlp.shared_experts.gate_proj.weight"), I, D));
    TRY(bind(b, &lw->sh_w2, pre, NAMES("ffn.shared_experts.w2.weight", "mlp.shared_experts.down_proj.weight"), D, I));
    TRY(bind(b, &lw->sh_w3, pre, NAMES("ffn.shared_experts.w3.weight", "mlp.shared_experts.up_proj.weight"), I, D));
    return DSV4_OK;
}

/* The MTP head (spec §5.2), when the checkpoint has mtp.0.e_proj: all of
 * it must then be there. */
static dsv4_status bind_mtp(binder *b)
{
    dsv4_model *m = b->m;
    const dsv4_config *cf = &m->cfg;
    char tried[512];
    if (!lookup(b, "mtp.0.", NAMES("e_proj.weight"), tried, sizeof tried)) return DSV4_OK;
    if (cf->mtp_attn_kind != ATTN_SWA)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: an MTP layer with compressed attention is not supported "
                         "(compress_ratios gives it ratio %d)", config_ratio(cf, cf->n_layers));
    int D = cf->dim, hc = cf->hc_mult;
    dsv4_mtp_w *w = &m->mtp;
    const char *p = "mtp.0.";
    TRY(bind(b, &w->e_proj, p, NAMES("e_proj.weight"), D, D));
    TRY(bind(b, &w->h_proj, p, NAMES("h_proj.weight"), D, D));
    TRY(bind(b, &w->enorm, p, NAMES("enorm.weight"), D, 0));
    TRY(bind(b, &w->hnorm, p, NAMES("hnorm.weight"), D, 0));
    TRY(bind(b, &w->norm, p, NAMES("norm.weight"), D, 0));
    TRY(bind(b, &w->hc_head_fn, p, NAMES("hc_head_fn", "hc_head.hc_fn"), hc, (int64_t)hc * D));
    TRY(bind(b, &w->hc_head_base, p, NAMES("hc_head_base", "hc_head.hc_base"), hc, 0));
    TRY(bind(b, &w->hc_head_scale, p, NAMES("hc_head_scale", "hc_head.hc_scale"), 1, 0));
    TRY(bind_layer(b, cf->n_layers, p));
    m->has_mtp = 1;
    return DSV4_OK;
}

/* Names we know but do not bind: deeper draft heads (mtp.1.* ...). */
static int is_known_unbound(const char *name)
{
    if (!strncmp(name, "model.", 6)) name += 6;
    return !strncmp(name, "mtp.", 4);
}

static dsv4_status collect_unknown(binder *b)
{
    dsv4_model *m = b->m;
    int n = st_count(m->st);
    for (int i = 0; i < n; i++) {
        if (b->used[i]) continue;
        const char *name = st_get(m->st, i)->name;
        if (is_known_unbound(name)) { m->n_mtp_tensors++; continue; }
        char **grown = realloc(m->unknown, (size_t)(m->n_unknown + 1) * sizeof *grown);
        if (!grown) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        m->unknown = grown;
        if (!(m->unknown[m->n_unknown] = strdup(name))) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        m->n_unknown++;
    }
    return DSV4_OK;
}

dsv4_status weights_bind(dsv4_model *m)
{
    const dsv4_config *cf = &m->cfg;
    int n = st_count(m->st);
    binder b = {m, calloc((size_t)n + 1, 1)};
    m->layers = calloc((size_t)cf->n_layers + 1, sizeof *m->layers);
    if (!b.used || !m->layers) { free(b.used); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); }
    dsv4_status st;
    int hc = cf->hc_mult;
    if ((st = bind(&b, &m->embed, "", NAMES("embed.weight", "embed_tokens.weight"), cf->vocab, cf->dim)) ||
        (st = bind(&b, &m->head, "", NAMES("head.weight", "lm_head.weight"), cf->vocab, cf->dim)) ||
        (st = bind(&b, &m->norm, "", NAMES("norm.weight"), cf->dim, 0)) ||
        (st = bind(&b, &m->hc_head_fn, "", NAMES("hc_head_fn", "hc_head.hc_fn"), hc, (int64_t)hc * cf->dim)) ||
        (st = bind(&b, &m->hc_head_base, "", NAMES("hc_head_base", "hc_head.hc_base"), hc, 0)) ||
        (st = bind(&b, &m->hc_head_scale, "", NAMES("hc_head_scale", "hc_head.hc_scale"), 1, 0))) {
        free(b.used);
        return st;
    }
    for (int l = 0; l < cf->n_layers; l++) {
        char pre[64];
        snprintf(pre, sizeof pre, "layers.%d.", l);
        if ((st = bind_layer(&b, l, pre))) { free(b.used); return st; }
    }
    if ((st = bind_mtp(&b))) { free(b.used); return st; }
    st = collect_unknown(&b);
    free(b.used);
    return st;
}

/* Hands every bound tensor to the backend (CUDA copies it to the device
 * once) and moves the validated tid2eid tables into backend memory. */
typedef struct {
    dsv4_backend *b;
    dsv4_progress_fn fn;
    void *user;
    uint64_t done, total, last;
} adopter;

/* Adopt one tensor and report progress about every 1% of the bytes. */
static dsv4_status adopt(adopter *a, dsv4_mat *w)
{
    if (!w->data) return DSV4_OK;
    TRY(a->b->ops->adopt_weight(a->b, w));
    a->done += (uint64_t)w->rows * (uint64_t)w->cols * (uint64_t)dtype_size(w->dtype);
    if (a->fn && a->done - a->last >= a->total / 100) {
        a->fn(a->user, a->done < a->total ? a->done : a->total, a->total);
        a->last = a->done;
    }
    return DSV4_OK;
}

dsv4_status weights_adopt(dsv4_model *m, dsv4_progress_fn progress, void *user)
{
    dsv4_backend *b = m->be;
    const dsv4_config *cf = &m->cfg;
    adopter ad = {b, progress, user, 0, st_mapped_bytes(m->st), 0};
    dsv4_mat *top[] = {&m->embed, &m->head, &m->norm, &m->hc_head_fn, &m->hc_head_base, &m->hc_head_scale};
    for (size_t i = 0; i < sizeof top / sizeof top[0]; i++) TRY(adopt(&ad, top[i]));
    dsv4_mtp_w *mw = &m->mtp;
    dsv4_mat *mtp[] = {&mw->e_proj, &mw->h_proj, &mw->enorm, &mw->hnorm, &mw->norm, &mw->hc_head_fn,
                       &mw->hc_head_base, &mw->hc_head_scale};
    for (size_t i = 0; i < sizeof mtp / sizeof mtp[0]; i++) TRY(adopt(&ad, mtp[i]));
    for (int l = 0; l < cf->n_layers + m->has_mtp; l++) {
        dsv4_layer_w *w = &m->layers[l];
        dsv4_mat *mats[] = {&w->attn_norm, &w->ffn_norm, &w->hc_attn_fn, &w->hc_attn_base, &w->hc_attn_scale,
                            &w->hc_ffn_fn, &w->hc_ffn_base, &w->hc_ffn_scale, &w->wq_a, &w->q_norm, &w->wq_b,
                            &w->wkv, &w->kv_norm, &w->wo_a, &w->wo_b, &w->sinks, &w->comp.wkv, &w->comp.wgate,
                            &w->comp.ape, &w->comp.norm, &w->idx_comp.wkv, &w->idx_comp.wgate, &w->idx_comp.ape,
                            &w->idx_comp.norm, &w->idx_wq_b, &w->idx_wproj, &w->gate, &w->gate_bias, &w->sh_w1,
                            &w->sh_w2, &w->sh_w3};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) TRY(adopt(&ad, mats[i]));
        for (int e = 0; e < cf->n_experts; e++) {
            TRY(adopt(&ad, &w->w1[e]));
            TRY(adopt(&ad, &w->w2[e]));
            TRY(adopt(&ad, &w->w3[e]));
        }
        if (w->tid2eid) {
            size_t bytes = (size_t)cf->vocab * (size_t)cf->n_active * sizeof(int32_t);
            int32_t *dev = b->ops->alloc(b, bytes);
            if (!dev) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the tid2eid table of layer %d", l);
            b->ops->upload(b, dev, w->tid2eid, bytes);
            free((void *)w->tid2eid);
            w->tid2eid = dev;
            w->tid2eid_on_backend = 1;
        }
    }
    if (ad.fn) ad.fn(ad.user, ad.total, ad.total);
    return DSV4_OK;
}

void weights_free(dsv4_model *m)
{
    if (m->layers) {
        for (int l = 0; l < m->cfg.n_layers + 1; l++) {
            dsv4_layer_w *w = &m->layers[l];
            free(w->w1);
            free(w->w2);
            free(w->w3);
            if (w->tid2eid_on_backend) m->be->ops->free(m->be, (void *)w->tid2eid);
            else free((void *)w->tid2eid);
        }
        free(m->layers);
        m->layers = NULL;
    }
    for (int i = 0; i < m->n_unknown; i++) free(m->unknown[i]);
    free(m->unknown);
    m->unknown = NULL;
    m->n_unknown = 0;
}

/* Binding checkpoint tensors to the model's weight slots: every tensor of
 * the catalog (model/catalog.c: names, where, shapes, accepted formats) is
 * looked up under each of its spellings, with or without a leading "model.":
 *   official DeepSeek  layers.L.attn.kv_norm.weight, embed.weight, hc_head_fn
 *   transformers       layers.L.self_attn.kv_norm.weight, embed_tokens.weight
 *   save_pretrained    a hybrid: official per-layer names except that the main
 *                      kv_norm becomes attn.norm.weight, plus embed_tokens and
 *                      hc_head.hc_fn kept from transformers.
 *   GGUF (llama.cpp)   blk.L.attn_kv_a_norm.weight, token_embd.weight: the
 *                      official names translated by one table (names_gguf.c)
 * Routed experts come per expert (ffn.experts.E.w1.weight) or merged
 * (mlp.experts.gate_up_proj [E, 2I, D], mlp.experts.down_proj [E, D, I];
 * GGUF: ffn_{gate,up}_exps [E, I, D], ffn_down_exps [E, D, I]); hash layers
 * carry tid2eid. GGUF matrices may be any block format the CPU decodes
 * (base/wformat.h); shapes are row-major in every container. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/catalog.h"
#include "model/model.h"
#include "model/names_gguf.h"

#define TRY(x) do { dsv4_status st_ = (x); if (st_) return st_; } while (0)

typedef struct {
    dsv4_model *m;
    tensor_source src;
    unsigned char *used; /* per source tensor: bound to a slot */
} binder;

/* Looks up `names` (NULL-terminated alternatives, official spelling first)
 * under prefix `pre` ("", "layers.L." or "mtp.0."); a GGUF source is
 * searched under the GGUF spelling of the official name. Returns the
 * tensor's index or -1 with the name tried in `tried`. */
static int lookup(binder *b, const char *pre, const char *const *names, src_tensor *t, char *tried, size_t tried_len)
{
    char full[512];
    if (b->src.gg) {
        if (!gguf_spelling(pre, names[0], b->m->cfg.n_layers, full, sizeof full)) {
            snprintf(tried, tried_len, "%s%s (no GGUF spelling)", pre, names[0]);
            return -1;
        }
        int i = tsrc_find(&b->src, full, t);
        if (i < 0) snprintf(tried, tried_len, "%s", full);
        return i;
    }
    for (int i = 0; names[i]; i++) {
        for (int mp = 0; mp < 2; mp++) {
            snprintf(full, sizeof full, "%s%s%s", mp ? "model." : "", pre, names[i]);
            int k = tsrc_find(&b->src, full, t);
            if (k >= 0) return k;
        }
    }
    snprintf(tried, tried_len, "%s%s", pre, names[0]);
    return -1;
}

static int is_float(dsv4_dtype d) { return d == DT_F32 || d == DT_BF16 || d == DT_F16; }

/* A slot's Q_* (catalog.h) says which formats it accepts: Q_DENSE FP8 with
 * its block grid when config.json has a quantization_config (wo_a occurs
 * both ways), Q_EXPERT MXFP4 or FP8 per expert_dtype. The tensor's own dtype
 * says which one a checkpoint chose. */

static dsv4_status shape_error(const src_tensor *t, int64_t d0, int64_t d1)
{
    char got[128] = "", *p = got;
    for (int i = 0; i < t->ndim && p < got + 100; i++)
        p += snprintf(p, (size_t)(got + sizeof got - p), "%s%lld", i ? ", " : "", (long long)t->shape[i]);
    if (d1)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has shape [%s], config expects [%lld, %lld]",
                         t->name, got, (long long)d0, (long long)d1);
    return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has shape [%s], config expects [%lld]",
                     t->name, got, (long long)d0);
}

static int has_shape(const src_tensor *t, int64_t d0, int64_t d1)
{
    return t->ndim == (d1 ? 2 : 1) && t->shape[0] == d0 && (!d1 || t->shape[1] == d1);
}

/* Every scale must be a finite power of two 2^k with k in [−127, max_exp],
 * so that every decoded weight (code · scale) is an exact, finite fp32. */
static dsv4_status check_scales(const src_tensor *s, int max_exp)
{
    int64_t n = s->shape[0] * s->shape[1], cols = s->shape[1];
    for (int64_t i = 0; i < n; i++) {
        int k;
        if (s->dtype == DT_F8_E8M0) {
            int e = ((const uint8_t *)s->data)[i];
            if (e == 255)
                return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s'[%lld][%lld] is NaN (E8M0 byte 255)",
                                 s->name, (long long)(i / cols), (long long)(i % cols));
            k = e - 127;
        } else {
            float f;
            memcpy(&f, (const char *)s->data + 4 * i, 4);
            if (!isfinite(f) || !(f > 0) || frexpf(f, &k) != 0.5f)
                return dsv4_fail(DSV4_ERR_FORMAT,
                                 "checkpoint: tensor '%s'[%lld][%lld] = %g is not a positive power of two",
                                 s->name, (long long)(i / cols), (long long)(i % cols), (double)f);
            k -= 1;
        }
        if (k < -127 || k > max_exp)
            return dsv4_fail(DSV4_ERR_FORMAT,
                             "checkpoint: tensor '%s'[%lld][%lld] = 2^%d is out of range (2^-127 .. 2^%d)",
                             s->name, (long long)(i / cols), (long long)(i % cols), k, max_exp);
    }
    return DSV4_OK;
}

/* The scale grid of quantized weight w: "X.scale" (official) or
 * "X.weight_scale_inv" (transformers) next to "X.weight", with exactly
 * [sr, sc] elements of F8_E8M0 (or F32 powers of two, as Flash-Base ships). */
static dsv4_status bind_scale(binder *b, const src_tensor *w, dsv4_mat *out, int64_t sr, int64_t sc, int max_exp)
{
    size_t n = strlen(w->name);
    if (n < 7 || strcmp(w->name + n - 7, ".weight") != 0)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: quantized tensor '%s' is not named X.weight", w->name);
    char name[600];
    src_tensor ss, *s = &ss;
    int idx = -1;
    const char *const sfx[] = {".scale", ".weight_scale_inv"};
    for (int i = 0; i < 2 && idx < 0; i++) {
        snprintf(name, sizeof name, "%.*s%s", (int)(n - 7), w->name, sfx[i]);
        idx = tsrc_find(&b->src, name, s);
    }
    if (idx < 0)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is %s but its scale '%.*s.scale' is missing",
                         w->name, dtype_name(w->dtype), (int)(n - 7), w->name);
    if (s->dtype != DT_F8_E8M0 && s->dtype != DT_F32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: scale tensor '%s' has dtype %s, expected F8_E8M0 or F32",
                         s->name, dtype_name(s->dtype));
    if (!has_shape(s, sr, sc)) return shape_error(s, sr, sc);
    TRY(check_scales(s, max_exp));
    b->used[idx] = 1;
    out->scale = s->data;
    out->scale_dtype = s->dtype;
    out->scale_rows = sr;
    out->scale_cols = sc;
    return DSV4_OK;
}

/* FP8 e4m3 [d0, d1] with blocks from quantization_config. */
static dsv4_status bind_fp8(binder *b, const src_tensor *t, dsv4_mat *out, int64_t d0, int64_t d1)
{
    const dsv4_config *cf = &b->m->cfg;
    if (cf->weight_format != WFMT_FP8)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is F8_E4M3 but config.json has no "
                         "quantization_config", t->name);
    if (!has_shape(t, d0, d1)) return shape_error(t, d0, d1);
    *out = (dsv4_mat){.dtype = DT_F8_E4M3, .rows = d0, .cols = d1, .data = t->data, .fmt = WF_FP8_E4M3,
                      .blk_r = cf->quant_blk_r, .blk_c = cf->quant_blk_c};
    /* 448 < 2^9: every value stays below 2^DSV4_MAX_WEIGHT_EXP */
    return bind_scale(b, t, out, (d0 + cf->quant_blk_r - 1) / cf->quant_blk_r,
                      (d1 + cf->quant_blk_c - 1) / cf->quant_blk_c, DSV4_MAX_WEIGHT_EXP - 9);
}

/* MXFP4 [d0, d1]: I8/U8 [d0, d1/2] (two E2M1 codes per byte) and E8M0 [d0, d1/32]. */
static dsv4_status bind_mxfp4(binder *b, const src_tensor *t, dsv4_mat *out, int64_t d0, int64_t d1)
{
    if (d1 % 32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s': MXFP4 needs a row length that is a multiple "
                         "of 32, config gives %lld", t->name, (long long)d1);
    if (!has_shape(t, d0, d1 / 2)) return shape_error(t, d0, d1 / 2);
    *out = (dsv4_mat){.dtype = t->dtype, .rows = d0, .cols = d1, .data = t->data, .fmt = WF_MXFP4,
                      .blk_r = 1, .blk_c = 32};
    /* 6 < 2^3: every value stays below 2^DSV4_MAX_WEIGHT_EXP */
    return bind_scale(b, t, out, d0, d1 / 32, DSV4_MAX_WEIGHT_EXP - 3);
}

/* The view of a bound tensor as [rows][cols] in its format (plain or a GGUF
 * block format). */
static dsv4_mat view_of(const src_tensor *t, int64_t rows, int64_t cols)
{
    if (is_float(t->dtype)) return wmat_plain(t->dtype, rows, cols, t->data);
    return (dsv4_mat){.dtype = DT_U8, .rows = rows, .cols = cols, .data = t->data, .fmt = (dsv4_wformat)t->fmt};
}

/* A GGUF type that is no weight format this build decodes. */
static dsv4_status unsupported_gguf_type(const src_tensor *t)
{
    return dsv4_fail(DSV4_ERR_UNSUPPORTED,
                     "checkpoint: tensor '%s' is %s: this GGUF type is not supported (F32, F16, BF16, Q8_0, Q2_K..Q6_K, "
                     "IQ4_XS, IQ3_XXS, IQ3_S, IQ2_XXS, IQ2_S, MXFP4 are)", t->name, t->type);
}

/* The scales inside a GGUF block tensor viewed as [rows][cols] (a scan of the
 * mapped file's scale fields, once at load): every one finite and in the
 * range whose values stay below 2^DSV4_MAX_WEIGHT_EXP (ggml_check_blocks). */
static dsv4_status check_gguf_blocks(const src_tensor *t, int64_t rows, int64_t cols)
{
    if (is_float(t->dtype)) return DSV4_OK;
    char why[96];
    int64_t per_row = cols / wformat_info((dsv4_wformat)t->fmt)->block_elems;
    int64_t bad = ggml_check_blocks(wformat_ggml_type((dsv4_wformat)t->fmt), t->data, rows * per_row, why, sizeof why);
    if (bad < 0) return DSV4_OK;
    return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' row %lld block %lld: %s", t->name,
                     (long long)(bad / per_row), (long long)(bad % per_row), why);
}

/* A GGUF tensor: float types anywhere, block formats for matrices (every
 * slot reads through the row decoder, and GGUF blocks carry their scales). */
static dsv4_status bind_gguf(binder *b, int idx, const src_tensor *t, dsv4_mat *out, int64_t d0, int64_t d1)
{
    if (t->fmt < 0) return unsupported_gguf_type(t);
    if (!is_float(t->dtype) && !d1)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is %s, expected F32/F16/BF16 for a vector",
                         t->name, t->type);
    if (!has_shape(t, d0, d1)) return shape_error(t, d0, d1);
    TRY(check_gguf_blocks(t, d0, d1));
    b->used[idx] = 1;
    *out = view_of(t, d1 ? d0 : 1, d1 ? d1 : d0);
    return DSV4_OK;
}

/* Bind one tensor with the exact expected shape (d1 = 0 for 1-D) in a format
 * the slot accepts (q: Q_*). */
static dsv4_status bind_q(binder *b, dsv4_mat *out, const char *pre, const char *const *names, int64_t d0,
                          int64_t d1, int q)
{
    char tried[512];
    const dsv4_config *cf = &b->m->cfg;
    src_tensor tt, *t = &tt;
    int idx = lookup(b, pre, names, t, tried, sizeof tried);
    if (idx < 0) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s'", tried);
    if (b->src.gg) return bind_gguf(b, idx, t, out, d0, d1);
    int quant = t->dtype == DT_F8_E4M3 || t->dtype == DT_I8 || t->dtype == DT_U8;
    if (quant && (q == Q_PLAIN || !d1))
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is %s; this tensor must be F32/BF16/F16",
                         t->name, dtype_name(t->dtype));
    if (t->dtype == DT_F8_E4M3) {
        if (q == Q_EXPERT && cf->expert_format == WFMT_FP4)
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: routed expert '%s' is F8_E4M3 but config.json says "
                             "expert_dtype fp4", t->name);
        TRY(bind_fp8(b, t, out, d0, d1));
    } else if (t->dtype == DT_I8 || t->dtype == DT_U8) {
        if (q != Q_EXPERT || cf->expert_format != WFMT_FP4)
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is %s (FP4) but %s", t->name,
                             dtype_name(t->dtype), q != Q_EXPERT ? "only routed experts may be FP4"
                                                                 : "config.json does not say expert_dtype fp4");
        TRY(bind_mxfp4(b, t, out, d0, d1));
    } else if (!is_float(t->dtype)) {
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has dtype %s, expected F32/BF16/F16%s",
                         t->name, dtype_name(t->dtype), q == Q_PLAIN ? "" : " (or a quantized format)");
    } else {
        if (!has_shape(t, d0, d1)) return shape_error(t, d0, d1);
        if ((uintptr_t)t->data % (uintptr_t)dtype_size(t->dtype))
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' data is not aligned to its %d-byte elements",
                             t->name, dtype_size(t->dtype));
        *out = wmat_plain(t->dtype, d1 ? d0 : 1, d1 ? d1 : d0, t->data);
    }
    b->used[idx] = 1;
    return DSV4_OK;
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Catalog entry t of layer l (CAT_TOP, CAT_MTP: l ignored) into its slot,
 * its names under prefix pre ("", "layers.L." or "mtp.0."). */
static dsv4_status bind_entry(binder *b, int l, const char *pre, const cat_tensor *t)
{
    const dsv4_config *c = &b->m->cfg;
    const char *names[4] = {t->name[0], t->name[1], t->name[2], NULL};
    return bind_q(b, catalog_slot(b->m, l, t), pre, names, catalog_dim(c, l, t->d0), catalog_dim(c, l, t->d1),
                  t->quant);
}

/* tid2eid: integer [vocab, n_active]; converted once to int32 after checking
 * every entry is a valid expert id (a bad table must not index out of range). */
static dsv4_status bind_tid2eid(binder *b, dsv4_layer_w *lw, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    char tried[512];
    src_tensor tt, *t = &tt;
    int idx = lookup(b, pre, NAMES("ffn.gate.tid2eid", "mlp.gate.tid2eid"), t, tried, sizeof tried);
    if (idx < 0) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s' (hash-routed layer)", tried);
    if (t->dtype != DT_I64 && t->dtype != DT_I32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' has dtype %s, expected I64 or I32",
                         t->name, t->type);
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
    b->used[idx] = 1;
    lw->tid2eid = tab;
    return DSV4_OK;
}

/* Merged 3-D expert tensors [e][r][c], viewed as 2-D [e·r, c]; returns 0
 * (with *st OK) when absent. */
static int find_merged(binder *b, const char *pre, const char *name, int64_t e, int64_t r, int64_t c, dsv4_mat *out,
                       dsv4_status *st)
{
    char tried[512];
    src_tensor t;
    int idx = lookup(b, pre, (const char *const[]){name, NULL}, &t, tried, sizeof tried);
    *st = DSV4_OK;
    if (idx < 0) return 0;
    if (b->src.gg && t.fmt < 0) {
        *st = unsupported_gguf_type(&t);
        return 0;
    }
    if (!b->src.gg && !is_float(t.dtype)) {
        *st = dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: merged expert tensor '%s' is %s: quantized experts "
                        "are read under their official per-expert names (ffn.experts.E.w1.weight + .scale)",
                        t.name, t.type);
        return 0;
    }
    if (t.ndim != 3 || t.shape[0] != e || t.shape[1] != r || t.shape[2] != c) {
        *st = dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' must have shape [%lld, %lld, %lld]", t.name,
                        (long long)e, (long long)r, (long long)c);
        return 0;
    }
    if (b->src.gg && (*st = check_gguf_blocks(&t, e * r, c)) != DSV4_OK) return 0;
    b->used[idx] = 1;
    *out = view_of(&t, e * r, c);
    return 1;
}

/* GGUF: gate, up and down experts merged per layer. */
static dsv4_status bind_experts_gguf(binder *b, dsv4_layer_w *lw, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    int E = cf->n_experts, I = cf->moe_inter, D = cf->dim;
    dsv4_mat g, u, d;
    static const char *const which[3] = {GGUF_EXPERTS_GATE, GGUF_EXPERTS_UP, GGUF_EXPERTS_DOWN};
    dsv4_mat *dst[3] = {&g, &u, &d};
    for (int k = 0; k < 3; k++) {
        dsv4_status st;
        if (!find_merged(b, pre, which[k], E, k == 2 ? D : I, k == 2 ? I : D, dst[k], &st)) {
            if (st) return st;
            char full[256];
            gguf_spelling(pre, which[k], cf->n_layers, full, sizeof full);
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s'", full);
        }
    }
    for (int e = 0; e < E; e++) {
        lw->w1[e] = mat_rows(&g, (int64_t)e * I, I);
        lw->w3[e] = mat_rows(&u, (int64_t)e * I, I);
        lw->w2[e] = mat_rows(&d, (int64_t)e * D, D);
    }
    return DSV4_OK;
}

static dsv4_status bind_experts(binder *b, dsv4_layer_w *lw, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    int E = cf->n_experts, I = cf->moe_inter, D = cf->dim;
    lw->w1 = calloc((size_t)E, sizeof *lw->w1);
    lw->w2 = calloc((size_t)E, sizeof *lw->w2);
    lw->w3 = calloc((size_t)E, sizeof *lw->w3);
    if (!lw->w1 || !lw->w2 || !lw->w3) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory binding experts");
    if (b->src.gg) return bind_experts_gguf(b, lw, pre);
    dsv4_status st;
    dsv4_mat all_gu, all_dn;
    if (find_merged(b, pre, "mlp.experts.gate_up_proj", E, 2 * I, D, &all_gu, &st)) {
        if (!find_merged(b, pre, "mlp.experts.down_proj", E, D, I, &all_dn, &st)) {
            if (st) return st;
            return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: '%smlp.experts.gate_up_proj' without down_proj", pre);
        }
        for (int e = 0; e < E; e++) {
            lw->w1[e] = mat_rows(&all_gu, (int64_t)e * 2 * I, I);
            lw->w3[e] = mat_rows(&all_gu, (int64_t)e * 2 * I + I, I);
            lw->w2[e] = mat_rows(&all_dn, (int64_t)e * D, D);
        }
        return DSV4_OK;
    }
    if (st) return st;
    char n1[96], n2[96], n3[96];
    for (int e = 0; e < E; e++) {
        snprintf(n1, sizeof n1, "ffn.experts.%d.w1.weight", e);
        snprintf(n2, sizeof n2, "ffn.experts.%d.w2.weight", e);
        snprintf(n3, sizeof n3, "ffn.experts.%d.w3.weight", e);
        TRY(bind_q(b, &lw->w1[e], pre, NAMES(n1), I, D, Q_EXPERT));
        TRY(bind_q(b, &lw->w2[e], pre, NAMES(n2), D, I, Q_EXPERT));
        TRY(bind_q(b, &lw->w3[e], pre, NAMES(n3), I, D, Q_EXPERT));
    }
    return DSV4_OK;
}

/* Layer l's block under prefix pre ("layers.L.", or "mtp.S." for a drafter
 * block, l >= n_layers: its attention kind from the config, routed MoE). */
static dsv4_status bind_layer(binder *b, int l, const char *pre)
{
    const dsv4_config *cf = &b->m->cfg;
    for (int i = 0; i < k_catalog_count; i++)
        if (catalog_per_layer(&k_catalog[i]) && catalog_present(cf, l, &k_catalog[i]))
            TRY(bind_entry(b, l, pre, &k_catalog[i]));
    if (l < cf->n_layers && cf->hash_layer[l]) TRY(bind_tid2eid(b, &b->m->layers[l], pre));
    return bind_experts(b, &b->m->layers[l], pre);
}

/* The drafter's own tensors of one kind (CAT_MTP ...) under prefix pre. */
static dsv4_status bind_where(binder *b, int where, const char *pre)
{
    for (int i = 0; i < k_catalog_count; i++)
        if (k_catalog[i].where == where) TRY(bind_entry(b, 0, pre, &k_catalog[i]));
    return DSV4_OK;
}

static dsv4_status swa_only(const dsv4_config *cf, const char *what)
{
    if (cf->mtp_attn_kind == ATTN_SWA) return DSV4_OK;
    return dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: %s with compressed attention is not supported "
                     "(compress_ratios gives it ratio %d)", what, config_ratio(cf, cf->n_layers));
}

/* The MTP head (spec §5.2), when the checkpoint has mtp.0.e_proj (GGUF:
 * blk.n_layers.nextn.e_proj): all of it must then be there. */
static dsv4_status bind_mtp(binder *b)
{
    dsv4_model *m = b->m;
    const dsv4_config *cf = &m->cfg;
    char tried[512];
    src_tensor t;
    if (lookup(b, "mtp.0.", NAMES("e_proj.weight"), &t, tried, sizeof tried) < 0) return DSV4_OK;
    if (cf->dspark_block)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: mtp.0.e_proj (an MTP head) with the dspark_* keys of "
                         "config.json (a DSpark drafter): a checkpoint has one drafter");
    TRY(swa_only(cf, "an MTP layer"));
    const char *p = "mtp.0.";
    TRY(bind_where(b, CAT_MTP, p));
    TRY(bind_where(b, CAT_DRAFT_HEAD, p));
    TRY(bind_layer(b, cf->n_layers, p));
    m->has_mtp = 1;
    m->n_draft = 1;
    return DSV4_OK;
}

/* The DSpark drafter (docs/DSPARK.md §3), when config.json has its keys:
 * stages mtp.0 .. mtp.<n-1> (as many as have an attn_norm, in a row), each
 * a V4 block; the context fusion on stage 0; the hc head, norm, Markov and
 * confidence heads on the last. All of it must then be there. Not read from
 * GGUF (no converter writes the V4 DSpark layout there yet). */
static dsv4_status bind_dspark(binder *b)
{
    dsv4_model *m = b->m;
    const dsv4_config *cf = &m->cfg;
    if (!cf->dspark_block) return DSV4_OK;
    if (b->src.gg) return dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: a DSpark drafter in a GGUF file is not supported");
    char tried[512], pre[32];
    src_tensor t;
    int n = 0;
    for (; n < DRAFT_MAX_BLOCKS; n++) {
        snprintf(pre, sizeof pre, "mtp.%d.", n);
        if (lookup(b, pre, NAMES("attn_norm.weight"), &t, tried, sizeof tried) < 0) break;
    }
    if (!n)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: config.json has dspark_block_size but the drafter's first "
                         "stage is missing (no tensor 'mtp.0.attn_norm.weight')");
    TRY(swa_only(cf, "a DSpark stage"));
    TRY(bind_where(b, CAT_DSPARK_IN, "mtp.0."));
    snprintf(pre, sizeof pre, "mtp.%d.", n - 1);
    TRY(bind_where(b, CAT_DRAFT_HEAD, pre));
    TRY(bind_where(b, CAT_DSPARK_OUT, pre));
    for (int s = 0; s < n; s++) {
        snprintf(pre, sizeof pre, "mtp.%d.", s);
        TRY(bind_layer(b, cf->n_layers + s, pre));
    }
    m->has_dspark = 1;
    m->n_draft = n;
    return DSV4_OK;
}

/* Names we know but do not bind: deeper draft heads (mtp.1.* ...; GGUF:
 * blocks after n_layers), an incomplete mtp.0 (no e_proj; GGUF: a head
 * without nextn.e_proj, such as a concatenated eh_proj). */
static int is_known_unbound(const binder *b, const char *name)
{
    if (b->src.gg) return gguf_is_mtp_name(name, b->m->cfg.n_layers);
    if (!strncmp(name, "model.", 6)) name += 6;
    return !strncmp(name, "mtp.", 4);
}

static dsv4_status collect_unknown(binder *b)
{
    dsv4_model *m = b->m;
    int n = tsrc_count(&b->src);
    for (int i = 0; i < n; i++) {
        if (b->used[i]) continue;
        src_tensor t;
        tsrc_get(&b->src, i, &t);
        const char *name = t.name;
        if (is_known_unbound(b, name)) { m->n_mtp_tensors++; continue; }
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
    tensor_source src = {m->st, m->gg};
    int n = tsrc_count(&src);
    binder b = {m, src, calloc((size_t)n + 1, 1)};
    m->layers = calloc((size_t)cf->n_layers + DRAFT_MAX_BLOCKS, sizeof *m->layers);
    if (!b.used || !m->layers) { free(b.used); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); }
    dsv4_status st = DSV4_OK;
    for (int i = 0; i < k_catalog_count && !st; i++)
        if (k_catalog[i].where == CAT_TOP) st = bind_entry(&b, 0, "", &k_catalog[i]);
    if (st) { free(b.used); return st; }
    for (int l = 0; l < cf->n_layers; l++) {
        char pre[64];
        snprintf(pre, sizeof pre, "layers.%d.", l);
        if ((st = bind_layer(&b, l, pre))) { free(b.used); return st; }
    }
    if ((st = bind_dspark(&b)) || (st = bind_mtp(&b))) { free(b.used); return st; }
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
    a->done += wmat_bytes(w);
    if (a->fn && a->done - a->last >= a->total / 100) {
        a->fn(a->user, a->done < a->total ? a->done : a->total, a->total);
        a->last = a->done;
    }
    return DSV4_OK;
}

/* Calls fn on every bound weight view: the top-level ones, the drafter's,
 * then layer by layer (the drafter's blocks last) with the routed experts last
 * (absent views included; fn skips them). */
static dsv4_status each_weight(dsv4_model *m, dsv4_status (*fn)(void *ctx, dsv4_mat *w), void *ctx)
{
    const dsv4_config *cf = &m->cfg;
    for (int i = 0; i < k_catalog_count; i++) /* the drafter's slots too (data NULL without one) */
        if (!catalog_per_layer(&k_catalog[i])) TRY(fn(ctx, catalog_slot(m, 0, &k_catalog[i])));
    for (int l = 0; l < cf->n_layers + m->n_draft; l++) {
        dsv4_layer_w *w = &m->layers[l];
        for (int i = 0; i < k_catalog_count; i++) /* absent slots have data NULL */
            if (catalog_per_layer(&k_catalog[i])) TRY(fn(ctx, catalog_slot(m, l, &k_catalog[i])));
        for (int e = 0; e < cf->n_experts; e++) {
            TRY(fn(ctx, &w->w1[e]));
            TRY(fn(ctx, &w->w2[e]));
            TRY(fn(ctx, &w->w3[e]));
        }
    }
    return DSV4_OK;
}

static dsv4_status adopt_one(void *ctx, dsv4_mat *w) { return adopt(ctx, w); }

static dsv4_status count_one(void *ctx, dsv4_mat *w)
{
    *(uint64_t *)ctx += wmat_bytes(w);
    return DSV4_OK;
}

uint64_t weights_bytes(dsv4_model *m)
{
    uint64_t n = 0;
    each_weight(m, count_one, &n);
    return n + (uint64_t)m->cfg.vocab * (uint64_t)m->cfg.n_active * sizeof(int32_t) * (uint64_t)config_n_hash(&m->cfg);
}

dsv4_status weights_adopt(dsv4_model *m, dsv4_progress_fn progress, void *user)
{
    dsv4_backend *b = m->be;
    const dsv4_config *cf = &m->cfg;
    adopter ad = {b, progress, user, 0, weights_bytes(m), 0};
    TRY(each_weight(m, adopt_one, &ad));
    for (int l = 0; l < cf->n_layers; l++) {
        dsv4_layer_w *w = &m->layers[l];
        if (w->tid2eid && !w->tid2eid_on_backend) {
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
        for (int l = 0; l < m->cfg.n_layers + DRAFT_MAX_BLOCKS; l++) {
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

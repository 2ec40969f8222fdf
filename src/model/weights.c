/* Binding checkpoint tensors to the model's weight slots: every tensor of
 * the catalog (model/catalog.c: names in each spelling, shapes, formats) is
 * looked up under each of its names, with or without a leading "model.".
 * Routed experts come per expert (ffn.experts.E.w1.weight, any format) or
 * merged (mlp.experts.gate_up_proj [E, 2I, D], mlp.experts.down_proj
 * [E, D, I], plain floats); hash layers carry tid2eid. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/catalog.h"
#include "model/model.h"

#define TRY(x) do { dsv4_status st_ = (x); if (st_) return st_; } while (0)

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

/* A slot's Q_* (catalog.h) says which formats it accepts: Q_DENSE FP8 with
 * its block grid when config.json has a quantization_config (wo_a occurs
 * both ways), Q_EXPERT MXFP4 or FP8 per expert_dtype. The tensor's own dtype
 * says which one a checkpoint chose. */

static dsv4_status shape_error(const st_tensor *t, int64_t d0, int64_t d1)
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

static int has_shape(const st_tensor *t, int64_t d0, int64_t d1)
{
    return t->ndim == (d1 ? 2 : 1) && t->shape[0] == d0 && (!d1 || t->shape[1] == d1);
}

/* Every scale must be a finite power of two 2^k with k in [−127, max_exp],
 * so that every decoded weight (code · scale) is an exact, finite fp32. */
static dsv4_status check_scales(const st_tensor *s, int max_exp)
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
static dsv4_status bind_scale(binder *b, const st_tensor *w, dsv4_mat *out, int64_t sr, int64_t sc, int max_exp)
{
    size_t n = strlen(w->name);
    if (n < 7 || strcmp(w->name + n - 7, ".weight") != 0)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: quantized tensor '%s' is not named X.weight", w->name);
    char name[600];
    const st_tensor *s = NULL;
    const char *const sfx[] = {".scale", ".weight_scale_inv"};
    for (int i = 0; i < 2 && !s; i++) {
        snprintf(name, sizeof name, "%.*s%s", (int)(n - 7), w->name, sfx[i]);
        s = st_find(b->m->st, name);
    }
    if (!s)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is %s but its scale '%.*s.scale' is missing",
                         w->name, dtype_name(w->dtype), (int)(n - 7), w->name);
    if (s->dtype != DT_F8_E8M0 && s->dtype != DT_F32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: scale tensor '%s' has dtype %s, expected F8_E8M0 or F32",
                         s->name, dtype_name(s->dtype));
    if (!has_shape(s, sr, sc)) return shape_error(s, sr, sc);
    TRY(check_scales(s, max_exp));
    b->used[tensor_index(b->m->st, s)] = 1;
    out->scale = s->data;
    out->scale_dtype = s->dtype;
    out->scale_rows = sr;
    out->scale_cols = sc;
    return DSV4_OK;
}

/* FP8 e4m3 [d0, d1] with blocks from quantization_config. */
static dsv4_status bind_fp8(binder *b, const st_tensor *t, dsv4_mat *out, int64_t d0, int64_t d1)
{
    const dsv4_config *cf = &b->m->cfg;
    if (cf->weight_format != WFMT_FP8)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s' is F8_E4M3 but config.json has no "
                         "quantization_config", t->name);
    if (!has_shape(t, d0, d1)) return shape_error(t, d0, d1);
    *out = (dsv4_mat){.dtype = DT_F8_E4M3, .rows = d0, .cols = d1, .data = t->data, .fmt = WF_FP8_E4M3,
                      .blk_r = cf->quant_blk_r, .blk_c = cf->quant_blk_c};
    /* 448 · 2^119 < 2^128: the largest e4m3 value stays finite */
    return bind_scale(b, t, out, (d0 + cf->quant_blk_r - 1) / cf->quant_blk_r,
                      (d1 + cf->quant_blk_c - 1) / cf->quant_blk_c, 119);
}

/* MXFP4 [d0, d1]: I8/U8 [d0, d1/2] (two E2M1 codes per byte) and E8M0 [d0, d1/32]. */
static dsv4_status bind_mxfp4(binder *b, const st_tensor *t, dsv4_mat *out, int64_t d0, int64_t d1)
{
    if (d1 % 32)
        return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: tensor '%s': MXFP4 needs a row length that is a multiple "
                         "of 32, config gives %lld", t->name, (long long)d1);
    if (!has_shape(t, d0, d1 / 2)) return shape_error(t, d0, d1 / 2);
    *out = (dsv4_mat){.dtype = t->dtype, .rows = d0, .cols = d1, .data = t->data, .fmt = WF_MXFP4,
                      .blk_r = 1, .blk_c = 32};
    /* 6 · 2^125 < 2^128 */
    return bind_scale(b, t, out, d0, d1 / 32, 125);
}

/* Bind one tensor with the exact expected shape (d1 = 0 for 1-D) in a format
 * the slot accepts (q: Q_*). */
static dsv4_status bind_q(binder *b, dsv4_mat *out, const char *pre, const char *const *names, int64_t d0,
                          int64_t d1, int q)
{
    char tried[512];
    const dsv4_config *cf = &b->m->cfg;
    const st_tensor *t = lookup(b, pre, names, tried, sizeof tried);
    if (!t) return dsv4_fail(DSV4_ERR_FORMAT, "checkpoint: missing tensor '%s'", tried);
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
    b->used[tensor_index(b->m->st, t)] = 1;
    return DSV4_OK;
}

#define NAMES(...) ((const char *const[]){__VA_ARGS__, NULL})

/* Catalog entry t of layer l (CAT_TOP: l ignored) into its slot. */
static dsv4_status bind_entry(binder *b, int l, const cat_tensor *t)
{
    const dsv4_config *c = &b->m->cfg;
    char pre[64] = "";
    if (t->where != CAT_TOP) snprintf(pre, sizeof pre, "layers.%d.", l);
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
        *st = dsv4_fail(DSV4_ERR_UNSUPPORTED, "checkpoint: merged expert tensor '%s' is %s: quantized experts "
                        "are read under their official per-expert names (ffn.experts.E.w1.weight + .scale)",
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
        dsv4_mat all_gu = wmat_plain(gu->dtype, (int64_t)E * 2 * I, D, gu->data);
        dsv4_mat all_dn = wmat_plain(dn->dtype, (int64_t)E * D, I, dn->data);
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
        TRY(bind_q(b, &lw->w1[e], pre, NAMES(n1), I, D, Q_EXPERT));
        TRY(bind_q(b, &lw->w2[e], pre, NAMES(n2), D, I, Q_EXPERT));
        TRY(bind_q(b, &lw->w3[e], pre, NAMES(n3), I, D, Q_EXPERT));
    }
    return DSV4_OK;
}

static dsv4_status bind_layer(binder *b, int l)
{
    const dsv4_config *cf = &b->m->cfg;
    char pre[64];
    snprintf(pre, sizeof pre, "layers.%d.", l);
    for (int i = 0; i < k_catalog_count; i++)
        if (k_catalog[i].where != CAT_TOP && catalog_present(cf, l, &k_catalog[i]))
            TRY(bind_entry(b, l, &k_catalog[i]));
    if (cf->hash_layer[l]) TRY(bind_tid2eid(b, &b->m->layers[l], pre));
    return bind_experts(b, &b->m->layers[l], pre);
}

/* Names we know but do not bind (yet): the MTP draft head. */
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
    m->layers = calloc((size_t)cf->n_layers, sizeof *m->layers);
    if (!b.used || !m->layers) { free(b.used); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); }
    dsv4_status st = DSV4_OK;
    for (int i = 0; i < k_catalog_count && !st; i++)
        if (k_catalog[i].where == CAT_TOP) st = bind_entry(&b, 0, &k_catalog[i]);
    if (st) { free(b.used); return st; }
    for (int l = 0; l < cf->n_layers; l++)
        if ((st = bind_layer(&b, l))) { free(b.used); return st; }
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

dsv4_status weights_adopt(dsv4_model *m, dsv4_progress_fn progress, void *user)
{
    dsv4_backend *b = m->be;
    const dsv4_config *cf = &m->cfg;
    adopter ad = {b, progress, user, 0, st_mapped_bytes(m->st), 0};
    for (int i = 0; i < k_catalog_count; i++)
        if (k_catalog[i].where == CAT_TOP) TRY(adopt(&ad, catalog_slot(m, 0, &k_catalog[i])));
    for (int l = 0; l < cf->n_layers; l++) {
        dsv4_layer_w *w = &m->layers[l];
        for (int i = 0; i < k_catalog_count; i++) /* absent slots have data NULL */
            if (k_catalog[i].where != CAT_TOP) TRY(adopt(&ad, catalog_slot(m, l, &k_catalog[i])));
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
        for (int l = 0; l < m->cfg.n_layers; l++) {
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

/* The DeepSeek-V4 forward pass over one chunk of tokens, written once for
 * every backend (spec Appendix A/B). Each layer: hyper-connection pre,
 * attention of the layer's kind, post; then the same around the MoE. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "engine/session.h"

/* Activations of one chunk, carved from one allocation. */
typedef struct {
    float *X, *x, *xn, *post, *comb, *qr, *q, *kv, *o, *z, *a, *u, *g, *qi, *wi, *y;
    int32_t *sel_idx, *sel_n;
    void *block;
} scratch;

static dsv4_status scratch_alloc(scratch *sc, const dsv4_config *c, int T)
{
    size_t hc = (size_t)c->hc_mult, D = (size_t)c->dim, H = (size_t)c->n_heads, hd = (size_t)c->head_dim;
    size_t ih = (size_t)c->idx_heads, ihd = (size_t)c->idx_head_dim, k = (size_t)c->idx_topk;
    size_t cw = 2 * (hd > ihd ? hd : ihd);
    size_t z = (size_t)c->o_groups * (size_t)c->o_lora;
    size_t sizes[] = {hc * D, D, D, hc, hc * hc, (size_t)c->q_lora, H * hd, hd, H * hd, z, D, cw, cw, ih * ihd, ih, D};
    float **slots[] = {&sc->X, &sc->x, &sc->xn, &sc->post, &sc->comb, &sc->qr, &sc->q, &sc->kv, &sc->o, &sc->z,
                       &sc->a, &sc->u, &sc->g, &sc->qi, &sc->wi, &sc->y};
    size_t n = sizeof sizes / sizeof sizes[0], total = 0;
    for (size_t i = 0; i < n; i++) total += sizes[i] * (size_t)T;
    total += 2 * k * (size_t)T + (size_t)T; /* selection: int32 as float-sized slots */
    sc->block = malloc(total * sizeof(float));
    if (!sc->block) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for %d-token activations", T);
    float *p = sc->block;
    for (size_t i = 0; i < n; i++) { *slots[i] = p; p += sizes[i] * (size_t)T; }
    sc->sel_idx = (int32_t *)p;
    sc->sel_n = (int32_t *)(p + k * (size_t)T);
    return DSV4_OK;
}

static void attention_block(dsv4_session *s, int l, int T, scratch *sc)
{
    dsv4_model *m = s->m;
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_layer_state *ls = &s->L[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int64_t pos0 = s->pos;
    int D = c->dim, H = c->n_heads, hd = c->head_dim, rd = c->rope_dim, kind = c->attn_kind[l];
    int ratio = config_ratio(c, l);
    float eps = (float)c->norm_eps;
    const float *freq = kind == ATTN_SWA ? m->inv_freq_main : m->inv_freq_compress;

    op->hc_pre(b, sc->X, T, c->hc_mult, D, &w->hc_attn_fn, &w->hc_attn_base, &w->hc_attn_scale, c->hc_iters,
               (float)c->hc_eps, eps, sc->x, sc->post, sc->comb);
    op->rmsnorm(b, sc->x, T, D, &w->attn_norm, eps, sc->xn);

    /* queries: low-rank, per-head unweighted norm, rope on the trailing dims */
    op->matmul(b, sc->xn, D, T, &w->wq_a, sc->qr, c->q_lora);
    op->rmsnorm(b, sc->qr, T, c->q_lora, &w->q_norm, eps, sc->qr);
    op->matmul(b, sc->qr, c->q_lora, T, &w->wq_b, sc->q, (int64_t)H * hd);
    op->rmsnorm(b, sc->q, T * H, hd, NULL, eps, sc->q);
    op->rope(b, sc->q, T, H, hd, rd, pos0, 1, freq, 0);
    /* the single shared key/value head */
    op->matmul(b, sc->xn, D, T, &w->wkv, sc->kv, hd);
    op->rmsnorm(b, sc->kv, T, hd, &w->kv_norm, eps, sc->kv);
    op->rope(b, sc->kv, T, 1, hd, rd, pos0, 1, freq, 0);

    const int32_t *sel_idx = NULL, *sel_n = NULL;
    if (kind != ATTN_SWA) {
        int cw = hd * (kind == ATTN_CSA ? 2 : 1);
        dsv4_comp_params cp = {ratio, kind == ATTN_CSA, hd, rd, &w->comp.ape, &w->comp.norm, freq, eps};
        op->matmul(b, sc->xn, D, T, &w->comp.wkv, sc->u, cw);
        op->matmul(b, sc->xn, D, T, &w->comp.wgate, sc->g, cw);
        op->compress(b, sc->u, sc->g, T, pos0, &cp, &ls->comp);
    }
    if (kind == ATTN_CSA) {
        int ih = c->idx_heads, ihd = c->idx_head_dim;
        dsv4_comp_params ip = {ratio, 1, ihd, rd, &w->idx_comp.ape, &w->idx_comp.norm, freq, eps};
        op->matmul(b, sc->xn, D, T, &w->idx_comp.wkv, sc->u, 2 * ihd);
        op->matmul(b, sc->xn, D, T, &w->idx_comp.wgate, sc->g, 2 * ihd);
        op->compress(b, sc->u, sc->g, T, pos0, &ip, &ls->idx);
        op->matmul(b, sc->qr, c->q_lora, T, &w->idx_wq_b, sc->qi, (int64_t)ih * ihd);
        op->rope(b, sc->qi, T, ih, ihd, rd, pos0, 1, freq, 0);
        op->matmul(b, sc->xn, D, T, &w->idx_wproj, sc->wi, ih);
        /* head weights carry 1/sqrt(heads); scores carry 1/sqrt(head_dim) */
        op->indexer(b, sc->qi, sc->wi, T, pos0, ih, ihd, ls->idx.entries, ratio, c->idx_topk,
                    1.0f / sqrtf((float)ihd), 1.0f / sqrtf((float)ih), sc->sel_idx, sc->sel_n);
        sel_idx = sc->sel_idx;
        sel_n = sc->sel_n;
    }
    op->attention(b, sc->q, T, pos0, H, hd, c->window, ls->ring, sc->kv, ls->comp.entries,
                  kind == ATTN_HCA ? ratio : 0, sel_idx, sel_n, c->idx_topk, &w->sinks,
                  1.0f / sqrtf((float)hd), sc->o);
    op->ring_store(b, ls->ring, c->window, hd, sc->kv, T, pos0);

    /* undo the keys' rotation at the query position, then the grouped
     * low-rank output projection (block-diagonal wo_a, then wo_b) */
    op->rope(b, sc->o, T, H, hd, rd, pos0, 1, freq, 1);
    int64_t G = (int64_t)H * hd / c->o_groups, zw = (int64_t)c->o_groups * c->o_lora;
    for (int g = 0; g < c->o_groups; g++) {
        dsv4_mat wa = mat_rows(&w->wo_a, (int64_t)g * c->o_lora, c->o_lora);
        op->matmul(b, sc->o + g * G, (int64_t)H * hd, T, &wa, sc->z + (int64_t)g * c->o_lora, zw);
    }
    op->matmul(b, sc->z, zw, T, &w->wo_b, sc->a, D);
    op->hc_post(b, sc->X, T, c->hc_mult, D, sc->a, sc->post, sc->comb);
}

static void ffn_block(dsv4_session *s, int l, const int32_t *tok, int T, scratch *sc)
{
    dsv4_model *m = s->m;
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int D = c->dim;
    float eps = (float)c->norm_eps;
    op->hc_pre(b, sc->X, T, c->hc_mult, D, &w->hc_ffn_fn, &w->hc_ffn_base, &w->hc_ffn_scale, c->hc_iters,
               (float)c->hc_eps, eps, sc->x, sc->post, sc->comb);
    op->rmsnorm(b, sc->x, T, D, &w->ffn_norm, eps, sc->xn);
    dsv4_moe_params mp = {&w->gate, &w->gate_bias, w->tid2eid, w->w1, w->w2, w->w3, &w->sh_w1, &w->sh_w2,
                          &w->sh_w3, c->n_experts, c->n_active, c->moe_inter, c->score_func,
                          (float)c->route_scale, (float)c->swiglu_limit};
    op->moe(b, sc->xn, tok, T, D, &mp, sc->y);
    op->hc_post(b, sc->X, T, c->hc_mult, D, sc->y, sc->post, sc->comb);
}

dsv4_status forward_chunk(dsv4_session *s, const int32_t *tok, int T, float *logits, int all_rows)
{
    dsv4_model *m = s->m;
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    scratch sc;
    dsv4_status st = scratch_alloc(&sc, c, T);
    if (st) return st;
    op->embed(b, &m->embed, tok, T, c->hc_mult, sc.X);
    for (int l = 0; l < c->n_layers; l++) {
        attention_block(s, l, T, &sc);
        ffn_block(s, l, tok, T, &sc);
    }
    if (logits) {
        int first = all_rows ? 0 : T - 1, n = T - first;
        const float *Xf = sc.X + (int64_t)first * c->hc_mult * c->dim;
        op->hc_head(b, Xf, n, c->hc_mult, c->dim, &m->hc_head_fn, &m->hc_head_base, &m->hc_head_scale,
                    (float)c->hc_eps, (float)c->norm_eps, sc.x);
        op->rmsnorm(b, sc.x, n, c->dim, &m->norm, (float)c->norm_eps, sc.x);
        op->matmul(b, sc.x, c->dim, n, &m->head, logits, c->vocab);
    }
    free(sc.block);
    if (b->sticky) {
        st = dsv4_fail(b->sticky, "%s", b->sticky_msg);
        b->sticky = DSV4_OK;
    }
    return st;
}

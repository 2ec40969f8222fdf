/* Bytes a decode step must read, the roofline denominator of `dsv4 bench`,
 * and the arithmetic of a prompt, its prefill figure's numerator. */
#include "model/catalog.h"
#include "model/model.h"

static uint64_t mat_bytes(const dsv4_mat *m) { return wmat_bytes(m); }

void model_decode_traffic(const dsv4_model *m, int64_t ctx, double distinct_experts, uint64_t *weights,
                          uint64_t *state)
{
    const dsv4_config *c = &m->cfg;
    uint64_t w = (uint64_t)wformat_row_bytes(m->embed.fmt, c->dim); /* one embedding row */
    dsv4_model *mm = (dsv4_model *)m; /* catalog_slot is shared with the binder; nothing is written */
    for (int i = 0; i < k_catalog_count; i++)
        if (k_catalog[i].where == CAT_TOP && k_catalog[i].per_step) w += mat_bytes(catalog_slot(mm, 0, &k_catalog[i]));
    uint64_t s = 0, kv = (uint64_t)m->layout.kv.bytes, ik = (uint64_t)m->layout.idx.bytes; /* per stored row */
    int64_t pos = ctx; /* the new token's position */
    for (int l = 0; l < c->n_layers; l++) {
        const dsv4_layer_w *lw = &m->layers[l];
        for (int i = 0; i < k_catalog_count; i++)
            if (catalog_per_layer(&k_catalog[i]) && k_catalog[i].per_step) w += mat_bytes(catalog_slot(mm, l, &k_catalog[i]));
        w += (uint64_t)(distinct_experts * (double)(mat_bytes(&lw->w1[0]) + mat_bytes(&lw->w2[0]) + mat_bytes(&lw->w3[0])));
        int64_t win = pos + 1 < c->window ? pos + 1 : c->window;
        s += (uint64_t)win * kv;
        int r = config_ratio(c, l);
        if (c->attn_kind[l] == ATTN_CSA) {
            int64_t n = (pos + 1) / r, k = n < c->idx_topk ? n : c->idx_topk;
            s += (uint64_t)n * ik + (uint64_t)k * kv;
        } else if (c->attn_kind[l] == ATTN_HCA) {
            s += (uint64_t)((pos + 1) / r) * kv;
        }
    }
    *weights = w;
    *state = s;
}

static double mat_flops(const dsv4_mat *m) { return m->data ? 2.0 * (double)m->rows * (double)m->cols : 0.0; }

void model_prefill_flops(const dsv4_model *m, int64_t n, int64_t out_rows, double *matmul, double *attention)
{
    const dsv4_config *c = &m->cfg;
    dsv4_model *mm = (dsv4_model *)m; /* catalog_slot is shared with the binder; nothing is written */
    double per_row = 0, per_out = 0, att = 0;
    for (int i = 0; i < k_catalog_count; i++)
        if (k_catalog[i].where == CAT_TOP && k_catalog[i].per_step) per_out += mat_flops(catalog_slot(mm, 0, &k_catalog[i]));
    for (int l = 0; l < c->n_layers; l++) {
        const dsv4_layer_w *lw = &m->layers[l];
        for (int i = 0; i < k_catalog_count; i++)
            if (catalog_per_layer(&k_catalog[i]) && k_catalog[i].per_step)
                per_row += mat_flops(catalog_slot(mm, l, &k_catalog[i]));
        per_row += c->n_active * (mat_flops(&lw->w1[0]) + mat_flops(&lw->w2[0]) + mat_flops(&lw->w3[0]));
        int r = config_ratio(c, l);
        for (int64_t p = 0; p < n; p++) {
            int64_t keys = p + 1 < c->window ? p + 1 : c->window, ents = r > 0 ? (p + 1) / r : 0;
            if (c->attn_kind[l] == ATTN_CSA) {
                keys += ents < c->idx_topk ? ents : c->idx_topk;
                att += 2.0 * (double)ents * c->idx_heads * c->idx_head_dim; /* the indexer's scores */
            } else if (c->attn_kind[l] == ATTN_HCA) {
                keys += ents;
            }
            att += 4.0 * (double)keys * c->n_heads * c->head_dim; /* scores and weighted sum */
        }
    }
    *matmul = per_row * (double)n + per_out * (double)out_rows;
    *attention = att;
}

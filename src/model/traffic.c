/* Bytes a decode step must read, the roofline denominator of `dsv4 bench`,
 * and the arithmetic of a prompt, its prefill figure's numerator. Both walk
 * the catalog's per-step tensors (those a step reads whole) the same way. */
#include "model/catalog.h"
#include "model/model.h"

typedef double (*mat_measure)(const dsv4_mat *m);

static double mat_bytes(const dsv4_mat *m) { return (double)wmat_bytes(m); }
static double mat_flops(const dsv4_mat *m) { return m->data ? 2.0 * (double)m->rows * (double)m->cols : 0.0; }

/* f summed over the per-step tensors of layer l (layer >= 0) or of the top
 * (layer < 0: the head, the final norm and mHC). */
static double per_step_sum(const dsv4_model *m, int layer, mat_measure f)
{
    dsv4_model *mm = (dsv4_model *)m; /* catalog_slot is shared with the binder; nothing is written */
    double s = 0;
    for (int i = 0; i < k_catalog_count; i++) {
        const cat_tensor *t = &k_catalog[i];
        if (t->per_step && (layer < 0 ? t->where == CAT_TOP : catalog_per_layer(t)))
            s += f(catalog_slot(mm, layer < 0 ? 0 : layer, t));
    }
    return s;
}

/* f of one routed expert of layer l (w1, w2, w3). */
static double expert_sum(const dsv4_model *m, int l, mat_measure f)
{
    const dsv4_layer_w *lw = &m->layers[l];
    return f(&lw->w1[0]) + f(&lw->w2[0]) + f(&lw->w3[0]);
}

/* What the row at position pos of layer l attends to: its window keys, the
 * compressed entries complete so far (CSA and HCA layers), and how many of
 * those it reads (CSA: the indexer's top-k of them; HCA: all). */
typedef struct { int64_t window, entries, read; } row_keys;

static row_keys keys_at(const dsv4_config *c, int l, int64_t pos)
{
    row_keys k = {pos + 1 < c->window ? pos + 1 : c->window, 0, 0};
    if (c->attn_kind[l] == ATTN_SWA) return k;
    k.entries = (pos + 1) / config_ratio(c, l);
    k.read = c->attn_kind[l] == ATTN_CSA && k.entries > c->idx_topk ? c->idx_topk : k.entries;
    return k;
}

void model_decode_traffic(const dsv4_model *m, int64_t ctx, double distinct_experts, uint64_t *weights,
                          uint64_t *state)
{
    const dsv4_config *c = &m->cfg;
    uint64_t w = (uint64_t)wformat_row_bytes(m->embed.fmt, c->dim); /* one embedding row */
    w += (uint64_t)per_step_sum(m, -1, mat_bytes);
    uint64_t s = 0, kv = (uint64_t)m->layout.kv.bytes, ik = (uint64_t)m->layout.idx.bytes; /* per stored row */
    int64_t pos = ctx; /* the new token's position */
    for (int l = 0; l < c->n_layers; l++) {
        w += (uint64_t)per_step_sum(m, l, mat_bytes);
        w += (uint64_t)(distinct_experts * expert_sum(m, l, mat_bytes));
        row_keys k = keys_at(c, l, pos);
        s += (uint64_t)(k.window + k.read) * kv;
        if (c->attn_kind[l] == ATTN_CSA) s += (uint64_t)k.entries * ik; /* the indexer scores every entry */
    }
    *weights = w;
    *state = s;
}

void model_prefill_flops(const dsv4_model *m, int64_t n, int64_t out_rows, double *matmul, double *attention)
{
    const dsv4_config *c = &m->cfg;
    double per_row = 0, att = 0;
    for (int l = 0; l < c->n_layers; l++) {
        per_row += per_step_sum(m, l, mat_flops) + c->n_active * expert_sum(m, l, mat_flops);
        for (int64_t p = 0; p < n; p++) {
            row_keys k = keys_at(c, l, p);
            att += 4.0 * (double)(k.window + k.read) * c->n_heads * c->head_dim; /* scores and weighted sum */
            if (c->attn_kind[l] == ATTN_CSA) att += 2.0 * (double)k.entries * c->idx_heads * c->idx_head_dim;
        }
    }
    *matmul = per_row * (double)n + per_step_sum(m, -1, mat_flops) * (double)out_rows;
    *attention = att;
}

/* Bytes a decode step must read: the roofline denominator of `dsv4 bench`. */
#include "model/model.h"

static uint64_t mat_bytes(const dsv4_mat *m) { return wmat_bytes(m); }

void model_decode_traffic(const dsv4_model *m, int64_t ctx, double distinct_experts, uint64_t *weights,
                          uint64_t *state)
{
    const dsv4_config *c = &m->cfg;
    uint64_t w = mat_bytes(&m->head) + mat_bytes(&m->norm) + mat_bytes(&m->hc_head_fn) +
                 (uint64_t)wformat_row_bytes(m->embed.fmt, c->dim); /* one embedding row */
    uint64_t s = 0;
    int64_t pos = ctx; /* the new token's position */
    for (int l = 0; l < c->n_layers; l++) {
        const dsv4_layer_w *lw = &m->layers[l];
        const dsv4_mat *mats[] = {&lw->attn_norm, &lw->ffn_norm, &lw->hc_attn_fn, &lw->hc_ffn_fn, &lw->wq_a,
                                  &lw->q_norm, &lw->wq_b, &lw->wkv, &lw->kv_norm, &lw->wo_a, &lw->wo_b,
                                  &lw->comp.wkv, &lw->comp.wgate, &lw->comp.norm, &lw->idx_comp.wkv,
                                  &lw->idx_comp.wgate, &lw->idx_comp.norm, &lw->idx_wq_b, &lw->idx_wproj,
                                  &lw->gate, &lw->sh_w1, &lw->sh_w2, &lw->sh_w3};
        for (size_t i = 0; i < sizeof mats / sizeof mats[0]; i++) w += mat_bytes(mats[i]);
        w += (uint64_t)(distinct_experts * (double)(mat_bytes(&lw->w1[0]) + mat_bytes(&lw->w2[0]) + mat_bytes(&lw->w3[0])));
        int64_t win = pos + 1 < c->window ? pos + 1 : c->window;
        s += (uint64_t)win * (uint64_t)c->head_dim * sizeof(float);
        int r = config_ratio(c, l);
        if (c->attn_kind[l] == ATTN_CSA) {
            int64_t n = (pos + 1) / r, k = n < c->idx_topk ? n : c->idx_topk;
            s += (uint64_t)n * (uint64_t)c->idx_head_dim * sizeof(float) + (uint64_t)k * (uint64_t)c->head_dim * sizeof(float);
        } else if (c->attn_kind[l] == ATTN_HCA) {
            s += (uint64_t)((pos + 1) / r) * (uint64_t)c->head_dim * sizeof(float);
        }
    }
    *weights = w;
    *state = s;
}

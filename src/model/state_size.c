/* Session-state sizes per storage layout (spec §6.2), from the config alone.
 *
 * Per layer: a window ring of `window` rows of head_dim values (every
 * layer); CSA/HCA: one compressed entry of head_dim values per `ratio`
 * tokens; CSA: one indexer key of idx_head_dim values per `ratio` tokens;
 * fixed compressor buffers (open rows and, with overlap, the previous
 * series-A rows, u and g) in fp32 whatever the layout. What a row costs:
 *   STATE_FP32      4 B per value (what the engine holds in both cache modes)
 *   STATE_BF16      2 B per value (the reference implementations)
 *   STATE_OFFICIAL  KV rows and entries as FP8 e4m3 for the non-rope dims + one
 *                   UE8M0 scale per 64 + bf16 rope dims, padded to 8 bytes
 *                   (FlashMLA: 448 + 7 + 128 + 1 = 584 B for Flash's 512);
 *                   indexer keys as packed E2M1 + one UE8M0 scale per 32
 *                   (64 + 4 = 68 B for 128 dims): the --cache official values
 *   STATE_FLASHMLA  as STATE_OFFICIAL but FP8 indexer keys with one fp32 scale
 *                   (128 + 4 B), the deployment choice of spec §6.2's table */
#include "model/model.h"

static double kv_row_bytes(const dsv4_config *c, int layout)
{
    int hd = c->head_dim, nope = c->head_dim - c->rope_dim;
    switch (layout) {
    case STATE_FP32: return 4.0 * hd;
    case STATE_BF16: return 2.0 * hd;
    default: {
        int b = nope + (nope + 63) / 64 + 2 * c->rope_dim;
        return (double)((b + 7) / 8 * 8);
    }
    }
}

static double idx_row_bytes(const dsv4_config *c, int layout)
{
    int d = c->idx_head_dim;
    switch (layout) {
    case STATE_FP32: return 4.0 * d;
    case STATE_BF16: return 2.0 * d;
    case STATE_OFFICIAL: return d / 2 + (d + 31) / 32;
    default: return d + 4.0;
    }
}

void config_state_size(const dsv4_config *c, int layout, double *per_token, uint64_t *fixed)
{
    double kv = kv_row_bytes(c, layout), ik = idx_row_bytes(c, layout), pt = 0, fx = 0;
    const double f = sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        int kind = c->attn_kind[l], r = config_ratio(c, l);
        fx += c->window * kv;
        if (kind == ATTN_SWA) continue;
        int ov = kind == ATTN_CSA;
        /* open rows (u and g) and, with overlap, the previous series-A rows */
        fx += (double)r * c->head_dim * (ov ? 2 : 1) * 2 * f;
        if (ov) fx += (double)r * c->head_dim * 2 * f;
        pt += kv / r;
        if (ov) {
            fx += (double)r * c->idx_head_dim * 6 * f;
            pt += ik / r;
        }
    }
    *per_token = pt;
    *fixed = (uint64_t)fx;
}

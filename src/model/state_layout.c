/* The session-state layout (spec §6.1, §6.2): how each row is stored, and
 * what a session costs. Every consumer takes its facts from here: session.c
 * allocates by them, snapshot.c and step.c walk the live bytes by them, the
 * ops store and read rows by them, dsv4 info and the memory plan report them.
 *
 * Per layer: a window ring of `window` rows of head_dim values (every
 * layer); CSA/HCA: one compressed entry of head_dim values per `ratio`
 * tokens; CSA: one indexer key of idx_head_dim values per `ratio` tokens;
 * the compressors' buffers (open rows and, with overlap, the previous
 * series-A rows, u and g) in fp32 in every layout (the official reference
 * keeps them fp32 too). What a row costs:
 *   STATE_FP32      4 B per value: what --cache exact holds
 *   STATE_OFFICIAL  what --cache official holds: KV rows and entries as
 *                   ROW_FP8 (FlashMLA: 448 e4m3 + 64 bf16 + 7 scales + 1 pad =
 *                   584 B for Flash's 512 values), indexer keys as ROW_FP4
 *                   (64 + 4 = 68 B for 128 values)
 * and, for comparison in dsv4 info (no session holds them):
 *   STATE_BF16      2 B per value: the reference implementations
 *   STATE_FLASHMLA  as STATE_OFFICIAL but FP8 indexer keys with one fp32
 *                   scale (128 + 4 B): the deployment choice of spec §6.2 */
#include "model/model.h"

static dsv4_row_fmt row_f32(int width) { return (dsv4_row_fmt){ROW_F32, width, 0, 0, 0, 4 * width}; }

/* e4m3 [0, nope), bf16 [nope, width) at nope, the scales after them, padded
 * to 8 bytes (FlashMLA's token stride): with nope a multiple of 4, as in
 * every real layout, the codes and the bf16 values of 4 columns c.. (c a
 * multiple of 4) are whole aligned 32-bit words, which the GPU readers load
 * as such (other layouts are read byte by byte). */
static dsv4_row_fmt row_fp8(int width, int rope_dim)
{
    int nope = width - rope_dim, scales = nope + 2 * rope_dim, end = scales + (nope + 63) / 64;
    return (dsv4_row_fmt){ROW_FP8, width, nope, nope, scales, (end + 7) / 8 * 8};
}

/* two codes per byte, then the scales */
static dsv4_row_fmt row_fp4(int width)
{
    int codes = (width + 1) / 2;
    return (dsv4_row_fmt){ROW_FP4, width, 0, 0, codes, codes + (width + 31) / 32};
}

dsv4_state_layout state_layout(const dsv4_config *c, int official)
{
    dsv4_state_layout L;
    L.kv = official ? row_fp8(c->head_dim, c->rope_dim) : row_f32(c->head_dim);
    L.idx = official ? row_fp4(c->idx_head_dim) : row_f32(c->idx_head_dim);
    return L;
}

void config_state_size(const dsv4_config *c, int layout, double *per_token, uint64_t *fixed)
{
    dsv4_state_layout L = state_layout(c, layout == STATE_OFFICIAL || layout == STATE_FLASHMLA);
    double kv = L.kv.bytes, ik = L.idx.bytes, pt = 0, fx = 0;
    if (layout == STATE_BF16) kv = 2.0 * c->head_dim, ik = 2.0 * c->idx_head_dim;
    if (layout == STATE_FLASHMLA) ik = c->idx_head_dim + 4.0;
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

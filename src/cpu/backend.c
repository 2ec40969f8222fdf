/* The CPU backend object: thread pool, per-thread scratch, ops table. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "cpu/cpu.h"

void cpu_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups, float *y,
                        int64_t ldy);
void cpu_matmul_pair(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1, int64_t ldy1,
                     const dsv4_mat *W2, float *y2, int64_t ldy2);
void cpu_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y);
void cpu_norm_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, const dsv4_mat *w,
                   float eps, const int64_t *pos, const float *inv_freq, int n_fp8);
void cpu_embed(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok, int T, int hc, float *X);
void cpu_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x,
                float *post, float *comb);
void cpu_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                 const dsv4_mat *scale, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x);
void cpu_ring_store(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f, const float *kv, int T,
                    int64_t pos0);
void cpu_compress(dsv4_backend *b, const float *u, const float *g, int T, int64_t pos0, const dsv4_comp_params *p,
                  dsv4_comp_state *st);
void cpu_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads, const uint8_t *keys,
                 const dsv4_row_fmt *kf, int ratio, int topk, float score_scale, float w_scale, int32_t *idx,
                 int32_t *n);
void cpu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window,
                   const uint8_t *ring, const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio,
                   const int32_t *sel_idx, const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale,
                   int rope_dim, const float *out_freq, float *out);
void cpu_moe(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D, const dsv4_moe_params *p,
             float *out);

void cpu_idx_fp4_round(dsv4_backend *b, float *x, int rows, int width);
void cpu_matmul_post(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                     const dsv4_hc_post *post);
void cpu_pick_sum(dsv4_backend *b, const float *a, int64_t lda, const float *c, int64_t ldc, int n, int V, int32_t *idx,
                  float *top, int32_t *bad);

void *cpu_alloc(dsv4_backend *b, size_t bytes);
void cpu_free(dsv4_backend *b, void *p);
void cpu_copy(dsv4_backend *b, void *dst, const void *src, size_t bytes);
void cpu_zero(dsv4_backend *b, void *p, size_t bytes);
dsv4_status cpu_adopt_weight(dsv4_backend *b, dsv4_mat *m);
dsv4_status cpu_sync(dsv4_backend *b);

static void cpu_backend_free(dsv4_backend *b);

static const dsv4_ops k_cpu_ops = {
    .alloc = cpu_alloc,
    .free = cpu_free,
    .upload = cpu_copy,
    .download = cpu_copy,
    .copy = cpu_copy,
    .zero = cpu_zero,
    .adopt_weight = cpu_adopt_weight,
    .sync = cpu_sync,
    .destroy = cpu_backend_free,
    .matmul = cpu_matmul,
    .rmsnorm = cpu_rmsnorm,
    .rope = cpu_rope,
    .norm_rope = cpu_norm_rope,
    .embed = cpu_embed,
    .hc_pre = cpu_hc_pre,
    .hc_post = cpu_hc_post,
    .hc_head = cpu_hc_head,
    .ring_store = cpu_ring_store,
    .compress = cpu_compress,
    .indexer = cpu_indexer,
    .attention = cpu_attention,
    .moe = cpu_moe,
    .matmul_grouped = cpu_matmul_grouped,
    .matmul_pair = cpu_matmul_pair,
    .idx_fp4_round = cpu_idx_fp4_round,
    .act_fp8_round = cpu_act_fp8_round,
    .matmul_fp8in = cpu_matmul_fp8in,
    .matmul_post = cpu_matmul_post,
    .pick_sum = cpu_pick_sum,
};

static void cpu_backend_free(dsv4_backend *b)
{
    if (!b) return;
    cpu_impl *c = b->impl;
    if (c) {
        if (c->row)
            for (int i = 0; i < pool_size(c->pool); i++) free(c->row[i]);
        free(c->row);
        pool_free(c->pool);
        free(c);
    }
    free(b);
}

dsv4_backend *cpu_backend_new(int n_threads, int64_t max_row)
{
    dsv4_backend *b = calloc(1, sizeof *b);
    cpu_impl *c = calloc(1, sizeof *c);
    if (!b || !c) { free(b); free(c); dsv4_fail(DSV4_ERR_NOMEM, "out of memory creating the CPU backend"); return NULL; }
    b->name = "cpu";
    b->ops = &k_cpu_ops;
    b->impl = c;
    c->pool = pool_new(n_threads);
    int n = pool_size(c->pool);
    c->row = c->pool ? calloc((size_t)n, sizeof *c->row) : NULL;
    c->row_cap = max_row;
    for (int i = 0; c->row && i < n; i++)
        if (!(c->row[i] = malloc((size_t)max_row * sizeof(float)))) { cpu_backend_free(b); b = NULL; break; }
    if (b && (!c->pool || !c->row)) { cpu_backend_free(b); b = NULL; }
    if (!b) dsv4_fail(DSV4_ERR_NOMEM, "out of memory creating the CPU backend");
    return b;
}

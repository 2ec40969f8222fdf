/* A profiling wrapper around a backend: forwards every op to the wrapped
 * backend and adds the wall time of each call (synchronized, so device work
 * is counted) to its op family. Used by `dsv4 bench` for the split of step
 * time; it serializes device work, so it measures shares, not the fastest
 * time. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "engine/profile.h"

enum { P_MATMUL, P_RMSNORM, P_ROPE, P_NORM_ROPE, P_EMBED, P_HC_PRE, P_HC_POST, P_HC_HEAD, P_RING, P_COMPRESS, P_INDEXER,
       P_ATTENTION, P_MOE, P_CACHE_QUANT, P_COUNT };
static const char *const k_names[P_COUNT] = {"matmul (projections, head)", "rmsnorm", "rope",
                                             "norm + rope (query, KV heads)", "embed",
                                             "hc_pre (mHC mix + Sinkhorn)", "hc_post", "hc_head", "ring_store",
                                             "compressor", "indexer", "attention", "moe (router + experts)",
                                             "FP8/FP4 rounding (official numerics)"};

typedef struct {
    dsv4_backend *inner;
    double sec[P_COUNT];
    long calls[P_COUNT];
    dsv4_ops ops;
} prof_impl;

#define INNER(b) (((prof_impl *)(b)->impl)->inner)

/* Times one forwarded call, with the inner backend drained before and after. */
#define TIMED(b, fam, call)                                                                   \
    do {                                                                                      \
        prof_impl *pi_ = (b)->impl;                                                           \
        dsv4_backend *in_ = pi_->inner;                                                       \
        (void)in_->ops->sync(in_);                                                            \
        double t0_ = clock_s();                                                                   \
        call;                                                                                 \
        (void)in_->ops->sync(in_);                                                            \
        pi_->sec[fam] += clock_s() - t0_;                                                         \
        pi_->calls[fam]++;                                                                    \
    } while (0)

static void p_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{ TIMED(b, P_MATMUL, INNER(b)->ops->matmul(INNER(b), x, ldx, T, W, y, ldy)); }
static void p_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y)
{ TIMED(b, P_RMSNORM, INNER(b)->ops->rmsnorm(INNER(b), x, T, n, w, eps, y)); }
static void p_rope(dsv4_backend *b, float *x, int T, int nh, int hd, int rd, int64_t p0, int64_t ps, const int64_t *pos,
                   const float *f, int inv)
{ TIMED(b, P_ROPE, INNER(b)->ops->rope(INNER(b), x, T, nh, hd, rd, p0, ps, pos, f, inv)); }
static void p_norm_rope(dsv4_backend *b, float *x, int T, int nh, int hd, int rd, const dsv4_mat *w, float eps,
                        const int64_t *pos, const float *f, int n_fp8)
{ TIMED(b, P_NORM_ROPE, INNER(b)->ops->norm_rope(INNER(b), x, T, nh, hd, rd, w, eps, pos, f, n_fp8)); }
static void p_embed(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok, int T, int hc, float *X)
{ TIMED(b, P_EMBED, INNER(b)->ops->embed(INNER(b), E, tok, T, hc, X)); }
static void p_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                     const dsv4_mat *scale, int iters, float he, float ne, const dsv4_mat *nw, float *x, float *post,
                     float *comb)
{ TIMED(b, P_HC_PRE, INNER(b)->ops->hc_pre(INNER(b), X, T, hc, D, fn, base, scale, iters, he, ne, nw, x, post, comb)); }
static void p_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post,
                      const float *comb)
{ TIMED(b, P_HC_POST, INNER(b)->ops->hc_post(INNER(b), X, T, hc, D, a, post, comb)); }
static void p_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                      const dsv4_mat *scale, float he, float ne, const dsv4_mat *nw, float *x)
{ TIMED(b, P_HC_HEAD, INNER(b)->ops->hc_head(INNER(b), X, T, hc, D, fn, base, scale, he, ne, nw, x)); }
static void p_ring(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f, const float *kv, int T,
                   int64_t pos0)
{ TIMED(b, P_RING, INNER(b)->ops->ring_store(INNER(b), ring, window, f, kv, T, pos0)); }
static void p_compress(dsv4_backend *b, const float *u, const float *g, int T, int64_t pos0,
                       const dsv4_comp_params *p, dsv4_comp_state *st)
{ TIMED(b, P_COMPRESS, INNER(b)->ops->compress(INNER(b), u, g, T, pos0, p, st)); }
static void p_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads,
                      const uint8_t *keys, const dsv4_row_fmt *kf, int ratio, int topk, float ss, float ws,
                      int32_t *idx, int32_t *n)
{ TIMED(b, P_INDEXER, INNER(b)->ops->indexer(INNER(b), q, w, T, pos0, heads, keys, kf, ratio, topk, ss, ws, idx, n)); }
static void p_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window,
                        const uint8_t *ring, const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf,
                        int ratio, const int32_t *si, const int32_t *sn, int cap, const dsv4_mat *sinks, float scale,
                        int rd, const float *freq, float *out)
{ TIMED(b, P_ATTENTION, INNER(b)->ops->attention(INNER(b), q, T, pos0, H, hd, window, ring, kv, entries, kf, ratio,
                                                 si, sn, cap, sinks, scale, rd, freq, out)); }
static void p_moe(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D, const dsv4_moe_params *p,
                  float *out)
{ TIMED(b, P_MOE, INNER(b)->ops->moe(INNER(b), x, tok, T, D, p, out)); }

static void p_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups,
                             float *y, int64_t ldy)
{ TIMED(b, P_MATMUL, INNER(b)->ops->matmul_grouped(INNER(b), x, ldx, T, W, groups, y, ldy)); }

static void p_matmul_pair(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1,
                          int64_t ldy1, const dsv4_mat *W2, float *y2, int64_t ldy2)
{ TIMED(b, P_MATMUL, INNER(b)->ops->matmul_pair(INNER(b), x, ldx, T, W1, y1, ldy1, W2, y2, ldy2)); }

static void p_idx_fp4_round(dsv4_backend *b, float *x, int rows, int width)
{ TIMED(b, P_CACHE_QUANT, INNER(b)->ops->idx_fp4_round(INNER(b), x, rows, width)); }

static void p_act_fp8_round(dsv4_backend *b, const float *x, int T, int n, float *y)
{ TIMED(b, P_CACHE_QUANT, INNER(b)->ops->act_fp8_round(INNER(b), x, T, n, y)); }

static void p_matmul_fp8in(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y,
                           int64_t ldy)
{ TIMED(b, P_MATMUL, INNER(b)->ops->matmul_fp8in(INNER(b), x, ldx, T, W, y, ldy)); }

static void p_matmul_post(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                          const dsv4_hc_post *post)
{ TIMED(b, P_MATMUL, INNER(b)->ops->matmul_post(INNER(b), x, ldx, T, W, fp8in, y, post)); }

static void *p_alloc(dsv4_backend *b, size_t n) { return INNER(b)->ops->alloc(INNER(b), n); }
static void p_free(dsv4_backend *b, void *p) { INNER(b)->ops->free(INNER(b), p); }
static void p_upload(dsv4_backend *b, void *d, const void *s, size_t n) { INNER(b)->ops->upload(INNER(b), d, s, n); }
static void p_download(dsv4_backend *b, void *d, const void *s, size_t n) { INNER(b)->ops->download(INNER(b), d, s, n); }
static void p_copy(dsv4_backend *b, void *d, const void *s, size_t n) { INNER(b)->ops->copy(INNER(b), d, s, n); }
static void p_zero(dsv4_backend *b, void *p, size_t n) { INNER(b)->ops->zero(INNER(b), p, n); }
static dsv4_status p_adopt(dsv4_backend *b, dsv4_mat *m) { return INNER(b)->ops->adopt_weight(INNER(b), m); }
static dsv4_status p_sync(dsv4_backend *b) { return INNER(b)->ops->sync(INNER(b)); }
static void p_destroy(dsv4_backend *b) { free(b->impl); free(b); }

dsv4_backend *profile_wrap(dsv4_backend *inner)
{
    dsv4_backend *b = calloc(1, sizeof *b);
    prof_impl *pi = calloc(1, sizeof *pi);
    if (!b || !pi) { free(b); free(pi); dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); return NULL; }
    pi->inner = inner;
    pi->ops = (dsv4_ops){
        .alloc = p_alloc, .free = p_free, .upload = p_upload, .download = p_download, .copy = p_copy,
        .zero = p_zero, .adopt_weight = p_adopt, .sync = p_sync, .destroy = p_destroy,
        .matmul = p_matmul, .rmsnorm = p_rmsnorm, .rope = p_rope, .norm_rope = p_norm_rope, .embed = p_embed, .hc_pre = p_hc_pre,
        .hc_post = p_hc_post, .hc_head = p_hc_head, .ring_store = p_ring, .compress = p_compress,
        .indexer = p_indexer, .attention = p_attention, .moe = p_moe,
        .matmul_grouped = p_matmul_grouped, .matmul_pair = p_matmul_pair, .matmul_post = p_matmul_post,
        /* optional ops stay absent where the wrapped backend lacks them */
        .idx_fp4_round = inner->ops->idx_fp4_round ? p_idx_fp4_round : NULL,
        .act_fp8_round = inner->ops->act_fp8_round ? p_act_fp8_round : NULL,
        .matmul_fp8in = inner->ops->matmul_fp8in ? p_matmul_fp8in : NULL,
    };
    b->name = inner->name;
    b->ops = &pi->ops;
    b->impl = pi;
    return b;
}

int profile_report(const dsv4_backend *b, const char **names, double *seconds, long *calls, int max)
{
    const prof_impl *pi = b->impl;
    int n = 0;
    for (int i = 0; i < P_COUNT && n < max; i++) {
        if (!pi->calls[i]) continue;
        names[n] = k_names[i];
        seconds[n] = pi->sec[i];
        calls[n] = pi->calls[i];
        n++;
    }
    return n;
}

void profile_reset(dsv4_backend *b)
{
    prof_impl *pi = b->impl;
    memset(pi->sec, 0, sizeof pi->sec);
    memset(pi->calls, 0, sizeof pi->calls);
}

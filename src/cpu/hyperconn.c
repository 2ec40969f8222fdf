/* Manifold-constrained hyper-connections (mHC) on the CPU (spec §2).
 * Everything in fp32; the Sinkhorn projection runs exactly `iters` rounds:
 * softmax rows (+eps), normalize columns, then iters−1 (row, column) pairs. */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu.h"

#define HC_MAX 16

static float sigmoidf(float x) { return 1.0f / (1.0f + expf(-x)); }

/* mix[k] = fn[k] · (v · rsqrt(mean(v²)+eps)) for k < n_mix. */
static void hc_mixes(dsv4_backend *b, int tid, const float *v, int64_t n, const dsv4_mat *fn, int n_mix, float eps,
                     float *flat, float *mix)
{
    float r = 1.0f / sqrtf(cpu_dot(v, v, n) / (float)n + eps);
    for (int64_t i = 0; i < n; i++) flat[i] = v[i] * r;
    float *row = cpu_scratch_row(b, tid);
    for (int k = 0; k < n_mix; k++) {
        const float *w;
        if (fn->fmt == WF_F32) {
            w = (const float *)fn->data + (int64_t)k * n;
        } else {
            wmat_decode_row(fn, k, 0, n, row);
            w = row;
        }
        mix[k] = cpu_dot(w, flat, n);
    }
}

/* x[0..D) = the hc streams X collapsed by pre, then RMS-normalized (the
 * norm that follows hc_pre and hc_head). */
static void hc_collapse_norm(const float *X, int hc, int D, const float *pre, const dsv4_mat *norm, float eps,
                             float *x)
{
    for (int d = 0; d < D; d++) {
        float s = 0;
        for (int i = 0; i < hc; i++) s += pre[i] * X[(int64_t)i * D + d];
        x[d] = s;
    }
    cpu_rms_row(x, D, norm, eps, x);
}

typedef struct {
    dsv4_backend *b;
    const float *X;
    int hc, D, iters;
    const dsv4_mat *fn, *base, *scale;
    float hc_eps, norm_eps;
    const dsv4_mat *norm;
    float *x, *post, *comb;
    float *flat; /* [threads][hc·D] */
} hc_job;

static void hc_pre_tokens(void *ctx, int64_t t0, int64_t t1, int tid)
{
    hc_job *j = ctx;
    int hc = j->hc, D = j->D, n_mix = (2 + hc) * hc;
    float mix[(2 + HC_MAX) * HC_MAX], pre[HC_MAX], c[HC_MAX * HC_MAX];
    float s0 = mat_get(j->scale, 0), s1 = mat_get(j->scale, 1), s2 = mat_get(j->scale, 2);
    float *flat = j->flat + (int64_t)tid * hc * D;
    for (int64_t t = t0; t < t1; t++) {
        const float *X = j->X + t * hc * D;
        hc_mixes(j->b, tid, X, (int64_t)hc * D, j->fn, n_mix, j->norm_eps, flat, mix);
        for (int i = 0; i < hc; i++) {
            pre[i] = sigmoidf(mix[i] * s0 + mat_get(j->base, i)) + j->hc_eps;
            j->post[t * hc + i] = 2.0f * sigmoidf(mix[hc + i] * s1 + mat_get(j->base, hc + i));
        }
        for (int r = 0; r < hc; r++) { /* row softmax + eps */
            float mx = -INFINITY, sum = 0;
            for (int k = 0; k < hc; k++) {
                int q = r * hc + k;
                c[q] = mix[2 * hc + q] * s2 + mat_get(j->base, 2 * hc + q);
                if (c[q] > mx) mx = c[q];
            }
            for (int k = 0; k < hc; k++) sum += (c[r * hc + k] = expf(c[r * hc + k] - mx));
            for (int k = 0; k < hc; k++) c[r * hc + k] = c[r * hc + k] / sum + j->hc_eps;
        }
        for (int it = 0; it < j->iters; it++) {
            if (it > 0) /* rows */
                for (int r = 0; r < hc; r++) {
                    float s = 0;
                    for (int k = 0; k < hc; k++) s += c[r * hc + k];
                    for (int k = 0; k < hc; k++) c[r * hc + k] /= s + j->hc_eps;
                }
            for (int k = 0; k < hc; k++) { /* columns */
                float s = 0;
                for (int r = 0; r < hc; r++) s += c[r * hc + k];
                for (int r = 0; r < hc; r++) c[r * hc + k] /= s + j->hc_eps;
            }
        }
        for (int q = 0; q < hc * hc; q++) j->comb[t * hc * hc + q] = c[q];
        hc_collapse_norm(X, hc, D, pre, j->norm, j->norm_eps, j->x + t * D);
    }
}

static float *flat_scratch(dsv4_backend *b, int hc, int D)
{
    float *f = malloc((size_t)pool_size(cpu_pool(b)) * (size_t)hc * (size_t)D * sizeof *f);
    if (!f) backend_fail(b, DSV4_ERR_NOMEM, "out of memory in hyper-connection mixing");
    return f;
}

void cpu_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x,
                float *post, float *comb)
{
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    hc_job j = {b, X, hc, D, iters, fn, base, scale, hc_eps, norm_eps, norm, x, post, comb, flat_scratch(b, hc, D)};
    if (!j.flat) return;
    pool_for(cpu_pool(b), T, 1, hc_pre_tokens, &j);
    free(j.flat);
}

typedef struct {
    float *X;
    int hc, D;
    const float *a, *post, *comb;
} post_job;

static void hc_post_tokens(void *ctx, int64_t t0, int64_t t1, int tid)
{
    (void)tid;
    post_job *j = ctx;
    int hc = j->hc, D = j->D;
    for (int64_t t = t0; t < t1; t++) {
        float *X = j->X + t * hc * D;
        const float *a = j->a + t * D, *post = j->post + t * hc, *c = j->comb + t * hc * hc;
        for (int d = 0; d < D; d++) {
            float old[HC_MAX];
            for (int i = 0; i < hc; i++) old[i] = X[(int64_t)i * D + d];
            for (int k = 0; k < hc; k++) { /* comb applied transposed: Σ_j C[j][k] X_j */
                float s = 0;
                for (int i = 0; i < hc; i++) s += c[i * hc + k] * old[i];
                X[(int64_t)k * D + d] = post[k] * a[d] + s;
            }
        }
    }
}

void cpu_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post,
                 const float *comb)
{
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    post_job j = {X, hc, D, a, post, comb};
    pool_for(cpu_pool(b), T, 1, hc_post_tokens, &j);
}

/* The product into y, then hc_post of it: the two ops' values. */
void cpu_matmul_post(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                     const dsv4_hc_post *post)
{
    if (fp8in) cpu_matmul_fp8in(b, x, ldx, T, W, y, W->rows);
    else cpu_matmul(b, x, ldx, T, W, y, W->rows);
    cpu_hc_post(b, post->X, T, post->hc, (int)W->rows, y, post->post, post->comb);
}

typedef struct {
    dsv4_backend *b;
    const float *X;
    int hc, D;
    const dsv4_mat *fn, *base, *scale;
    float hc_eps, norm_eps;
    const dsv4_mat *norm;
    float *x, *flat;
} head_job;

static void hc_head_tokens(void *ctx, int64_t t0, int64_t t1, int tid)
{
    head_job *j = ctx;
    int hc = j->hc, D = j->D;
    float mix[HC_MAX], pre[HC_MAX];
    float sc = mat_get(j->scale, 0);
    float *flat = j->flat + (int64_t)tid * hc * D;
    for (int64_t t = t0; t < t1; t++) {
        const float *X = j->X + t * hc * D;
        hc_mixes(j->b, tid, X, (int64_t)hc * D, j->fn, hc, j->norm_eps, flat, mix);
        for (int i = 0; i < hc; i++) pre[i] = sigmoidf(mix[i] * sc + mat_get(j->base, i)) + j->hc_eps;
        hc_collapse_norm(X, hc, D, pre, j->norm, j->norm_eps, j->x + t * D);
    }
}

void cpu_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                 const dsv4_mat *scale, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x)
{
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    head_job j = {b, X, hc, D, fn, base, scale, hc_eps, norm_eps, norm, x, flat_scratch(b, hc, D)};
    if (!j.flat) return;
    pool_for(cpu_pool(b), T, 1, hc_head_tokens, &j);
    free(j.flat);
}

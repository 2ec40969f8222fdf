/* Manifold-constrained hyper-connections (mHC) on the GPU.
 *
 * hc_pre/hc_head: a mixing kernel computes the n_mix dot products of the
 * RMS-normalised streams with the rows of fn (one block per (mix, token),
 * spreading the read of fn over the whole GPU); a finishing kernel (one block
 * per token) turns them into pre/post/comb (Sinkhorn, `iters` rounds, as the
 * CPU) and collapses the streams. hc_post: elementwise. */
#include <string.h>

#include "cuda/cuda_internal.cuh"

#define HC_MAX 16

typedef struct {
    int64_t pos0;
    const float *X;
    int T, hc, D, iters, head;   /* head: hc_head (mix = hc, no post/comb) */
    dsv4_mat fn, base, scale;
    float hc_eps, norm_eps;
    float *x, *post, *comb;
    float *mix;                  /* workspace [T][n_mix] */
} hc_args;

/* mix[t][k] = rsqrt(mean(X[t]²)+eps) · (fn[k] · X[t]) */
__global__ void hc_mix_kernel(const float *X, int64_t n, dsv4_mat fn, float eps, float *mix, int n_mix)
{
    __shared__ float sh[32];
    int k = blockIdx.x, t = blockIdx.y;
    const float *v = X + (int64_t)t * n;
    float ss = 0.0f, dot = 0.0f;
    for (int64_t i = threadIdx.x; i < n; i += blockDim.x) {
        float xv = v[i];
        ss = fmaf(xv, xv, ss);
        dot = fmaf(cu_ld(fn.dtype, fn.data, (int64_t)k * n + i), xv, dot);
    }
    ss = cu_block_sum(ss, sh);
    dot = cu_block_sum(dot, sh);
    if (threadIdx.x == 0) mix[(int64_t)t * n_mix + k] = dot * (1.0f / sqrtf(ss / (float)n + eps));
}

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* One block per token; the Sinkhorn projection runs on hc·hc threads, one
 * per entry, each summing its row or column in the CPU's order. */
__global__ void hc_finish_kernel(hc_args a)
{
    __shared__ float pre[HC_MAX], cm[HC_MAX * HC_MAX];
    int t = blockIdx.x, hc = a.hc, D = a.D, q = threadIdx.x, nq = hc * hc;
    int n_mix = a.head ? hc : (2 + hc) * hc;
    const float *mix = a.mix + (int64_t)t * n_mix;
    float s0 = cu_ld(a.scale.dtype, a.scale.data, 0);
    if (q < hc) pre[q] = sigm(mix[q] * s0 + cu_ld(a.base.dtype, a.base.data, q)) + a.hc_eps;
    if (!a.head) {
        float s1 = cu_ld(a.scale.dtype, a.scale.data, 1), s2 = cu_ld(a.scale.dtype, a.scale.data, 2);
        if (q < hc)
            a.post[(int64_t)t * hc + q] = 2.0f * sigm(mix[hc + q] * s1 + cu_ld(a.base.dtype, a.base.data, hc + q));
        if (q < nq) cm[q] = mix[2 * hc + q] * s2 + cu_ld(a.base.dtype, a.base.data, 2 * hc + q);
        __syncthreads();
        int r = q / hc, k = q % hc;
        float v = 0.0f;
        if (q < nq) { /* row softmax + eps */
            float mx = -INFINITY, sum = 0.0f;
            for (int j = 0; j < hc; j++) mx = fmaxf(mx, cm[r * hc + j]);
            for (int j = 0; j < hc; j++) sum += expf(cm[r * hc + j] - mx);
            v = expf(cm[q] - mx) / sum + a.hc_eps;
        }
        __syncthreads();
        if (q < nq) cm[q] = v;
        __syncthreads();
        for (int it = 0; it < a.iters; it++) {
            if (it > 0) {
                if (q < nq) {
                    float sr = 0.0f;
                    for (int j = 0; j < hc; j++) sr += cm[r * hc + j];
                    v = cm[q] / (sr + a.hc_eps);
                }
                __syncthreads();
                if (q < nq) cm[q] = v;
                __syncthreads();
            }
            if (q < nq) {
                float sc = 0.0f;
                for (int j = 0; j < hc; j++) sc += cm[j * hc + k];
                v = cm[q] / (sc + a.hc_eps);
            }
            __syncthreads();
            if (q < nq) cm[q] = v;
            __syncthreads();
        }
        if (q < nq) a.comb[(int64_t)t * nq + q] = cm[q];
    }
    __syncthreads();
    const float *X = a.X + (int64_t)t * hc * D;
    for (int d = threadIdx.x; d < D; d += blockDim.x) {
        float s = 0.0f;
        for (int i = 0; i < hc; i++) s += pre[i] * X[(int64_t)i * D + d];
        a.x[(int64_t)t * D + d] = s;
    }
}

static void exec_hc(cu_impl *c, const hc_args *a)
{
    if (a->T <= 0) return;
    int n_mix = a->head ? a->hc : (2 + a->hc) * a->hc;
    int64_t n = (int64_t)a->hc * a->D;
    hc_mix_kernel<<<dim3((unsigned)n_mix, (unsigned)a->T), 512, 0, c->stream>>>(a->X, n, a->fn, a->norm_eps, a->mix,
                                                                               n_mix);
    CU_LAUNCHED(c, "hc mix");
    hc_finish_kernel<<<a->T, 256, 0, c->stream>>>(*a);
    CU_LAUNCHED(c, "hc finish");
}

void cu_exec_hc_pre(cu_impl *c, const void *args, const int64_t *dpos) { (void)dpos; exec_hc(c, (const hc_args *)args); }
void cu_exec_hc_head(cu_impl *c, const void *args, const int64_t *dpos) { (void)dpos; exec_hc(c, (const hc_args *)args); }

static void submit_hc(dsv4_backend *b, int kind, const float *X, int T, int hc, int D, const dsv4_mat *fn,
                      const dsv4_mat *base, const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, float *x,
                      float *post, float *comb)
{
    cu_impl *c = cu_of(b);
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    hc_args a;
    memset(&a, 0, sizeof a);
    a.X = X;
    a.T = T;
    a.hc = hc;
    a.D = D;
    a.iters = iters;
    a.head = kind == K_HC_HEAD;
    a.fn = *fn;
    a.base = *base;
    a.scale = *scale;
    a.hc_eps = hc_eps;
    a.norm_eps = norm_eps;
    a.x = x;
    a.post = post;
    a.comb = comb;
    a.mix = (float *)cu_ws(c, WS_HC, (size_t)(T > 0 ? T : 1) * (size_t)((2 + hc) * hc) * sizeof(float));
    if (!a.mix) return;
    cu_submit(c, kind, &a, sizeof a);
}

void cu_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
               const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, float *x, float *post, float *comb)
{
    submit_hc(b, K_HC_PRE, X, T, hc, D, fn, base, scale, iters, hc_eps, norm_eps, x, post, comb);
}

void cu_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                const dsv4_mat *scale, float hc_eps, float norm_eps, float *x)
{
    submit_hc(b, K_HC_HEAD, X, T, hc, D, fn, base, scale, 0, hc_eps, norm_eps, x, NULL, NULL);
}

/* ---- hc_post: X'[k] = post[k]·a + Σ_j comb[j][k]·X[j] ---- */

typedef struct {
    int64_t pos0;
    float *X;
    int T, hc, D;
    const float *a, *post, *comb;
} post_args;

__global__ void hc_post_kernel(post_args p)
{
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)p.T * p.D) return;
    int64_t t = i / p.D, d = i % p.D;
    int hc = p.hc;
    float *X = p.X + t * hc * p.D;
    const float *cm = p.comb + t * hc * hc, *po = p.post + t * hc;
    float old[HC_MAX];
    for (int j = 0; j < hc; j++) old[j] = X[(int64_t)j * p.D + d];
    float av = p.a[t * p.D + d];
    for (int k = 0; k < hc; k++) {
        float s = 0.0f;
        for (int j = 0; j < hc; j++) s += cm[j * hc + k] * old[j];
        X[(int64_t)k * p.D + d] = po[k] * av + s;
    }
}

void cu_exec_hc_post(cu_impl *c, const void *args, const int64_t *dpos)
{
    const post_args *a = (const post_args *)args;
    (void)dpos;
    int64_t n = (int64_t)a->T * a->D;
    if (n <= 0) return;
    hc_post_kernel<<<cu_blocks(n, 256), 256, 0, c->stream>>>(*a);
    CU_LAUNCHED(c, "hc_post");
}

void cu_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post, const float *comb)
{
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    post_args p;
    memset(&p, 0, sizeof p);
    p.X = X;
    p.T = T;
    p.hc = hc;
    p.D = D;
    p.a = a;
    p.post = post;
    p.comb = comb;
    cu_submit(cu_of(b), K_HC_POST, &p, sizeof p);
}

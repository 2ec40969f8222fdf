/* Manifold-constrained hyper-connections (mHC) on the GPU.
 *
 * hc_pre/hc_head: a mixing kernel computes the n_mix dot products of the
 * RMS-normalised streams with the rows of fn (one block per (mix, token),
 * spreading the read of fn over the whole GPU); a finishing kernel (one block
 * per token) turns them into pre/post/comb (Sinkhorn, `iters` rounds, as the
 * CPU), collapses the streams and applies the norm that follows (the
 * rmsnorm op's arithmetic, rms_row.cuh: no norm launch of its own).
 * hc_post: elementwise. */
#include <string.h>

#include "cuda/ggml_blocks.cuh"
#include "cuda/hc_post.cuh"
#include "cuda/rms_row.cuh"

typedef struct {
    int64_t pos0;
    const float *X;
    int T, hc, D, iters, head;   /* head: hc_head (mix = hc, no post/comb) */
    dsv4_mat fn, base, scale, norm;
    float hc_eps, norm_eps;
    float *x, *post, *comb;
    int splits;                  /* hc_mix_splits(hc·D) */
    float *mix;                  /* workspace: [T][n_mix][splits] dot products, then [T][splits] sums of squares */
} hc_args;

/* Slices of a mixing row, each one block's: from the row length alone (so
 * a row's sums never depend on T), whole 32-value chunks (GGUF blocks) of
 * at least 1024 values. The 24 rows of hc = 4 alone would read the 1.5 MB
 * of fn on 24 SMs. */
static int hc_mix_splits(int64_t n)
{
    int s = 8;
    while (s > 1 && (n % (s * 32) || n / s < 1024)) s /= 2;
    return s;
}
#define HC_MIX_THREADS 256

/* Block (kg·splits + slice, tg): mixes k = kg·KG ... kg·KG + KG − 1 against
 * tokens t = tg·TG ... (those below T). Over the slice's values of X[t]
 * and of row k of fn, the dot product and (k = 0 only) the sum of squares,
 * each in a fixed order (a thread's pieces in turn, then the block sum of
 * cu_block_sum, hc_block_sums); the finishing kernel adds the slices in
 * slice order: mix[t][k] = rsqrt(mean(X[t]²)+eps) · (fn[k] · X[t]). KG and
 * TG only say how many mixes and tokens share a block's loads (a prompt's
 * rows read each piece of fn and of X once a block instead of once a
 * (mix, token)); a sum's arithmetic is the same in every instance. 16-byte
 * loads of fn and X when aligned (KG = TG = 1, the decode instance: a
 * thread's first HC_PRE pieces of fn read before waiting for the
 * predecessor: no predecessor writes fn, so the reads' latency overlaps its
 * end); GGUF blocks of fn 32 values (one chunk) at a time. */
#define HC_PRE 4

/* cu_block_sum of the N values v[] of every thread, each with its tree
 * (warp butterflies, the warps' sums in a warp's butterfly), in one pass
 * of barriers; value i's sum goes to out(i, sum) from one thread. sh:
 * N·32 floats. */
template <int N, class F>
__device__ __forceinline__ void hc_block_sums(float *v, float *sh, F out)
{
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
#pragma unroll
    for (int i = 0; i < N; i++) v[i] = cu_warp_sum(v[i]);
    if (l == 0)
#pragma unroll
        for (int i = 0; i < N; i++) sh[i * 32 + w] = v[i];
    __syncthreads();
    for (int i = w; i < N; i += nw) {
        float r = cu_warp_sum(l < nw ? sh[i * 32 + l] : 0.0f);
        if (l == 0) out(i, r);
    }
}

template <int KG, int TG>
__global__ void __launch_bounds__(HC_MIX_THREADS) hc_mix_kernel(const float *X, int64_t n, int T, dsv4_mat fn,
                                                                float *mix, int n_mix, int splits, int vec)
{
    int k0 = blockIdx.x / splits * KG, sl = blockIdx.x % splits, t0 = blockIdx.y * TG;
    int nt = T - t0 < TG ? T - t0 : TG, sq = k0 == 0; /* sq: this block's mixes include k = 0 */
    int per = fn.dtype == DT_F32 ? 4 : 8, esz = fn.dtype == DT_F32 ? 4 : 2;
    int64_t len = n / splits, v0 = sl * len; /* the slice: values [v0, v0 + len) */
    const uint4 *w = (const uint4 *)((const char *)fn.data + ((int64_t)k0 * n + v0) * esz);
    int64_t nc = len / per, wstride = n * esz / 16; /* uint4s from row k to row k + 1 of fn (vec) */
    constexpr int NPRE = KG == 1 && TG == 1 ? HC_PRE : 0;
    int pre = vec && !gg_is_fmt(fn.fmt);
    uint4 wp[NPRE > 0 ? NPRE : 1];
#pragma unroll
    for (int i = 0; i < NPRE; i++) {
        int64_t c = threadIdx.x + (int64_t)i * blockDim.x;
        wp[i] = pre && c < nc ? __ldg(w + c) : make_uint4(0, 0, 0, 0);
    }
    cu_pdl();
    __shared__ float sh[(KG + 1) * TG * 32];
    const float *v = X + (int64_t)t0 * n + v0;
    float ss[TG], dot[KG][TG];
#pragma unroll
    for (int i = 0; i < TG; i++) {
        ss[i] = 0.0f;
#pragma unroll
        for (int k = 0; k < KG; k++) dot[k][i] = 0.0f;
    }
    /* the KG pieces c of fn (u[k], or f[k] as floats) against the same 4
     * or 8 values of each token's X */
    auto piece = [&](int64_t c, const uint4 *u) {
        float f[KG][8];
#pragma unroll
        for (int k = 0; k < KG; k++) {
            if (per == 8) {
                cu_unpack8(fn.dtype, u[k], f[k]);
            } else {
                f[k][0] = __uint_as_float(u[k].x); f[k][1] = __uint_as_float(u[k].y);
                f[k][2] = __uint_as_float(u[k].z); f[k][3] = __uint_as_float(u[k].w);
            }
        }
#pragma unroll
        for (int i = 0; i < TG; i++) {
            if (i >= nt) break;
            const float *vt = v + (int64_t)i * n;
            float xv[8];
            if (per == 8) {
                float4 a = ((const float4 *)vt)[2 * c], b = ((const float4 *)vt)[2 * c + 1];
                xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w; xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
            } else {
                float4 a = ((const float4 *)vt)[c];
                xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w;
            }
            /* unrolled to 8 (the arrays stay in registers; a loop to the
             * run-time per put them in local memory) */
#pragma unroll
            for (int j = 0; j < 8; j++) {
                if (j >= per) break;
                if (sq) ss[i] = fmaf(xv[j], xv[j], ss[i]);
#pragma unroll
                for (int k = 0; k < KG; k++) dot[k][i] = fmaf(f[k][j], xv[j], dot[k][i]);
            }
        }
    };
    if (gg_is_fmt(fn.fmt)) {
        int64_t rb = gg_row_bytes(fn.fmt, n);
        for (int64_t c = threadIdx.x; c < len / 32; c += blockDim.x) {
            float f[KG][32];
#pragma unroll
            for (int k = 0; k < KG; k++) gg_chunk_rt(fn.fmt, (const uint8_t *)fn.data + (k0 + k) * rb, v0 / 32 + c, f[k]);
            for (int i = 0; i < nt; i++)
                for (int j = 0; j < 32; j++) {
                    float xv = v[(int64_t)i * n + 32 * c + j];
                    if (sq) ss[i] = fmaf(xv, xv, ss[i]);
#pragma unroll
                    for (int k = 0; k < KG; k++) dot[k][i] = fmaf(f[k][j], xv, dot[k][i]);
                }
        }
    } else if (vec) {
        /* the pieces in the same order as one loop over c would take them */
#pragma unroll
        for (int i = 0; i < NPRE; i++) {
            int64_t c = threadIdx.x + (int64_t)i * blockDim.x;
            if (c < nc) piece(c, &wp[i]);
        }
        for (int64_t c = threadIdx.x + (int64_t)NPRE * blockDim.x; c < nc; c += blockDim.x) {
            uint4 u[KG];
#pragma unroll
            for (int k = 0; k < KG; k++) u[k] = __ldg(w + k * wstride + c);
            piece(c, u);
        }
    } else {
        for (int64_t c = threadIdx.x; c < len; c += blockDim.x) {
            float f[KG];
#pragma unroll
            for (int k = 0; k < KG; k++) f[k] = cu_ld(fn.dtype, fn.data, (int64_t)(k0 + k) * n + v0 + c);
            for (int i = 0; i < nt; i++) {
                float xv = v[(int64_t)i * n + c];
                if (sq) ss[i] = fmaf(xv, xv, ss[i]);
#pragma unroll
                for (int k = 0; k < KG; k++) dot[k][i] = fmaf(f[k], xv, dot[k][i]);
            }
        }
    }
    /* values: dot[k][i] at k·TG + i, then ss[i] at KG·TG + i */
    float vals[(KG + 1) * TG];
#pragma unroll
    for (int i = 0; i < TG; i++) {
#pragma unroll
        for (int k = 0; k < KG; k++) vals[k * TG + i] = dot[k][i];
        vals[KG * TG + i] = ss[i];
    }
    hc_block_sums<(KG + 1) * TG>(vals, sh, [&](int idx, float r) {
        int i = idx % TG;
        if (i >= nt) return;
        int64_t t = t0 + i;
        if (idx < KG * TG) mix[(t * n_mix + k0 + idx / TG) * splits + sl] = r;
        else if (sq) mix[(int64_t)T * n_mix * splits + t * splits + sl] = r;
    });
}

__device__ __forceinline__ float sigm(float x) { return 1.0f / (1.0f + expf(-x)); }

/* hc·hc > 32: the Sinkhorn projection on nq threads of the block, one per
 * entry, each summing its row or column in the CPU's order. */
__device__ void sinkhorn_block(float *cm, int hc, int iters, float eps, int q)
{
    int nq = hc * hc, r = q / hc, k = q % hc;
    float v = 0.0f;
    if (q < nq) { /* row softmax + eps */
        float mx = -INFINITY, sum = 0.0f;
        for (int j = 0; j < hc; j++) mx = fmaxf(mx, cm[r * hc + j]);
        for (int j = 0; j < hc; j++) sum += expf(cm[r * hc + j] - mx);
        v = expf(cm[q] - mx) / sum + eps;
    }
    __syncthreads();
    if (q < nq) cm[q] = v;
    __syncthreads();
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            if (q < nq) {
                float sr = 0.0f;
                for (int j = 0; j < hc; j++) sr += cm[r * hc + j];
                v = cm[q] / (sr + eps);
            }
            __syncthreads();
            if (q < nq) cm[q] = v;
            __syncthreads();
        }
        if (q < nq) {
            float sc = 0.0f;
            for (int j = 0; j < hc; j++) sc += cm[j * hc + k];
            v = cm[q] / (sc + eps);
        }
        __syncthreads();
        if (q < nq) cm[q] = v;
        __syncthreads();
    }
}

/* hc·hc <= 32 (hc = 4 in the real models): one warp, lane q holds entry q
 * in a register and gathers its row or column with shuffles; sums in the
 * CPU's order, one division per lane per step, all lanes at once. HC > 0:
 * hc known at compile time, so the shuffles of a sum are issued together
 * (the same sums). */
template <int HC>
__device__ void sinkhorn_warp(float *cm, int hc_rt, int iters, float eps)
{
    const int hc = HC > 0 ? HC : hc_rt;
    int q = threadIdx.x & 31, nq = hc * hc, r = q / hc, k = q % hc;
    float c = q < nq ? cm[q] : 0.0f;
    float mx = -INFINITY, sum = 0.0f;
#pragma unroll
    for (int j = 0; j < hc; j++) mx = fmaxf(mx, __shfl_sync(0xffffffffu, c, (r * hc + j) & 31));
    float e = expf(c - mx);
#pragma unroll
    for (int j = 0; j < hc; j++) sum += __shfl_sync(0xffffffffu, e, (r * hc + j) & 31);
    c = e / sum + eps;
    for (int it = 0; it < iters; it++) {
        if (it > 0) {
            float sr = 0.0f;
#pragma unroll
            for (int j = 0; j < hc; j++) sr += __shfl_sync(0xffffffffu, c, (r * hc + j) & 31);
            c = c / (sr + eps);
        }
        float sc = 0.0f;
#pragma unroll
        for (int j = 0; j < hc; j++) sc += __shfl_sync(0xffffffffu, c, (j * hc + k) & 31);
        c = c / (sc + eps);
    }
    if (q < nq) cm[q] = c;
}

/* Threads of the finishing block: the norm's (rms_threads), and at least
 * one per comb entry for the block Sinkhorn (hc·hc > 32; with rows under
 * 1024 values and hc >= 12 only, the norm's stride then differs from the
 * rmsnorm op's: the same values up to the order of its sum). */
static int hc_finish_threads(int hc, int D)
{
    int t = rms_threads(D), nq = (hc * hc + 31) / 32 * 32;
    return nq > 32 && nq > t ? nq : t;
}

/* The slice sums of mixes k0 .. k1 − 1 of token t into mix[] (shared), in
 * slice order: mix[k] = rsqrt(mean(X[t]²) + eps) · (fn[k] · X[t]). A
 * thread's S (<= 8, hc_mix_splits) pairs of loads are issued before its
 * first add. */
__device__ __forceinline__ void hc_mix_sums(const hc_args &a, int t, int n_mix, int k0, int k1, float *mix)
{
    int S = a.splits;
    const float *dots = a.mix + (int64_t)t * n_mix * S, *sq = a.mix + ((int64_t)a.T * n_mix + t) * S;
    for (int k = k0 + (int)threadIdx.x; k < k1; k += blockDim.x) {
        float vs[8], vd[8];
#pragma unroll
        for (int j = 0; j < 8; j++) {
            vs[j] = j < S ? sq[j] : 0.0f;
            vd[j] = j < S ? dots[k * S + j] : 0.0f;
        }
        float ss = 0.0f, dot = 0.0f;
#pragma unroll
        for (int j = 0; j < 8; j++)
            if (j < S) {
                ss += vs[j];
                dot += vd[j];
            }
        mix[k] = dot * (1.0f / sqrtf(ss / (float)(a.hc * a.D) + a.norm_eps));
    }
}

/* The streams of token t collapsed by pre and normalized into x (HC > 0:
 * hc known at compile time, so a value's hc loads are issued together;
 * the same sums). */
template <int HC>
__device__ __forceinline__ void hc_collapse(const hc_args &a, int t, const float *pre, const rms_w &wv, float *sh)
{
    const int hc = HC > 0 ? HC : a.hc;
    const int64_t D = a.D;
    const float *__restrict__ X = a.X + (int64_t)t * hc * D;
    rms_row(
        [&](int d) {
            float s = 0.0f;
#pragma unroll
            for (int i = 0; i < hc; i++) s += pre[i] * X[(int64_t)i * D + d];
            return s;
        },
        a.D, a.norm, wv, a.norm_eps, a.x + (int64_t)t * D, sh);
}

/* Grid (tokens, 2 for hc_pre, 1 for hc_head). Block y = 0: pre, then the
 * streams collapsed by pre and normalized into x (every kind). Block y =
 * 1 (hc_pre): post and comb (the Sinkhorn on warp 0, or on the whole
 * block for hc·hc > 32), beside the collapse instead of before it: the
 * Sinkhorn's rounds are a serial chain as long as the rest of the work. */
__global__ void __launch_bounds__(1024) hc_finish_kernel(hc_args a)
{
    int t = blockIdx.x, hc = a.hc, q = threadIdx.x, nq = hc * hc;
    int n_mix = a.head ? hc : (2 + hc) * hc;
    __shared__ float pre[HC_MAX], cm[HC_MAX * HC_MAX], sh[32], mix[(2 + HC_MAX) * HC_MAX];
    if (blockIdx.y == 0) {
        /* the weights before waiting for the predecessor (none writes them) */
        rms_w wv = rms_weights(a.norm, a.D);
        float s0 = cu_ld(a.scale.dtype, a.scale.data, 0), b0 = q < hc ? cu_ld(a.base.dtype, a.base.data, q) : 0.0f;
        cu_pdl();
        hc_mix_sums(a, t, n_mix, 0, hc, mix);
        if (q < hc) pre[q] = sigm(mix[q] * s0 + b0) + a.hc_eps;
        __syncthreads();
        if (hc == 4) hc_collapse<4>(a, t, pre, wv, sh);
        else hc_collapse<0>(a, t, pre, wv, sh);
        return;
    }
    if (nq <= 32 && q >= 32) return; /* the register Sinkhorn: warp 0 alone, no block barrier below */
    float s1 = cu_ld(a.scale.dtype, a.scale.data, 1), s2 = cu_ld(a.scale.dtype, a.scale.data, 2);
    float b1 = q < hc ? cu_ld(a.base.dtype, a.base.data, hc + q) : 0.0f;
    float b2 = q < nq ? cu_ld(a.base.dtype, a.base.data, 2 * hc + q) : 0.0f;
    cu_pdl();
    hc_mix_sums(a, t, n_mix, hc, n_mix, mix);
    if (nq <= 32) __syncwarp();
    else __syncthreads();
    if (q < hc) a.post[(int64_t)t * hc + q] = 2.0f * sigm(mix[hc + q] * s1 + b1);
    if (q < nq) cm[q] = mix[2 * hc + q] * s2 + b2;
    if (nq <= 32) {
        __syncwarp();
        if (hc == 4) sinkhorn_warp<4>(cm, hc, a.iters, a.hc_eps);
        else sinkhorn_warp<0>(cm, hc, a.iters, a.hc_eps);
    } else {
        __syncthreads();
        sinkhorn_block(cm, hc, a.iters, a.hc_eps, q);
    }
    if (q < nq) a.comb[(int64_t)t * nq + q] = cm[q];
}

static void exec_hc(cu_impl *c, const hc_args *a)
{
    if (a->T <= 0) return;
    int n_mix = a->head ? a->hc : (2 + a->hc) * a->hc;
    int64_t n = (int64_t)a->hc * a->D;
    /* 16-byte loads: rows and slices aligned (a slice is whole 32-value chunks) */
    int vec = cu_vec_ok(a->fn.dtype, a->fn.data, n, a->X, n);
    /* a prompt's rows: 4 mixes and 8 tokens a block (the same sums) */
    if (a->T >= 8 && n_mix % 4 == 0)
        cu_launch(c, "hc mix", hc_mix_kernel<4, 8>, dim3((unsigned)(n_mix / 4 * a->splits), (unsigned)((a->T + 7) / 8)),
                  dim3(HC_MIX_THREADS), 0, a->X, n, a->T, a->fn, a->mix, n_mix, a->splits, vec);
    else
        cu_launch(c, "hc mix", hc_mix_kernel<1, 1>, dim3((unsigned)(n_mix * a->splits), (unsigned)a->T),
                  dim3(HC_MIX_THREADS), 0, a->X, n, a->T, a->fn, a->mix, n_mix, a->splits, vec);
    cu_launch(c, "hc finish", hc_finish_kernel, dim3((unsigned)a->T, a->head ? 1u : 2u),
              dim3(hc_finish_threads(a->hc, a->D)), 0, *a);
}

void cu_exec_hc_pre(cu_impl *c, const void *args, const int64_t *dpos) { (void)dpos; exec_hc(c, (const hc_args *)args); }
void cu_exec_hc_head(cu_impl *c, const void *args, const int64_t *dpos) { (void)dpos; exec_hc(c, (const hc_args *)args); }

static void submit_hc(dsv4_backend *b, int kind, const float *X, int T, int hc, int D, const dsv4_mat *fn,
                      const dsv4_mat *base, const dsv4_mat *scale, int iters, float hc_eps, float norm_eps,
                      const dsv4_mat *norm, float *x, float *post, float *comb)
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
    if (norm) a.norm = *norm;
    a.hc_eps = hc_eps;
    a.norm_eps = norm_eps;
    a.x = x;
    a.post = post;
    a.comb = comb;
    a.splits = hc_mix_splits((int64_t)hc * D);
    a.mix = (float *)cu_ws(c, WS_HC, (size_t)(T > 0 ? T : 1) * (size_t)((2 + hc) * hc + 1) * a.splits * sizeof(float));
    if (!a.mix) return;
    cu_submit(c, kind, &a, sizeof a);
}

void cu_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
               const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x,
               float *post, float *comb)
{
    submit_hc(b, K_HC_PRE, X, T, hc, D, fn, base, scale, iters, hc_eps, norm_eps, norm, x, post, comb);
}

void cu_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                const dsv4_mat *scale, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x)
{
    submit_hc(b, K_HC_HEAD, X, T, hc, D, fn, base, scale, 0, hc_eps, norm_eps, norm, x, NULL, NULL);
}

/* ---- hc_post: X'[k] = post[k]·a + Σ_j comb[j][k]·X[j] ---- */

typedef struct {
    int64_t pos0;
    dsv4_hc_post p;
    int T, D;
    const float *a;
} post_args;

__global__ void hc_post_kernel(post_args p)
{
    cu_pdl();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)p.T * p.D) return;
    hc_post_elem(p.p, p.D, i / p.D, i % p.D, p.a[i]);
}

void cu_exec_hc_post(cu_impl *c, const void *args, const int64_t *dpos)
{
    const post_args *a = (const post_args *)args;
    (void)dpos;
    int64_t n = (int64_t)a->T * a->D;
    if (n <= 0) return;
    cu_launch(c, "hc_post", hc_post_kernel, dim3(cu_blocks(n, 256)), dim3(256), 0, *a);
}

void cu_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post, const float *comb)
{
    if (hc > HC_MAX) { backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16"); return; }
    post_args p;
    memset(&p, 0, sizeof p);
    p.p = (dsv4_hc_post){X, hc, post, comb};
    p.T = T;
    p.D = D;
    p.a = a;
    cu_submit(cu_of(b), K_HC_POST, &p, sizeof p);
}

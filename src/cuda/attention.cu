/* Shared-KV multi-query attention with a sink (spec §3.6-3.7) on the GPU.
 * One block per (head, query). Like the CPU: a first pass finds the largest
 * logit (sink included), a second recomputes the logits chunk by chunk,
 * accumulates exp-weighted keys (V = K) in key order and the denominator in
 * key order; no buffer grows with the context, and the grid depends only on
 * T and H (the key count comes from the position at run time). */
#include <string.h>

#include "cuda/cuda_internal.cuh"

#define ATT_THREADS 128
#define ATT_CHUNK 64
#define ATT_MAX_HD 512

typedef struct {
    int64_t pos0;
    const float *q;
    int T, H, hd, window;
    const float *ring, *kv, *entries;
    int ratio;
    const int32_t *sel_idx, *sel_n;
    int sel_cap;
    dsv4_mat sinks;
    float scale;
    float *out;
    int *err;
} att_args;

/* Address of key k of the query at position pos (window keys oldest first). */
__device__ __forceinline__ const float *key_at(const att_args &a, int64_t pos0, int64_t w_first, int64_t n_win,
                                              const int32_t *sel, int64_t k)
{
    if (k < n_win) {
        int64_t s = w_first + k;
        if (s >= pos0) return a.kv + (s - pos0) * a.hd;
        return a.ring + (s % a.window) * a.hd;
    }
    k -= n_win;
    int64_t e = sel ? sel[k] : k;
    return a.entries + e * a.hd;
}

__device__ __forceinline__ float warp_dot(const float *q, const float *key, int hd)
{
    float d = 0.0f;
    for (int i = threadIdx.x & 31; i < hd; i += 32) d = fmaf(q[i], key[i], d);
    return cu_warp_sum(d);
}

__global__ void __launch_bounds__(ATT_THREADS) attention_kernel(att_args a, const int64_t *dpos)
{
    __shared__ float sq[ATT_MAX_HD];
    __shared__ float sp[ATT_CHUNK];
    __shared__ float smax[ATT_THREADS / 32];
    int h = blockIdx.x, t = blockIdx.y, hd = a.hd;
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, nw = ATT_THREADS / 32;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    int64_t pos = pos0 + t;
    int64_t w_first = pos - a.window + 1 < 0 ? 0 : pos - a.window + 1;
    int64_t n_win = pos - w_first + 1, n_comp = 0;
    const int32_t *sel = NULL;
    if (a.sel_idx) {
        sel = a.sel_idx + (int64_t)t * a.sel_cap;
        n_comp = a.sel_n[t];
        if (n_comp < 0 || n_comp > a.sel_cap) {
            if (threadIdx.x == 0) cu_fault(a.err, CU_FAULT_SELECT);
            n_comp = 0;
        }
    } else if (a.ratio > 0) {
        n_comp = (pos + 1) / a.ratio;
    }
    int64_t nk = n_win + n_comp;
    const float *q = a.q + ((int64_t)t * a.H + h) * hd;
    for (int i = threadIdx.x; i < hd; i += blockDim.x) sq[i] = q[i];
    __syncthreads();
    float sink = cu_ld(a.sinks.dtype, a.sinks.data, h);
    float mx = sink;
    for (int64_t k = warp; k < nk; k += nw) {
        const float *key = key_at(a, pos0, w_first, n_win, sel, k);
        mx = fmaxf(mx, warp_dot(sq, key, hd) * a.scale);
    }
    if (lane == 0) smax[warp] = mx;
    __syncthreads();
    mx = smax[0];
    for (int i = 1; i < nw; i++) mx = fmaxf(mx, smax[i]);
    float acc[ATT_MAX_HD / ATT_THREADS];
#pragma unroll
    for (int j = 0; j < ATT_MAX_HD / ATT_THREADS; j++) acc[j] = 0.0f;
    float denom = expf(sink - mx);
    for (int64_t c0 = 0; c0 < nk; c0 += ATT_CHUNK) {
        int n = nk - c0 < ATT_CHUNK ? (int)(nk - c0) : ATT_CHUNK;
        for (int j = warp; j < n; j += nw) {
            float l = warp_dot(sq, key_at(a, pos0, w_first, n_win, sel, c0 + j), hd) * a.scale;
            if (lane == 0) sp[j] = expf(l - mx);
        }
        __syncthreads();
        for (int j = 0; j < n; j++) {
            const float *key = key_at(a, pos0, w_first, n_win, sel, c0 + j);
            float p = sp[j];
            denom += p;
#pragma unroll
            for (int r = 0; r < ATT_MAX_HD / ATT_THREADS; r++) {
                int d = r * ATT_THREADS + threadIdx.x;
                if (d < hd) acc[r] = fmaf(p, key[d], acc[r]);
            }
        }
        __syncthreads();
    }
    float inv = 1.0f / denom;
    float *o = a.out + ((int64_t)t * a.H + h) * hd;
#pragma unroll
    for (int r = 0; r < ATT_MAX_HD / ATT_THREADS; r++) {
        int d = r * ATT_THREADS + threadIdx.x;
        if (d < hd) o[d] = acc[r] * inv;
    }
}

void cu_exec_attention(cu_impl *c, const void *args, const int64_t *dpos)
{
    const att_args *a = (const att_args *)args;
    if (a->T <= 0 || a->H <= 0) return;
    attention_kernel<<<dim3((unsigned)a->H, (unsigned)a->T), ATT_THREADS, 0, c->stream>>>(*a, dpos);
    CU_LAUNCHED(c, "attention");
}

void cu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window, const float *ring,
                  const float *kv, const float *entries, int ratio, const int32_t *sel_idx, const int32_t *sel_n,
                  int sel_cap, const dsv4_mat *sinks, float scale, float *out)
{
    if (hd > ATT_MAX_HD) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA attention: head_dim above 512");
        return;
    }
    att_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.q = q;
    a.T = T;
    a.H = H;
    a.hd = hd;
    a.window = window;
    a.ring = ring;
    a.kv = kv;
    a.entries = entries;
    a.ratio = ratio;
    a.sel_idx = sel_idx;
    a.sel_n = sel_n;
    a.sel_cap = sel_cap;
    a.sinks = *sinks;
    a.scale = scale;
    a.out = out;
    a.err = cu_of(b)->err_dev;
    cu_submit(cu_of(b), K_ATTENTION, &a, sizeof a);
}

/* RMSNorm, RoPE (alone and after a per-head norm), embedding lookup and
 * the window ring on the GPU. */
#include <cuda_bf16.h>
#include <string.h>

#include "cuda/ggml_blocks.cuh"
#include "cuda/rms_row.cuh"
#include "cuda/rope_pair.cuh"
#include "cuda/state_rows.cuh"

/* ---- rmsnorm: one block per row ---- */

typedef struct {
    int64_t pos0;
    const float *x;
    float *y;
    int T, n;
    dsv4_mat w; /* w.data NULL: unweighted */
    float eps;
} norm_args;

/* One block of rms_threads(n) per row (rms_row.cuh). */
__global__ void __launch_bounds__(1024) rmsnorm_kernel(const float *x, float *y, int n, dsv4_mat w, float eps)
{
    rms_w wv = rms_weights(w, n); /* before the wait: its latency overlaps the predecessor's end */
    cu_pdl();
    __shared__ float sh[32];
    const float *xr = x + (int64_t)blockIdx.x * n;
    rms_row([&](int i) { return xr[i]; }, n, w, wv, eps, y + (int64_t)blockIdx.x * n, sh);
}

void cu_exec_rmsnorm(cu_impl *c, const void *args, const int64_t *dpos)
{
    const norm_args *a = (const norm_args *)args;
    (void)dpos;
    if (a->T <= 0) return;
    cu_launch(c, "rmsnorm", rmsnorm_kernel, dim3(a->T), dim3(rms_threads(a->n)), 0, a->x, a->y, a->n, a->w, a->eps);
}

void cu_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y)
{
    norm_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.y = y;
    a.T = T;
    a.n = n;
    if (w) a.w = *w;
    a.eps = eps;
    cu_submit(cu_of(b), K_RMSNORM, &a, sizeof a);
}

/* ---- rope: one thread per (row, head, pair) ---- */

typedef struct {
    int64_t pos0;
    float *x;
    int T, n_heads, head_dim, rope_dim;
    int64_t pos_step;
    const int64_t *pos; /* row positions (NULL: pos0 + t·pos_step) */
    const float *inv_freq;
    int inverse;
} rope_args;

__global__ void rope_kernel(rope_args a, const int64_t *dpos)
{
    cu_pdl();
    int half = a.rope_dim / 2;
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)a.T * a.n_heads * half) return;
    int p = (int)(i % half);
    int64_t th = i / half;
    int64_t t = th / a.n_heads;
    int64_t pos = a.pos ? a.pos[t] : (dpos ? *dpos : a.pos0) + t * a.pos_step;
    rope_pair(a.x + th * a.head_dim + (a.head_dim - a.rope_dim) + 2 * p, (float)pos, a.inv_freq[p], a.inverse);
}

void cu_exec_rope(cu_impl *c, const void *args, const int64_t *dpos)
{
    const rope_args *a = (const rope_args *)args;
    int64_t n = (int64_t)a->T * a->n_heads * (a->rope_dim / 2);
    if (n <= 0) return;
    cu_launch(c, "rope", rope_kernel, dim3(cu_blocks(n, 256)), dim3(256), 0, *a, dpos);
}

void cu_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, int64_t pos0,
             int64_t pos_step, const int64_t *pos, const float *inv_freq, int inverse)
{
    rope_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.x = x;
    a.T = T;
    a.n_heads = n_heads;
    a.head_dim = head_dim;
    a.rope_dim = rope_dim;
    a.pos_step = pos_step;
    a.pos = pos;
    a.inv_freq = inv_freq;
    a.inverse = inverse;
    cu_submit(cu_of(b), K_ROPE, &a, sizeof a);
}

/* ---- norm_rope: one block of rms_threads(head_dim) per (row, head) ---- */

typedef struct {
    int64_t pos0; /* unused: the rows' positions are in pos */
    float *x;
    const int64_t *pos; /* [T] */
    int T, n_heads, head_dim, rope_dim;
    dsv4_mat w; /* w.data NULL: unweighted */
    float eps;
    const float *inv_freq;
    int n_fp8; /* >= 0: then the official KV rounding (-1: none) */
} norm_rope_args;

/* The head normalized as rmsnorm_kernel does it, then its pairs rotated as
 * rope_kernel does: the values of the two kernels, in one launch; then,
 * under the official numerics, the KV head rounded as the FP8 cache holds
 * it: a warp a block of 64 values below n_fp8 (cq_kv_block), the rest to
 * bf16, the CPU's bits (cpu_kv_fp8_round). */
__global__ void __launch_bounds__(1024) norm_rope_kernel(norm_rope_args a)
{
    rms_w wv = rms_weights(a.w, a.head_dim); /* before the wait, as rmsnorm_kernel */
    cu_pdl();
    __shared__ float sh[32];
    float *h = a.x + (int64_t)blockIdx.x * a.head_dim;
    rms_row([&](int i) { return h[i]; }, a.head_dim, a.w, wv, a.eps, h, sh);
    __syncthreads(); /* each pair was normalized by two threads */
    float pos = (float)a.pos[blockIdx.x / a.n_heads];
    float *r = h + (a.head_dim - a.rope_dim);
    for (int p = threadIdx.x; p < a.rope_dim / 2; p += blockDim.x)
        rope_pair(r + 2 * p, pos, a.inv_freq[p], 0);
    if (a.n_fp8 < 0) return;
    __syncthreads(); /* the head's values are the rope's */
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int b = threadIdx.x >> 5; b * 64 < a.n_fp8; b += nw)
        cq_kv_block(h, b * 64, a.n_fp8 - b * 64 < 64 ? a.n_fp8 - b * 64 : 64, lane);
    for (int c = a.n_fp8 + threadIdx.x; c < a.head_dim; c += blockDim.x)
        h[c] = __bfloat162float(__float2bfloat16_rn(h[c]));
}

void cu_exec_norm_rope(cu_impl *c, const void *args, const int64_t *dpos)
{
    const norm_rope_args *a = (const norm_rope_args *)args;
    (void)dpos;
    int64_t n = (int64_t)a->T * a->n_heads;
    if (n <= 0) return;
    cu_launch(c, "norm_rope", norm_rope_kernel, dim3((unsigned)n), dim3(rms_threads(a->head_dim)), 0, *a);
}

void cu_norm_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, const dsv4_mat *w,
                  float eps, const int64_t *pos, const float *inv_freq, int n_fp8)
{
    norm_rope_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.pos = pos;
    a.T = T;
    a.n_heads = n_heads;
    a.head_dim = head_dim;
    a.rope_dim = rope_dim;
    if (w) a.w = *w;
    a.eps = eps;
    a.inv_freq = inv_freq;
    a.n_fp8 = n_fp8;
    cu_submit(cu_of(b), K_NORM_ROPE, &a, sizeof a);
}

/* ---- embedding ---- */

typedef struct {
    int64_t pos0;
    dsv4_mat E;
    const int32_t *tok;
    int T, hc;
    float *X;
    int *err;
    int layer; /* for fault reports */
} embed_args;

__global__ void embed_kernel(embed_args a)
{
    cu_pdl();
    int64_t D = a.E.cols;
    int t = blockIdx.y;
    int32_t id = a.tok[t];
    if (id < 0 || id >= a.E.rows) {
        if (threadIdx.x == 0 && blockIdx.x == 0) cu_fault(a.err, CU_FAULT_TOKEN, t, a.layer);
        id = 0;
    }
    if (gg_is_fmt(a.E.fmt)) { /* GGUF blocks: a thread decodes 32 values at a time */
        const uint8_t *row = (const uint8_t *)a.E.data + id * gg_row_bytes(a.E.fmt, D);
        for (int64_t ch = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; ch < D / 32; ch += (int64_t)gridDim.x * blockDim.x) {
            float v[32];
            gg_chunk_rt(a.E.fmt, row, ch, v);
            for (int k = 0; k < 32; k++)
                for (int i = 0; i < a.hc; i++) a.X[((int64_t)t * a.hc + i) * D + 32 * ch + k] = v[k];
        }
        return;
    }
    for (int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; d < D; d += (int64_t)gridDim.x * blockDim.x) {
        float v = cu_ld(a.E.dtype, a.E.data, (int64_t)id * D + d);
        for (int i = 0; i < a.hc; i++) a.X[((int64_t)t * a.hc + i) * D + d] = v;
    }
}

void cu_exec_embed(cu_impl *c, const void *args, const int64_t *dpos)
{
    const embed_args *a = (const embed_args *)args;
    (void)dpos;
    if (a->T <= 0) return;
    dim3 grid(cu_blocks(a->E.cols, 256), (unsigned)a->T);
    cu_launch(c, "embed", embed_kernel, dim3(grid), dim3(256), 0, *a);
}

void cu_embed(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok, int T, int hc, float *X)
{
    embed_args a;
    memset(&a, 0, sizeof a);
    a.E = *E;
    a.tok = tok;
    a.T = T;
    a.hc = hc;
    a.X = X;
    a.err = cu_of(b)->err_dev;
    a.layer = b->cur_layer;
    cu_submit(cu_of(b), K_EMBED, &a, sizeof a);
}

/* ---- ring store: one block per stored row, packed by sr_store_block ---- */

typedef struct {
    int64_t pos0;
    uint8_t *ring;
    int window;
    dsv4_row_fmt f;
    const float *kv;
    int T;
} ring_args;

__global__ void __launch_bounds__(128) ring_kernel(ring_args a, const int64_t *dpos)
{
    cu_pdl();
    extern __shared__ float row[]; /* [f.width] */
    int first = a.T > a.window ? a.T - a.window : 0, w = a.f.width;
    int64_t t = first + blockIdx.x;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    for (int c = threadIdx.x; c < w; c += blockDim.x) row[c] = a.kv[t * w + c];
    __syncthreads();
    sr_store_block(a.f, row, a.ring + ((pos0 + t) % a.window) * a.f.bytes);
}

void cu_exec_ring(cu_impl *c, const void *args, const int64_t *dpos)
{
    const ring_args *a = (const ring_args *)args;
    int first = a->T > a->window ? a->T - a->window : 0;
    if (a->T - first <= 0) return;
    cu_launch(c, "ring_store", ring_kernel, dim3((unsigned)(a->T - first)), dim3(128),
              (size_t)a->f.width * sizeof(float), *a, dpos);
}

void cu_ring_store(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f, const float *kv, int T,
                   int64_t pos0)
{
    if (f->width > CU_ROW_MAX) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA state rows: more than 12288 values per row");
        return;
    }
    ring_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.ring = ring;
    a.window = window;
    a.f = *f;
    a.kv = kv;
    a.T = T;
    cu_submit(cu_of(b), K_RING, &a, sizeof a);
}

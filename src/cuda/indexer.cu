/* Lightning indexer (spec §3.5) on the GPU: a scoring kernel (one warp per
 * visible entry, the query's heads staged in shared memory) writes every
 * score; a top-k kernel per query finds the k-th largest score with a 4-pass
 * radix select and compacts the winners in increasing index order, taking
 * tied scores at the threshold from the lowest indices (as the CPU). The
 * number of visible entries depends on the position, so both kernels loop
 * over it with grids fixed by T alone. */
#include <string.h>

#include "cuda/cuda_internal.cuh"

#define KEY_REGS 8 /* head_dim up to 256 */

typedef struct {
    int64_t pos0;
    const float *q, *w, *keys;
    int T, heads, head_dim, ratio, topk;
    float score_scale, w_scale;
    int32_t *idx, *n;
    float *scores;   /* workspace [T][stride] */
    int64_t stride;
    int score_blocks;
} idx_args;

__global__ void __launch_bounds__(256) idx_score_kernel(idx_args a, const int64_t *dpos)
{
    extern __shared__ float sq[]; /* [heads][hd] query, then [heads] weights */
    int t = blockIdx.y, hd = a.head_dim, H = a.heads;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    int64_t nvis = (pos0 + t + 1) / a.ratio;
    if ((int64_t)blockIdx.x * 8 >= nvis) return;
    float *sw = sq + H * hd;
    for (int i = threadIdx.x; i < H * hd; i += blockDim.x) sq[i] = a.q[(int64_t)t * H * hd + i];
    for (int i = threadIdx.x; i < H; i += blockDim.x) sw[i] = a.w[(int64_t)t * H + i] * a.w_scale;
    __syncthreads();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    for (int64_t s = (int64_t)blockIdx.x * 8 + warp; s < nvis; s += (int64_t)gridDim.x * 8) {
        float kv[KEY_REGS];
#pragma unroll
        for (int j = 0; j < KEY_REGS; j++) kv[j] = j * 32 + lane < hd ? a.keys[s * hd + j * 32 + lane] : 0.0f;
        float score = 0.0f;
        for (int h = 0; h < H; h++) {
            float dot = 0.0f;
#pragma unroll
            for (int j = 0; j < KEY_REGS; j++)
                if (j * 32 + lane < hd) dot = fmaf(sq[h * hd + j * 32 + lane], kv[j], dot);
            dot = cu_warp_sum(dot);
            score += (fmaxf(dot, 0.0f) * a.score_scale) * sw[h];
        }
        if (lane == 0) a.scores[(int64_t)t * a.stride + s] = score == 0.0f ? 0.0f : score; /* no −0 */
    }
}

/* Order-preserving map of a float to an unsigned key. */
__device__ __forceinline__ unsigned fkey(float f)
{
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Exclusive prefix count of flag over the block, and the block total. */
__device__ __forceinline__ int block_scan(int flag, int *total, int *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    unsigned b = __ballot_sync(0xffffffffu, flag);
    if (lane == 0) sh[warp] = __popc(b);
    __syncthreads();
    int off = 0, tot = 0;
    for (int i = 0; i < nw; i++) {
        if (i < warp) off += sh[i];
        tot += sh[i];
    }
    __syncthreads();
    *total = tot;
    return off + __popc(b & ((1u << lane) - 1u));
}

__global__ void __launch_bounds__(512) idx_topk_kernel(idx_args a, const int64_t *dpos)
{
    __shared__ unsigned hist[256];
    __shared__ int sh[32];
    __shared__ unsigned s_bin, s_rem;
    int t = blockIdx.x;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    int64_t nvis = (pos0 + t + 1) / a.ratio;
    int32_t *out = a.idx + (int64_t)t * a.topk;
    if (nvis <= a.topk) {
        for (int64_t s = threadIdx.x; s < nvis; s += blockDim.x) out[s] = (int32_t)s;
        if (threadIdx.x == 0) a.n[t] = (int32_t)nvis;
        return;
    }
    const float *sc = a.scores + (int64_t)t * a.stride;
    unsigned prefix = 0, mask = 0, rem = (unsigned)a.topk;
    for (int pass = 0; pass < 4; pass++) {
        int shift = 24 - 8 * pass;
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        for (int64_t s = threadIdx.x; s < nvis; s += blockDim.x) {
            unsigned u = fkey(sc[s]);
            if ((u & mask) == prefix) atomicAdd(&hist[(u >> shift) & 255u], 1u);
        }
        __syncthreads();
        if (threadIdx.x == 0) {
            unsigned cum = 0;
            for (int bin = 255; bin >= 0; bin--) {
                if (cum + hist[bin] >= rem) {
                    s_bin = (unsigned)bin;
                    s_rem = rem - cum;
                    break;
                }
                cum += hist[bin];
            }
        }
        __syncthreads();
        prefix |= s_bin << shift;
        mask |= 255u << shift;
        rem = s_rem;
        __syncthreads();
    }
    /* thr = prefix: everything above it, plus the first `rem` equal to it */
    int base_eq = 0, base_out = 0;
    for (int64_t s0 = 0; s0 < nvis; s0 += blockDim.x) {
        int64_t s = s0 + threadIdx.x;
        unsigned u = s < nvis ? fkey(sc[s]) : 0u;
        int gt = s < nvis && u > prefix, eq = s < nvis && u == prefix;
        int tot_eq, tot_sel;
        int eq_rank = base_eq + block_scan(eq, &tot_eq, sh);
        int sel = gt || (eq && eq_rank < (int)rem);
        int at = base_out + block_scan(sel, &tot_sel, sh);
        if (sel) out[at] = (int32_t)s;
        base_eq += tot_eq;
        base_out += tot_sel;
    }
    if (threadIdx.x == 0) a.n[t] = a.topk;
}

void cu_exec_indexer(cu_impl *c, const void *args, const int64_t *dpos)
{
    const idx_args *a = (const idx_args *)args;
    if (a->T <= 0) return;
    size_t shm = (size_t)(a->heads * a->head_dim + a->heads) * sizeof(float);
    idx_score_kernel<<<dim3((unsigned)a->score_blocks, (unsigned)a->T), 256, shm, c->stream>>>(*a, dpos);
    CU_LAUNCHED(c, "indexer scores");
    idx_topk_kernel<<<a->T, 512, 0, c->stream>>>(*a, dpos);
    CU_LAUNCHED(c, "indexer top-k");
}

void cu_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads, int head_dim,
                const float *keys, int ratio, int topk, float score_scale, float w_scale, int32_t *idx, int32_t *n)
{
    cu_impl *c = cu_of(b);
    size_t shm = (size_t)(heads * head_dim + heads) * sizeof(float);
    if (head_dim > 32 * KEY_REGS || shm > 200 * 1024 || ratio <= 0) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA indexer: head_dim above 256 or too many heads");
        return;
    }
    if (shm > 48 * 1024 &&
        cu_check(c, cudaFuncSetAttribute(idx_score_kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm),
                 "indexer shared memory"))
        return;
    idx_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.q = q;
    a.w = w;
    a.keys = keys;
    a.T = T;
    a.heads = heads;
    a.head_dim = head_dim;
    a.ratio = ratio;
    a.topk = topk;
    a.score_scale = score_scale;
    a.w_scale = w_scale;
    a.idx = idx;
    a.n = n;
    /* the row stride only grows (in powers of two), so a decode step keeps
     * the same workspace layout for many positions */
    int64_t need = (pos0 + T) / ratio, stride = 1024;
    while (stride < need) stride *= 2;
    a.stride = stride;
    a.scores = (float *)cu_ws(c, WS_INDEXER, (size_t)(T > 0 ? T : 1) * (size_t)stride * sizeof(float));
    a.score_blocks = T <= CU_GRAPH_MAX_ROWS ? 2 * c->n_sm : 32;
    if (!a.scores) return;
    cu_submit(c, K_INDEXER, &a, sizeof a);
}

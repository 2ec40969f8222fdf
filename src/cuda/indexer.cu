/* Lightning indexer (spec §3.5) on the GPU: a scoring kernel (one warp per
 * visible entry, the query's heads staged in shared memory) writes every
 * score; a top-k kernel per query finds the k-th largest score with a 4-pass
 * radix select and compacts the winners in increasing index order, taking
 * tied scores at the threshold from the lowest indices (as the CPU). The
 * number of visible entries depends on the position, so both kernels loop
 * over it with grids fixed by T alone. Keys are stored fp32 or packed FP4
 * and read back four values at a time into registers. A step's rows run in
 * blocks whose scores fit IDX_WS_BYTES (a prompt's rows at a long context
 * would otherwise want rows x entries floats at once). */
#include <string.h>

#include "cuda/state_rows.cuh"

#define IDX_HG 8 /* heads per warp */
#define TK_E 8   /* consecutive scores per thread in the top-k passes */
#define IDX_WS_BYTES ((size_t)256 << 20) /* the scores of one launch's rows */

typedef struct {
    int64_t pos0;
    const float *q, *w;
    const uint8_t *keys;
    dsv4_row_fmt kf;
    int T, heads, head_dim, ratio, topk;
    float score_scale, w_scale;
    int32_t *idx, *n;
    float *scores;   /* workspace [rows][stride]: the rows of one launch */
    int64_t stride;
    int rows;        /* rows a launch (the last one: what is left) */
    int score_blocks;
} idx_args;

/* A block scores tiles of 32 entries of the step's row t0 + blockIdx.y
 * (into workspace row blockIdx.y): lane = entry, warp = group of IDX_HG
 * heads. Each thread streams its entry's key (4 values a load: one 16-byte
 * fp32 load, or two FP4 bytes and their scale; KIND the keys' row format,
 * fixed per instantiation so the fp32 loop stays as lean) against its
 * heads' queries (shared-memory broadcasts); the groups' partial scores are
 * added in group order through shared memory. */
template <int KIND>
__global__ void __launch_bounds__(1024) idx_score_kernel(idx_args a, const int64_t *dpos, int t0)
{
    cu_pdl();
    extern __shared__ float4 sq4[]; /* [heads][hd] query, [heads] weights, [groups][32] partials */
    float *sq = (float *)sq4;
    int t = t0 + (int)blockIdx.y, hd = a.head_dim, H = a.heads, groups = (H + IDX_HG - 1) / IDX_HG;
    int lane = threadIdx.x & 31, g = threadIdx.x >> 5;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    int64_t nvis = (pos0 + t + 1) / a.ratio;
    if ((int64_t)blockIdx.x * 32 >= nvis) return;
    float *sw = sq + H * hd, *part = sw + H;
    for (int i = threadIdx.x; i < H * hd; i += blockDim.x) sq[i] = a.q[(int64_t)t * H * hd + i];
    for (int i = threadIdx.x; i < H; i += blockDim.x) sw[i] = a.w[(int64_t)t * H + i] * a.w_scale;
    __syncthreads();
    for (int64_t s0 = (int64_t)blockIdx.x * 32; s0 < nvis; s0 += (int64_t)gridDim.x * 32) {
        int64_t s = s0 + lane;
        float score = 0.0f;
        if (s < nvis) {
            const uint8_t *key = a.keys + s * a.kf.bytes;
            dsv4_row_fmt kf = a.kf;
            kf.kind = KIND;
            float acc[IDX_HG];
#pragma unroll
            for (int j = 0; j < IDX_HG; j++) acc[j] = 0.0f;
            int h0 = g * IDX_HG;
#pragma unroll 4
            for (int d4 = 0; d4 < hd / 4; d4++) {
                float4 k = sr_load4(kf, key, 4 * d4);
#pragma unroll
                for (int j = 0; j < IDX_HG; j++) {
                    if (h0 + j < H) {
                        float4 q = sq4[(h0 + j) * (hd / 4) + d4];
                        acc[j] = fmaf(q.x, k.x, acc[j]);
                        acc[j] = fmaf(q.y, k.y, acc[j]);
                        acc[j] = fmaf(q.z, k.z, acc[j]);
                        acc[j] = fmaf(q.w, k.w, acc[j]);
                    }
                }
            }
#pragma unroll
            for (int j = 0; j < IDX_HG; j++)
                if (h0 + j < H) score += (fmaxf(acc[j], 0.0f) * a.score_scale) * sw[h0 + j];
        }
        part[g * 32 + lane] = score;
        __syncthreads();
        if (g == 0 && s < nvis) {
            float tot = 0.0f;
            for (int i = 0; i < groups; i++) tot += part[i * 32 + lane];
            a.scores[(int64_t)blockIdx.y * a.stride + s] = tot == 0.0f ? 0.0f : tot; /* no −0 */
        }
        __syncthreads();
    }
}

/* Order-preserving map of a float to an unsigned key. */
__device__ __forceinline__ unsigned fkey(float f)
{
    unsigned u = __float_as_uint(f);
    return (u & 0x80000000u) ? ~u : (u | 0x80000000u);
}

/* Barrier among the first 256 threads (named barrier 1). */
__device__ __forceinline__ void bar_sync_256() { asm volatile("bar.sync 1, 256;" ::: "memory"); }

/* Exclusive prefix sum of v over the block (thread order), and the total. */
__device__ __forceinline__ int block_scan(int v, int *total, int *sh)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int inc = v;
    for (int o = 1; o < 32; o <<= 1) {
        int u = __shfl_up_sync(0xffffffffu, inc, o);
        if (lane >= o) inc += u;
    }
    if (lane == 31) sh[warp] = inc;
    __syncthreads();
    int off = 0, tot = 0;
    for (int i = 0; i < nw; i++) {
        if (i < warp) off += sh[i];
        tot += sh[i];
    }
    __syncthreads();
    *total = tot;
    return off + inc - v;
}

/* The top-k of the step's row t0 + blockIdx.x (workspace row blockIdx.x). */
__global__ void __launch_bounds__(512) idx_topk_kernel(idx_args a, const int64_t *dpos, int t0)
{
    cu_pdl();
    __shared__ unsigned hist[256];
    __shared__ int sh[32];
    __shared__ unsigned s_bin, s_rem, wsum[8];
    int t = t0 + (int)blockIdx.x;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    int64_t nvis = (pos0 + t + 1) / a.ratio;
    int32_t *out = a.idx + (int64_t)t * a.topk;
    if (a.topk <= 0) {
        if (threadIdx.x == 0) a.n[t] = 0;
        return;
    }
    if (nvis <= a.topk) {
        for (int64_t s = threadIdx.x; s < nvis; s += blockDim.x) out[s] = (int32_t)s;
        if (threadIdx.x == 0) a.n[t] = (int32_t)nvis;
        return;
    }
    const float *sc = a.scores + (int64_t)blockIdx.x * a.stride;
    unsigned prefix = 0, mask = 0, rem = (unsigned)a.topk;
    for (int pass = 0; pass < 4; pass++) {
        int shift = 24 - 8 * pass;
        for (int i = threadIdx.x; i < 256; i += blockDim.x) hist[i] = 0;
        __syncthreads();
        /* each thread counts a run of TK_E consecutive scores; equal bins in a
         * row (the common case: scores share their top bits) make one atomic */
        for (int64_t b0 = (int64_t)threadIdx.x * TK_E; b0 < nvis; b0 += (int64_t)blockDim.x * TK_E) {
            unsigned last = 0, cnt = 0;
            for (int j = 0; j < TK_E && b0 + j < nvis; j++) {
                unsigned u = fkey(sc[b0 + j]);
                if ((u & mask) != prefix) continue;
                unsigned bin = (u >> shift) & 255u;
                if (cnt && bin == last) {
                    cnt++;
                } else {
                    if (cnt) atomicAdd(&hist[last], cnt);
                    last = bin;
                    cnt = 1;
                }
            }
            if (cnt) atomicAdd(&hist[last], cnt);
        }
        __syncthreads();
        if (threadIdx.x < 256) { /* bins from the top: the one where the count reaches rem */
            int b = 255 - (int)threadIdx.x, w = threadIdx.x >> 5, l = threadIdx.x & 31;
            unsigned h = hist[b], inc = h;
            for (int o = 1; o < 32; o <<= 1) {
                unsigned v = __shfl_up_sync(0xffffffffu, inc, o);
                if (l >= o) inc += v;
            }
            if (l == 31) wsum[w] = inc;
            __syncwarp();
            bar_sync_256();
            unsigned off = 0;
            for (int i = 0; i < w; i++) off += wsum[i];
            inc += off;
            if (inc - h < rem && inc >= rem) {
                s_bin = (unsigned)b;
                s_rem = rem - (inc - h);
            }
        }
        __syncthreads();
        prefix |= s_bin << shift;
        mask |= 255u << shift;
        rem = s_rem;
        __syncthreads();
    }
    /* thr = prefix: everything above it, plus the first `rem` equal to it;
     * each thread takes a run of TK_E consecutive indices, in thread order */
    int base_eq = 0, base_out = 0;
    for (int64_t c0 = 0; c0 < nvis; c0 += (int64_t)blockDim.x * TK_E) {
        int64_t b0 = c0 + (int64_t)threadIdx.x * TK_E;
        unsigned u[TK_E];
        int n_eq = 0, tot_eq, tot_sel;
#pragma unroll
        for (int j = 0; j < TK_E; j++) {
            u[j] = b0 + j < nvis ? fkey(sc[b0 + j]) : 0u;
            n_eq += b0 + j < nvis && u[j] == prefix;
        }
        int eq_rank = base_eq + block_scan(n_eq, &tot_eq, sh), n_sel = 0;
        int take[TK_E];
#pragma unroll
        for (int j = 0; j < TK_E; j++) {
            int in = b0 + j < nvis, eq = in && u[j] == prefix;
            take[j] = (in && u[j] > prefix) || (eq && eq_rank < (int)rem);
            eq_rank += eq;
            n_sel += take[j];
        }
        int at = base_out + block_scan(n_sel, &tot_sel, sh);
#pragma unroll
        for (int j = 0; j < TK_E; j++)
            if (take[j]) out[at++] = (int32_t)(b0 + j);
        base_eq += tot_eq;
        base_out += tot_sel;
    }
    if (threadIdx.x == 0) a.n[t] = a.topk;
}

static size_t idx_shm(int heads, int head_dim)
{
    int groups = (heads + IDX_HG - 1) / IDX_HG;
    return (size_t)(heads * head_dim + heads + 32 * groups) * sizeof(float);
}

void cu_exec_indexer(cu_impl *c, const void *args, const int64_t *dpos)
{
    const idx_args *a = (const idx_args *)args;
    if (a->T <= 0) return;
    size_t shm = idx_shm(a->heads, a->head_dim);
    int warps = (a->heads + IDX_HG - 1) / IDX_HG;
    for (int t0 = 0; t0 < a->T; t0 += a->rows) {
        int n = a->T - t0 < a->rows ? a->T - t0 : a->rows;
        dim3 grid((unsigned)a->score_blocks, (unsigned)n), block(32 * warps);
        if (a->kf.kind == ROW_F32)
            cu_launch(c, "indexer scores", idx_score_kernel<ROW_F32>, grid, block, shm, *a, dpos, t0);
        else cu_launch(c, "indexer scores", idx_score_kernel<ROW_FP4>, grid, block, shm, *a, dpos, t0);
        cu_launch(c, "indexer top-k", idx_topk_kernel, dim3((unsigned)n), dim3(512), 0, *a, dpos, t0);
    }
}

void cu_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads, const uint8_t *keys,
                const dsv4_row_fmt *kf, int ratio, int topk, float score_scale, float w_scale, int32_t *idx,
                int32_t *n)
{
    cu_impl *c = cu_of(b);
    int head_dim = kf->width;
    size_t shm = idx_shm(heads, head_dim);
    if (head_dim % 4 || heads > 32 * IDX_HG || shm > 200 * 1024 || ratio <= 0 || kf->kind == ROW_FP8) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA indexer: head_dim must be a multiple of 4 (and heads x head_dim "
                     "below 50K), keys fp32 or FP4");
        return;
    }
    if (shm > 48 * 1024 &&
        (cu_check(c, cudaFuncSetAttribute(idx_score_kernel<ROW_F32>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)shm), "indexer shared memory") ||
         cu_check(c, cudaFuncSetAttribute(idx_score_kernel<ROW_FP4>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                          (int)shm), "indexer shared memory")))
        return;
    idx_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.q = q;
    a.w = w;
    a.keys = keys;
    a.kf = *kf;
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
    int64_t rows = (int64_t)(IDX_WS_BYTES / ((size_t)stride * sizeof(float)));
    a.rows = (int)(rows < 1 ? 1 : rows < T ? rows : T > 0 ? T : 1);
    a.scores = (float *)cu_ws(c, WS_INDEXER, (size_t)a.rows * (size_t)stride * sizeof(float));
    /* a row's tiles of 32 entries spread over the blocks (an entry's score
     * is the same whichever block takes it); a decode step's grid no
     * larger than the tiles the stride holds (the stride, not the entry
     * count, so that the grid and the graph keep their shape for many
     * positions): blocks past the entries exit at once, but 528 of 1024
     * threads took 18.7 us at context 0 (eighth session's profile) */
    int64_t tiles = stride / 32;
    a.score_blocks = T > CU_GRAPH_MAX_ROWS ? 64 : tiles < 4 * c->n_sm ? (int)tiles : 4 * c->n_sm;
    if (!a.scores) return;
    cu_submit(c, K_INDEXER, &a, sizeof a);
}

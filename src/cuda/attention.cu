/* Shared-KV multi-query attention with a sink (spec §3.6-3.7) on the GPU,
 * split over the keys (flash-decoding). One warp per head, ATT_G heads per
 * block sharing the key reads (MQA: every head reads the same K = V). A
 * query's keys are cut into slices of ATT_KPS keys (slice s: keys
 * [s·ATT_KPS, (s+1)·ATT_KPS) of its key list); a block decodes a slice's
 * keys (the ring and the entries, fp32 or packed FP8) into shared memory,
 * each warp reduces its head over the slice (maximum, then exp(l − max) and
 * the weighted key sum in key order), and a combine kernel merges the
 * slices in slice order with the sink. The slices depend only on the
 * query's own keys, never on how many rows the step has: the grid holds
 * enough slices for the step's longest key list, the ones past a row's keys
 * do nothing, and the combine reads the row's own slices only, so a row's
 * result is the same bits in any step (batch and chunking invariance). */
#include <string.h>

#include "cuda/state_rows.cuh"

#define ATT_G 4          /* heads per block (one warp each) */
#define ATT_MAX_HD 512
#define ATT_PER_LANE (ATT_MAX_HD / 32)
#define ATT_KPS 16       /* keys per slice */
#define ATT_WS_BYTES ((size_t)256 << 20) /* slice workspace; longer steps run in row blocks */

typedef struct {
    int64_t pos0;
    const float *q;
    int T, H, hd, window;
    const uint8_t *ring, *entries;
    const float *kv;
    dsv4_row_fmt kf; /* of the ring rows and entries */
    int ratio;
    const int32_t *sel_idx, *sel_n;
    int sel_cap;
    dsv4_mat sinks;
    float scale;
    float *out;
    int *err;
    int layer; /* for fault reports */
    float *part;   /* workspace [rows][H][splits][hd + 2] */
    int splits;    /* slices in the grid (enough for the step's longest key list) */
    int rows;      /* rows per launch (the workspace holds that many) */
    int t0;        /* first row of the launch (set by the exec function) */
} att_args;

typedef struct {
    int64_t w_first, n_win, n_comp;
    const int32_t *sel;
} key_set;

__device__ __forceinline__ key_set keys_of(const att_args &a, int64_t pos0, int t)
{
    key_set k;
    int64_t pos = pos0 + t;
    k.w_first = pos - a.window + 1 < 0 ? 0 : pos - a.window + 1;
    k.n_win = pos - k.w_first + 1;
    k.n_comp = 0;
    k.sel = NULL;
    if (a.sel_idx) {
        k.sel = a.sel_idx + (int64_t)t * a.sel_cap;
        k.n_comp = a.sel_n[t];
        if (k.n_comp < 0 || k.n_comp > a.sel_cap) k.n_comp = 0; /* reported by the combine kernel */
    } else if (a.ratio > 0) {
        k.n_comp = (pos + 1) / a.ratio;
    }
    return k;
}

/* The row of key k of a query (window keys oldest first, then compressed
 * entries): this step's own rows are fp32 in a.kv (*step set), the others
 * stored rows in a.kf's format. */
__device__ __forceinline__ const uint8_t *key_row(const att_args &a, int64_t pos0, const key_set &ks, int64_t k,
                                                  bool *step)
{
    *step = false;
    if (k < ks.n_win) {
        int64_t s = ks.w_first + k;
        if (s >= pos0) {
            *step = true;
            return (const uint8_t *)(a.kv + (s - pos0) * a.hd);
        }
        return a.ring + (s % a.window) * a.kf.bytes;
    }
    k -= ks.n_win;
    int64_t e = ks.sel ? ks.sel[k] : k;
    if (e < 0) e = 0;
    return a.entries + e * a.kf.bytes;
}

/* Values c .. c+3 of a key row (KIND: a.kf's kind, fixed per
 * instantiation so that the fp32 kernel stays lean). */
template <int KIND>
__device__ __forceinline__ float4 key_values4(const att_args &a, const uint8_t *row, bool step, int c)
{
    if (KIND == ROW_F32 || step) return ((const float4 *)row)[c / 4];
    dsv4_row_fmt kf = a.kf;
    kf.kind = KIND;
    return sr_load4(kf, row, c);
}

/* One slice of one row for ATT_G heads: the block decodes the slice's keys
 * into shared memory once (every load of the slice in flight together: the
 * keys are what the heads share), then each warp scores its head against
 * all of them (independent dot products), takes the slice's maximum, and
 * sums p = exp(l − max) and p·key in key order. */
template <int KIND>
__global__ void __launch_bounds__(ATT_G * 32) attention_part_kernel(att_args a, const int64_t *dpos)
{
    __shared__ float keys[ATT_KPS * ATT_MAX_HD];
    cu_pdl();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31;
    int h = blockIdx.x * ATT_G + warp, t = a.t0 + blockIdx.y, sp = blockIdx.z, hd = a.hd, nd = hd / 32;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    key_set ks = keys_of(a, pos0, t);
    int64_t nk = ks.n_win + ks.n_comp, k0 = (int64_t)sp * ATT_KPS;
    if (k0 >= nk) return; /* past this row's keys (the whole block): the combine reads only its own slices */
    int n = nk - k0 < ATT_KPS ? (int)(nk - k0) : ATT_KPS, groups = hd / 4;
    for (int g = threadIdx.x; g < n * groups; g += blockDim.x) {
        int i = g / groups, c = 4 * (g % groups);
        bool step;
        const uint8_t *row = key_row(a, pos0, ks, k0 + i, &step);
        *(float4 *)&keys[i * hd + c] = key_values4<KIND>(a, row, step, c);
    }
    __syncthreads();
    if (h >= a.H) return;
    const float *q = a.q + ((int64_t)t * a.H + h) * hd;
    float qv[ATT_PER_LANE], acc[ATT_PER_LANE], l[ATT_KPS];
#pragma unroll
    for (int j = 0; j < ATT_PER_LANE; j++) {
        qv[j] = j < nd ? q[j * 32 + lane] : 0.0f;
        acc[j] = 0.0f;
    }
#pragma unroll
    for (int i = 0; i < ATT_KPS; i++) {
        float d = 0.0f;
#pragma unroll
        for (int j = 0; j < ATT_PER_LANE; j++)
            if (i < n && j < nd) d = fmaf(qv[j], keys[i * hd + j * 32 + lane], d);
        l[i] = d;
    }
    float m = -INFINITY, den = 0.0f;
#pragma unroll
    for (int i = 0; i < ATT_KPS; i++) {
        l[i] = cu_warp_sum(l[i]) * a.scale;
        if (i < n) m = fmaxf(m, l[i]);
    }
#pragma unroll
    for (int i = 0; i < ATT_KPS; i++) {
        if (i >= n) break;
        float p = expf(l[i] - m);
        den += p;
#pragma unroll
        for (int j = 0; j < ATT_PER_LANE; j++)
            if (j < nd) acc[j] = fmaf(p, keys[i * hd + j * 32 + lane], acc[j]);
    }
    float *o = a.part + (((int64_t)blockIdx.y * a.H + h) * a.splits + sp) * (hd + 2);
#pragma unroll
    for (int j = 0; j < ATT_PER_LANE; j++)
        if (j < nd) o[j * 32 + lane] = acc[j];
    if (lane == 0) {
        o[hd] = m;
        o[hd + 1] = den;
    }
}

__global__ void attention_combine_kernel(att_args a, const int64_t *dpos)
{
    cu_pdl();
    extern __shared__ float f[]; /* [splits] weights, then [splits] denominators */
    __shared__ float s_inv;
    int h = blockIdx.x, t = a.t0 + blockIdx.y, hd = a.hd, lane = threadIdx.x & 31;
    float *ls = f + a.splits;
    const float *p = a.part + ((int64_t)blockIdx.y * a.H + h) * a.splits * (hd + 2);
    /* this row's slices: the ones that hold its keys (the grid's others are
     * empty and were not written), so the sums below are the row's own */
    key_set ks = keys_of(a, dpos ? *dpos : a.pos0, t);
    int64_t nk = ks.n_win + ks.n_comp, used = (nk + ATT_KPS - 1) / ATT_KPS;
    int S = used < a.splits ? (int)used : a.splits;
    /* warp 0: the slices' maxima and denominators read side by side (a max
     * is the same in any order), then lane 0 adds the denominators in
     * slice order */
    if (threadIdx.x < 32) {
        if (lane == 0 && a.sel_idx && (a.sel_n[t] < 0 || a.sel_n[t] > a.sel_cap)) cu_fault(a.err, CU_FAULT_SELECT, t, a.layer);
        float sink = cu_ld(a.sinks.dtype, a.sinks.data, h), M = sink;
        for (int s = lane; s < S; s += 32) {
            float l = p[s * (hd + 2) + hd + 1], m = p[s * (hd + 2) + hd];
            ls[s] = l;
            f[s] = m;
            if (l > 0.0f) M = fmaxf(M, m);
        }
        for (int o = 16; o > 0; o >>= 1) M = fmaxf(M, __shfl_xor_sync(0xffffffffu, M, o));
        for (int s = lane; s < S; s += 32) f[s] = ls[s] > 0.0f ? expf(f[s] - M) : 0.0f;
        __syncwarp();
        if (lane == 0) {
            float denom = expf(sink - M);
            for (int s = 0; s < S; s++) denom += ls[s] * f[s];
            s_inv = 1.0f / denom;
        }
    }
    __syncthreads();
    float *o = a.out + ((int64_t)t * a.H + h) * hd;
    for (int d = threadIdx.x; d < hd; d += blockDim.x) {
        float v = 0.0f;
        for (int s = 0; s < S; s++) v = fmaf(p[s * (hd + 2) + d], f[s], v);
        o[d] = v * s_inv;
    }
}

void cu_exec_attention(cu_impl *c, const void *args, const int64_t *dpos)
{
    const att_args *a = (const att_args *)args;
    if (a->T <= 0 || a->H <= 0) return;
    att_args b = *a;
    for (b.t0 = 0; b.t0 < a->T; b.t0 += a->rows) {
        unsigned rows = (unsigned)(a->T - b.t0 < a->rows ? a->T - b.t0 : a->rows);
        dim3 grid((unsigned)((a->H + ATT_G - 1) / ATT_G), rows, (unsigned)a->splits);
        if (a->kf.kind == ROW_F32)
            cu_launch(c, "attention", attention_part_kernel<ROW_F32>, grid, dim3(ATT_G * 32), 0, b, dpos);
        else
            cu_launch(c, "attention", attention_part_kernel<ROW_FP8>, grid, dim3(ATT_G * 32), 0, b, dpos);
        cu_launch(c, "attention combine", attention_combine_kernel, dim3((unsigned)a->H, rows), dim3(256),
                  (size_t)a->splits * 2 * sizeof(float), b, dpos);
    }
}

void cu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window, const uint8_t *ring,
                  const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio, const int32_t *sel_idx,
                  const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale, float *out)
{
    cu_impl *c = cu_of(b);
    if (hd > ATT_MAX_HD || hd % 32 || kf->kind == ROW_FP4) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA attention: head_dim must be a multiple of 32 up to 512, keys fp32 or FP8");
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
    a.kf = *kf;
    a.ratio = ratio;
    a.sel_idx = sel_idx;
    a.sel_n = sel_n;
    a.sel_cap = sel_cap;
    a.sinks = *sinks;
    a.scale = scale;
    a.out = out;
    a.err = c->err_dev;
    a.layer = b->cur_layer;
    /* slices for the longest key list of the step (its last row), rounded up
     * to a power of two so that decode graphs are re-captured only when the
     * context doubles */
    int64_t last = pos0 + (T > 0 ? T : 1) - 1, win = last + 1 < window ? last + 1 : window;
    int64_t comp = sel_idx ? sel_cap : ratio > 0 ? (last + 1) / ratio : 0, need = (win + comp + ATT_KPS - 1) / ATT_KPS;
    a.splits = 1;
    while (a.splits < need) a.splits *= 2;
    size_t row_bytes = (size_t)H * a.splits * (hd + 2) * sizeof(float);
    int64_t rows = (int64_t)(ATT_WS_BYTES / row_bytes);
    a.rows = (int)(rows < 1 ? 1 : rows < T ? rows : T > 0 ? T : 1);
    a.part = (float *)cu_ws(c, WS_ATTN, (size_t)a.rows * row_bytes);
    if (!a.part) return;
    cu_submit(c, K_ATTENTION, &a, sizeof a);
}

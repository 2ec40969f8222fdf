/* Shared-KV multi-query attention with a sink (spec §3.6-3.7) on the GPU,
 * split over the keys (flash-decoding) and computed on the tensor cores.
 * MQA: all heads read the same K = V, so a row's scores are one product
 * (heads × dims)·(dims × keys) and its output another, ATT_HT heads a block
 * (the M dimension of the MMA tiles). A query's keys are cut into slices of
 * ATT_KPS keys (slice s: keys [s·ATT_KPS, (s+1)·ATT_KPS) of its key list);
 * a block decodes a slice's keys (the ring and the entries, fp32 or packed
 * FP8) into shared memory, scores them against its heads, takes each head's
 * maximum over the slice, then exp(l − max), their sum, and the weighted key
 * sum; a combine kernel merges the slices in slice order with the sink.
 *
 * Numerics: fp32 values as tf32 hi + lo pairs, three MMAs a product
 * (3xTF32, fp32 accumulation), about 2^-21 relative per product, where the
 * fp32 dot products they replace had 2^-24: far inside the oracle's 1e-3.
 *
 * Invariance: the slices depend only on the query's own keys, never on how
 * many rows the step has: the grid holds enough slices for the step's
 * longest key list, the ones past a row's keys do nothing, and the combine
 * reads the row's own slices only; inside a block, every sum runs in an
 * order fixed by the slice (MMA k-steps, fixed shuffles, warps in order).
 * So a row's result is the same bits in any step (batch and chunking
 * invariance). */
#include <string.h>

#include "cuda/rope_pair.cuh"
#include "cuda/state_rows.cuh"
#include "cuda/wload.cuh" /* cu_e4m3x2 */

#define ATT_HT 16        /* heads per block: one 16-row tile of the products */
#define ATT_WARPS 16     /* a block's warps: a decode step has few blocks, each a chain of dependent
                          * instructions, so more warps a block shorten each warp's share */
#define ATT_MAX_HD 512
#define ATT_LPR (ATT_MAX_HD / 128)          /* a lane's float4 loads of one row */
#define ATT_DT (ATT_MAX_HD / 8 / ATT_WARPS) /* a warp's dim tiles of p·key */
#define ATT_KPS 32       /* keys per slice: 4 tiles of 8 */
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
    int rope_dim;           /* out_freq != NULL: the output's last rope_dim dims rotated back */
    const float *out_freq;
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
 * instantiation so that the fp32 kernel stays lean). FP8 rows: sr_load4's
 * values for layouts whose FP8 part is whole words (n_fp8 % 4 == 0, every
 * real one; cu_attention refuses others): four e4m3 codes through the
 * hardware conversion (exact, two an instruction) times their block's
 * power of two, or four bf16 rope values. Sixteen of these are unrolled in
 * a block's loads, and a decode step's few blocks are bound by fetching and
 * issuing their code (Nsight Compute: 39 % of the stalls waiting for
 * instructions with sr_load4's per-value fallback and bit-moving decoder
 * inlined 16 times), so the loader stays short. */
template <int KIND>
__device__ __forceinline__ float4 key_values4(const att_args &a, const uint8_t *row, bool step, int c)
{
    if (KIND == ROW_F32 || step) return ((const float4 *)row)[c / 4];
    const dsv4_row_fmt &kf = a.kf;
    if (c < kf.n_fp8) {
        uint32_t u = sr_word(row + c);
        float s = sr_e8m0(row[kf.scale_off + c / 64]);
        float2 v0 = cu_e4m3x2(u), v1 = cu_e4m3x2(u >> 16);
        return make_float4(v0.x * s, v0.y * s, v1.x * s, v1.y * s);
    }
    const uint8_t *h = row + kf.rope_off + 2 * (c - kf.n_fp8);
    uint32_t h0 = sr_word(h), h1 = sr_word(h + 4); /* the first bf16 in the low half */
    return make_float4(sr_bits(h0 << 16), sr_bits(h0 & 0xffff0000u), sr_bits(h1 << 16), sr_bits(h1 & 0xffff0000u));
}

/* x as tf32 hi + lo (hi: x rounded to tf32, lo: the exact rest rounded):
 * the 3xTF32 products below then carry about 21 of x's 24 bits. */
__device__ __forceinline__ void att_split(float x, uint32_t &hi, uint32_t &lo)
{
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(hi) : "f"(x));
    asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(lo) : "f"(x - __uint_as_float(hi)));
}

/* d += A·B for one m16n8k8 tile, tf32 in, fp32 accumulate. */
__device__ __forceinline__ void att_mma(float *d, const uint32_t *a, uint32_t b0, uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

/* d += A·B at about fp32 accuracy (3xTF32): the two cross terms, then the
 * high one (lo·lo, below 2^-22 of the product, is left out). A fragment:
 * a[0] (row g, col q), a[1] (g+8, q), a[2] (g, q+4), a[3] (g+8, q+4); B:
 * b0 (row q, col g), b1 (q+4, g), each split into hi and lo. */
__device__ __forceinline__ void att_mma3(float *d, const uint32_t *ah, const uint32_t *al, uint32_t bh0, uint32_t bh1,
                                         uint32_t bl0, uint32_t bl1)
{
    att_mma(d, al, bh0, bh1);
    att_mma(d, ah, bl0, bl1);
    att_mma(d, ah, bh0, bh1);
}

/* The four tf32 pairs of an A fragment at p (row g, col q of the tile;
 * ld: the row stride). */
__device__ __forceinline__ void att_frag_a(const float *p, int ld, uint32_t *ah, uint32_t *al)
{
    att_split(p[0], ah[0], al[0]);
    att_split(p[8 * ld], ah[1], al[1]);
    att_split(p[4], ah[2], al[2]);
    att_split(p[8 * ld + 4], ah[3], al[3]);
}

/* Floats of the block's shared memory: the slice's keys and the heads'
 * queries (rows of hd + 4: the fragment reads of a quad's rows fall on
 * distinct banks), the probabilities, the later dim parts' scores, the
 * per-key-tile maxima and denominators. */
#define ATT_KT (ATT_KPS / 8)          /* key tiles (the N dimension of the scores) */
#define ATT_DP (ATT_WARPS / ATT_KT)   /* dim parts of the scores: a warp a (key tile, part) */
#define ATT_PL (ATT_KPS + 4)
__host__ __device__ static inline int att_ld(int hd) { return hd + 4; }
__host__ __device__ static inline size_t att_smem_floats(int hd)
{
    return (size_t)(ATT_KPS + ATT_HT) * att_ld(hd) + ATT_HT * ATT_PL + (ATT_DP - 1) * ATT_KT * 32 * 4 +
           2 * ATT_KT * ATT_HT;
}

/* One slice of one row for ATT_HT heads on the tensor cores (3xTF32; MQA:
 * the heads are the M dimension of one product with the shared keys).
 * Loads: warp w fetches keys w, w + 16 (zeros past the row's keys) and
 * head w (lane: values 4·lane + 128j), every load issued before the first
 * shared-memory store so that their latencies overlap (a decode step has
 * few blocks: this latency is its cost). Scores: warp w takes key tile
 * w mod 4 over dim part w / 4 (a quarter of the dims: 8-column k-steps
 * dealt to 2 accumulators by parity); the later parts' scores pass through
 * shared memory and are added to the first's in part order; the maximum and
 * the denominators of p = exp(l − max) come from fixed shuffles and the
 * tiles' values in tile order. p·key: warp w sums over the slice's keys for
 * the dim tiles w, w + 16, ... . Nothing in a row's arithmetic depends on
 * the grid. */
template <int KIND>
__global__ void __launch_bounds__(ATT_WARPS * 32) attention_part_kernel(att_args a, const int64_t *dpos)
{
    extern __shared__ float sm[];
    cu_pdl();
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3;
    int h0 = blockIdx.x * ATT_HT, t = a.t0 + blockIdx.y, sp = blockIdx.z, hd = a.hd, ld = att_ld(hd);
    float *ks = sm, *qs = ks + ATT_KPS * ld, *ps = qs + ATT_HT * ld, *sc = ps + ATT_HT * ATT_PL,
          *mx = sc + (ATT_DP - 1) * ATT_KT * 32 * 4, *dn = mx + ATT_KT * ATT_HT;
    int64_t pos0 = dpos ? *dpos : a.pos0;
    key_set kset = keys_of(a, pos0, t);
    int64_t nk = kset.n_win + kset.n_comp, k0 = (int64_t)sp * ATT_KPS;
    if (k0 >= nk) return; /* past this row's keys (the whole block): the combine reads only its own slices */
    int n = nk - k0 < ATT_KPS ? (int)(nk - k0) : ATT_KPS;
    const float4 zero = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    float4 kv[ATT_KPS / ATT_WARPS][ATT_LPR], qv[ATT_HT / ATT_WARPS][ATT_LPR];
#pragma unroll
    for (int r = 0; r < ATT_KPS / ATT_WARPS; r++) {
        int i = warp + ATT_WARPS * r;
        bool step = false;
        const uint8_t *row = i < n ? key_row(a, pos0, kset, k0 + i, &step) : NULL;
#pragma unroll
        for (int j = 0; j < ATT_LPR; j++) {
            int c = 4 * lane + 128 * j;
            kv[r][j] = row && c < hd ? key_values4<KIND>(a, row, step, c) : zero; /* never garbage into p·key */
        }
    }
    const float *qg = a.q + ((int64_t)t * a.H + h0) * hd;
    bool qal = ((uintptr_t)qg & 15) == 0;
#pragma unroll
    for (int r = 0; r < ATT_HT / ATT_WARPS; r++) {
        int i = warp + ATT_WARPS * r;
#pragma unroll
        for (int j = 0; j < ATT_LPR; j++) {
            int c = 4 * lane + 128 * j;
            const float *p = qg + (int64_t)i * hd + c;
            qv[r][j] = h0 + i >= a.H || c >= hd ? zero : qal ? *(const float4 *)p : make_float4(p[0], p[1], p[2], p[3]);
        }
    }
#pragma unroll
    for (int j = 0; j < ATT_LPR; j++) {
        int c = 4 * lane + 128 * j;
        if (c >= hd) break;
#pragma unroll
        for (int r = 0; r < ATT_KPS / ATT_WARPS; r++) *(float4 *)&ks[(warp + ATT_WARPS * r) * ld + c] = kv[r][j];
#pragma unroll
        for (int r = 0; r < ATT_HT / ATT_WARPS; r++) *(float4 *)&qs[(warp + ATT_WARPS * r) * ld + c] = qv[r][j];
    }
    __syncthreads();

    /* scores of key tile kt over dim part dh (hd a multiple of 32: parts of
     * whole 8-column k-steps): c[0] (head g, key 8kt+2q), c[1] (g,
     * 8kt+2q+1), c[2], c[3] (head g+8) */
    int kt = warp % ATT_KT, dh = warp / ATT_KT, pd = hd / ATT_DP; /* the part's dims */
    float sacc[2][4];
#pragma unroll
    for (int u = 0; u < 2; u++)
#pragma unroll
        for (int i = 0; i < 4; i++) sacc[u][i] = 0.0f;
    const float *qa = qs + g * ld + q + dh * pd, *kb = ks + (8 * kt + g) * ld + q + dh * pd;
    for (int d0 = 0; d0 < pd; d0 += 16) {
#pragma unroll
        for (int u = 0; u < 2; u++) {
            int d = d0 + 8 * u;
            if (d >= pd) break; /* a part of an odd number of k-steps */
            uint32_t ah[4], al[4], bh0, bl0, bh1, bl1;
            att_frag_a(qa + d, ld, ah, al);
            att_split(kb[d], bh0, bl0);
            att_split(kb[d + 4], bh1, bl1);
            att_mma3(sacc[u], ah, al, bh0, bh1, bl0, bl1);
        }
    }
    float l[4], m[2];
#pragma unroll
    for (int i = 0; i < 4; i++) l[i] = sacc[0][i] + sacc[1][i];
    float4 *sc4 = (float4 *)sc + kt * 32 + lane; /* part p > 0 at sc4[(p - 1) · ATT_KT · 32] */
    if (dh > 0) sc4[(dh - 1) * ATT_KT * 32] = make_float4(l[0], l[1], l[2], l[3]);
    __syncthreads();
    int kk = 8 * kt + 2 * q;
    if (dh == 0) {
#pragma unroll
        for (int p = 1; p < ATT_DP; p++) {
            float4 o = sc4[(p - 1) * ATT_KT * 32];
            l[0] += o.x;
            l[1] += o.y;
            l[2] += o.z;
            l[3] += o.w;
        }
#pragma unroll
        for (int i = 0; i < 4; i++) l[i] *= a.scale;
#pragma unroll
        for (int r = 0; r < 2; r++) { /* r: head g, g + 8 */
            float v = -INFINITY;
            if (kk < n) v = l[2 * r];
            if (kk + 1 < n) v = fmaxf(v, l[2 * r + 1]);
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 1));
            v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, 2));
            if (q == 0) mx[kt * ATT_HT + g + 8 * r] = v;
        }
    }
    __syncthreads();
    if (dh == 0) {
#pragma unroll
        for (int r = 0; r < 2; r++) {
            int h = g + 8 * r;
            m[r] = fmaxf(fmaxf(mx[h], mx[ATT_HT + h]), fmaxf(mx[2 * ATT_HT + h], mx[3 * ATT_HT + h]));
            float p0 = kk < n ? expf(l[2 * r] - m[r]) : 0.0f, p1 = kk + 1 < n ? expf(l[2 * r + 1] - m[r]) : 0.0f;
            ps[h * ATT_PL + kk] = p0;
            ps[h * ATT_PL + kk + 1] = p1;
            float s = p0 + p1;
            s += __shfl_xor_sync(0xffffffffu, s, 1);
            s += __shfl_xor_sync(0xffffffffu, s, 2);
            if (q == 0) dn[kt * ATT_HT + h] = s;
        }
    }
    __syncthreads();

    /* p·key for dim tiles warp + 8j: o[j][0] (head g, dim 8·tile+2q),
     * o[j][1] (+1), o[j][2], o[j][3] (head g+8) */
    float o[ATT_DT][4];
    int nt = hd / 8;
#pragma unroll
    for (int j = 0; j < ATT_DT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) o[j][i] = 0.0f;
#pragma unroll
    for (int c0 = 0; c0 < ATT_KPS; c0 += 8) {
        uint32_t ah[4], al[4];
        att_frag_a(ps + g * ATT_PL + c0 + q, ATT_PL, ah, al);
        const float *vb = ks + (c0 + q) * ld + 8 * warp + g;
#pragma unroll
        for (int j = 0; j < ATT_DT; j++) {
            if (warp + ATT_WARPS * j >= nt) break;
            uint32_t bh0, bl0, bh1, bl1;
            att_split(vb[8 * ATT_WARPS * j], bh0, bl0);
            att_split(vb[4 * ld + 8 * ATT_WARPS * j], bh1, bl1);
            att_mma3(o[j], ah, al, bh0, bh1, bl0, bl1);
        }
    }
    float *part = a.part + (((int64_t)blockIdx.y * a.H + h0) * a.splits + sp) * (hd + 2);
    int64_t hstride = (int64_t)a.splits * (hd + 2);
#pragma unroll
    for (int r = 0; r < 2; r++) {
        int h = g + 8 * r;
        if (h0 + h >= a.H) continue;
        float *ph = part + h * hstride;
#pragma unroll
        for (int j = 0; j < ATT_DT; j++) {
            int tile = warp + ATT_WARPS * j;
            if (tile >= nt) break;
            *(float2 *)&ph[8 * tile + 2 * q] = make_float2(o[j][2 * r], o[j][2 * r + 1]);
        }
        if (warp == 0 && q == 0) {
            ph[hd] = m[r];
            ph[hd + 1] = ((dn[h] + dn[ATT_HT + h]) + dn[2 * ATT_HT + h]) + dn[3 * ATT_HT + h];
        }
    }
}

/* Dims d .. d+N-1 of a row's output before the denominator, into v: their
 * slices' weighted sums (p: the row's S slices, hd + 2 floats each; f:
 * their weights), each added in slice order. */
template <int N>
__device__ __forceinline__ void att_slices_dims(float *v, const float *p, const float *f, int S, int hd, int d)
{
#pragma unroll
    for (int k = 0; k < N; k++) v[k] = 0.0f;
    for (int s = 0; s < S; s++)
#pragma unroll
        for (int k = 0; k < N; k++) v[k] = fmaf(p[s * (hd + 2) + d + k], f[s], v[k]);
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
    int nope = a.out_freq ? hd - a.rope_dim : hd; /* dims stored as they are */
    for (int d = threadIdx.x; d < nope; d += blockDim.x) {
        float v;
        att_slices_dims<1>(&v, p, f, S, hd, d);
        o[d] = v * s_inv;
    }
    /* the rope dims, a pair a thread: each value as above, then the rope
     * op's inverse rotation at the query's position (rope_pair: its bits) */
    if (!a.out_freq) return;
    float pos = (float)((dpos ? *dpos : a.pos0) + t);
    for (int i = threadIdx.x; i < a.rope_dim / 2; i += blockDim.x) {
        int d = nope + 2 * i;
        float v[2];
        att_slices_dims<2>(v, p, f, S, hd, d);
        v[0] *= s_inv;
        v[1] *= s_inv;
        rope_pair(v, pos, a.out_freq[i], 1);
        o[d] = v[0];
        o[d + 1] = v[1];
    }
}

void cu_exec_attention(cu_impl *c, const void *args, const int64_t *dpos)
{
    const att_args *a = (const att_args *)args;
    if (a->T <= 0 || a->H <= 0) return;
    att_args b = *a;
    for (b.t0 = 0; b.t0 < a->T; b.t0 += a->rows) {
        unsigned rows = (unsigned)(a->T - b.t0 < a->rows ? a->T - b.t0 : a->rows);
        dim3 grid((unsigned)((a->H + ATT_HT - 1) / ATT_HT), rows, (unsigned)a->splits);
        size_t shm = att_smem_floats(a->hd) * sizeof(float);
        static size_t allowed[2][CU_SMEM_GPUS];
        if (a->kf.kind == ROW_F32) {
            if (cu_allow_smem(c, attention_part_kernel<ROW_F32>, shm, allowed[0])) return;
            cu_launch(c, "attention", attention_part_kernel<ROW_F32>, grid, dim3(ATT_WARPS * 32), shm, b, dpos);
        } else {
            if (cu_allow_smem(c, attention_part_kernel<ROW_FP8>, shm, allowed[1])) return;
            cu_launch(c, "attention", attention_part_kernel<ROW_FP8>, grid, dim3(ATT_WARPS * 32), shm, b, dpos);
        }
        cu_launch(c, "attention combine", attention_combine_kernel, dim3((unsigned)a->H, rows), dim3(256),
                  (size_t)a->splits * 2 * sizeof(float), b, dpos);
    }
}

void cu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window, const uint8_t *ring,
                  const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio, const int32_t *sel_idx,
                  const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale, int rope_dim,
                  const float *out_freq, float *out)
{
    cu_impl *c = cu_of(b);
    if (hd > ATT_MAX_HD || hd % 32 || kf->kind == ROW_FP4 || (kf->kind == ROW_FP8 && kf->n_fp8 % 4)) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA attention: head_dim must be a multiple of 32 up to 512, keys fp32 "
                     "or FP8 with whole words of e4m3 codes (head_dim - rope_dim a multiple of 4)");
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
    a.rope_dim = rope_dim;
    a.out_freq = out_freq;
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

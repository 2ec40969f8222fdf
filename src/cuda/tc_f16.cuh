/* Tensor-core products of FP8 (e4m3, 128x128 blocks) and MXFP4 (E2M1, 1x32
 * blocks) weights with fp32 activations, shared by the matmul (linear.cu)
 * and the experts (moe.cu).
 *
 * Numerics. Every weight code becomes an f16 by moving its bits (no
 * conversion instruction, no multiply): the f16 value is the code's value
 * times 2^-8 (e4m3) or 2^-14 (E2M1), exactly, subnormal codes included. The
 * scale block's power of two is applied to the block's fp32 sum after the
 * MMAs, with the activation row's own power of two folded in (exact). An
 * activation row is "prepared" once per op (tc_prep): scaled by a power of
 * two so that its largest |value| lies in [2^14, 2^15), then split into f16
 * hi + lo (hi = f16(x), lo = f16(x - hi)): 22 significant bits, each term
 * well inside f16's range. mma.m16n8k16 (f16 in, fp32 accumulate) then forms
 * the hi and lo products. So a row's sum is, up to about 2^-22 relative per
 * term, the fp32 dot product with the exactly dequantized weight.
 *
 * Invariance. What a row computes is fixed by the weight's shape and format
 * and by its own activation row: the chunk order, the slices (from the shape
 * alone) and the block sums never depend on how many rows or tokens share
 * the launch, or on which warp computes them.
 *
 * Layout. A warp holds MT tiles of 16 weight rows and NT tiles of 8 token
 * columns; thread (g = lane/4, q = lane%4) loads rows g and g+8 of each tile.
 * A k-step covers 16 columns from the four threads of a quad; the values of
 * an 8-column group v0..v7 are paired (v0,v4) (v1,v5) (v2,v6) (v3,v7), the
 * order the bit moves produce, and a prepared row stores each group in that
 * order: [x0 x4 x1 x5 x2 x6 x3 x7] (hi), then the same 8 of lo.
 *   FP8: a chunk is 64 columns; thread q loads 16 bytes (columns 16q..) of
 *        each row: 2 groups, 4 k-steps; the chunk lies in one scale block
 *        (power-of-two blocks of at least 64 columns).
 *   FP4: a chunk is 128 columns = 4 scale blocks (E8M0 grids); thread q
 *        loads word q (8 values) of each block, so each block's 2 k-steps
 *        stay in one scale block and its sum can be scaled. */
#ifndef DSV4_CUDA_TC_F16_CUH
#define DSV4_CUDA_TC_F16_CUH
#include "cuda/wload.cuh"

/* Columns of a chunk, and of a prepared row's padding. */
#define TC_CC8 64
#define TC_CC4 128
#define TC_PAD 128

__host__ __device__ static inline int64_t tc_npad(int64_t n) { return (n + TC_PAD - 1) / TC_PAD * TC_PAD; }

/* f16 pairs of an e4m3 word pair. u holds bytes [v0 v1 v4 v5] (or
 * [v2 v3 v6 v7]); e4m3 bits s.eeee.mmm go to f16 bits s.0eeee.mmm0000000:
 * the f16 is the code's value times 2^-8 (subnormals too). */
__device__ __forceinline__ uint32_t tc_e4m3_lo(uint32_t u) /* (byte 0, byte 2) */
{
    return ((u << 7) & 0x3F803F80u) | ((u << 8) & 0x80008000u);
}
__device__ __forceinline__ uint32_t tc_e4m3_hi(uint32_t u) /* (byte 1, byte 3) */
{
    return ((u >> 1) & 0x3F803F80u) | (u & 0x80008000u);
}

/* f16 pair (n_i, n_{i+4}) of the E2M1 nibbles of w (n0 = bits 0..3): bits
 * s.ee.m go to f16 bits s.000ee.m000000000, the value times 2^-14. */
template <int I>
__device__ __forceinline__ uint32_t tc_e2m1_pair(uint32_t w)
{
    uint32_t m, s; /* magnitude bits 4I..4I+2 -> 9..11, sign bit 4I+3 -> 15 (and the same +16) */
    if constexpr (I < 3) m = w << (9 - 4 * I);
    else m = w >> 3;
    if constexpr (I < 3) s = w << (12 - 4 * I);
    else s = w;
    return (m & 0x0E000E00u) | (s & 0x80008000u);
}

/* A warp's MT x NT tiles of accumulators set to zero. */
template <int MT, int NT>
__device__ __forceinline__ void tc_zero(float (*a)[NT][4])
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) a[m][j][i] = 0.0f;
}

/* d += A·B for one m16n8k16 tile (f16 in, fp32 accumulate). */
__device__ __forceinline__ void tc_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

/* The weight bytes of one chunk for one thread and row: FP8 16 bytes at
 * p (columns 16q..), FP4 word q of each of the 4 blocks (p = the chunk's
 * start + 4q). avail: bytes of the row from p on. Rows are whole 16-byte
 * pieces (tc_shape_ok), so a piece is wholly inside the row or past its
 * end (read as 0). */
template <int FAM>
__device__ __forceinline__ uint4 tc_load(const char *p, int64_t avail)
{
    if constexpr (FAM == CU_W_FP8) {
        return avail > 0 ? __ldg((const uint4 *)p) : make_uint4(0, 0, 0, 0);
    } else {
        uint32_t w[4];
#pragma unroll
        for (int b = 0; b < 4; b++) w[b] = avail > 16 * b ? __ldg((const uint32_t *)(p + 16 * b)) : 0u;
        return make_uint4(w[0], w[1], w[2], w[3]);
    }
}

/* Scales of one chunk of a row, packed in a word: FP8 its one scale (fp32
 * bits), FP4 its 4 blocks' E8M0 bytes, a block past the row's end as byte
 * 0 (2^-127: its sum is exactly 0, and nothing past the grid is read). */
template <int FAM>
__device__ __forceinline__ uint32_t tc_scales(const dsv4_mat &W, const char *srow, int64_t col0, int64_t n)
{
    if constexpr (FAM == CU_W_FP8) {
        /* blk_c is a power of two here (tc_shape_ok) */
        uint32_t j = (uint32_t)col0 >> (__ffs((uint32_t)W.blk_c) - 1);
        if (W.scale_dtype == DT_F32) return __ldg((const uint32_t *)srow + j);
        return __float_as_uint(cu_e8m0(__ldg((const uint8_t *)srow + j)));
    } else {
        /* the chunk's 4 bytes in one load where the grid's rows allow it (one
         * register per load in flight instead of four) */
        if (col0 + 128 <= n && W.scale_cols % 4 == 0 && (uintptr_t)W.scale % 4 == 0)
            return __ldg((const uint32_t *)(srow + (col0 >> 5)));
        uint32_t s = 0;
#pragma unroll
        for (int b = 0; b < 4; b++) {
            int64_t c = col0 + 32 * b;
            if (c < n) s |= (uint32_t)__ldg((const uint8_t *)srow + (c >> 5)) << (8 * b);
        }
        return s;
    }
}

/* Block b's scale from a tc_scales word. */
template <int FAM>
__device__ __forceinline__ float tc_scale(uint32_t s, int b)
{
    if constexpr (FAM == CU_W_FP8) return __uint_as_float(s);
    else return cu_e8m0((s >> (8 * b)) & 0xffu);
}

/* One chunk's products for a warp: the weight loads u[m][h] (rows g, g+8 of
 * tile m) with scales sc[m][h][], against the prepared token rows xr[j]
 * (token g of tile j; group index gi = the chunk's first 8-column group
 * for this thread), P[j][2] the output columns' row factors; adds the
 * chunk's (FP4: each block's) scaled sums to acc. */
template <int FAM, int MT, int NT>
__device__ __forceinline__ void tc_chunk_f16(float (*acc)[NT][4], const uint4 (*u)[2], const uint32_t (*sc)[2],
                                             const __half *const *xr, int64_t gi, const float (*P)[2])
{
    constexpr int NB = FAM == CU_W_FP8 ? 1 : 4;   /* scale blocks in the chunk */
    constexpr int SPB = FAM == CU_W_FP8 ? 4 : 2;  /* k-steps per block */
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float blk[MT][NT][4];
        tc_zero<MT, NT>(blk);
#pragma unroll
        for (int s = 0; s < SPB; s++) {
            /* group of this k-step (FP8: 2 per load; FP4: the block's word) */
            int grp = FAM == CU_W_FP8 ? s >> 1 : b * 4;
            int odd = s & 1;
            uint32_t a[MT][4];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint32_t x0, x1;
                    if (FAM == CU_W_FP8) {
                        uint32_t w0 = grp ? u[m][h].z : u[m][h].x, w1 = grp ? u[m][h].w : u[m][h].y;
                        uint32_t v = __byte_perm(w0, w1, odd ? 0x7632 : 0x5410);
                        x0 = tc_e4m3_lo(v);
                        x1 = tc_e4m3_hi(v);
                    } else {
                        uint32_t w = b == 0 ? u[m][h].x : b == 1 ? u[m][h].y : b == 2 ? u[m][h].z : u[m][h].w;
                        x0 = odd ? tc_e2m1_pair<2>(w) : tc_e2m1_pair<0>(w);
                        x1 = odd ? tc_e2m1_pair<3>(w) : tc_e2m1_pair<1>(w);
                    }
                    a[m][h] = x0;     /* row g (h 0) / g+8 (h 1), k slots 2q, 2q+1 */
                    a[m][2 + h] = x1; /* k slots 2q+8, 2q+9 */
                }
#pragma unroll
            for (int j = 0; j < NT; j++) {
                const uint4 *xg = (const uint4 *)(xr[j] + (gi + grp) * 16);
                uint4 hi = xg[0], lo = xg[1];
                uint32_t h0 = odd ? hi.z : hi.x, h1 = odd ? hi.w : hi.y;
                uint32_t l0 = odd ? lo.z : lo.x, l1 = odd ? lo.w : lo.y;
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    tc_mma(blk[m][j], a[m][0], a[m][1], a[m][2], a[m][3], h0, h1);
                    tc_mma(blk[m][j], a[m][0], a[m][1], a[m][2], a[m][3], l0, l1);
                }
            }
        }
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++)
                    acc[m][j][i] = fmaf(blk[m][j][i], tc_scale<FAM>(sc[m][i >> 1], b) * P[j][i & 1], acc[m][j][i]);
    }
}

/* One slice of a warp's rows: chunks sp, sp+ks, ... (in increasing order,
 * U of them loading while one computes) into acc (zeroed here).
 * wr[m][h]: row pointers at this thread's offset (FP8 16q, FP4 4q);
 * sr[m][h]: the rows' scale rows; rb: row bytes; n: columns. */
template <int FAM, int MT, int NT, int U>
__device__ __forceinline__ void tc_slice_f16(float (*acc)[NT][4], const dsv4_mat &W, const char *const (*wr)[2],
                                             const char *const (*sr)[2], int64_t rb, int64_t n, int sp, int ks,
                                             const __half *const *xr, const float (*P)[2], int q)
{
    constexpr int CC = FAM == CU_W_FP8 ? TC_CC8 : TC_CC4, CB = 64; /* CB: a chunk's row bytes, either family */
    int64_t nch = (n + CC - 1) / CC;
    int tq = FAM == CU_W_FP8 ? 16 * q : 4 * q; /* this thread's byte offset in a chunk */
    tc_zero<MT, NT>(acc);
    uint4 ub[U][MT][2];
    uint32_t sb[U][MT][2];
#define TC_LOAD(c, i)                                                                                  \
    do {                                                                                               \
        int64_t off_ = (c) * CB;                                                                       \
        _Pragma("unroll") for (int m = 0; m < MT; m++)                                                 \
        _Pragma("unroll") for (int h = 0; h < 2; h++) {                                                \
            ub[i][m][h] = tc_load<FAM>(wr[m][h] + off_, rb - off_ - tq);                                \
            sb[i][m][h] = tc_scales<FAM>(W, sr[m][h], (c) * CC, n);                                    \
        }                                                                                              \
    } while (0)
#pragma unroll
    for (int i = 0; i < U; i++)
        if (sp + (int64_t)i * ks < nch) TC_LOAD(sp + (int64_t)i * ks, i);
    for (int64_t base = sp; base < nch; base += (int64_t)U * ks) {
#pragma unroll
        for (int i = 0; i < U; i++) {
            int64_t c = base + (int64_t)i * ks;
            if (c >= nch) break;
            uint4 u[MT][2];
            uint32_t sc[MT][2];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    u[m][h] = ub[i][m][h];
                    sc[m][h] = sb[i][m][h];
                }
            if (c + (int64_t)U * ks < nch) TC_LOAD(c + (int64_t)U * ks, i);
            /* first 8-column group of this thread's columns in chunk c */
            int64_t gi = FAM == CU_W_FP8 ? c * (TC_CC8 / 8) + 2 * q : c * (TC_CC4 / 8) + q;
            tc_chunk_f16<FAM, MT, NT>(acc, u, sc, xr, gi, P);
        }
    }
#undef TC_LOAD
}

/* A warp's row sums from its K slices, the same for every instance: SEQ =
 * 1 runs all ks slices in turn, SEQ = 0 its own slice sp0 (the ks warps of
 * a row tile side by side), and then adds the others' through part ([8
 * warps][MT][NT][4][32] floats) in slice order. slice(acc, sp) writes
 * slice sp's sums into acc. Returns whether this warp holds the finished
 * sums (SEQ = 0: the tile's first warp). Every warp of the block must call
 * it (barriers). */
template <int MT, int NT, int SEQ, class F>
__device__ __forceinline__ int tc_slices_sum(float (*tot)[NT][4], int ks, int sp0, float *part, F slice)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    float acc[MT][NT][4];
    int sp_end = SEQ ? ks : sp0 + 1;
    for (int sp = SEQ ? 0 : sp0; sp < sp_end; sp++) {
        slice(acc, sp);
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) tot[m][j][i] = SEQ && sp > 0 ? tot[m][j][i] + acc[m][j][i] : acc[m][j][i];
    }
    if constexpr (SEQ) {
        return 1;
    } else {
        if (ks == 1) return 1;
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) part[(((warp * MT + m) * NT + j) * 4 + i) * 32 + lane] = tot[m][j][i];
        __syncthreads();
        int mine = sp0 == 0;
        if (mine)
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int j = 0; j < NT; j++)
#pragma unroll
                    for (int i = 0; i < 4; i++)
                        for (int k = 1; k < ks; k++)
                            tot[m][j][i] += part[((((warp + k) * MT + m) * NT + j) * 4 + i) * 32 + lane];
        __syncthreads(); /* part may be written again by the caller's next tile */
        return mine;
    }
}

/* Floats of tc_slices_sum's part for an instance (SEQ = 0 with ks > 1
 * slices; nothing otherwise): the kernels place their staging after it,
 * the launches size their shared memory by it. */
__host__ __device__ static inline int64_t tc_part_floats(int seq, int mt, int nt, int ks)
{
    return !seq && ks > 1 ? (int64_t)8 * mt * nt * 4 * 32 : 0;
}

/* tc_slices_sum over tc_slice_f16 (FP8/MXFP4). */
template <int FAM, int MT, int NT, int SEQ, int U>
__device__ __forceinline__ int tc_warp_sums(float (*tot)[NT][4], const dsv4_mat &W, const char *const (*wr)[2],
                                            const char *const (*sr)[2], int64_t rb, int64_t n, int ks, int sp0,
                                            const __half *const *xr, const float (*P)[2], int q, float *part)
{
    return tc_slices_sum<MT, NT, SEQ>(tot, ks, sp0, part, [&](float (*acc)[NT][4], int sp) {
        tc_slice_f16<FAM, MT, NT, U>(acc, W, wr, sr, rb, n, sp, ks, xr, P, q);
    });
}

/* The factor of a prepared row's sums for the weight kind: the row's
 * 2^-e times the codes' 2^8 (FP8) or 2^14 (FP4); the GGUF kinds'
 * (ggml_tc.cuh) codes are plain integers. */
template <int FAM>
__device__ __forceinline__ float tc_row_factor(const float *pf, int64_t row)
{
    return pf[row] * (FAM == CU_W_FP8 ? 256.0f : FAM == CU_W_FP4 ? 16384.0f : 1.0f);
}

/* ---- activation rows (the preparation of the header comment) ---- */

/* Largest |value| over the block (all threads get it); sh: 32 floats. */
__device__ __forceinline__ float tc_block_absmax(float v, float *sh)
{
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads(); /* sh may still be read from a previous call */
    if (l == 0) sh[w] = v;
    __syncthreads();
    v = l < nw ? sh[l] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v = fmaxf(v, __shfl_xor_sync(0xffffffffu, v, o));
    return v;
}

/* A row's power of two e (largest |x·2^e| in [2^14, 2^15); 0 for a zero or
 * non-finite row, capped so that 2^-e stays a normal float). All threads of
 * the block call it and get e. */
__device__ __forceinline__ int tc_row_exp(const float *row, int64_t n, float *sh)
{
    float mx = 0.0f;
    if ((uintptr_t)row % 16 == 0 && n % 4 == 0)
        for (int64_t i = threadIdx.x; i < n / 4; i += blockDim.x) {
            float4 v = ((const float4 *)row)[i];
            mx = fmaxf(mx, fmaxf(fmaxf(fabsf(v.x), fabsf(v.y)), fmaxf(fabsf(v.z), fabsf(v.w))));
        }
    else
        for (int64_t i = threadIdx.x; i < n; i += blockDim.x) mx = fmaxf(mx, fabsf(row[i]));
    mx = tc_block_absmax(mx, sh);
    int e = 0;
    if (mx > 0.0f && mx <= 3.4028235e38f) {
        int E;
        frexpf(mx, &E); /* mx = f·2^E, f in [0.5, 1): e in [-113, 126] */
        e = 15 - E < 126 ? 15 - E : 126;
    }
    return e;
}

/* 2^-e, the factor that undoes a row's scaling (a normal float). */
__device__ __forceinline__ float tc_exp_factor(int e) { return __int_as_float((127 - e) << 23); }

/* 8-column group g8 of a prepared row at o: f16 hi/lo of x·2^e in the
 * paired order [x0 x4 x1 x5 x2 x6 x3 x7], zeros past n (x·2^e is exact). */
__device__ __forceinline__ void tc_prep_group(const float *row, int64_t n, int64_t g8, int e, __half *o)
{
    float p2 = __int_as_float((127 + e) << 23);
    __align__(16) __half hv[8], lv[8];
#pragma unroll
    for (int j = 0; j < 8; j++) {
        int64_t c = g8 * 8 + j;
        float v = c < n ? row[c] * p2 : 0.0f;
        __half h = __float2half_rn(v);
        int p = (j & 3) * 2 + (j >> 2);
        hv[p] = h;
        lv[p] = __float2half_rn(v - __half2float(h));
    }
    ((uint4 *)(o + g8 * 16))[0] = *(const uint4 *)hv;
    ((uint4 *)(o + g8 * 16))[1] = *(const uint4 *)lv;
}

/* The block prepares nr rows (row i at x + i·ldx) itself into shared
 * memory: sx (nr rows of 2·tc_npad(n) halves), spf (nr factors); the same
 * values tc_prep writes, for decode steps whose rows fit (tc_stage_bytes),
 * saving the preparation launch and the activations' trips to L2. */
__device__ __forceinline__ void tc_prep_block(const float *x, int64_t ldx, int nr, int64_t n, __half *sx, float *spf,
                                              float *sh)
{
    int64_t npad = tc_npad(n);
    for (int i = 0; i < nr; i++) {
        const float *row = x + i * ldx;
        int e = tc_row_exp(row, n, sh);
        for (int64_t g8 = threadIdx.x; g8 < npad / 8; g8 += blockDim.x) tc_prep_group(row, n, g8, e, sx + i * 2 * npad);
        if (threadIdx.x == 0) spf[i] = tc_exp_factor(e);
    }
    __syncthreads();
}

/* Shared bytes for nr rows prepared in a block (plus the factors and the
 * reduction scratch); decode stages its rows when this fits next to the
 * slice sums in the default 48 KB and the rows are short: every block
 * prepares the whole row, which at 4096 columns and more costs more than
 * the launch it saves (measured per shape: docs/PERFORMANCE.md, "Tuning
 * of the tensor-core decode"). */
#define TC_STAGE_MAX_N 2048
__host__ __device__ static inline size_t tc_stage_bytes(int nr, int64_t n)
{
    return (size_t)nr * (size_t)tc_npad(n) * 4 + 8 * 4 + 32 * 4;
}
#define TC_STAGE_MAX (40 * 1024)

/* Whether W takes the tensor-core path: FP8 with scale blocks holding
 * whole chunks, MXFP4 with 32-column blocks; rows 16-byte aligned (shape
 * and format only). */
__host__ static inline int tc_shape_ok(const dsv4_mat &W)
{
    int fam = cu_wfam(W);
    if (fam == CU_W_FP8) return cu_w_loads_ok(W) && W.blk_c % TC_CC8 == 0 && (W.blk_c & (W.blk_c - 1)) == 0;
    if (fam == CU_W_FP4) return cu_w_loads_ok(W) && W.blk_c == 32 && W.scale_dtype == DT_F8_E8M0;
    return 0;
}

/* K slices (a power of two up to 8, one warp each in decode): about 2048
 * warps for short matrices, each slice at least 4 chunks. From the shape
 * alone. Fewer, longer-lived warps stream better than many short ones
 * (the sweep: docs/PERFORMANCE.md, "Tuning of the tensor-core decode"). */
__host__ static inline int tc_splits(int64_t rows, int64_t nch)
{
    int ks = 1;
    while (ks < 8 && (rows + 15) / 16 * ks < 2048 && nch / (ks * 2) >= 4) ks *= 2;
    return ks;
}

/* Host: prepared rows for R = T·G activation rows of n values (row (t, b)
 * at x + t·ldx + b·n) into xq (R rows of 2·tc_npad(n) halves) and pf (R
 * factors); bytes needed: tc_prep_bytes. */
size_t tc_prep_bytes(int64_t rows, int64_t n);
void tc_prep(cu_impl *c, const float *x, int64_t ldx, int T, int G, int64_t n, __half *xq, float *pf);

#endif

/* Products whose block sums are exact integers, so that a row's bits do not
 * depend on which kernel, how many token rows or which hardware unit
 * computed it: batch invariance without tying decode to the tensor cores'
 * instruction stream (tests/cuda/NOTES.md, 2026-12-07). For the GGUF
 * types whose 32-column blocks are int8 codes times one factor: Q8_0 (the
 * files' dense matrices and shared experts) and IQ3_XXS (their routed
 * experts: grid magnitudes with signs, d·(0.5 + s)·0.5 a block); shared by
 * the dense products (int_matmul.cu) and the experts (moe_int.cu). MXFP4 experts
 * took it too in one measured build and were slower than on the f16 tensor
 * cores (decoding E2M1 to int8 costs more than their halved bytes save),
 * so they stay there.
 *
 * Numerics. A prepared activation row (int_prep_kernel) has, per 32-column
 * block b, a power of two 2^e_b that puts the block's largest |value| in
 * [2^21, 2^22), and x_int = rint(x * 2^e_b) split into three int8 limbs,
 * x_int = a2*2^16 + a1*2^8 + a0 (|a2| <= 64). A weight block is 32 int8
 * codes q and a factor d (Q8_0: its f16; IQ3_XXS: the exact fp32 product
 * f16·(0.5 + s)·0.5). The int32 sums s_l = sum q*a_l are exact,
 * and the block's value
 *   v = fma(float(s2*256 + s1), 256, float(s0))   (|s2*256 + s1| < 2^27)
 * is scaled by d * 2^-e_b (one product, exact unless it leaves the normal
 * range: then it rounds the same way everywhere). A row adds fma(v, scale,
 * acc) block after block within a slice (slice s: the 32-block chunks
 * s, s + ks, ...; ks from the shape), and the slices' sums in slice order.
 * Rounding x to 22 bits relative to its block's largest value is the only
 * approximation (about 2^-22 of the block's size a term); an FP8-rounded
 * row (official numerics) is represented exactly. A block holding a NaN or
 * an infinity has zero limbs and the scale factor NaN, so every sum it
 * enters is NaN, as on the other paths (the step's checks then see it;
 * integer limbs alone would turn it into a finite value).
 *
 * Two warp routines compute these sums in the same order:
 *   - int_gemv_warp, up to INT_GEMV_MAX token rows on the CUDA cores: lane
 *     l computes block l of a chunk for each of the warp's (up to 32) rows
 *     (dp4a) into shared memory, then lane r adds row r's blocks in order;
 *   - int_tile_warp, 16 rows by 8*NT token rows on the integer tensor cores
 *     (mma.m16n8k32 s8, exact int32 sums), the same blocks in the same
 *     order. */
#ifndef DSV4_CUDA_INT_DOT_CUH
#define DSV4_CUDA_INT_DOT_CUH
#include "cuda/cuda_internal.cuh"
#include "cuda/ggml_blocks.cuh" /* the IQ3_XXS grid and sign tables */
#include "cuda/wload.cuh"

#define INT_CHUNK 32   /* blocks a chunk: a GEMV warp's lanes */
#define INT_GEMV_MAX 8 /* token rows the GEMV takes at most */
#define INT_LIMB_BYTES 96 /* a prepared block: 3 limbs of 32 int8 */

/* Whether W takes the integer sums (shape and format alone). */
__host__ static inline int int_ok(const dsv4_mat &W)
{
    return (W.fmt == WF_Q8_0 || W.fmt == WF_IQ3_XXS) && W.cols % gg_block_elems(W.fmt) == 0 && W.rows > 0 &&
           W.data && (uintptr_t)W.data % 2 == 0;
}

/* Calls f(int-constant format) for an int_ok format (the host's choice of
 * a kernel instance). */
template <int F> struct int_fmt_c { static constexpr int value = F; };
template <class F>
__host__ static inline void int_fmt_dispatch(int fmt, F f)
{
    if (fmt == WF_IQ3_XXS) f(int_fmt_c<WF_IQ3_XXS>());
    else f(int_fmt_c<WF_Q8_0>());
}

/* Slices from the shape alone: enough warps for short matrices (at most 4,
 * a GEMV block's warps). */
__host__ static inline int int_splits(int64_t rows, int64_t cols)
{
    int64_t nch = (cols / 32 + INT_CHUNK - 1) / INT_CHUNK;
    int ks = 1;
    while (ks < 4 && ks < nch && rows * ks < 32768) ks *= 2;
    return ks;
}

/* nrows prepared rows of n columns: their limbs (INT_LIMB_BYTES a block),
 * then their factors 2^-e (one float a block; NaN: the block is not finite). */
__host__ __device__ static inline size_t int_limbs_bytes(int64_t nrows, int64_t n) { return (size_t)nrows * (size_t)n * 3; }

__host__ __device__ static inline const float *int_factors(const int8_t *lim, int64_t nrows, int64_t n)
{
    return (const float *)(lim + int_limbs_bytes(nrows, n));
}

__device__ __forceinline__ float int_block_value(int s0, int s1, int s2)
{
    return __fmaf_rn((float)(s2 * 256 + s1), 256.0f, (float)s0);
}

/* The block's scale against a prepared block of factor xs = 2^-e. */
__device__ __forceinline__ float int_scale(float f, float xs) { return __fmul_rn(f, xs); }

__device__ __forceinline__ float int_f16(uint32_t h) { return __half2float(__ushort_as_half((unsigned short)h)); }

/* IQ3_XXS (98-byte super-blocks of 256 values, 2-aligned: f16 d, qs[64]
 * grid indices, then a u32 a 32-value block: four 7-bit sign groups and a
 * 4-bit scale s). Block b is sub-block b % 8 of super-block b / 8. */
__device__ __forceinline__ const uint16_t *int_iq3_super(const uint8_t *row, int64_t b)
{
    return (const uint16_t *)(row + (b >> 3) * 98);
}
__device__ __forceinline__ uint32_t int_iq3_aux(const uint16_t *h, int c)
{
    return (uint32_t)__ldg(h + 33 + 2 * c) | (uint32_t)__ldg(h + 34 + 2 * c) << 16;
}
__device__ __forceinline__ float int_iq3_factor(const uint16_t *h, uint32_t aux)
{
    return __fmul_rn(__fmul_rn(int_f16(__ldg(h)), 0.5f + (float)(aux >> 28)), 0.5f);
}
/* The 4 magnitudes (bytes) of grid entry idx with the signs s (bit k:
 * value k negative) as int8 bytes: a negative byte is ~m + 1, and no
 * grid magnitude is 0, so the + 1 never carries into the next byte. */
__device__ __forceinline__ uint32_t int_iq3_word(uint32_t idx, uint32_t s)
{
    uint32_t g = ((const uint32_t *)gg_dev_iq3xxs_grid)[idx];
    uint32_t m = ((s * 0x00204081u) & 0x01010101u) * 0xFFu; /* bit k -> byte k all ones */
    return (g ^ m) + (m & 0x01010101u);
}
/* Sign group l of a block: 8 signs, for its values 8l .. 8l+7. */
__device__ __forceinline__ uint32_t int_iq3_signs(uint32_t aux, int l)
{
    return gg_dev_ksigns_iq2xs[(aux >> (7 * l)) & 127];
}

/* GEMV: block b of a row, whole: its codes (8 words of 4 int8) and d. Q8_0:
 * the 34-byte blocks start 0 or 2 bytes into a word. */
template <int FMT>
__device__ __forceinline__ void int_block_codes(const uint8_t *row, int64_t b, int q[8], float &f)
{
    if constexpr (FMT == WF_IQ3_XXS) {
        const uint16_t *h = int_iq3_super(row, b);
        int c = (int)(b & 7);
        uint32_t aux = int_iq3_aux(h, c);
        f = int_iq3_factor(h, aux);
#pragma unroll
        for (int l = 0; l < 4; l++) {
            uint32_t idx = __ldg(h + 1 + 4 * c + l), sg = int_iq3_signs(aux, l);
            q[2 * l] = (int)int_iq3_word(idx & 0xFF, sg & 15);
            q[2 * l + 1] = (int)int_iq3_word(idx >> 8, sg >> 4);
        }
        return;
    }
    uintptr_t p = (uintptr_t)(row + b * 34);
    const uint32_t *wp = (const uint32_t *)(p & ~(uintptr_t)3);
    int odd = (int)(p & 2);
    uint32_t w[9];
#pragma unroll
    for (int i = 0; i < 8; i++) w[i] = __ldg(wp + i);
    /* the last word: whole only where the block ends on it (no read past the tensor) */
    w[8] = odd ? __ldg(wp + 8) : (uint32_t)__ldg((const uint16_t *)(wp + 8));
    uint32_t sel = odd ? 0x7654u : 0x5432u;
#pragma unroll
    for (int i = 0; i < 8; i++) q[i] = (int)__byte_perm(w[i], w[i + 1], sel);
    f = int_f16(odd ? w[0] >> 16 : w[0] & 0xffffu);
}

/* Tile: the codes of columns 8j..8j+3 (lo) and 8j+4..8j+7 (hi) of block b,
 * and its d. */
template <int FMT>
__device__ __forceinline__ void int_block_pair(const uint8_t *row, int64_t b, int j, uint32_t &lo, uint32_t &hi,
                                               float &f)
{
    if constexpr (FMT == WF_IQ3_XXS) {
        const uint16_t *h = int_iq3_super(row, b);
        int c = (int)(b & 7);
        uint32_t aux = int_iq3_aux(h, c), idx = __ldg(h + 1 + 4 * c + j), sg = int_iq3_signs(aux, j);
        f = int_iq3_factor(h, aux);
        lo = int_iq3_word(idx & 0xFF, sg & 15);
        hi = int_iq3_word(idx >> 8, sg >> 4);
        return;
    }
    const uint16_t *h = (const uint16_t *)(row + b * 34);
    lo = (uint32_t)__ldg(h + 1 + 4 * j) | (uint32_t)__ldg(h + 2 + 4 * j) << 16;
    hi = (uint32_t)__ldg(h + 3 + 4 * j) | (uint32_t)__ldg(h + 4 + 4 * j) << 16;
    f = int_f16(__ldg(h));
}

/* The prepared block b of prepared row idx. */
__device__ __forceinline__ const int8_t *int_limbs(const int8_t *lim, int64_t idx, int64_t nb, int64_t b)
{
    return lim + (idx * nb + b) * INT_LIMB_BYTES;
}

/* Rows a GEMV warp takes (4 to 32): fewer for short matrices, so that a
 * product's loads spread over about 1024 warps (a small product on 32-row
 * warps kept too few bytes in flight: 0.1-0.2 TB/s). Which warp computes a
 * row never changes its sums. */
__host__ static inline int int_gemv_rows(int64_t rows, int ks)
{
    int rw = 32;
    while (rw > 4 && (rows + rw - 1) / rw * ks < 1024) rw /= 2;
    return rw;
}

/* GEMV sums of a warp: NM matrices of format FMT (W[m], all of one shape),
 * rows row0 .. row0 + rw - 1 (rw <= 32, int_gemv_rows; lane l < rw: row
 * row0 + l; rows past R repeat row R - 1 and are not for storing), against
 * T <= INT_GEMV_MAX prepared rows (xidx(t): the prepared row of token row
 * t), over the chunks of slice sl of ks. vs: this warp's shared scratch. */
template <int NM, int FMT, class XI>
__device__ __forceinline__ void int_gemv_warp(const dsv4_mat *W, int64_t row0, int rw, int T, int sl, int ks,
                                              const int8_t *lim, const float *ex, XI xidx, float2 (*vs)[33],
                                              float (*acc)[INT_GEMV_MAX])
{
    int lane = threadIdx.x & 31;
    int64_t R = W[0].rows, nb = W[0].cols / 32, nch = (nb + INT_CHUNK - 1) / INT_CHUNK, rb = cu_row_bytes(W[0]);
#pragma unroll
    for (int m = 0; m < NM; m++)
#pragma unroll
        for (int t = 0; t < INT_GEMV_MAX; t++) acc[m][t] = 0.0f;
    for (int64_t ch = sl; ch < nch; ch += ks) {
        int64_t b = ch * INT_CHUNK + lane, bc = ch * INT_CHUNK;
        int nbc = nb - bc < INT_CHUNK ? (int)(nb - bc) : INT_CHUNK, have = lane < nbc;
        for (int t = 0; t < T; t++) {
            int64_t idx = xidx(t);
            int la[3][8];
            float xs = 0.0f;
            if (have) {
                const int *lw = (const int *)int_limbs(lim, idx, nb, b);
#pragma unroll
                for (int l = 0; l < 3; l++)
#pragma unroll
                    for (int i = 0; i < 8; i++) la[l][i] = __ldg(lw + 8 * l + i);
                xs = __ldg(ex + idx * nb + b);
            }
#pragma unroll
            for (int m = 0; m < NM; m++) {
                const uint8_t *base = (const uint8_t *)W[m].data;
                if (have) {
#pragma unroll 4
                    for (int r = 0; r < rw; r++) {
                        int64_t rr = row0 + r < R ? row0 + r : R - 1;
                        int q[8];
                        float f;
                        int_block_codes<FMT>(base + rr * rb, b, q, f);
                        int s0 = 0, s1 = 0, s2 = 0;
#pragma unroll
                        for (int i = 0; i < 8; i++) {
                            s0 = __dp4a(q[i], la[0][i], s0);
                            s1 = __dp4a(q[i], la[1][i], s1);
                            s2 = __dp4a(q[i], la[2][i], s2);
                        }
                        vs[r][lane] = make_float2(int_block_value(s0, s1, s2), int_scale(f, xs));
                    }
                }
                __syncwarp();
                if (lane < rw) {
                    float a = acc[m][t];
                    for (int i = 0; i < nbc; i++) {
                        float2 p = vs[lane][i];
                        a = __fmaf_rn(p.x, p.y, a);
                    }
                    acc[m][t] = a;
                }
                __syncwarp();
            }
        }
    }
}

/* Tile sums of a warp: NM matrices' (format FMT) rows row0 + g and row0 + g + 8 (g =
 * lane / 4; rows past R repeat row R - 1) against 8*NT prepared rows
 * (xidx(i), i < 8*NT), all ks slices in order: tot[m][j][i] is the
 * mma.m16n8k32 accumulator layout (rows g, g, g + 8, g + 8 against token
 * rows 8j + 2(lane % 4) + (i & 1)). A-fragment slots k = 4q..4q+3 and
 * 16+4q.. hold the block's columns 8q..8q+3 and 8q+4..8q+7 and the
 * prepared words 2q, 2q+1 go in the matching B slots, so each sum runs over
 * the block's 32 columns. */
#define INT_IMMA(d, a, b0, b1)                                                                                       \
    asm("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};"     \
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3])                                                             \
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1))

template <int NM, int NT, int FMT, class XI>
__device__ __forceinline__ void int_tile_warp(const dsv4_mat *W, int64_t row0, int ks, const int8_t *lim,
                                              const float *ex, XI xidx, float (*tot)[NT][4])
{
    int lane = threadIdx.x & 31, gq = lane >> 2, q = lane & 3;
    int64_t R = W[0].rows, nb = W[0].cols / 32, nch = (nb + INT_CHUNK - 1) / INT_CHUNK, rb = cu_row_bytes(W[0]);
    int64_t r0 = row0 + gq < R ? row0 + gq : R - 1, r1 = row0 + gq + 8 < R ? row0 + gq + 8 : R - 1;
    int64_t xb[NT], xc[NT][2];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        xb[j] = xidx(8 * j + gq);
        xc[j][0] = xidx(8 * j + 2 * q);
        xc[j][1] = xidx(8 * j + 2 * q + 1);
    }
    const uint8_t *w0[NM], *w1[NM];
#pragma unroll
    for (int m = 0; m < NM; m++) {
        w0[m] = (const uint8_t *)W[m].data + r0 * rb;
        w1[m] = (const uint8_t *)W[m].data + r1 * rb;
    }
    for (int sl = 0; sl < ks; sl++) {
        float acc[NM][NT][4];
#pragma unroll
        for (int m = 0; m < NM; m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[m][j][i] = 0.0f;
        for (int64_t ch = sl; ch < nch; ch += ks) {
            int64_t bend = (ch + 1) * INT_CHUNK < nb ? (ch + 1) * INT_CHUNK : nb;
            for (int64_t b = ch * INT_CHUNK; b < bend; b++) {
                float eb[NT][2];
                uint32_t bw[NT][3][2];
#pragma unroll
                for (int j = 0; j < NT; j++) {
                    const int *lw = (const int *)int_limbs(lim, xb[j], nb, b);
#pragma unroll
                    for (int l = 0; l < 3; l++) {
                        bw[j][l][0] = (uint32_t)__ldg(lw + 8 * l + 2 * q);
                        bw[j][l][1] = (uint32_t)__ldg(lw + 8 * l + 2 * q + 1);
                    }
                    eb[j][0] = __ldg(ex + xc[j][0] * nb + b);
                    eb[j][1] = __ldg(ex + xc[j][1] * nb + b);
                }
#pragma unroll
                for (int m = 0; m < NM; m++) {
                    uint32_t a[4];
                    float f0, f1;
                    int_block_pair<FMT>(w0[m], b, q, a[0], a[2], f0);
                    int_block_pair<FMT>(w1[m], b, q, a[1], a[3], f1);
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        int s[3][4];
#pragma unroll
                        for (int l = 0; l < 3; l++) {
                            s[l][0] = s[l][1] = s[l][2] = s[l][3] = 0;
                            INT_IMMA(s[l], a, bw[j][l][0], bw[j][l][1]);
                        }
#pragma unroll
                        for (int i = 0; i < 4; i++)
                            acc[m][j][i] = __fmaf_rn(int_block_value(s[0][i], s[1][i], s[2][i]),
                                                     int_scale(i < 2 ? f0 : f1, eb[j][i & 1]), acc[m][j][i]);
                    }
                }
            }
        }
#pragma unroll
        for (int m = 0; m < NM; m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) tot[m][j][i] = sl == 0 ? acc[m][j][i] : __fadd_rn(tot[m][j][i], acc[m][j][i]);
    }
}

#endif

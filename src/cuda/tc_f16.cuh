/* Tensor-core products of FP8 (e4m3, 128x128 blocks), MXFP4 (E2M1, 1x32
 * blocks), BF16 and F16 weights with fp32 activations, shared by the
 * matmul (linear.cu) and the experts (moe.cu).
 *
 * Numerics. Every weight code becomes an f16 exactly: an e4m3 code by
 * the hardware conversion (its value), an E2M1 code by moving its bits
 * (its value times 2^-14, subnormal codes included). The scale block's
 * power of two is applied to the block's fp32 sum after the MMAs, the
 * activation row's own power of two to the row's total (both exact). An
 * activation row is "prepared" once per op (tc_prep): scaled by a power of
 * two so that its largest |value| lies in [2^14, 2^15), then split into f16
 * hi + lo (hi = f16(x), lo = f16(x - hi)): 22 significant bits, each term
 * well inside f16's range. mma.m16n8k16 (f16 in, fp32 accumulate) then forms
 * the hi and lo products. So a row's sum is, up to about 2^-22 relative per
 * term, the fp32 dot product with the exactly dequantized weight.
 *   F16 weights are their own f16 codes (no scale). BF16 weights are not
 *   f16 values (8 exponent bits), so they stay bf16: mma.m16n8k16 with bf16
 *   inputs, against the activation row split into three bf16 terms (hi +
 *   mid + lo, 24 bits: x·2^e exactly), each product exact in fp32.
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
 * order the conversions produce, and a prepared row stores each group in that
 * order: [x0 x4 x1 x5 x2 x6 x3 x7] (hi), then the same 8 of lo.
 *   FP8: a chunk is 64 columns; thread q loads 16 bytes (columns 16q..) of
 *        each row: 2 groups, 4 k-steps; the chunk lies in one scale block
 *        (power-of-two blocks of at least 64 columns).
 *   FP4: a chunk is 128 columns = 4 scale blocks (E8M0 grids); thread q
 *        loads word q (8 values) of each block, so each block's 2 k-steps
 *        stay in one scale block and its sum can be scaled.
 *   BF16/F16: a chunk is 32 columns; thread q loads 16 bytes (group q,
 *        columns 8q..8q+7) of each row: 2 k-steps, the pairs moved into
 *        the paired order by byte permutes.
 * A prepared row's group holds its terms one after the other: f16 hi, lo
 * (every kind but BF16) or bf16 hi, mid, lo (tc_terms). */
#ifndef DSV4_CUDA_TC_F16_CUH
#define DSV4_CUDA_TC_F16_CUH
#include "cuda/state_rows.cuh" /* cq_act_block */
#include "cuda/wload.cuh"

/* Columns of a chunk, and of a prepared row's padding. */
#define TC_CC8 64
#define TC_CC4 128
#define TC_CC16 32
#define TC_PAD 128

/* The 16-bit weight families (one 16-byte load: 8 columns, no scales). */
__host__ __device__ constexpr int tc_is16(int fam) { return fam == CU_W_BF16 || fam == CU_W_F16; }

/* 16-bit terms of a prepared activation value for a tensor-core kind:
 * BF16 weights take three bf16 terms, the others two f16 (the GGUF kinds,
 * numbered past every family, included). */
__host__ __device__ constexpr int tc_terms(int kind) { return kind == CU_W_BF16 ? 3 : 2; }

__host__ __device__ static inline int64_t tc_npad(int64_t n) { return (n + TC_PAD - 1) / TC_PAD * TC_PAD; }

/* f16 pairs (v0, v4), (v1, v5) of the e4m3 bytes [v0 v4 v1 v5] of v: the
 * hardware conversion, exact for every code (f16 holds every e4m3 value),
 * two values an instruction. */
__device__ __forceinline__ void tc_e4m3_pairs(uint32_t v, uint32_t &lo, uint32_t &hi)
{
    __half2_raw a = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v & 0xffffu), __NV_E4M3);
    __half2_raw b = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(v >> 16), __NV_E4M3);
    lo = (uint32_t)a.x | (uint32_t)a.y << 16;
    hi = (uint32_t)b.x | (uint32_t)b.y << 16;
}

/* f16 pair (n_i, n_{i+4}) of the E2M1 nibbles of w (n0 = bits 0..3): bits
 * s.ee.m go to f16 bits s.000ee.m000000000, the value times 2^-14. An f16
 * code's low byte is zero and its high byte s000eem0: the high bytes of the
 * even nibbles (n0, n2, n4, n6, one a byte) and of the odd ones come from
 * a few word-wide operations each, shared by the word's four pairs, and a
 * byte permute places a pair's two beside zero bytes: 11 operations a
 * word where shifting and masking each pair took 16 (the MXFP4 products
 * are bound by their instruction issue). The same bits (checked for every
 * word against (w << (9 - 4i)) & 0x0E000E00 | (w << (12 - 4i)) & 0x80008000). */
template <int I>
__device__ __forceinline__ uint32_t tc_e2m1_pair(uint32_t w)
{
    uint32_t b = I & 1 ? ((w >> 3) & 0x0E0E0E0Eu) | (w & 0x80808080u)          /* n1, n3, n5, n7 */
                       : ((w << 1) & 0x0E0E0E0Eu) | ((w << 4) & 0x80808080u); /* n0, n2, n4, n6 */
    return __byte_perm(b, 0u, I < 2 ? 0x2404 : 0x3414); /* bytes [0, b_k, 0, b_k+2], k = I / 2 */
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

/* d += A·B for one m16n8k16 tile, fp32 accumulate: f16 inputs, or bf16
 * ones (BF16). */
#define TC_MMA(T)                                                                                                    \
    asm("mma.sync.aligned.m16n8k16.row.col.f32." T "." T ".f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "             \
        "{%0,%1,%2,%3};"                                                                                             \
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])                                                             \
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1))
template <int BF16 = 0>
__device__ __forceinline__ void tc_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1)
{
    if constexpr (BF16) TC_MMA("bf16");
    else TC_MMA("f16");
}
#undef TC_MMA

/* Block b's scale of an MXFP4 chunk from its 4 E8M0 bytes plus one each
 * (s1 = the loaded word + 0x01010101; no byte carries, the loaders admit
 * no byte above 219): 2^(e-126), a normal float for every admitted e, 0
 * included, in two operations; the sums' 2^-1 is in tc_row_factor. */
template <int B>
__device__ __forceinline__ float tc_fp4_scale(uint32_t s1)
{
    uint32_t v = B == 0 ? s1 << 23 : B == 1 ? s1 << 15 : B == 2 ? s1 << 7 : s1 >> 1;
    return __uint_as_float(v & 0x7F800000u);
}

/* One chunk's products for a warp: the weight words u[m][h] (rows g, g+8
 * of tile m) with their scale word sc[m][h] (FP8: the block's fp32 scale;
 * FP4: the 4 blocks' E8M0 bytes), against prepared token rows: xb(j, k, t)
 * is term t of 8-column group k (counted from the chunk's first group for
 * this thread) of token g of tile j, wherever the rows are held (global
 * memory, tc_chunk_f16 below; a block's tile in shared memory, tc_tile.cuh).
 * Adds each scale block's sum times its scale to acc. The rows' factors are
 * applied by the caller, after the slices' sum (powers of two: the same
 * bits as applying them here). */
template <int FAM, int MT, int NT, class XB>
__device__ __forceinline__ void tc_chunk_mma(float (*acc)[NT][4], const uint4 (*u)[2], const uint32_t (*sc)[2], XB xb)
{
    constexpr int NB = FAM == CU_W_FP4 ? 4 : 1;  /* scale blocks in the chunk (16-bit: none, one sum) */
    constexpr int SPB = FAM == CU_W_FP8 ? 4 : 2; /* k-steps per block */
    constexpr int TERMS = tc_terms(FAM);
    uint32_t s1[MT][2];
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) s1[m][h] = sc[m][h] + 0x01010101u;
#pragma unroll
    for (int b = 0; b < NB; b++) {
        float blk[MT][NT][4];
        tc_zero<MT, NT>(blk);
#pragma unroll
        for (int s = 0; s < SPB; s++) {
            /* group of this k-step (FP8: 2 per load; FP4: the block's word;
             * 16-bit: the load's one group) */
            int grp = FAM == CU_W_FP8 ? s >> 1 : FAM == CU_W_FP4 ? b * 4 : 0;
            int odd = s & 1;
            uint32_t a[MT][4];
#pragma unroll
            for (int m = 0; m < MT; m++)
#pragma unroll
                for (int h = 0; h < 2; h++) {
                    uint32_t x0, x1;
                    if constexpr (FAM == CU_W_FP8) {
                        uint32_t w0 = grp ? u[m][h].z : u[m][h].x, w1 = grp ? u[m][h].w : u[m][h].y;
                        tc_e4m3_pairs(__byte_perm(w0, w1, odd ? 0x7362 : 0x5140), x0, x1);
                    } else if constexpr (tc_is16(FAM)) {
                        /* words (v0 v1) (v2 v3) (v4 v5) (v6 v7): pairs (v0, v4), (v1, v5), or (v2, v6), (v3, v7) */
                        uint32_t w0 = odd ? u[m][h].y : u[m][h].x, w1 = odd ? u[m][h].w : u[m][h].z;
                        x0 = __byte_perm(w0, w1, 0x5410);
                        x1 = __byte_perm(w0, w1, 0x7632);
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
#pragma unroll
                for (int t = 0; t < TERMS; t++) {
                    uint4 v = xb(j, grp, t);
                    uint32_t b0 = odd ? v.z : v.x, b1 = odd ? v.w : v.y;
#pragma unroll
                    for (int m = 0; m < MT; m++) {
                        tc_mma<FAM == CU_W_BF16>(blk[m][j], a[m][0], a[m][1], a[m][2], a[m][3], b0, b1);
                    }
                }
            }
        }
#pragma unroll
        for (int m = 0; m < MT; m++) {
            float sv[2];
#pragma unroll
            for (int h = 0; h < 2; h++) {
                if constexpr (FAM == CU_W_FP8) sv[h] = __uint_as_float(sc[m][h]);
                else if constexpr (tc_is16(FAM)) sv[h] = 1.0f; /* fmaf(blk, 1, acc): acc + blk */
                else
                    sv[h] = b == 0 ? tc_fp4_scale<0>(s1[m][h]) : b == 1 ? tc_fp4_scale<1>(s1[m][h])
                            : b == 2 ? tc_fp4_scale<2>(s1[m][h]) : tc_fp4_scale<3>(s1[m][h]);
            }
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) acc[m][j][i] = fmaf(blk[m][j][i], sv[i >> 1], acc[m][j][i]);
        }
    }
}

/* tc_chunk_mma against the prepared rows xr[j] (token g of tile j) in
 * global memory; gi = the chunk's first 8-column group for this thread. */
template <int FAM, int MT, int NT>
__device__ __forceinline__ void tc_chunk_f16(float (*acc)[NT][4], const uint4 (*u)[2], const uint32_t (*sc)[2],
                                             const __half *const *xr, int gi)
{
    constexpr int TERMS = tc_terms(FAM);
    tc_chunk_mma<FAM, MT, NT>(acc, u, sc, [&](int j, int k, int t) {
        return ((const uint4 *)(xr[j] + (gi + k) * 8 * TERMS))[t];
    });
}

/* The fp32 bits of the scale of FP8 chunk c of a row (srow: its scale
 * row; blk_c a power of two, tc_shape_ok). */
__device__ __forceinline__ uint32_t tc_fp8_scale(const dsv4_mat &W, const char *srow, int c)
{
    int j = (c * TC_CC8) >> (__ffs((uint32_t)W.blk_c) - 1);
    if (W.scale_dtype == DT_F32) return __ldg((const uint32_t *)srow + j);
    return __float_as_uint(cu_e8m0(__ldg((const uint8_t *)srow + j)));
}

/* The first 8-column group of thread q's columns in chunk c. */
__host__ __device__ __forceinline__ int tc_group(int fam, int c, int q)
{
    return fam == CU_W_FP8 ? c * (TC_CC8 / 8) + 2 * q : fam == CU_W_FP4 ? c * (TC_CC4 / 8) + q : c * (TC_CC16 / 8) + q;
}

/* Where a warp's rows are read: per tile m, row g's weight bytes at this
 * thread's offset (FP8 16q, FP4 4q) and its scale row, and how far row
 * g+8's are past them (rows past the matrix's end repeat its last row, so
 * the distance is at most 8 rows). One pointer a tile instead of two keeps
 * the slices' registers below the two-blocks-an-SM limit. */
template <int MT>
struct tc_rows {
    const char *w[MT], *s[MT];
    int dw[MT], ds[MT];
};

/* Tile m of R: rows r0 + g and r0 + g + 8 of W (clamped to its last row). */
template <int FAM, int MT>
__device__ __forceinline__ void tc_rows_set(tc_rows<MT> &R, int m, const dsv4_mat &W, int64_t r0, int g, int q)
{
    int64_t last = W.rows - 1, ra = r0 + g < last ? r0 + g : last, rc = r0 + g + 8 < last ? r0 + g + 8 : last;
    int64_t rb = cu_row_bytes(W);
    R.w[m] = (const char *)W.data + ra * rb + (FAM == CU_W_FP4 ? 4 * q : 16 * q);
    R.dw[m] = (int)((rc - ra) * rb);
    R.s[m] = tc_is16(FAM) ? NULL : cu_scale_row(W, ra); /* 16-bit rows have no scales */
    R.ds[m] = tc_is16(FAM) ? 0 : (int)(cu_scale_row(W, rc) - R.s[m]);
}

/* The weight words and scale word of chunk c of a warp's rows, bounds
 * checked: pieces past the row's end read as 0 and blocks past it take
 * scale byte 0 (a sum of exactly 0, and nothing past the grid is read).
 * For the last chunk of a row and for FP4 grids whose rows do not allow
 * whole-word scale loads. */
template <int FAM, int MT>
__device__ __forceinline__ void tc_load_checked(const dsv4_mat &W, const tc_rows<MT> &R, int rb, int n, int c, int tq,
                                                uint4 (*uo)[2], uint32_t (*so)[2])
{
    constexpr int CC = FAM == CU_W_FP8 ? TC_CC8 : FAM == CU_W_FP4 ? TC_CC4 : TC_CC16, CB = 64;
    int off = c * CB;
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int h = 0; h < 2; h++) {
            const char *p = R.w[m] + h * R.dw[m] + off, *srow = R.s[m] + h * R.ds[m];
            if constexpr (FAM != CU_W_FP4) {
                uo[m][h] = off + tq < rb ? __ldg((const uint4 *)p) : make_uint4(0, 0, 0, 0);
                so[m][h] = FAM == CU_W_FP8 ? tc_fp8_scale(W, srow, c) : 0u;
            } else {
                const uint8_t *sr = (const uint8_t *)srow + 4 * c;
                uint32_t w[4], sw = 0;
#pragma unroll
                for (int b = 0; b < 4; b++) {
                    w[b] = off + tq + 16 * b < rb ? __ldg((const uint32_t *)(p + 16 * b)) : 0u;
                    if (c * CC + 32 * b < n) sw |= (uint32_t)__ldg(sr + b) << (8 * b);
                }
                uo[m][h] = make_uint4(w[0], w[1], w[2], w[3]);
                so[m][h] = sw;
            }
        }
}

/* Asynchronous copies global -> shared (cp.async): the streamed weight
 * bytes go to shared memory without holding registers while in flight. */
__device__ __forceinline__ void tc_cp16(void *dst, const void *src)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}
__device__ __forceinline__ void tc_cp_commit() { asm volatile("cp.async.commit_group;" ::: "memory"); }
template <int N>
__device__ __forceinline__ void tc_cp_wait()
{
    asm volatile("cp.async.wait_group %0;" ::"n"(N) : "memory");
}

/* uint4s of one warp's copy ring: U + 1 stages of [MT][2][32 lanes] of 16
 * bytes, rows g and g+8 of each tile (FP8: a lane's own bytes; FP4: the
 * quad's four pieces of a row, read across the quad, tc_slice_f16). The
 * kernels' shared memory starts with 8 warps'. */
__host__ __device__ constexpr int tc_ring_u4(int mt, int u) { return (u + 1) * mt * 2 * 32; }
__host__ __device__ constexpr size_t tc_ring_bytes(int mt, int u) { return (size_t)8 * tc_ring_u4(mt, u) * 16; }

/* One slice of a warp's rows: chunks sp, sp+ks, ... in increasing order
 * into acc (zeroed here). rb: row bytes (whole 16-byte pieces,
 * tc_shape_ok), n: columns. The chunks wholly inside the rows stream
 * through the warp's copy ring (ring: this lane's first uint4), U of them
 * in flight while one computes, each row walked by pointer without bounds
 * checks; their scales ride along in U + 1 register sets turning round
 * with the unrolled loop. The rest (a row's last, partial chunk, or all of
 * them where FP4 scales cannot load as words) one at a time through
 * tc_load_checked. The same sums either way.
 * pre (when do_pre): called once the first U chunks' copies are issued and
 * before anything reads xr: the weights never depend on the previous
 * kernel, so their first bytes are on their way while the caller waits
 * for it (griddepcontrol.wait) and prepares the activation rows. */
template <int FAM, int MT, int NT, int U, class F>
__device__ __forceinline__ void tc_slice_f16(float (*acc)[NT][4], const dsv4_mat &W, const tc_rows<MT> &R, int rb,
                                             int n, int sp, int ks, const __half *const *xr, int q, uint4 *ring,
                                             int do_pre, F pre)
{
    constexpr int CC = FAM == CU_W_FP8 ? TC_CC8 : FAM == CU_W_FP4 ? TC_CC4 : TC_CC16, CB = 64; /* CB: a chunk's row bytes, every family */
    const int nch = (n + CC - 1) / CC, tq = FAM == CU_W_FP4 ? 4 * q : 16 * q; /* tq: this thread's offset */
    /* FP4 scale words load whole where the grid's rows allow it (one
     * register per load in flight instead of four) */
    const int words = FAM != CU_W_FP4 || (W.scale_cols % 4 == 0 && (uintptr_t)W.scale % 4 == 0);
    const int nfull = words ? n / CC : 0; /* chunks streamed */
    /* FP4: lane (g, q) copies piece q (16 bytes) of its rows and reads word
     * q of the quad's four pieces; slot q ^ swz keeps those reads free of
     * bank conflicts (rows g, g+2, g+4, g+6 share banks otherwise) */
    const int lane = threadIdx.x & 31, g = lane >> 2, swz = (g >> 1) & 3;
    tc_zero<MT, NT>(acc);
    uint32_t sb[U + 1][MT][2];
    /* the next streamed chunk's bytes (and FP4 scales) of row g of each
     * tile; row g+8's are R.dw / R.ds past them */
    const char *lw[MT], *ls[MT];
#pragma unroll
    for (int m = 0; m < MT; m++) {
        lw[m] = R.w[m] + sp * CB;
        ls[m] = FAM == CU_W_FP4 ? R.s[m] + 4 * sp : NULL;
    }
    auto issue = [&](int c, int st, uint32_t (*so)[2]) {
#pragma unroll
        for (int m = 0; m < MT; m++) {
#pragma unroll
            for (int h = 0; h < 2; h++) {
                const char *p = lw[m] + h * R.dw[m];
                char *d = (char *)(ring + ((st * MT + m) * 2 + h) * 32);
                if constexpr (FAM != CU_W_FP4) {
                    tc_cp16(d, p);
                    so[m][h] = FAM == CU_W_FP8 ? tc_fp8_scale(W, R.s[m] + h * R.ds[m], c) : 0u;
                } else {
                    /* p is the chunk's byte 4q: piece q (16 bytes at 16q)
                     * goes to the quad's slot q ^ swz (read back below) */
                    tc_cp16(d + 16 * ((q ^ swz) - q), p + 12 * q);
                    so[m][h] = __ldg((const uint32_t *)(ls[m] + h * R.ds[m]));
                }
            }
            lw[m] += ks * CB;
            if constexpr (FAM == CU_W_FP4) ls[m] += 4 * ks;
        }
    };
    /* every step commits a group (empty past the streamed chunks), so
     * waiting for all but the newest U finds the chunk's own complete */
#pragma unroll
    for (int i = 0; i < U; i++) {
        if (sp + i * ks < nfull) issue(sp + i * ks, i, sb[i]);
        tc_cp_commit();
    }
    if (do_pre) pre();
    for (int c = sp; c < nfull; c += (U + 1) * ks) {
#pragma unroll
        for (int i = 0; i <= U; i++) {
            int ci = c + i * ks;
            if (ci >= nfull) break;
            if (ci + U * ks < nfull) issue(ci + U * ks, (i + U) % (U + 1), sb[(i + U) % (U + 1)]);
            tc_cp_commit();
            tc_cp_wait<U>();
            uint4 u[MT][2];
            if constexpr (FAM != CU_W_FP4) {
#pragma unroll
                for (int m = 0; m < MT; m++)
#pragma unroll
                    for (int h = 0; h < 2; h++) u[m][h] = ring[((i * MT + m) * 2 + h) * 32];
            } else {
                __syncwarp(); /* the quad's copies are read by all four */
#pragma unroll
                for (int m = 0; m < MT; m++)
#pragma unroll
                    for (int h = 0; h < 2; h++) {
                        const uint32_t *sl = (const uint32_t *)(ring - lane + ((i * MT + m) * 2 + h) * 32 + 4 * g);
                        u[m][h] = make_uint4(sl[4 * (0 ^ swz) + q], sl[4 * (1 ^ swz) + q], sl[4 * (2 ^ swz) + q],
                                             sl[4 * (3 ^ swz) + q]);
                    }
                __syncwarp(); /* read before the next copies into this stage */
            }
            tc_chunk_f16<FAM, MT, NT>(acc, u, sb[i], xr, tc_group(FAM, ci, q));
        }
    }
    /* the first chunk of the slice not streamed */
    int c = nfull <= sp ? sp : sp + (nfull - sp + ks - 1) / ks * ks;
    for (; c < nch; c += ks) {
        uint4 u[MT][2];
        uint32_t sc[MT][2];
        tc_load_checked<FAM, MT>(W, R, rb, n, c, tq, u, sc);
        tc_chunk_f16<FAM, MT, NT>(acc, u, sc, xr, tc_group(FAM, c, q));
    }
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

/* tc_slices_sum over tc_slice_f16 (FP8/MXFP4); ring: the warp's copy ring;
 * pre: called once, by the warp's first slice after its first copies are
 * issued (every warp of the block calls it: it may hold barriers). */
template <int FAM, int MT, int NT, int SEQ, int U, class F>
__device__ __forceinline__ int tc_warp_sums(float (*tot)[NT][4], const dsv4_mat &W, const tc_rows<MT> &R, int ks,
                                            int sp0, const __half *const *xr, int q, float *part, uint4 *ring, F pre)
{
    int rb = (int)cu_row_bytes(W), n = (int)W.cols, first = 1;
    return tc_slices_sum<MT, NT, SEQ>(tot, ks, sp0, part, [&](float (*acc)[NT][4], int sp) {
        tc_slice_f16<FAM, MT, NT, U>(acc, W, R, rb, n, sp, ks, xr, q, ring, first, pre);
        first = 0;
    });
}

/* The factor of a prepared row's sums for the weight kind: the row's
 * 2^-e, times 2^-1 for MXFP4 (its scales are taken as 2^(e-126),
 * tc_fp4_scale) and 2^14 for its codes (f16 = value·2^-14); e4m3 codes
 * convert to their values, the GGUF kinds' (ggml_tc.cuh) are plain
 * integers. */
template <int FAM>
__device__ __forceinline__ float tc_row_factor(const float *pf, int64_t row)
{
    return pf[row] * (FAM == CU_W_FP4 ? 8192.0f : 1.0f);
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

/* 8-column group g8 of a prepared row at o (8·TERMS 16-bit values a
 * group): the terms of x·2^e in the paired order [x0 x4 x1 x5 x2 x6 x3 x7],
 * zeros past n (x·2^e is exact). TERMS 2: f16 hi, lo; 3: bf16 hi, mid, lo,
 * whose sum is x·2^e exactly (each residual is exact in fp32 and has at
 * most 16, then 8, significant bits). */
template <int TERMS>
__device__ __forceinline__ void tc_prep_group(const float *row, int64_t n, int64_t g8, int e, __half *o)
{
    float p2 = __int_as_float((127 + e) << 23);
    __align__(16) unsigned short tv[TERMS][8];
    /* the group's values in two 16-byte loads where they can be (a staged
     * row in shared memory: one lane's 32 bytes in 8 scalar loads met
     * 8-way bank conflicts) */
    float xv[8];
    const float *src = row + g8 * 8;
    if (g8 * 8 + 8 <= n && (uintptr_t)src % 16 == 0) {
        float4 a = ((const float4 *)src)[0], b = ((const float4 *)src)[1];
        xv[0] = a.x; xv[1] = a.y; xv[2] = a.z; xv[3] = a.w; xv[4] = b.x; xv[5] = b.y; xv[6] = b.z; xv[7] = b.w;
    } else {
#pragma unroll
        for (int j = 0; j < 8; j++) xv[j] = g8 * 8 + j < n ? src[j] : 0.0f;
    }
#pragma unroll
    for (int j = 0; j < 8; j++) {
        float v = g8 * 8 + j < n ? xv[j] * p2 : 0.0f;
        int p = (j & 3) * 2 + (j >> 2);
#pragma unroll
        for (int t = 0; t < TERMS; t++) {
            if constexpr (TERMS == 3) {
                __nv_bfloat16 b = __float2bfloat16_rn(v);
                tv[t][p] = __bfloat16_as_ushort(b);
                v -= __bfloat162float(b);
            } else {
                __half h = __float2half_rn(v);
                tv[t][p] = __half_as_ushort(h);
                v -= __half2float(h);
            }
        }
    }
#pragma unroll
    for (int t = 0; t < TERMS; t++) ((uint4 *)(o + g8 * 8 * TERMS))[t] = *(const uint4 *)tv[t];
}

/* Official numerics with the preparation (act): the block writes row·f
 * through FP8 1x128 (cq_act_block: act_fp8_kernel's values) to out (n
 * floats, shared memory), which the preparation then reads, instead of a
 * rounding launch before it. */
__device__ __forceinline__ void tc_act_row(const float *row, int64_t n, float f, float *out)
{
    int lane = threadIdx.x & 31, nw = blockDim.x >> 5;
    for (int64_t b = threadIdx.x >> 5; b * 128 < n; b += nw) cq_act_block(row, out, b * 128, n, f, lane);
    __syncthreads();
}

/* The block prepares nr rows (row i at x + i·ldx) itself into shared
 * memory: sx (nr rows of TERMS·tc_npad(n) 16-bit values), spf (nr
 * factors); the same values tc_prep writes, for decode steps whose rows
 * fit (tc_stage_bytes), saving the preparation launch and the activations'
 * trips to L2. act (TERMS 2 only: tc_stage_act_ok): each row (times f)
 * through FP8 1x128 first, rounded into its own staging (n floats fit in
 * its 2·npad halves; each thread then reads the 8 floats of a group where
 * it writes the group's 16 halves, which three terms would overrun). */
template <int TERMS>
__device__ __forceinline__ void tc_prep_block(const float *x, int64_t ldx, int nr, int64_t n, __half *sx, float *spf,
                                              float *sh, int act = 0, float f = 1.0f)
{
    int64_t npad = tc_npad(n);
    for (int i = 0; i < nr; i++) {
        const float *row = x + i * ldx;
        if (TERMS == 2 && act) {
            tc_act_row(row, n, f, (float *)(sx + i * 2 * npad));
            row = (const float *)(sx + i * 2 * npad);
        }
        int e = tc_row_exp(row, n, sh);
        for (int64_t g8 = threadIdx.x; g8 < npad / 8; g8 += blockDim.x)
            tc_prep_group<TERMS>(row, n, g8, e, sx + i * TERMS * npad);
        if (threadIdx.x == 0) spf[i] = tc_exp_factor(e);
    }
    __syncthreads();
}

/* Whether a kind's rows can be staged with the FP8 rounding (act). */
__host__ __device__ constexpr int tc_stage_act_ok(int kind) { return tc_terms(kind) == 2; }

/* Floats before the factors in a block's staging of nr rows: the rows'
 * terms (TERMS·npad 16-bit values each). */
__host__ __device__ static inline int64_t tc_stage_row_floats(int nr, int64_t n, int terms)
{
    return (int64_t)nr * tc_npad(n) * terms / 2;
}

/* Shared bytes for nr rows prepared in a block (plus the factors and the
 * reduction scratch); decode stages its rows when this fits next to the
 * slice sums in the default 48 KB and the rows have at most 8192 columns.
 * Every block prepares the whole row; since the slices issue their first
 * weight copies before that, it overlaps their flight and beats the
 * preparation launch up to the longest rows of the model (FP8 wo_b, 8192
 * columns: 20.0 -> 17.2 us; before the copies went first, rows of 4096
 * columns were slower staged: docs/PERFORMANCE.md, "Weight copies
 * before the wait"). */
#define TC_STAGE_MAX_N 8192
__host__ __device__ static inline size_t tc_stage_bytes(int nr, int64_t n, int terms)
{
    return (size_t)tc_stage_row_floats(nr, n, terms) * 4 + 8 * 4 + 32 * 4;
}
#define TC_STAGE_MAX (40 * 1024)
/* The bound for a kind's staging: the same rows and columns whatever the
 * terms (three-term rows take 1.5 times the bytes of two-term ones). */
__host__ __device__ constexpr size_t tc_stage_max(int terms) { return (size_t)TC_STAGE_MAX / 2 * terms; }

/* 16-bit weights take the tensor cores from this many values on: below
 * it a decode product is a few microseconds either way, and the GEMV's
 * (more warps a row, no staging) is about 3 us shorter (512x4096 BF16:
 * 4.1 against 7.1 us; 2048x4096: 8.5 against 8.8), which some ten small
 * products a layer (compressor, indexer, router) would pay every token. */
#define TC16_MIN_VALUES ((int64_t)1 << 23)
/* ... and up to this many rows: a vocabulary head (129280 rows) stays on
 * the GEMV, which streams it at 4.0 TB/s against the tensor cores' 2.8
 * in decode, while a prompt needs the head of its last row only. */
#define TC16_MAX_ROWS 65536

/* Whether W takes the tensor-core path: FP8 with scale blocks holding
 * whole chunks, MXFP4 with 32-column blocks, BF16/F16 of at least
 * TC16_MIN_VALUES and at most TC16_MAX_ROWS rows; rows 16-byte aligned
 * (shape and format only). */
__host__ static inline int tc_shape_ok(const dsv4_mat &W)
{
    int fam = cu_wfam(W);
    if (fam == CU_W_FP8) return cu_w_loads_ok(W) && W.blk_c % TC_CC8 == 0 && (W.blk_c & (W.blk_c - 1)) == 0;
    if (fam == CU_W_FP4) return cu_w_loads_ok(W) && W.blk_c == 32 && W.scale_dtype == DT_F8_E8M0;
    if (tc_is16(fam)) return cu_w_loads_ok(W) && W.rows * W.cols >= TC16_MIN_VALUES && W.rows <= TC16_MAX_ROWS;
    return 0;
}

/* K slices (a power of two up to 8, one warp each in decode): about 2048
 * warps for short matrices, each slice at least `least` chunks (4 for a
 * matmul). From the shape alone. Fewer, longer-lived warps stream better
 * than many short ones (the sweep: docs/PERFORMANCE.md, "Tuning of the
 * tensor-core decode"). */
__host__ static inline int tc_splits(int64_t rows, int64_t nch, int least = 4)
{
    int ks = 1;
    while (ks < 8 && (rows + 15) / 16 * ks < 2048 && nch / (ks * 2) >= least) ks *= 2;
    return ks;
}

/* Host: prepared rows for R = T·G activation rows of n values (row (t, b)
 * at x + t·ldx + b·n) into xq (R rows of terms·tc_npad(n) 16-bit values,
 * tc_terms of the kind that reads them) and pf (R factors, at
 * tc_prep_pf_offset); bytes needed: tc_prep_bytes. act (G = 1,
 * tc_prep_act_ok(n)): the rows through FP8 1x128 first, row r times f[r]
 * for r < nf (tc_act_row). */
__host__ static inline size_t tc_prep_pf_offset(int64_t rows, int64_t n, int terms)
{
    return (size_t)rows * (size_t)tc_npad(n) * 2 * (size_t)terms;
}
__host__ static inline size_t tc_prep_bytes(int64_t rows, int64_t n, int terms)
{
    return tc_prep_pf_offset(rows, n, terms) + (size_t)rows * 4 + 16;
}
/* Whether tc_prep can round rows of n values: the rounded row sits in the
 * launch's dynamic shared memory next to its 32-float reduction scratch,
 * within the default 48 KB (12256 values; DSpark's main_proj has 12288). */
__host__ static inline int tc_prep_act_ok(int64_t n) { return (n + 32) * (int64_t)sizeof(float) <= 48 * 1024; }
void tc_prep(cu_impl *c, const float *x, int64_t ldx, int T, int G, int64_t n, __half *xq, float *pf, int terms,
             int act = 0, const float *f = NULL, int nf = 0);

#endif

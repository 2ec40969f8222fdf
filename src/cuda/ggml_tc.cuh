/* Tensor-core products of GGUF block weights (the k-quant, i-quant, Q8_0
 * and MXFP4 block types) with fp32 activations, for the matmul (linear.cu)
 * and the experts (moe.cu): the same kernels as FP8/MXFP4 (tc_f16.cuh), with
 * the weight side decoded through shared memory.
 *
 * Numerics. A chunk (32 columns of a row) decodes into integer codes c and
 * per-half factors a, m (ggml_blocks.cuh: value = a·c − m, halves of 16
 * columns). The codes are exact in f16, the activation rows are prepared as
 * for FP8 (tc_prep: a power-of-two scale 2^e and an f16 hi + lo split, 22
 * bits), and one k-step of mma.m16n8k16 covers one half: its fp32 sum
 * s = Σ c·(hi + lo) goes into the row's total as fma(a, s, acc), and for
 * the types with a min term fma(−m, σ, acc), σ = Σ (hi + lo) over the half
 * (an MMA with an all-ones A). The total times 2^−e is the row's product.
 * So a row's result is, up to about 2^-22 relative per term, the fp32 dot
 * product with the CPU's dequantized weights.
 *
 * Invariance. A row's total runs over its chunks in increasing order within
 * each of ks slices (ks from the shape: tc_splits), the slices added in
 * slice order (tc_slices_sum), both halves of a chunk in order: nothing
 * depends on how many token rows share the launch, the instance, or which
 * warp computes a row.
 *
 * Staging. The 32 lanes of a warp decode 32 (row, chunk) jobs per pass:
 * MT = 2 tiles: the 32 rows of the warp, one chunk; MT = 1: its 16 rows, two
 * chunks of its slice (c and c + ks). A lane writes its job's codes as f16
 * pairs into its row of the warp's staging area, each 8-column group in the
 * order of the prepared rows ([c0 c4 c1 c5 c2 c6 c3 c7], tc_f16.cuh), and
 * its factors next to them; after __syncwarp every thread reads its
 * A-fragment words from there. k-step s of a chunk covers columns
 * 16s .. 16s+15 (one half): thread q takes 8-column group 2s + q/2, the
 * even (q even: columns 0 1 4 5) or odd (2 3 6 7) words of the group, and
 * the same words of the prepared activation group. */
#ifndef DSV4_CUDA_GGML_TC_CUH
#define DSV4_CUDA_GGML_TC_CUH
#include "cuda/ggml_blocks.cuh"
#include "cuda/tc_f16.cuh"

/* The tensor-core kernels' weight kinds: CU_W_FP8, CU_W_FP4, CU_W_BF16,
 * CU_W_F16, or a GGUF block format as TC_GG(fmt). */
#define TC_GG0 64
#define TC_GG(fmt) (TC_GG0 + (fmt))
__host__ __device__ constexpr int tc_is_gg(int kind) { return kind >= TC_GG0; }
__host__ __device__ constexpr int tc_gg_fmt(int kind) { return kind - TC_GG0; }

/* One warp's staging: 32 job rows of 16 code words (4 pad words keep the
 * threads of a fragment read on different banks) and their factors. */
#define GGTC_ROW_WORDS 20
typedef struct {
    uint32_t code[32][GGTC_ROW_WORDS];
    float4 f[32]; /* a[0], a[1], m[0], m[1] */
} ggtc_stage;
#define GGTC_STAGE_BYTES (8 * sizeof(ggtc_stage)) /* a block's 8 warps */

/* The f16 bits of an integer |c| <= 2048 (exact). */
GG_FN uint32_t gg_h16(int c)
{
#ifdef __CUDA_ARCH__
    return __half_as_ushort(__int2half_rn(c));
#else
    uint32_t s = c < 0 ? 0x8000u : 0u, v = (uint32_t)(c < 0 ? -c : c), e = 0;
    if (!v) return s;
    while (v >> (e + 1)) e++;
    return s | (e + 15) << 10 | ((v << (10 - e)) & 0x3FFu);
#endif
}

/* A job's codes and factors into its staging row (see the header comment). */
GG_FN void ggtc_put(const gg_codes *o, uint32_t *row, float4 *f)
{
GG_UNROLL
    for (int gi = 0; gi < 4; gi++)
GG_UNROLL
        for (int p = 0; p < 4; p++) row[4 * gi + p] = gg_h16(o->c[8 * gi + p]) | gg_h16(o->c[8 * gi + 4 + p]) << 16;
    *f = make_float4(o->a[0], o->a[1], o->m[0], o->m[1]);
}

/* Thread q's two A-fragment words of a staging row for k-step s: (a0, a2)
 * for the tile's row g, (a1, a3) for row g + 8. */
GG_FN uint2 ggtc_frag(const uint32_t *row, int s, int q)
{
    int w = (2 * s + (q >> 1)) * 4 + 2 * (q & 1);
    return make_uint2(row[w], row[w + 1]);
}

/* Thread q's B-fragment words for k-step s of chunk c of a prepared row:
 * (hi b0, hi b1, lo b0, lo b1). */
GG_FN uint4 ggtc_bfrag(const __half *xr, int64_t c, int s, int q)
{
    const uint4 *xg = (const uint4 *)(xr + (4 * c + 2 * s + (q >> 1)) * 16);
    uint4 hi = xg[0], lo = xg[1];
    return (q & 1) ? make_uint4(hi.z, hi.w, lo.z, lo.w) : make_uint4(hi.x, hi.y, lo.x, lo.y);
}

/* The job a lane decodes: row jr of the warp's 16·MT rows, chunk ju of a
 * pass (the pass's chunks are c, c + ks). */
__host__ __device__ constexpr int ggtc_job_row(int lane, int mt) { return lane % (16 * mt); }
__host__ __device__ constexpr int ggtc_job_chunk(int lane, int mt) { return lane / (16 * mt); }

#ifdef __CUDACC__
/* Asks for the 128-byte lines of the block that holds chunk c of a row
 * (blocks are at most 210 bytes: up to three lines). */
template <int FMT>
__device__ __forceinline__ void ggtc_prefetch(const uint8_t *row, int64_t c)
{
    constexpr int SUB = gg_block_elems(FMT) / 32, BB = gg_block_bytes(FMT);
    uintptr_t b = (uintptr_t)(row + (uint64_t)c / SUB * BB), end = b + BB;
    for (uintptr_t l = b & ~(uintptr_t)127; l < end; l += 128) asm volatile("prefetch.global.L2 [%0];" ::"l"(l));
}

/* One slice of a warp's rows: chunks sp, sp + ks, ... of nch, in increasing
 * order, into acc (zeroed here; factors of the activation rows not applied).
 * jrow: this lane's job row (its bytes); xr[j]: token g of tile j's
 * prepared row; st: the warp's staging. */
template <int FMT, int MT, int NT>
__device__ __forceinline__ void ggtc_slice(float (*acc)[NT][4], const uint8_t *jrow, int64_t nch, int sp, int ks,
                                           const __half *const *xr, ggtc_stage *st)
{
    constexpr int CPI = 2 / MT; /* chunks per pass */
    int lane = threadIdx.x & 31, g = lane >> 2, q = lane & 3, ju = ggtc_job_chunk(lane, MT);
    tc_zero<MT, NT>(acc);
    for (int64_t base = sp; base < nch; base += (int64_t)CPI * ks) {
        int64_t cj = base + (int64_t)ju * ks, cn = cj + (int64_t)CPI * ks;
        /* the next pass's block on its way to L2 while this one is decoded:
         * a slice is a chain of dependent passes, and short matrices give
         * too few warps to hide a memory latency per pass (a hint: the
         * values do not depend on it) */
        if (cn < nch) ggtc_prefetch<FMT>(jrow, cn);
        __syncwarp(); /* the previous pass's reads are done */
        if (cj < nch) {
            gg_codes o;
            gg_chunk_codes<FMT>(jrow, cj, &o);
            ggtc_put(&o, st->code[lane], &st->f[lane]);
        }
        __syncwarp();
#pragma unroll
        for (int u = 0; u < CPI; u++) {
            int64_t c = base + (int64_t)u * ks;
            if (c >= nch) break;
#pragma unroll
            for (int s = 0; s < 2; s++) {
                uint4 bw[NT];
#pragma unroll
                for (int j = 0; j < NT; j++) bw[j] = ggtc_bfrag(xr[j], c, s, q);
                float sig[NT][4]; /* σ of the half for tokens 2q, 2q+1 (rows alike) */
                if (gg_has_min(FMT)) {
                    const uint32_t one = 0x3C003C00u; /* f16 pair (1, 1) */
#pragma unroll
                    for (int j = 0; j < NT; j++) {
#pragma unroll
                        for (int i = 0; i < 4; i++) sig[j][i] = 0.0f;
                        tc_mma(sig[j], one, one, one, one, bw[j].x, bw[j].y);
                        tc_mma(sig[j], one, one, one, one, bw[j].z, bw[j].w);
                    }
                }
#pragma unroll
                for (int m = 0; m < MT; m++) {
                    int j0 = (u * MT + m) * 16 + g, j1 = j0 + 8;
                    uint2 f0 = ggtc_frag(st->code[j0], s, q), f1 = ggtc_frag(st->code[j1], s, q);
                    float4 F0 = st->f[j0], F1 = st->f[j1];
                    float a0 = s ? F0.y : F0.x, a1 = s ? F1.y : F1.x;
                    float m0 = s ? F0.w : F0.z, m1 = s ? F1.w : F1.z;
#pragma unroll
                    for (int j = 0; j < NT; j++) {
                        float blk[4] = {0.0f, 0.0f, 0.0f, 0.0f};
                        tc_mma(blk, f0.x, f1.x, f0.y, f1.y, bw[j].x, bw[j].y);
                        tc_mma(blk, f0.x, f1.x, f0.y, f1.y, bw[j].z, bw[j].w);
#pragma unroll
                        for (int i = 0; i < 4; i++) {
                            float a = i < 2 ? a0 : a1;
                            acc[m][j][i] = fmaf(a, blk[i], acc[m][j][i]);
                            if (gg_has_min(FMT)) acc[m][j][i] = fmaf(-(i < 2 ? m0 : m1), sig[j][i], acc[m][j][i]);
                        }
                    }
                }
            }
        }
    }
}
#endif

/* Whether W takes the GGUF tensor-core path: a GGUF block format (rows are
 * whole blocks, so whole chunks), at most TC16_MAX_ROWS rows: a vocabulary
 * head stays on the GEMV as the 16-bit ones do (a Q6_K head on the tiles
 * streamed 0.68 TB/s at decode on the H100, 659 us a token). */
__host__ static inline int ggtc_shape_ok(const dsv4_mat &W)
{
    return gg_is_fmt(W.fmt) && W.cols % 32 == 0 && W.rows <= TC16_MAX_ROWS;
}

/* The tensor-core weight kind of W (tc_shape_ok or ggtc_shape_ok), -1: none. */
__host__ static inline int tc_kind(const dsv4_mat &W)
{
    if (ggtc_shape_ok(W)) return TC_GG(W.fmt);
    return tc_shape_ok(W) ? cu_wfam(W) : -1;
}

/* Shared bytes of a kind's staging (the GGUF kinds' ggtc_stage per warp). */
__host__ static inline size_t tc_kind_bytes(int kind) { return tc_is_gg(kind) ? GGTC_STAGE_BYTES : 0; }

/* Shared bytes at the start of a kernel instance's shared memory: the GGUF
 * kinds' staging, or the FP8/MXFP4 kinds' copy rings (tc_ring_bytes). */
__host__ __device__ constexpr size_t tc_lead_bytes(int kind, int mt, int u)
{
    return tc_is_gg(kind) ? GGTC_STAGE_BYTES : tc_ring_bytes(mt, u);
}

/* The columns of a kind's chunk (the unit of its K slices). */
__host__ __device__ constexpr int tc_chunk_cols(int kind)
{
    return tc_is_gg(kind) ? 32 : kind == CU_W_FP8 ? TC_CC8 : kind == CU_W_FP4 ? TC_CC4 : TC_CC16;
}

/* Calls f(TC_GG(fmt)-kind constant) for W's GGUF format: the kernels'
 * dispatch over the block types (a generic lambda with an
 * std::integral_constant-like argument). */
template <int K> struct tc_kind_c { static constexpr int value = K; };
#define GGTC_KIND_CASE(f, name, ggml, elems, bytes) case f: fn(tc_kind_c<TC_GG(f)>()); break;
template <class F>
__host__ static inline void tc_kind_dispatch(int kind, F fn)
{
    if (kind == CU_W_FP8) fn(tc_kind_c<CU_W_FP8>());
    else if (kind == CU_W_FP4) fn(tc_kind_c<CU_W_FP4>());
    else if (kind == CU_W_BF16) fn(tc_kind_c<CU_W_BF16>());
    else if (kind == CU_W_F16) fn(tc_kind_c<CU_W_F16>());
    else if (tc_is_gg(kind))
        switch (tc_gg_fmt(kind)) { WF_GGUF_BLOCKS(GGTC_KIND_CASE) default: break; }
}
#undef GGTC_KIND_CASE

#endif

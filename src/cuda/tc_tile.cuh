/* Prompt products of FP8 and MXFP4 weights on tensor cores, in block
 * tiles staged through shared memory: the matmul (tt_kernel, launched by
 * linear.cu for steps of more than 64 token rows) and the experts
 * (moe_tc.cuh's expert_tt_kernel) share tt_sums.
 *
 * Why. tc_kernel (linear.cu) streams each warp's weight rows and reads the
 * prepared activation rows from L2 for every 16-row tile, which suits a few
 * tokens: at 4096 rows every weight tile re-reads all activations. Here the
 * 8 warps of a block share one tile of BM weight rows x BN tokens: a
 * chunk's weights and prepared activations are copied once into shared
 * memory (cp.async, a ring of ST stages) and each warp computes its MT x NT
 * tiles of 16 rows x 8 tokens from there.
 *
 * Invariance. A row's arithmetic is tc_kernel's, bit for bit: the same
 * f16 codes and prepared rows, the same MMA fragments in the same k-slot
 * order (tc_chunk_mma), block sums scaled into the slice's sum chunk by
 * chunk, the slices (ks from the shape: tc_splits) each summed in chunk
 * order and added in slice order, the row factor last. So a token's
 * result does not depend on whether its step ran here or in tc_kernel.
 * The chunks are walked slice after slice (sp = 0: chunks 0, ks, 2ks, ...;
 * then sp = 1, ...); a slice's finished sum goes to shared memory (each
 * thread its own words) and the next slice starts from zero.
 *
 * Shared memory of a stage: the weights (BM rows of a chunk's 64 bytes;
 * MXFP4's four 16-byte pieces of a row XOR-swizzled by (row/2)%4, as in
 * tc_slice_f16's ring, so the quad's word reads fall on distinct banks),
 * the prepared activations (BN tokens of a chunk's 2·CC halves, each
 * 16-byte unit swizzled by tt_unit), and one scale word a row
 * (tc_chunk_mma's sc: FP8 the fp32 scale, MXFP4 the 4 E8M0 bytes, those
 * past the row's end 0). After the stages, the slice sums when ks > 1. */
#ifndef DSV4_CUDA_TC_TILE_CUH
#define DSV4_CUDA_TC_TILE_CUH
#include "cuda/tc_f16.cuh"

/* The kinds with a tiled prefill. */
__host__ __device__ constexpr int tt_kind(int kind) { return kind == CU_W_FP8 || kind == CU_W_FP4; }

/* The tile shape the launches use: warps of 4 x 4 MMA tiles, 2 warps along
 * the rows, so 128 rows x 128 tokens (measured against 128 x 64, 64 x 128
 * and 64 x 256: docs/PERFORMANCE.md, "Prefill in block tiles"). */
#define TT_MT 4
#define TT_NT 4
#define TT_WM 2

/* A block's tile: 8 warps, WM along the weight rows and 8 / WM along the
 * tokens, each MT tiles of 16 rows x NT tiles of 8 tokens. */
template <int FAM, int MT, int NT, int WM>
struct tt_cfg {
    static constexpr int BM = WM * 16 * MT, BN = 8 / WM * 8 * NT;
    static constexpr int CC = FAM == CU_W_FP8 ? TC_CC8 : TC_CC4; /* columns a chunk */
    static constexpr int UB = CC * 2 * 2;                        /* a token's prepared bytes a chunk (2 f16 terms) */
    static constexpr int A_BYTES = BM * 64, B_BYTES = BN * UB, S_BYTES = BM * 4;
    static constexpr int STAGE = A_BYTES + B_BYTES + S_BYTES;
    static constexpr int ST = 3 * STAGE <= 128 * 1024 ? 3 : 2; /* stages in the ring */
    static constexpr int TOT_FLOATS = 8 * MT * NT * 4 * 32;    /* the slice sums: [8 warps][MT][NT][4][32 lanes] */
};

template <int FAM, int MT, int NT, int WM>
__host__ static inline size_t tt_smem_bytes(int ks)
{
    using C = tt_cfg<FAM, MT, NT, WM>;
    return (size_t)C::ST * C::STAGE + (ks > 1 ? (size_t)C::TOT_FLOATS * 4 : 0);
}

/* Where 16-byte unit u of token tok's chunk row lies in its stage row.
 * Thread (g, q) reads unit (first group + k)·2 + t of token g: the eight
 * threads of a quarter warp (tokens 2i, 2i+1, q = 0..3) would meet on two
 * bank groups (units 64 bytes apart per q); flipping bit 0 by the token's
 * parity and, for FP8 (units 4q + ...), bit 1 for q >= 2 spreads them over
 * all eight. */
template <int FAM>
__host__ __device__ __forceinline__ int tt_unit(int u, int tok)
{
    return u ^ (tok & 1) ^ (FAM == CU_W_FP8 ? (u >> 2) & 2 : 0);
}

/* The unit of a token's chunk row that thread q reads for tc_chunk_mma's
 * group k and term t: its first group of the chunk (FP8 2q, MXFP4 q, as
 * tc_group) plus k, two 16-byte terms a group. */
template <int FAM>
__host__ __device__ __forceinline__ int tt_read_unit(int q, int k, int t)
{
    return ((FAM == CU_W_FP8 ? 2 * q : q) + k) * 2 + t;
}

/* Where piece p (16 bytes) of a weight row lies among the row's four in a
 * stage (MXFP4's swizzled, see the header). */
template <int FAM>
__host__ __device__ __forceinline__ int tt_wslot(int row, int p)
{
    return FAM == CU_W_FP4 ? p ^ ((row >> 1) & 3) : p;
}

/* cp.async of 16 bytes, zeros when !ok (src is then not read). */
__device__ __forceinline__ void tt_cp16z(void *dst, const void *src, int ok)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)),
                 "l"(src), "r"(ok ? 16 : 0)
                 : "memory");
}

/* Row ri of a block's tile: its weight bytes and scale row (rows past a
 * matrix's end repeat its last row: their sums are not stored). */
struct tt_wrow {
    const char *w, *s;
};

/* f(m, j, e) for each accumulator word of a warp's MT x NT tiles. */
template <int MT, int NT, class F>
__device__ __forceinline__ void tt_each(F f)
{
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 4; e++) f(m, j, e);
}

/* The block's tile sums into acc (this warp's MT x NT tiles; every
 * thread of the block calls it): W gives the format and row length (the
 * rows themselves come from wrow(ri), so one tile may hold rows of two
 * matrices of that format, the experts' w1 and w3), xrow(ti) the prepared
 * row (bytes) of the tile's token ti. pre() runs once the first weight
 * copies are issued and before any activation is read (the wait for the
 * previous kernel, where the weights do not depend on it). */
template <int FAM, int MT, int NT, int WM, class WR, class XR, class PRE>
__device__ __forceinline__ void tt_sums(float (*acc)[NT][4], const dsv4_mat &W, int ks, WR wrow, XR xrow, PRE pre)
{
    using C = tt_cfg<FAM, MT, NT, WM>;
    constexpr int UN = C::UB / 16, BM = C::BM, BN = C::BN;
    static_assert(BM <= 256, "one scale word a thread");
    extern __shared__ __align__(16) char tsm[];
    const int tid = threadIdx.x, lane = tid & 31, warp = tid >> 5, g = lane >> 2, q = lane & 3;
    const int wm = warp % WM, wn = warp / WM; /* the warp's rows and tokens of the tile */
    const int64_t n = W.cols, rb = cu_row_bytes(W);
    const int nch = (int)((n + C::CC - 1) / C::CC);
    float *totsm = (float *)(tsm + C::ST * C::STAGE);

    auto stage_a = [&](int st) { return tsm + st * C::STAGE; };
    /* the weights of chunk c (zeros past a row's end) */
    auto copy_w = [&](int c, int st) {
        char *A = stage_a(st);
        for (int p = tid; p < BM * 4; p += 256) {
            int row = p >> 2, k = p & 3;
            int64_t off = (int64_t)c * 64 + 16 * k;
            tt_cp16z(A + row * 64 + 16 * tt_wslot<FAM>(row, k), wrow(row).w + (off < rb ? off : 0), off < rb);
        }
    };
    /* the prepared activations of chunk c */
    auto copy_x = [&](int c, int st) {
        char *B = stage_a(st) + C::A_BYTES;
        for (int p = tid; p < BN * UN; p += 256) {
            int tok = p / UN, u = p % UN;
            tc_cp16(B + tok * C::UB + 16 * tt_unit<FAM>(u, tok), xrow(tok) + (int64_t)c * C::UB + 16 * u);
        }
    };
    /* row `row`'s scale word for chunk c (tid < BM) */
    auto scale_word = [&](int c, int row) -> uint32_t {
        const char *srow = wrow(row).s;
        if constexpr (FAM == CU_W_FP8) {
            return tc_fp8_scale(W, srow, c);
        } else {
            uint32_t sw = 0;
#pragma unroll
            for (int b = 0; b < 4; b++)
                if ((int64_t)c * C::CC + 32 * b < n) sw |= (uint32_t)__ldg((const uint8_t *)srow + 4 * c + b) << (8 * b);
            return sw;
        }
    };
    auto scales = [&](int st) { return (uint32_t *)(stage_a(st) + C::A_BYTES + C::B_BYTES); };
    /* slice-major chunk order: sp, then sp + ks, ...; then slice sp + 1 */
    auto next = [&](int &sp, int &c) {
        c += ks;
        if (c >= nch) c = ++sp;
    };

    __syncthreads(); /* a previous tile of the block is done with the stages */
    /* the first stages' weights and scales before pre(), their activations after it */
    int lsp = 0, lc = 0;
    {
        int sp = 0, c = 0;
        for (int s = 0; s < C::ST - 1 && s < nch; s++) {
            copy_w(c, s);
            if (tid < BM) scales(s)[tid] = scale_word(c, tid);
            next(sp, c);
        }
    }
    pre();
    for (int s = 0; s < C::ST - 1; s++) {
        if (s < nch) {
            copy_x(lc, s);
            next(lsp, lc);
        }
        tc_cp_commit();
    }

    tc_zero<MT, NT>(acc);
    int csp = 0, cc = 0;
    for (int i = 0; i < nch; i++) {
        tc_cp_wait<C::ST - 2>();
        __syncthreads(); /* stage i % ST is in; every warp is done with stage (i - 1) % ST */
        int ls = (i + C::ST - 1) % C::ST, more = i + C::ST - 1 < nch;
        uint32_t sreg = 0;
        if (more) {
            copy_w(lc, ls);
            copy_x(lc, ls);
            if (tid < BM) sreg = scale_word(lc, tid); /* stored after this chunk's products */
            next(lsp, lc);
        }
        tc_cp_commit();

        const int st = i % C::ST;
        const char *A = stage_a(st), *B = A + C::A_BYTES;
        const uint32_t *S = scales(st);
        uint4 u[MT][2];
        uint32_t sc[MT][2];
#pragma unroll
        for (int m = 0; m < MT; m++)
#pragma unroll
            for (int h = 0; h < 2; h++) {
                int row = wm * 16 * MT + m * 16 + g + 8 * h;
                if constexpr (FAM == CU_W_FP8) { /* piece q of the row */
                    u[m][h] = *(const uint4 *)(A + row * 64 + 16 * tt_wslot<FAM>(row, q));
                } else { /* word q of each of the row's four pieces */
                    const uint32_t *w = (const uint32_t *)(A + row * 64);
                    u[m][h] = make_uint4(w[4 * tt_wslot<FAM>(row, 0) + q], w[4 * tt_wslot<FAM>(row, 1) + q],
                                         w[4 * tt_wslot<FAM>(row, 2) + q], w[4 * tt_wslot<FAM>(row, 3) + q]);
                }
                sc[m][h] = S[row];
            }
        tc_chunk_mma<FAM, MT, NT>(acc, u, sc, [&](int j, int k, int t) {
            int tok = wn * 8 * NT + j * 8 + g;
            return *(const uint4 *)(B + tok * C::UB + 16 * tt_unit<FAM>(tt_read_unit<FAM>(q, k, t), tok));
        });
        if (more && tid < BM) scales(ls)[tid] = sreg;

        if (ks > 1 && cc + ks >= nch) /* the slice's last chunk: into the slice sums, in slice order */
            tt_each<MT, NT>([&](int m, int j, int e) {
                float *p = totsm + (((warp * MT + m) * NT + j) * 4 + e) * 32 + lane;
                *p = csp == 0 ? acc[m][j][e] : *p + acc[m][j][e];
                acc[m][j][e] = 0.0f;
            });
        next(csp, cc);
    }
    if (ks > 1)
        tt_each<MT, NT>([&](int m, int j, int e) {
            acc[m][j][e] = totsm[(((warp * MT + m) * NT + j) * 4 + e) * 32 + lane];
        });
}

/* Grid (row tiles, token tiles), 256 threads: the matmul. xq, pf: the
 * prepared rows (tc_prep; token t of row block b is prepared row t·G + b);
 * grp_rows: rows of a block of the grouped product (a multiple of the
 * tile's rows) or 0. */
template <int FAM, int MT, int NT, int WM>
__global__ void __launch_bounds__(256, 1)
    tt_kernel(const __half *xq, const float *pf, int T, int G, dsv4_mat W, float *y, int64_t ldy, int ks,
              int64_t grp_rows)
{
    using C = tt_cfg<FAM, MT, NT, WM>;
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int wm = warp % WM, wn = warp / WM;
    const int64_t r0 = (int64_t)blockIdx.x * C::BM, t0 = (int64_t)blockIdx.y * C::BN;
    const int64_t gb = grp_rows ? r0 / grp_rows : 0, rb = cu_row_bytes(W), npad = tc_npad(W.cols);
    float acc[MT][NT][4];
    tt_sums<FAM, MT, NT, WM>(
        acc, W, ks,
        [&](int ri) {
            int64_t r = r0 + ri < W.rows ? r0 + ri : W.rows - 1;
            return tt_wrow{(const char *)W.data + r * rb, cu_scale_row(W, r)};
        },
        [&](int ti) {
            int64_t t = t0 + ti < T ? t0 + ti : T - 1;
            return (const char *)(xq + (t * G + gb) * 2 * npad);
        },
        [] { cu_pdl(); });
    float P[NT][2];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int64_t t = t0 + wn * 8 * NT + 8 * j + 2 * q + e;
            t = t < T ? t : T - 1;
            P[j][e] = tc_row_factor<FAM>(pf, t * G + gb);
        }
    tt_each<MT, NT>([&](int m, int j, int e) {
        int64_t r = r0 + wm * 16 * MT + m * 16 + g + (e >= 2 ? 8 : 0), t = t0 + wn * 8 * NT + 8 * j + 2 * q + (e & 1);
        if (r < W.rows && t < T) y[t * ldy + r] = acc[m][j][e] * P[j][e & 1];
    });
}

#endif

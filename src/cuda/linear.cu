/* Matrix products of the CUDA backend: y[t] = W · x[t] for T token rows.
 *
 * The arithmetic of a row is fixed by the weight's shape and format alone,
 * never by T, so a token's result does not depend on the other rows of the
 * step or on how a prompt is chunked (batch invariance, bit for bit):
 *   - FP8 and MXFP4 weights with 16-byte-aligned rows: tensor cores
 *     (tc_kernel; numerics in tc_f16.cuh: weight codes as f16 by bit moves,
 *     each activation row prepared once per call as a power-of-two-scaled
 *     f16 hi + lo pair, fp32 accumulation, block scales applied to block
 *     sums). A row's sum runs over the K chunks in one fixed order, split
 *     into ks interleaved slices (ks from the shape) that are added in slice
 *     order. Decode (few rows) runs the slices on parallel warps and adds
 *     them through shared memory; mid-size steps run them one after the
 *     other in each warp; prompts of more than 64 rows run block tiles
 *     staged through shared memory (tt_kernel, tc_tile.cuh), slice after
 *     slice: the same additions in the same order.
 *   - GGUF block weights (ggml_tc.cuh): the same kernel, the codes of each
 *     32-column chunk decoded into shared memory as f16, the block scales
 *     applied to the sums of each 16-column half; grouped products whose
 *     row blocks are not whole 16-row tiles keep ggml_gemv.cu's fp32 GEMV.
 *   - everything else (F32, BF16, F16 weights, unaligned shapes): an fp32
 *     GEMV, one warp per weight row, applied to up to 8 token rows per block
 *     (more rows: more blocks, the same per-row sums). BF16 stays here: the
 *     tensor-core instance read BF16 at 1.8-2.5 TB/s at decode against the
 *     GEMV's 2.8-4.1 (H200, tests/cuda/NOTES.md), and decode speed comes first. */
#include <string.h>

#include "cuda/ggml_tc.cuh"
#include "cuda/hc_post.cuh"
#include "cuda/tc_tile.cuh"

/* ---------------------------------------------------------------- GEMV */

/* KS warps (a power of two up to 8) share RW weight rows, computed against
 * NT token rows (block row blockIdx.y·8 of x and y; rows past T repeat the
 * last one and are not stored): warp split sp takes the 16-byte chunks sp,
 * sp+KS, ... of a row, lane-strided; the KS partial sums are added in split
 * order. The order depends only on the row length and KS, which depends only
 * on the matrix shape, never on RW or NT. Each x chunk is loaded once and
 * used for the RW rows. gemv_rows computes the rows of block index bx,
 * whichever kernel and block run it. (Its shared split sums are declared
 * here: passed in by the kernels, they changed the code of gemv_kernel<2, 2>
 * and <3, 2>.) */
template <int NT, int RW>
__device__ __forceinline__ void gemv_rows(const float *x, int64_t ldx, int T, const dsv4_mat &W, float *y,
                                          int64_t ldy, int vec, int ks, int64_t grp_rows, unsigned bx)
{
    cu_pdl();
    __shared__ float part[8][RW][NT];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sp = warp % ks, lanes = 32 * ks;
    int64_t row0 = ((int64_t)bx * (8 / ks) + warp / ks) * RW;
    int active = row0 < W.rows;
    if (ks == 1 && !active) return;
    if (!active) row0 = W.rows - 1; /* computes a dummy row, so every warp reaches the barrier */
    int t0 = blockIdx.y * 8, nt = T - t0 < NT ? T - t0 : NT;
    x += (int64_t)t0 * ldx;
    y += (int64_t)t0 * ldy;
    int dt = W.dtype;
    int64_t n = W.cols, rb = cu_row_bytes(W);
    if (grp_rows) x += row0 / grp_rows * n; /* matmul_grouped: the row block's columns of x */
    const char *wr[RW];
    int64_t rr[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) { /* rows past the end repeat the last one; their sums are dropped */
        rr[r] = row0 + r < W.rows ? row0 + r : W.rows - 1;
        wr[r] = (const char *)W.data + rr[r] * rb;
    }
    const float *xt[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) xt[t] = x + (int64_t)(t < nt ? t : nt - 1) * ldx;
    float acc[RW][NT];
#pragma unroll
    for (int r = 0; r < RW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) acc[r][t] = 0.0f;
    if (vec && dt != DT_F32) {
#pragma unroll(8 / RW) /* loads in flight */
        for (int64_t c = lane + 32 * sp; c < n / 8; c += lanes) {
            float f[RW][8];
#pragma unroll
            for (int r = 0; r < RW; r++) cu_unpack8(dt, __ldg((const uint4 *)wr[r] + c), f[r]);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float4 *xv = (const float4 *)(xt[t] + c * 8);
                float4 a = xv[0], b = xv[1];
#pragma unroll
                for (int r = 0; r < RW; r++) {
                    float s = acc[r][t];
                    s = fmaf(f[r][0], a.x, s); s = fmaf(f[r][1], a.y, s);
                    s = fmaf(f[r][2], a.z, s); s = fmaf(f[r][3], a.w, s);
                    s = fmaf(f[r][4], b.x, s); s = fmaf(f[r][5], b.y, s);
                    s = fmaf(f[r][6], b.z, s); s = fmaf(f[r][7], b.w, s);
                    acc[r][t] = s;
                }
            }
        }
    } else if (vec) {
#pragma unroll 2
        for (int64_t c = lane + 32 * sp; c < n / 4; c += lanes) {
            float4 u[RW];
#pragma unroll
            for (int r = 0; r < RW; r++) u[r] = __ldg((const float4 *)wr[r] + c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float4 a = ((const float4 *)xt[t])[c];
#pragma unroll
                for (int r = 0; r < RW; r++) {
                    float s = acc[r][t];
                    s = fmaf(u[r].x, a.x, s); s = fmaf(u[r].y, a.y, s);
                    s = fmaf(u[r].z, a.z, s); s = fmaf(u[r].w, a.w, s);
                    acc[r][t] = s;
                }
            }
        }
    } else {
        for (int64_t c = lane + 32 * sp; c < n; c += lanes) {
            float wv[RW];
#pragma unroll
            for (int r = 0; r < RW; r++) wv[r] = cu_wget(W, rr[r], c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float xv = xt[t][c];
#pragma unroll
                for (int r = 0; r < RW; r++) acc[r][t] = fmaf(wv[r], xv, acc[r][t]);
            }
        }
    }
#pragma unroll
    for (int r = 0; r < RW; r++)
#pragma unroll
        for (int t = 0; t < NT; t++) {
            float v = cu_warp_sum(acc[r][t]);
            if (ks == 1) {
                if (lane == 0 && row0 + r < W.rows && t < nt) y[t * ldy + row0 + r] = v;
            } else if (lane == 0) {
                part[warp][r][t] = v;
            }
        }
    if (ks == 1) return;
    __syncthreads();
    if (sp == 0 && lane == 0 && active)
        for (int r = 0; r < RW; r++)
            for (int t = 0; t < nt; t++) {
                float v = part[warp][r][t];
                for (int j = 1; j < ks; j++) v += part[warp + j][r][t];
                if (row0 + r < W.rows) y[t * ldy + row0 + r] = v;
            }
}

template <int NT, int RW>
__global__ void __launch_bounds__(256) gemv_kernel(const float *x, int64_t ldx, int T, dsv4_mat W, float *y,
                                                   int64_t ldy, int vec, int ks, int64_t grp_rows)
{
    gemv_rows<NT, RW>(x, ldx, T, W, y, ldy, vec, ks, grp_rows, blockIdx.x);
}

/* matmul_pair in one launch: the first half of the blocks computes y = W·x
 * as gemv_kernel does, the second half y2 = W2·x. W2 has W's shape and
 * format and the launch's vec suits both (cu_matmul_pair), so a block's
 * rows are summed as in a launch of their own, whichever half it is in.
 * Only W2's bytes and scales come in (data2, scale2): a whole second view
 * chosen at run time went through local memory (41 loads and stores in the
 * first build, which ran the decode step 0.6 ms slower). */
template <int NT, int RW>
__global__ void __launch_bounds__(256) gemv_pair_kernel(const float *x, int64_t ldx, int T, dsv4_mat W, float *y,
                                                        int64_t ldy, const void *data2, const void *scale2, float *y2,
                                                        int64_t ldy2, int vec, int ks)
{
    unsigned half = gridDim.x / 2, second = blockIdx.x >= half;
    dsv4_mat Wh = W;
    if (second) {
        Wh.data = data2;
        Wh.scale = scale2;
    }
    gemv_rows<NT, RW>(x, ldx, T, Wh, second ? y2 : y, second ? ldy2 : ldy, vec, ks, 0, blockIdx.x - (second ? half : 0));
}

/* Warps per row: enough warps in flight (about one full load of the GPU,
 * 8192) for short matrices, from the shape alone (see gemv_kernel). */
static int gemv_splits(int64_t rows, int64_t cols)
{
    int ks = 1;
    while (ks < 8 && rows * ks < 8192 && cols / (ks * 2) >= 512) ks *= 2;
    return ks;
}

/* Whether the GEMV reads W's rows against x in 16-byte loads. */
static int gemv_vec(const dsv4_mat *W, const float *x, int64_t ldx)
{
    int fam = cu_wfam(*W); /* FP8/FP4 here only for shapes the loads do not fit: element by element */
    return fam != CU_W_FP8 && fam != CU_W_FP4 && cu_vec_ok(W->dtype, W->data, W->cols, x, ldx);
}

/* a->y2 set: matmul_pair's two products in one launch of twice the blocks
 * (gemv_pair_kernel), with W's instance, vec and ks. */
static void run_gemv(cu_impl *c, const cu_matmul_args *a)
{
    const dsv4_mat *W = &a->W;
    int T = a->T, pair = a->y2 != NULL;
    int vec = gemv_vec(W, a->x, a->ldx);
    /* more token rows: more weight rows per warp, so each x load serves
     * several (measured better than more warps with fewer rows) */
    int ks = gemv_splits(W->rows, W->cols), nt = T < 8 ? T : 8, rw = nt == 1 ? 1 : nt < 4 ? 2 : 4;
    if (a->grp_rows % rw) rw = 1; /* a warp's rows must share a row block */
    dim3 grid(cu_blocks(W->rows, 8 / ks * rw) * (pair ? 2 : 1), cu_blocks(T, 8));
    switch (nt * 8 + rw) {
#define CASE(n, r)                                                                                                   \
    case n * 8 + r:                                                                                                  \
        if (pair)                                                                                                    \
            cu_launch(c, "gemv_pair_kernel", gemv_pair_kernel<n, r>, grid, dim3(256), 0, a->x, a->ldx, T, *W, a->y,  \
                      a->ldy, a->W2.data, a->W2.scale, a->y2, a->ldy2, vec, ks);                                     \
        else                                                                                                         \
            cu_launch(c, "gemv_kernel", gemv_kernel<n, r>, grid, dim3(256), 0, a->x, a->ldx, T, *W, a->y, a->ldy, vec, \
                      ks, a->grp_rows);                                                                              \
        break;
        CASE(1, 1) CASE(2, 1) CASE(2, 2) CASE(3, 1) CASE(3, 2) CASE(4, 1) CASE(4, 4) CASE(5, 1) CASE(5, 4)
        CASE(6, 1) CASE(6, 4) CASE(7, 1) CASE(7, 4) CASE(8, 1) CASE(8, 4)
#undef CASE
    }
}

/* -------------------------------------------------------- tensor cores */

/* Block (activation row (t, b), group block): tc_row_exp of the row (every
 * block of the row finds the same e from the whole row), then its 256
 * 8-column groups (tc_prep_group). */
#define PREP_GROUPS 256
__global__ void __launch_bounds__(256) tc_prep_kernel(const float *x, int64_t ldx, int G, int64_t n, int64_t npad,
                                                      __half *xq, float *pf, int terms, int act, const float *f, int nf)
{
    cu_pdl();
    __shared__ float sh[32];
    extern __shared__ float srow[]; /* act: the rounded row (n floats) */
    int64_t r = blockIdx.x;
    const float *row = x + r / G * ldx + r % G * n;
    if (act) {
        tc_act_row(row, n, f && r < nf ? f[r] : 1.0f, srow);
        row = srow;
    }
    int e = tc_row_exp(row, n, sh);
    int64_t g8 = (int64_t)blockIdx.y * PREP_GROUPS + threadIdx.x;
    if (g8 < npad / 8) {
        if (terms == 3) tc_prep_group<3>(row, n, g8, e, xq + r * 3 * npad);
        else tc_prep_group<2>(row, n, g8, e, xq + r * 2 * npad);
    }
    if (blockIdx.y == 0 && threadIdx.x == 0) pf[r] = tc_exp_factor(e);
}

void tc_prep(cu_impl *c, const float *x, int64_t ldx, int T, int G, int64_t n, __half *xq, float *pf, int terms,
             int act, const float *f, int nf)
{
    int64_t npad = tc_npad(n);
    dim3 grid((unsigned)((int64_t)T * G), cu_blocks(npad / 8, PREP_GROUPS));
    cu_launch(c, "tc_prep_kernel", tc_prep_kernel, grid, dim3(256), act ? (size_t)n * sizeof(float) : 0, x, ldx, G, n,
              npad, xq, pf, terms, act, f, nf);
}

/* Block: 8 warps. A warp computes MT tiles of 16 weight rows against NT
 * tiles of 8 token rows (tokens blockIdx.y·8·NT ...) of the prepared rows
 * (xq, pf; token t of row block b is prepared row t·G + b). The K chunks
 * are dealt to ks slices, chunk c to slice c % ks; a slice accumulates its
 * chunks in increasing order (tc_slice_f16, ggml_tc.cuh's ggtc_slice); the
 * row's result is ((slice 0 + slice 1) + slice 2) + ... .
 * KIND: CU_W_FP8, CU_W_FP4 or TC_GG(a GGUF block format).
 * SEQ = 0: the ks warps of a row tile run one slice each (decode);
 * SEQ = 1: each warp runs every slice in turn (prefill).
 * U: chunks whose loads are in flight while one is computed (FP8/MXFP4).
 * stage (G = 1, few rows): the block prepares its token rows of x itself,
 * into shared memory (tc_prep_block), instead of reading xq/pf.
 * Shared memory: the GGUF kinds' staging, the slice sums, the staged rows. */
template <int KIND, int MT, int NT, int SEQ, int U>
__global__ void __launch_bounds__(256, 1) tc_kernel(const __half *xq, const float *pf, const float *x, int64_t ldx,
                                                 int stage, int act, int T, int G, dsv4_mat W, float *y, int64_t ldy,
                                                 int ks, int64_t grp_rows)
{
    constexpr int GG = tc_is_gg(KIND), TERMS = tc_terms(KIND);
    extern __shared__ float smem[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    float *part = smem + tc_lead_bytes(KIND, MT, U) / 4; /* SEQ = 0, ks > 1: [8 warps][MT][NT][4][32] */
    int64_t tb = (int64_t)blockIdx.y * 8 * NT, npad = tc_npad(W.cols);
    int nr = T - tb < 8 * NT ? (int)(T - tb) : 8 * NT;
    float *stg = part + tc_part_floats(SEQ, MT, NT, ks);
    __half *sx = (__half *)stg;
    float *spf = stg + tc_stage_row_floats(nr, W.cols, TERMS), *sh = spf + 8;
    /* everything that reads what earlier kernels wrote (x, xq, pf) comes
     * after the wait; FP8/MXFP4 slices call this once their first weight
     * copies are in flight */
    int wpt = SEQ ? 1 : ks; /* warps per row tile */
    int sp0 = warp % wpt;
    int64_t brow0 = (int64_t)blockIdx.x * (8 / wpt) * (16 * MT), row0 = brow0 + (int64_t)(warp / wpt) * (16 * MT);
    /* staged grouped products: the block's rows lie in one row block (the
     * host checked), whose columns of x the block prepares */
    int64_t sgb = stage && grp_rows ? brow0 / grp_rows : 0;
    auto wait_prep = [&]() {
        cu_pdl();
        if (stage) tc_prep_block<TERMS>(x + tb * ldx + sgb * W.cols, ldx, nr, W.cols, sx, spf, sh, act);
    };
    int active = row0 < W.rows;
    if (wpt == 1 && !active) {
        wait_prep(); /* its barriers */
        return;
    }
    if (!active) row0 = 0; /* a dummy tile, so every warp reaches the barrier */
    int64_t n = W.cols, rb = cu_row_bytes(W);
    int64_t gb = grp_rows ? row0 / grp_rows : 0; /* matmul_grouped: the row block */
    const __half *xr[NT];
#pragma unroll
    for (int j = 0; j < NT; j++) {
        int64_t t = tb + 8 * j + g;
        t = t < T ? t : T - 1;
        xr[j] = stage ? sx + (t - tb) * TERMS * npad : xq + (t * G + gb) * TERMS * npad;
    }
    float tot[MT][NT][4];
    int mine;
    if constexpr (GG) {
        wait_prep();
        int64_t r = row0 + ggtc_job_row(lane, MT);
        const uint8_t *jrow = (const uint8_t *)W.data + (r < W.rows ? r : W.rows - 1) * rb;
        ggtc_stage *st = (ggtc_stage *)smem + warp;
        mine = tc_slices_sum<MT, NT, SEQ>(tot, ks, sp0, part, [&](float (*acc)[NT][4], int sp) {
            ggtc_slice<tc_gg_fmt(KIND), MT, NT>(acc, jrow, n / 32, sp, ks, xr, st);
        });
    } else {
        tc_rows<MT> R;
#pragma unroll
        for (int m = 0; m < MT; m++) tc_rows_set<KIND, MT>(R, m, W, row0 + m * 16, g, q);
        uint4 *ring = (uint4 *)smem + warp * tc_ring_u4(MT, U) + lane;
        mine = tc_warp_sums<KIND, MT, NT, SEQ, U>(tot, W, R, ks, sp0, xr, q, part, ring, wait_prep);
    }
    if (!mine || !active) return;
    float P[NT][2];
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int64_t u = tb + 8 * j + 2 * q + e;
            u = u < T ? u : T - 1;
            P[j][e] = stage ? tc_row_factor<KIND>(spf, u - tb) : tc_row_factor<KIND>(pf, u * G + gb);
        }
#pragma unroll
    for (int m = 0; m < MT; m++)
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int64_t r = row0 + m * 16 + g + (i >= 2 ? 8 : 0), t = tb + 8 * j + 2 * q + (i & 1);
                /* the sums are of the scaled rows: their factor comes last */
                if (r < W.rows && t < T) y[t * ldy + r] = tot[m][j][i] * P[j][i & 1];
            }
}

/* The tensor-core kind of W for a matmul (shape and format only), -1: none. */
static int tc_matmul_kind(const dsv4_mat *W, int64_t grp_rows)
{
    return grp_rows % 16 == 0 && !cu_int_matmul_ok(W, grp_rows) ? tc_kind(*W) : -1;
}

template <int KIND, int MT, int NT, int SEQ, int U>
static void tc_launch(cu_impl *c, const cu_matmul_args *a, int ks, int G, int stage)
{
    const dsv4_mat *W = &a->W;
    int wpt = SEQ ? 1 : ks;
    size_t shm = tc_lead_bytes(KIND, MT, U) + (size_t)tc_part_floats(SEQ, MT, NT, ks) * sizeof(float) +
                 (stage ? tc_stage_bytes(a->T < 8 * NT ? a->T : 8 * NT, W->cols, tc_terms(KIND)) : 0);
    static size_t allowed[CU_SMEM_GPUS];
    if (cu_allow_smem(c, tc_kernel<KIND, MT, NT, SEQ, U>, shm, allowed)) return;
    dim3 grid(cu_blocks(W->rows, 8 / wpt * 16 * MT), cu_blocks(a->T, 8 * NT));
    cu_launch(c, "tc_kernel", tc_kernel<KIND, MT, NT, SEQ, U>, grid, dim3(256), shm, (const __half *)a->xq,
              (const float *)a->pf, a->x, a->ldx, stage, a->act, a->T, G, *W, a->y, a->ldy, ks, a->grp_rows);
}

/* Prefill of FP8/MXFP4 weights in block tiles (tc_tile.cuh): the same
 * row sums as tc_kernel. */
template <int KIND>
static void tt_launch(cu_impl *c, const cu_matmul_args *a, int ks, int G)
{
    using C = tt_cfg<KIND, TT_MT, TT_NT, TT_WM>;
    auto kernel = tt_kernel<KIND, TT_MT, TT_NT, TT_WM>;
    size_t shm = tt_smem_bytes<KIND, TT_MT, TT_NT, TT_WM>(ks);
    static size_t allowed[CU_SMEM_GPUS];
    if (cu_allow_smem(c, kernel, shm, allowed)) return;
    dim3 grid(cu_blocks(a->W.rows, C::BM), cu_blocks(a->T, C::BN));
    cu_launch(c, "tt_kernel", kernel, grid, dim3(256), shm, (const __half *)a->xq, (const float *)a->pf, a->T, G, a->W,
              a->y, a->ldy, ks, a->grp_rows);
}

/* The instance only sets how many rows and tokens a warp holds; every
 * instance computes a row the same way (see tc_kernel, tt_kernel). */
template <int KIND>
static void run_tc(cu_impl *c, const cu_matmul_args *a)
{
    int G = a->grp_rows ? (int)(a->W.rows / a->grp_rows) : 1;
    int ks = tc_splits(a->W.rows, (a->W.cols + tc_chunk_cols(KIND) - 1) / tc_chunk_cols(KIND));
    /* decode steps whose rows fit in shared memory prepare them in each block
     * (grouped products: when a block's 8 / ks row tiles lie in one row block) */
    int stage = a->T <= 8 && (G == 1 || a->grp_rows % (8 / ks * 16) == 0) && a->W.cols <= TC_STAGE_MAX_N &&
                (!a->act || tc_stage_act_ok(KIND)) &&
                tc_kind_bytes(KIND) + (size_t)tc_part_floats(0, 1, 1, ks) * sizeof(float) +
                        tc_stage_bytes(a->T, a->W.cols, tc_terms(KIND)) <= tc_stage_max(tc_terms(KIND));
    if (!stage) tc_prep(c, a->x, a->ldx, a->T, G, a->W.cols, a->xq, a->pf, tc_terms(KIND), a->act);
    /* 16-bit kinds: 8 chunks in flight (a chunk's 64 bytes are 32 columns, little work per byte) */
    if (a->T <= 8) tc_launch<KIND, 1, 1, 0, tc_is16(KIND) ? 8 : 4>(c, a, ks, G, stage);
    else if (a->T <= 64) tc_launch<KIND, 1, 4, 0, 2>(c, a, ks, G, 0);
    else if (tt_kind(KIND) && a->grp_rows % (16 * TT_MT * TT_WM) == 0) /* (other kinds never get here: */
        tt_launch<tt_kind(KIND) ? KIND : CU_W_FP8>(c, a, ks, G);       /* no tt_kernel of theirs) */
    else if (a->grp_rows % 32 == 0) tc_launch<KIND, 2, 4, 1, 2>(c, a, ks, G, 0);
    else tc_launch<KIND, 1, 4, 1, 2>(c, a, ks, G, 0);
}

void cu_exec_matmul(cu_impl *c, const void *args, const int64_t *dpos)
{
    const cu_matmul_args *a = (const cu_matmul_args *)args;
    (void)dpos;
    if (a->T <= 0 || a->W.rows <= 0) return;
    if (a->y2) { /* a pair that cu_matmul_pair admitted to one GEMV launch */
        run_gemv(c, a);
        return;
    }
    int kind = tc_matmul_kind(&a->W, a->grp_rows);
    if (a->act && cu_f8mma_ok(&a->W, a->grp_rows)) cu_f8mma(c, a);
    else if (cu_int_matmul_ok(&a->W, a->grp_rows)) cu_int_matmul(c, a);
    else if (kind >= 0) tc_kind_dispatch(kind, [&](auto k) { run_tc<decltype(k)::value>(c, a); });
    else if (cu_wfam(a->W) == CU_W_GGUF) cu_gg_matmul(c, a);
    else run_gemv(c, a);
}

void cu_matmul_prep_ws(cu_impl *c, cu_matmul_args *a)
{
    a->xq = NULL;
    a->pf = NULL;
    if (a->T <= 0) return;
    int64_t rows = (int64_t)a->T * (a->grp_rows ? a->W.rows / a->grp_rows : 1); /* prepared rows */
    if (a->act && cu_f8mma_ok(&a->W, a->grp_rows)) { /* fp8_mma.cu: codes and scales */
        a->xq = (__half *)cu_ws(c, WS_MATMUL, cu_f8mma_ws_bytes(rows, a->W.cols));
        return;
    }
    if (cu_int_matmul_ok(&a->W, a->grp_rows)) { /* int_matmul.cu: limbs and exponents */
        a->xq = (__half *)cu_ws(c, WS_MATMUL, cu_int_prep_bytes(rows, a->W.cols));
        return;
    }
    int kind = tc_matmul_kind(&a->W, a->grp_rows);
    if (kind < 0) return;
    int terms = tc_terms(kind);
    char *ws = (char *)cu_ws(c, WS_MATMUL, tc_prep_bytes(rows, a->W.cols, terms));
    if (!ws) return;
    a->xq = (__half *)ws;
    a->pf = (float *)(ws + tc_prep_pf_offset(rows, a->W.cols, terms));
}

/* The arguments of y = W·x (the rest zero: no groups, rounding, epilogue
 * or second product). */
static cu_matmul_args matmul_args(const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    cu_matmul_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.ldx = ldx;
    a.T = T;
    a.W = *W;
    a.y = y;
    a.ldy = ldy;
    return a;
}

/* grp_rows = 0: a plain matmul; otherwise rows per block of the grouped one.
 * act: the rows through FP8 1x128 in their preparation (tensor-core kinds). */
static void submit_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int64_t grp_rows,
                          float *y, int64_t ldy, int act = 0, const dsv4_hc_post *post = NULL)
{
    cu_matmul_args a = matmul_args(x, ldx, T, W, y, ldy);
    a.grp_rows = grp_rows;
    a.act = act;
    if (post) a.post = *post;
    cu_matmul_prep_ws(cu_of(b), &a);
    cu_submit(cu_of(b), K_MATMUL, &a, sizeof a);
}

void cu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    submit_matmul(b, x, ldx, T, W, 0, y, ldy);
}

/* Whether a plain product of W takes the GEMV (cu_exec_matmul's last case). */
static int takes_gemv(const dsv4_mat *W)
{
    return !cu_int_matmul_ok(W, 0) && tc_matmul_kind(W, 0) < 0 && cu_wfam(*W) != CU_W_GGUF;
}

/* One GEMV launch for both products when both weights take the GEMV with
 * the same instance and arguments: the same shape (so the same ks, and rw
 * from T), the same format, dtype and scale grid, and 16-byte loads for
 * both or for neither. Each output then has the bits of a launch of its own
 * (gemv_pair_kernel). Any other pair, and every other kernel path, runs two
 * products. */
void cu_matmul_pair(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1, int64_t ldy1,
                    const dsv4_mat *W2, float *y2, int64_t ldy2)
{
    int same = W1->rows == W2->rows && W1->cols == W2->cols && W1->fmt == W2->fmt && W1->dtype == W2->dtype &&
               W1->scale_dtype == W2->scale_dtype && W1->blk_r == W2->blk_r && W1->blk_c == W2->blk_c &&
               W1->scale_rows == W2->scale_rows && W1->scale_cols == W2->scale_cols;
    if (!same || !takes_gemv(W1) || !takes_gemv(W2) || gemv_vec(W1, x, ldx) != gemv_vec(W2, x, ldx)) {
        cu_matmul(b, x, ldx, T, W1, y1, ldy1);
        cu_matmul(b, x, ldx, T, W2, y2, ldy2);
        return;
    }
    cu_matmul_args a = matmul_args(x, ldx, T, W1, y1, ldy1);
    a.W2 = *W2;
    a.y2 = y2;
    a.ldy2 = ldy2;
    cu_submit(cu_of(b), K_MATMUL, &a, sizeof a);
}

/* FP8 weights take the e4m3 tensor cores (fp8_mma.cu) and the other
 * tensor-core kinds round each row where they prepare it (tc_prep,
 * tc_prep_block), both with cq_act_block's (act_fp8_kernel's) values; the
 * rest take the rows rounded into a workspace of their own, then the plain
 * product. */
void cu_matmul_fp8in(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    cu_impl *c = cu_of(b);
    if (T <= 0) return;
    if (cu_f8mma_ok(W, 0) || (tc_matmul_kind(W, 0) >= 0 && tc_prep_act_ok(W->cols))) {
        submit_matmul(b, x, ldx, T, W, 0, y, ldy, 1);
        return;
    }
    if (ldx != W->cols) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA matmul of FP8-rounded rows: rows must be contiguous");
        return;
    }
    float *xr = (float *)cu_ws(c, WS_ACT, (size_t)T * (size_t)W->cols * sizeof(float));
    if (!xr) return;
    cu_act_fp8_round(b, x, T, (int)W->cols, xr);
    submit_matmul(b, xr, W->cols, T, W, 0, y, ldy);
}

/* The FP8 products on the e4m3 tensor cores apply hc_post where they
 * store a row; every other product stores y, then the hc_post op. */
void cu_matmul_post(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                    const dsv4_hc_post *post)
{
    if (T <= 0) return;
    if (post->hc > HC_MAX) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16");
        return;
    }
    if (fp8in && cu_f8mma_ok(W, 0)) {
        submit_matmul(b, x, ldx, T, W, 0, y, W->rows, 1, post);
        return;
    }
    if (fp8in) cu_matmul_fp8in(b, x, ldx, T, W, y, W->rows);
    else cu_matmul(b, x, ldx, T, W, y, W->rows);
    cu_hc_post(b, post->X, T, post->hc, (int)W->rows, y, post->post, post->comb);
}

void cu_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups, float *y,
                       int64_t ldy)
{
    submit_matmul(b, x, ldx, T, W, W->rows / groups, y, ldy);
}

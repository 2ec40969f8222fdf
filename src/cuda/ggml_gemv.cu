/* Matrix products of GGUF block weights on the CUDA backend: y[t] = W · x[t],
 * for the grouped products whose row blocks are not whole tensor-core tiles
 * (every other GGUF product runs on tensor cores: linear.cu, ggml_tc.cuh).
 *
 * An fp32 GEMV, one warp per weight row (KS warps for short matrices),
 * applied to NT <= 8 token rows per block (more rows: more blocks). A lane
 * decodes whole 32-value chunks of the row in registers (ggml_blocks.cuh)
 * and multiplies each against the same 32 values of every token row it
 * holds; lane l of split sp takes chunks l + 32·sp, then + 32·KS, ...; the
 * lanes' sums are added by the warp butterfly and the KS splits in split
 * order. KS comes from the matrix shape alone and NT changes only how many
 * token rows share a weight read, so a row's arithmetic is fixed by its
 * length and format: the same bits for T = 1 and T = 4096 (batch
 * invariance). */
#include "cuda/ggml_blocks.cuh"

template <int FMT, int NT>
__global__ void __launch_bounds__(256) gg_gemv_kernel(const float *x, int64_t ldx, int T, dsv4_mat W, float *y,
                                                      int64_t ldy, int ks, int64_t grp_rows)
{
    cu_pdl();
    __shared__ float part[8][NT];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sp = warp % ks;
    int64_t row = (int64_t)blockIdx.x * (8 / ks) + warp / ks;
    int active = row < W.rows;
    if (ks == 1 && !active) return;
    if (!active) row = W.rows - 1; /* a dummy row, so every warp reaches the barrier */
    int t0 = blockIdx.y * NT, nt = T - t0 < NT ? T - t0 : NT;
    int64_t n = W.cols;
    /* matmul_grouped: the row block's columns of x */
    const float *xb = x + (int64_t)t0 * ldx + (grp_rows ? row / grp_rows * n : 0);
    const float *xt[NT];
#pragma unroll
    for (int t = 0; t < NT; t++) xt[t] = xb + (int64_t)(t < nt ? t : 0) * ldx;
    const uint8_t *wr = (const uint8_t *)W.data + row * gg_row_bytes(FMT, n);
    float acc[1][NT];
    gg_dots_fmt<FMT, 1, NT>(&wr, n / 32, xt, nt, lane + 32 * sp, 32 * ks, acc);
    y += (int64_t)t0 * ldy;
#pragma unroll
    for (int t = 0; t < NT; t++) {
        if (t >= nt) break;
        float v = cu_warp_sum(acc[0][t]);
        if (lane != 0) continue;
        if (ks == 1) y[t * ldy + row] = v;
        else part[warp][t] = v;
    }
    if (ks == 1) return;
    __syncthreads();
    if (sp != 0 || lane != 0 || !active) return;
    for (int t = 0; t < nt; t++) {
        float v = part[warp][t];
        for (int j = 1; j < ks; j++) v += part[warp + j][t];
        y[t * ldy + row] = v;
    }
}

/* Warps per row: a power of two up to 8, while the matrix has fewer than
 * about one GPU load of warps (8192) and every lane keeps a chunk; from the
 * shape alone. */
static int gg_splits(int64_t rows, int64_t cols)
{
    int ks = 1;
    while (ks < 8 && rows * ks < 8192 && cols / 32 >= 64 * ks) ks *= 2;
    return ks;
}

template <int FMT>
static void gg_launch(cu_impl *c, const cu_matmul_args *a)
{
    const dsv4_mat *W = &a->W;
    int T = a->T, ks = gg_splits(W->rows, W->cols), nt = T >= 8 ? 8 : T > 2 ? 4 : T;
    dim3 grid(cu_blocks(W->rows, 8 / ks), cu_blocks(T, nt));
    switch (nt) {
#define CASE(n) case n: cu_launch(c, "gg_gemv_kernel", gg_gemv_kernel<FMT, n>, grid, dim3(256), 0, a->x, a->ldx, T, *W, a->y, a->ldy, ks, a->grp_rows); break;
        CASE(1) CASE(2) CASE(4) CASE(8)
#undef CASE
    }
}

void cu_gg_matmul(cu_impl *c, const cu_matmul_args *a)
{
    switch (a->W.fmt) {
#define GG_LAUNCH_CASE(f, name, ggml, elems, bytes) case f: gg_launch<f>(c, a); break;
        WF_GGUF_BLOCKS(GG_LAUNCH_CASE)
#undef GG_LAUNCH_CASE
    default: break;
    }
}

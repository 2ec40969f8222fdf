/* Matrix products of the CUDA backend.
 *
 * Up to CU_MAX_GEMV_ROWS token rows (decode): a GEMV kernel, one warp per
 * weight row, streaming the row with 16-byte loads and applying it to every
 * token row, so each weight is read once per step. Each token's dot product
 * runs in the same order whatever the number of rows (batch invariance).
 * More rows (prefill): cuBLAS SGEMM (fp32, no TF32) on fp32 weights, 16-bit
 * weights converted chunk by chunk into a workspace. */
#include <string.h>

#include "cuda/cuda_internal.cuh"

#define CONV_BYTES ((size_t)64 << 20)

/* KS warps (a power of two up to 8) share RW weight rows, computed against
 * NT token rows: warp split sp takes the 16-byte chunks sp, sp+KS, ... of a
 * row, lane-strided; the KS partial sums are added in split order. The
 * order depends only on the row length and KS, which depends only on the
 * matrix shape, never on RW or NT, so a token's result does not depend on the
 * other tokens. Each x chunk is loaded once and used for the RW rows. */
template <int NT, int RW>
__global__ void __launch_bounds__(256) gemv_kernel(const float *x, int64_t ldx, dsv4_mat W, float *y, int64_t ldy,
                                                   int vec, int ks, int64_t grp_rows)
{
    cu_pdl();
    __shared__ float part[8][RW][NT];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sp = warp % ks, lanes = 32 * ks;
    int64_t row0 = ((int64_t)blockIdx.x * (8 / ks) + warp / ks) * RW;
    int active = row0 < W.rows;
    if (ks == 1 && !active) return;
    if (!active) row0 = W.rows - 1; /* computes a dummy row, so every warp reaches the barrier */
    int dt = W.dtype, esz = dt == DT_F32 ? 4 : 2;
    int64_t n = W.cols;
    if (grp_rows) x += row0 / grp_rows * n; /* matmul_grouped: the row block's columns of x */
    const char *wr[RW];
#pragma unroll
    for (int r = 0; r < RW; r++) /* rows past the end repeat the last one; their sums are dropped */
        wr[r] = (const char *)W.data + (row0 + r < W.rows ? row0 + r : W.rows - 1) * n * esz;
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
                const float4 *xv = (const float4 *)(x + t * ldx + c * 8);
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
                float4 a = ((const float4 *)(x + t * ldx))[c];
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
            for (int r = 0; r < RW; r++) wv[r] = cu_ld(dt, wr[r], c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float xv = x[t * ldx + c];
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
                if (lane == 0 && row0 + r < W.rows) y[t * ldy + row0 + r] = v;
            } else if (lane == 0) {
                part[warp][r][t] = v;
            }
        }
    if (ks == 1) return;
    __syncthreads();
    if (sp == 0 && lane == 0 && active)
        for (int r = 0; r < RW; r++)
            for (int t = 0; t < NT; t++) {
                float v = part[warp][r][t];
                for (int j = 1; j < ks; j++) v += part[warp + j][r][t];
                if (row0 + r < W.rows) y[t * ldy + row0 + r] = v;
            }
}

/* Warps per row: enough warps in flight (about one full load of the GPU,
 * 8192) for short matrices, from the shape alone (see gemv_kernel). */
static int gemv_splits(int64_t rows, int64_t cols)
{
    int ks = 1;
    while (ks < 8 && rows * ks < 8192 && cols / (ks * 2) >= 512) ks *= 2;
    return ks;
}

__global__ void to_f32_kernel(dsv4_mat W, int64_t off, int64_t n, float *out)
{
    cu_pdl();
    for (int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x; i < n; i += (int64_t)gridDim.x * blockDim.x)
        out[i] = cu_ld(W.dtype, W.data, off + i);
}

void cu_matmul_prepare(cu_impl *c, cu_matmul_args *a)
{
    a->conv = NULL;
    a->conv_bytes = 0;
    if (a->T <= CU_MAX_GEMV_ROWS || a->W.dtype == DT_F32) return;
    size_t row_bytes = (size_t)a->W.cols * 4;
    int64_t chunk = (int64_t)(CONV_BYTES / row_bytes);
    if (chunk < 1) chunk = 1;
    if (chunk > a->W.rows) chunk = a->W.rows;
    a->conv_bytes = (size_t)chunk * row_bytes;
    a->conv = (float *)cu_ws(c, WS_MATMUL, a->conv_bytes);
}

void cu_exec_matmul(cu_impl *c, const void *args, const int64_t *dpos)
{
    const cu_matmul_args *a = (const cu_matmul_args *)args;
    (void)dpos;
    int T = a->T;
    const dsv4_mat *W = &a->W;
    if (T <= 0 || W->rows <= 0) return;
    if (T <= CU_MAX_GEMV_ROWS) {
        int vec = cu_vec_ok(W->dtype, W->data, W->cols, a->x, a->ldx);
        /* more token rows: more weight rows per warp, so each x load serves
         * several (measured better than more warps with fewer rows) */
        int ks = gemv_splits(W->rows, W->cols), rw = T == 1 ? 1 : T < 4 ? 2 : 4;
        if (a->grp_rows % rw) rw = 1; /* a warp's rows must share a row block */
        unsigned grid = cu_blocks(W->rows, 8 / ks * rw);
        switch (T * 8 + rw) {
#define CASE(n, r) case n * 8 + r: cu_launch(c, "gemv_kernel", gemv_kernel<n, r>, dim3(grid), dim3(256), 0, a->x, a->ldx, *W, a->y, a->ldy, vec, ks, a->grp_rows); break;
            CASE(1, 1) CASE(2, 1) CASE(2, 2) CASE(3, 1) CASE(3, 2) CASE(4, 1) CASE(4, 4) CASE(5, 1) CASE(5, 4)
            CASE(6, 1) CASE(6, 4) CASE(7, 1) CASE(7, 4) CASE(8, 1) CASE(8, 4)
#undef CASE
        }
        return;
    }
    if (a->grp_rows) { /* prefill: one product per row block */
        cu_matmul_args g = *a;
        g.grp_rows = 0;
        for (int64_t r0 = 0; r0 < W->rows; r0 += a->grp_rows) {
            g.W = mat_rows(W, r0, a->grp_rows);
            g.x = a->x + r0 / a->grp_rows * W->cols;
            g.y = a->y + r0;
            cu_exec_matmul(c, &g, dpos);
        }
        return;
    }
    const float one = 1.0f, zero = 0.0f;
    if (W->dtype == DT_F32) {
        if (cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)W->rows, T, (int)W->cols, &one, (const float *)W->data,
                        (int)W->cols, a->x, (int)a->ldx, &zero, a->y, (int)a->ldy) != CUBLAS_STATUS_SUCCESS)
            backend_fail(c->b, DSV4_ERR_DEVICE, "cuBLAS SGEMM failed");
        return;
    }
    if (!a->conv) return; /* workspace allocation failed: already sticky */
    int64_t chunk = (int64_t)(a->conv_bytes / ((size_t)W->cols * 4));
    for (int64_t r0 = 0; r0 < W->rows; r0 += chunk) {
        int64_t R = W->rows - r0 < chunk ? W->rows - r0 : chunk;
        cu_launch(c, "weight conversion", to_f32_kernel, dim3((unsigned)(c->n_sm * 8)), dim3(256), 0, *W, r0 * W->cols, R * W->cols, a->conv);
        if (cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)R, T, (int)W->cols, &one, a->conv, (int)W->cols, a->x,
                        (int)a->ldx, &zero, a->y + r0, (int)a->ldy) != CUBLAS_STATUS_SUCCESS) {
            backend_fail(c->b, DSV4_ERR_DEVICE, "cuBLAS SGEMM failed");
            return;
        }
    }
}

/* grp_rows = 0: a plain matmul; otherwise rows per block of the grouped one. */
static void submit_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int64_t grp_rows,
                          float *y, int64_t ldy)
{
    cu_impl *c = cu_of(b);
    cu_matmul_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.ldx = ldx;
    a.T = T;
    a.W = *W;
    a.y = y;
    a.ldy = ldy;
    a.grp_rows = grp_rows;
    cu_matmul_prepare(c, &a);
    cu_submit(c, K_MATMUL, &a, sizeof a);
}

void cu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    submit_matmul(b, x, ldx, T, W, 0, y, ldy);
}

void cu_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups, float *y,
                       int64_t ldy)
{
    submit_matmul(b, x, ldx, T, W, W->rows / groups, y, ldy);
}

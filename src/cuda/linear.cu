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

template <int NT>
__device__ __forceinline__ void lane_dot_multi(int dt, const void *w, int64_t n, const float *x, int64_t ldx,
                                               int vec, float *acc)
{
    int lane = threadIdx.x & 31;
#pragma unroll
    for (int t = 0; t < NT; t++) acc[t] = 0.0f;
    if (vec && dt != DT_F32) {
        const uint4 *wv = (const uint4 *)w;
#pragma unroll 4
        for (int64_t c = lane; c < n / 8; c += 32) {
            uint4 u = __ldg(wv + c);
            float f[8];
            uint32_t q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
            for (int j = 0; j < 4; j++) {
                if (dt == DT_BF16) {
                    f[2 * j] = __uint_as_float(q[j] << 16);
                    f[2 * j + 1] = __uint_as_float(q[j] & 0xffff0000u);
                } else {
                    float2 ff = __half22float2(*(const __half2 *)&q[j]);
                    f[2 * j] = ff.x;
                    f[2 * j + 1] = ff.y;
                }
            }
#pragma unroll
            for (int t = 0; t < NT; t++) {
                const float4 *xv = (const float4 *)(x + t * ldx + c * 8);
                float4 a = xv[0], b = xv[1];
                float s = acc[t];
                s = fmaf(f[0], a.x, s); s = fmaf(f[1], a.y, s);
                s = fmaf(f[2], a.z, s); s = fmaf(f[3], a.w, s);
                s = fmaf(f[4], b.x, s); s = fmaf(f[5], b.y, s);
                s = fmaf(f[6], b.z, s); s = fmaf(f[7], b.w, s);
                acc[t] = s;
            }
        }
    } else if (vec) {
        const float4 *wv = (const float4 *)w;
#pragma unroll 4
        for (int64_t c = lane; c < n / 4; c += 32) {
            float4 u = __ldg(wv + c);
#pragma unroll
            for (int t = 0; t < NT; t++) {
                float4 a = ((const float4 *)(x + t * ldx))[c];
                float s = acc[t];
                s = fmaf(u.x, a.x, s); s = fmaf(u.y, a.y, s);
                s = fmaf(u.z, a.z, s); s = fmaf(u.w, a.w, s);
                acc[t] = s;
            }
        }
    } else {
        for (int64_t c = lane; c < n; c += 32) {
            float wv = cu_ld(dt, w, c);
#pragma unroll
            for (int t = 0; t < NT; t++) acc[t] = fmaf(wv, x[t * ldx + c], acc[t]);
        }
    }
}

template <int NT>
__global__ void __launch_bounds__(256) gemv_kernel(const float *x, int64_t ldx, dsv4_mat W, float *y, int64_t ldy,
                                                   int vec)
{
    int64_t row = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (row >= W.rows) return;
    int esz = W.dtype == DT_F32 ? 4 : 2;
    const char *wr = (const char *)W.data + row * W.cols * esz;
    float acc[NT];
    lane_dot_multi<NT>(W.dtype, wr, W.cols, x, ldx, vec, acc);
#pragma unroll
    for (int t = 0; t < NT; t++) {
        float v = cu_warp_sum(acc[t]);
        if ((threadIdx.x & 31) == 0) y[t * ldy + row] = v;
    }
}

__global__ void to_f32_kernel(dsv4_mat W, int64_t off, int64_t n, float *out)
{
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
        unsigned grid = cu_blocks(W->rows, 8);
        switch (T) {
#define CASE(n) case n: gemv_kernel<n><<<grid, 256, 0, c->stream>>>(a->x, a->ldx, *W, a->y, a->ldy, vec); break;
            CASE(1) CASE(2) CASE(3) CASE(4) CASE(5) CASE(6) CASE(7) CASE(8)
#undef CASE
        }
        CU_LAUNCHED(c, "gemv");
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
        to_f32_kernel<<<(unsigned)(c->n_sm * 8), 256, 0, c->stream>>>(*W, r0 * W->cols, R * W->cols, a->conv);
        CU_LAUNCHED(c, "weight conversion");
        if (cublasSgemm(c->blas, CUBLAS_OP_T, CUBLAS_OP_N, (int)R, T, (int)W->cols, &one, a->conv, (int)W->cols, a->x,
                        (int)a->ldx, &zero, a->y + r0, (int)a->ldy) != CUBLAS_STATUS_SUCCESS) {
            backend_fail(c->b, DSV4_ERR_DEVICE, "cuBLAS SGEMM failed");
            return;
        }
    }
}

void cu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
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
    cu_matmul_prepare(c, &a);
    cu_submit(c, K_MATMUL, &a, sizeof a);
}

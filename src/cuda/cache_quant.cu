/* The official numerics on the GPU (spec §8.3), the same steps as the
 * CPU's cache_quant.c value for value: indexer queries and keys
 * Hadamard-rotated, then through FP4 E2M1 in blocks of 32; the inputs of
 * the FP8/FP4 matmuls through FP8 e4m3 in blocks of 128. (The window KV's
 * FP8 blocks of 64 are norm_rope's last step, cq_kv_block; stored rows
 * round as state_rows.cuh stores them.) Every operation is exact or an
 * IEEE-rounded fp32 operation in the CPU's order (the butterflies of one
 * stage are independent; a block's amax is a max, which no order
 * changes), so the GPU gives the CPU's bits. Each row on its own: batch
 * invariant. */
#include <cuda_bf16.h>

#include "cuda/state_rows.cuh" /* cq_pow2_ceil, sr_hadamard */

enum { CQ_IDX, CQ_ACT };

typedef struct {
    int64_t pos0;
    const float *x;
    float *y;        /* CQ_ACT: the output (may be x); the others work in place on y */
    const float *f;  /* CQ_ACT: rows r < nf are multiplied by f[r] first (NULL: none) */
    int rows, width, nf, mode;
} cq_args;

/* Round to E2M1 and back (f32_to_e2m1, ties to the even code). */
__device__ __forceinline__ float cq_e2m1(float f)
{
    const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    const float val[8] = {0.0f, 0.5f, 1.0f, 1.5f, 2.0f, 3.0f, 4.0f, 6.0f};
    float a = fabsf(f), r = 0.0f;
#pragma unroll
    for (int c = 0; c < 7; c++)
        if (a > mid[c] || (a == mid[c] && (c & 1))) r = val[c + 1];
    return signbit(f) ? -r : r;
}

/* One warp per row (width a power of two up to 1024, in shared memory):
 * Hadamard butterflies stage by stage, the scale, then FP4 blocks of 32
 * (one lane each). */
__global__ void __launch_bounds__(256) idx_fp4_kernel(cq_args a)
{
    cu_pdl();
    __shared__ float sh[8][1024];
    int warp = threadIdx.x >> 5, lane = threadIdx.x & 31, n = a.width;
    int64_t r = (int64_t)blockIdx.x * 8 + warp;
    if (r >= a.rows) return;
    float *row = a.y + r * n, *v = sh[warp];
    for (int c = lane; c < n; c += 32) v[c] = row[c];
    __syncwarp();
    sr_hadamard(v, n, lane, 32, [] { __syncwarp(); });
    for (int b = lane; b * 32 < n; b += 32) {
        int c0 = b * 32, m = n - c0 < 32 ? n - c0 : 32;
        float amax = 6.0f * 0x1p-126f;
        for (int c = 0; c < m; c++) amax = fmaxf(amax, fabsf(v[c0 + c]));
        float s = cq_pow2_ceil(amax / 6.0f), inv = 1.0f / s;
        for (int c = 0; c < m; c++) v[c0 + c] = cq_e2m1(v[c0 + c] * inv) * s;
    }
    __syncwarp();
    for (int c = lane; c < n; c += 32) row[c] = v[c];
}

/* One warp per block of 128 values of a row (cq_act_block). */
__global__ void __launch_bounds__(256) act_fp8_kernel(cq_args a)
{
    cu_pdl();
    int lane = threadIdx.x & 31, nb = (a.width + 127) / 128;
    int64_t w = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (w >= (int64_t)a.rows * nb) return;
    int64_t r = w / nb;
    cq_act_block(a.x + r * a.width, a.y + r * a.width, (w % nb) * 128, a.width, a.f && r < a.nf ? a.f[r] : 1.0f, lane);
}

void cu_exec_cache_quant(cu_impl *c, const void *args, const int64_t *dpos)
{
    const cq_args *a = (const cq_args *)args;
    (void)dpos;
    if (a->rows <= 0) return;
    if (a->mode == CQ_IDX) {
        cu_launch(c, "idx fp4 round", idx_fp4_kernel, dim3(cu_blocks(a->rows, 8)), dim3(256), 0, *a);
    } else {
        int64_t n = (int64_t)a->rows * ((a->width + 127) / 128);
        cu_launch(c, "act fp8 round", act_fp8_kernel, dim3(cu_blocks(n, 8)), dim3(256), 0, *a);
    }
}

void cu_idx_fp4_round(dsv4_backend *b, float *x, int rows, int width)
{
    if (width > 1024 || (width & (width - 1))) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA indexer FP4 rounding: width must be a power of two up to 1024");
        return;
    }
    cq_args a = {0, x, x, NULL, rows, width, 0, CQ_IDX};
    cu_submit(cu_of(b), K_CACHE_QUANT, &a, sizeof a);
}

void cu_act_fp8_round(dsv4_backend *b, const float *x, int T, int n, float *y)
{
    cq_args a = {0, x, y, NULL, T, n, 0, CQ_ACT};
    cu_submit(cu_of(b), K_CACHE_QUANT, &a, sizeof a);
}

void cu_launch_act_fp8(cu_impl *c, const float *x, float *y, int rows, int n, const float *f, int nf)
{
    cq_args a = {0, x, y, f, rows, n, nf, CQ_ACT};
    cu_exec_cache_quant(c, &a, NULL);
}

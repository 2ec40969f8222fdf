/* RMSNorm of one row by one block: the arithmetic of the rmsnorm op on the
 * GPU, shared by the kernels that end in a norm (rmsnorm_kernel, the mHC
 * finish of hc_pre/hc_head), so a norm gives the same bits whichever
 * kernel computes it.
 *
 * Thread i of a block of rms_threads(n) threads holds values i, i +
 * blockDim.x, ... (up to RMS_REG of them, in registers between the sum of
 * squares and the scaling); each thread's squares are summed in that order,
 * then cu_block_sum. Rows longer than RMS_REG·blockDim.x take the values
 * twice (once for the sum, once to scale). */
#ifndef DSV4_CUDA_RMS_ROW_CUH
#define DSV4_CUDA_RMS_ROW_CUH
#include "cuda/cuda_internal.cuh"

#define RMS_REG 8

/* Threads of the block that normalizes a row of n values. */
static inline int rms_threads(int n) { return n >= 4096 ? 1024 : n >= 1024 ? 256 : 128; }

/* The weights a thread applies (w.data NULL: unweighted, all 1), read by
 * the kernels before they wait for their predecessor: no kernel writes
 * weights. */
struct rms_w {
    float v[RMS_REG];
};
__device__ __forceinline__ rms_w rms_weights(const dsv4_mat &w, int n)
{
    rms_w r;
    int in_regs = n <= RMS_REG * (int)blockDim.x;
#pragma unroll
    for (int j = 0; j < RMS_REG; j++) {
        int i = j * blockDim.x + threadIdx.x;
        r.v[j] = in_regs && w.data && i < n ? cu_ld(w.dtype, w.data, i) : 0.0f;
    }
    return r;
}

/* y[i] = value(i) · rsqrt(mean(value²) + eps) [· w[i]] for i < n; value(i)
 * is called for this thread's i only. All threads of the block call it. */
template <class F>
__device__ __forceinline__ void rms_row(F value, int n, const dsv4_mat &w, const rms_w &wv, float eps, float *y,
                                        float *sh)
{
    if (n <= RMS_REG * (int)blockDim.x) {
        float v[RMS_REG], ss = 0.0f;
#pragma unroll
        for (int j = 0; j < RMS_REG; j++) {
            int i = j * blockDim.x + threadIdx.x;
            v[j] = i < n ? value(i) : 0.0f;
            ss = fmaf(v[j], v[j], ss);
        }
        ss = cu_block_sum(ss, sh);
        float r = 1.0f / sqrtf(ss / (float)n + eps);
#pragma unroll
        for (int j = 0; j < RMS_REG; j++) {
            int i = j * blockDim.x + threadIdx.x;
            if (i < n) y[i] = w.data ? (v[j] * r) * wv.v[j] : v[j] * r;
        }
        return;
    }
    float ss = 0.0f;
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = value(i);
        ss = fmaf(v, v, ss);
    }
    ss = cu_block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    for (int i = threadIdx.x; i < n; i += blockDim.x) {
        float v = value(i) * r;
        y[i] = w.data ? v * cu_ld(w.dtype, w.data, i) : v;
    }
}

#endif

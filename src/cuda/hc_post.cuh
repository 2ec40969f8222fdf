/* hc_post of one element, shared by the hc_post kernel and the kernels
 * that apply it where they store their output (dsv4_hc_post: the matmul of
 * fp8_mma.cu, the MoE's combine), so that the streams get the same bits
 * either way: X'[k] = post[k]·v + Σ_j comb[j][k]·X[j] at one column, each
 * sum from 0 in j order, fused multiply-adds throughout. */
#ifndef DSV4_CUDA_HC_POST_CUH
#define DSV4_CUDA_HC_POST_CUH
#include "cuda/cuda_internal.cuh"

#define HC_MAX 16

/* Column d of token t of the streams in p (D columns a stream), v the
 * op's output there. The thread that calls it must be the only one that
 * touches that column of that token's streams. */
__device__ __forceinline__ void hc_post_elem(const dsv4_hc_post &p, int64_t D, int64_t t, int64_t d, float v)
{
    int hc = p.hc;
    float *X = p.X + t * hc * D + d;
    const float *cm = p.comb + t * hc * hc, *po = p.post + t * hc;
    float old[HC_MAX];
    for (int j = 0; j < hc; j++) old[j] = X[(int64_t)j * D];
    for (int k = 0; k < hc; k++) {
        float s = 0.0f;
        for (int j = 0; j < hc; j++) s = __fmaf_rn(cm[j * hc + k], old[j], s);
        X[(int64_t)k * D] = __fmaf_rn(po[k], v, s);
    }
}

#endif

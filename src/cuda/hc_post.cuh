/* hc_post of one element, shared by the hc_post kernel and the kernels
 * that apply it where they store their output (dsv4_hc_post: the matmul of
 * fp8_mma.cu, the MoE's combine), so that the streams get the same bits
 * either way: X'[k] = post[k]·v + Σ_j comb[j][k]·X[j] at one column, each
 * sum from 0 in j order, fused multiply-adds throughout. */
#ifndef DSV4_CUDA_HC_POST_CUH
#define DSV4_CUDA_HC_POST_CUH
#include "cuda/cuda_internal.cuh"

#define HC_MAX 16

/* hc_post_elem for hc = HC streams (HC > 0: known at compile time, so old[]
 * stays in registers and its loads are issued together; 0: any hc, old[]
 * in local memory). The same operations either way. */
template <int HC>
__device__ __forceinline__ void hc_post_elem_n(const dsv4_hc_post &p, int64_t D, int64_t t, int64_t d, float v)
{
    const int hc = HC > 0 ? HC : p.hc;
    float *X = p.X + t * hc * D + d;
    const float *cm = p.comb + t * hc * hc, *po = p.post + t * hc;
    float old[HC > 0 ? HC : HC_MAX];
#pragma unroll
    for (int j = 0; j < hc; j++) old[j] = X[(int64_t)j * D];
#pragma unroll
    for (int k = 0; k < hc; k++) {
        float s = 0.0f;
#pragma unroll
        for (int j = 0; j < hc; j++) s = __fmaf_rn(cm[j * hc + k], old[j], s);
        X[(int64_t)k * D] = __fmaf_rn(po[k], v, s);
    }
}

/* Column d of token t of the streams in p (D columns a stream), v the
 * op's output there. The thread that calls it must be the only one that
 * touches that column of that token's streams. hc = 4 (the real models)
 * takes the register instance. */
__device__ __forceinline__ void hc_post_elem(const dsv4_hc_post &p, int64_t D, int64_t t, int64_t d, float v)
{
    if (p.hc == 4) hc_post_elem_n<4>(p, D, t, d, v);
    else hc_post_elem_n<0>(p, D, t, d, v);
}

#endif

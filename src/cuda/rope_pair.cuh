/* The rotation of one rope pair, shared by the rope kernel (norm_rope.cu)
 * and attention's combine (attention.cu), which rotates its output back in
 * place of a rope launch: both must give the same bits. An inline helper
 * alone does not promise that: where `inverse` is a compile-time constant
 * the compiler folds the sign and may contract x0·c − x1·s into fused
 * multiply-adds another way than where it is a run-time value. So every
 * rounding is spelled out: the angle one product, each output one product
 * rounded alone and one fused multiply-add. */
#ifndef DSV4_CUDA_ROPE_PAIR_CUH
#define DSV4_CUDA_ROPE_PAIR_CUH

/* (q[0], q[1]) rotated by pos·f (inverse: by −pos·f). */
__device__ __forceinline__ void rope_pair(float *q, float pos, float f, int inverse)
{
    float ang = __fmul_rn(pos, f);
    float c = cosf(ang), s = sinf(ang);
    if (inverse) s = -s; /* exact: the products below only change sign */
    float x0 = q[0], x1 = q[1];
    q[0] = fmaf(x0, c, -__fmul_rn(x1, s));
    q[1] = fmaf(x1, c, __fmul_rn(x0, s));
}

#endif

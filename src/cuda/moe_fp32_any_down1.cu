/* The fp32 experts (moe_fp32.cuh) for any mix of families (dispatched per group at run time), w2, one-token steps. */
#include "cuda/moe_fp32.cuh"

template void moe_fp32_fam<-1, -1, 0, 1>(cu_impl *c, const moe_args *a, int part);

/* The tensor-core experts (moe_tc.cuh) for BF16 and F16 weights. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<CU_W_BF16>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<CU_W_F16>(cu_impl *c, const moe_args *a, int up, int part);

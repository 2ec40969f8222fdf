/* The tensor-core experts (moe_tc.cuh) for the FP8 and MXFP4 checkpoint formats. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<CU_W_FP8>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<CU_W_FP4>(cu_impl *c, const moe_args *a, int up, int part);

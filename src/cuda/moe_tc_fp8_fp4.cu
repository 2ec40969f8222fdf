/* The tensor-core experts (moe_tc.cuh) for the FP8 and MXFP4 checkpoint
 * formats, and the official mix of the two in one launch. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<CU_W_FP8>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<CU_W_FP4>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_pair<CU_W_FP4, CU_W_FP8>(cu_impl *c, const moe_args *a, int up);

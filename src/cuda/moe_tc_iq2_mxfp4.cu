/* The tensor-core experts (moe_tc.cuh) for GGUF IQ2_XXS, IQ2_S and MXFP4 blocks. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<TC_GG(WF_IQ2_XXS)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_IQ2_S)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_MXFP4_GGUF)>(cu_impl *c, const moe_args *a, int up, int part);

/* The tensor-core experts (moe_tc.cuh) for GGUF IQ4_XS, IQ3_XXS and IQ3_S blocks. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<TC_GG(WF_IQ4_XS)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_IQ3_XXS)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_IQ3_S)>(cu_impl *c, const moe_args *a, int up, int part);

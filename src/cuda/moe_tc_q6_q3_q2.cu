/* The tensor-core experts (moe_tc.cuh) for GGUF Q6_K, Q3_K and Q2_K blocks. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<TC_GG(WF_Q6_K)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_Q3_K)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_Q2_K)>(cu_impl *c, const moe_args *a, int up, int part);

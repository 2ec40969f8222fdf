/* The tensor-core experts (moe_tc.cuh) for GGUF Q8_0, Q4_K and Q5_K blocks. */
#include "cuda/moe_tc.cuh"

template void moe_tc_kind<TC_GG(WF_Q8_0)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_Q4_K)>(cu_impl *c, const moe_args *a, int up, int part);
template void moe_tc_kind<TC_GG(WF_Q5_K)>(cu_impl *c, const moe_args *a, int up, int part);

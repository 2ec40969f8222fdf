/* The fp32 experts (moe_fp32.cuh) for GGUF block experts, w2. */
#include "cuda/moe_fp32.cuh"

template void moe_fp32_fam<CU_W_GGUF, CU_W_GGUF, 0, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_GGUF, CU_W_GGUF, 0, 4>(cu_impl *c, const moe_args *a, int part);

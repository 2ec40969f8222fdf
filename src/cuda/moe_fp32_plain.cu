/* The fp32 experts (moe_fp32.cuh) for the BF16, FP8 and FP4 families. */
#include "cuda/moe_fp32.cuh"

template void moe_fp32_fam<CU_W_BF16, CU_W_BF16, 1, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_BF16, CU_W_BF16, 1, 4>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_BF16, CU_W_BF16, 0, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_BF16, CU_W_BF16, 0, 4>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP4, CU_W_FP8, 1, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP4, CU_W_FP8, 1, 4>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP4, CU_W_FP8, 0, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP4, CU_W_FP8, 0, 4>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP8, CU_W_FP8, 1, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP8, CU_W_FP8, 1, 4>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP8, CU_W_FP8, 0, 1>(cu_impl *c, const moe_args *a, int part);
template void moe_fp32_fam<CU_W_FP8, CU_W_FP8, 0, 4>(cu_impl *c, const moe_args *a, int part);

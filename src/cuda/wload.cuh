/* Weight loaders of the CUDA backend: the one place where the kernels turn a
 * weight format's checkpoint bytes (base/wformat.h) into numbers, in
 * registers; no dequantized copy of a weight ever exists in memory.
 *
 * Every loader reads a row in 16-byte pieces ("loads"): a load holds EPL
 * consecutive values of the row (BF16/F16 8, FP8 16, MXFP4 32) and lies
 * inside one scale block (FP8 blocks are 128 columns, MXFP4 blocks 32), so
 * one scale serves the whole load. cu_decode_load gives EPL fp32 values
 * (the fp32 dot products of shapes the tensor-core path does not take;
 * that path, tc_f16.cuh, moves the codes' bits itself).
 * Exactness: an e4m3 or E2M1 code times its power-of-two scale is an fp32
 * exactly (the loader admits only scales for which no product overflows),
 * so the consumers see the mathematically dequantized weight, as the CPU's
 * wmat_decode_row does. */
#ifndef DSV4_CUDA_WLOAD_CUH
#define DSV4_CUDA_WLOAD_CUH
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "cuda/cuda_internal.cuh"
#include "cuda/ggml_blocks.cuh"

/* Format families the kernels are templated on (GGUF: every block format,
 * decoded by ggml_blocks.cuh). */
enum { CU_W_BF16, CU_W_F16, CU_W_FP8, CU_W_FP4, CU_W_F32, CU_W_GGUF };

__host__ __device__ static inline int cu_wfam(const dsv4_mat &W)
{
    switch (W.fmt) {
    case WF_BF16: return CU_W_BF16;
    case WF_F16: return CU_W_F16;
    case WF_FP8_E4M3: return CU_W_FP8;
    case WF_MXFP4: return CU_W_FP4;
    default: return gg_is_fmt(W.fmt) ? CU_W_GGUF : CU_W_F32;
    }
}

/* Values per 16-byte load of a family. */
__host__ __device__ static inline int cu_epl(int fam)
{
    return fam == CU_W_FP8 ? 16 : fam == CU_W_FP4 ? 32 : fam == CU_W_F32 ? 4 : 8;
}

/* Bytes of one row of W. */
__host__ __device__ static inline int64_t cu_row_bytes(const dsv4_mat &W)
{
    int fam = cu_wfam(W);
    if (fam == CU_W_GGUF) return gg_row_bytes(W.fmt, W.cols);
    return fam == CU_W_FP8 ? W.cols : fam == CU_W_FP4 ? W.cols / 2 : fam == CU_W_F32 ? W.cols * 4 : W.cols * 2;
}

/* Whether the 16-byte loads of W line up: rows start on 16 bytes and (scaled
 * formats) every load stays inside one scale block. Decided by the shape and
 * the format alone. */
__host__ static inline int cu_w_loads_ok(const dsv4_mat &W)
{
    int fam = cu_wfam(W);
    if ((uintptr_t)W.data % 16 || cu_row_bytes(W) % 16) return 0;
    if (fam == CU_W_FP8) return W.scale && W.blk_r > 0 && W.blk_c > 0 && W.blk_c % 16 == 0;
    if (fam == CU_W_FP4) return W.scale && W.blk_r > 0 && W.blk_c > 0 && W.blk_c % 32 == 0;
    return 1;
}

/* 2^(e−127) for an E8M0 byte (e = 0: the subnormal 2^−127). */
__device__ __forceinline__ float cu_e8m0(uint32_t e) { return __uint_as_float(e ? e << 23 : 0x00400000u); }

/* The scale grid row of W's row r (computed once per row: the kernels'
 * inner loops then only index it by column block). */
__device__ __forceinline__ const char *cu_scale_row(const dsv4_mat &W, int64_t r)
{
    int64_t sr = (uint64_t)r / (uint32_t)W.blk_r;
    return (const char *)W.scale + sr * W.scale_cols * (W.scale_dtype == DT_F32 ? 4 : 1);
}

/* The scale of column c in scale row srow (blk_c a power of two in every
 * checkpoint: a shift; otherwise a 32-bit division). */
__device__ __forceinline__ float cu_scale_at(const dsv4_mat &W, const char *srow, int64_t c)
{
    uint32_t bc = (uint32_t)W.blk_c;
    uint32_t j = (bc & (bc - 1)) == 0 ? (uint32_t)c >> (__ffs(bc) - 1) : (uint32_t)c / bc;
    if (W.scale_dtype == DT_F32) return __ldg((const float *)srow + j);
    return cu_e8m0(__ldg((const uint8_t *)srow + j));
}

/* Two e4m3 codes (low byte first) as floats, exactly (hardware conversion
 * to f16, which holds every e4m3 value). */
__device__ __forceinline__ float2 cu_e4m3x2(uint32_t two)
{
    __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)(two & 0xffffu), __NV_E4M3);
    return __half22float2(*(const __half2 *)&h);
}

/* An E2M1 code (low 4 bits of n) as a float: the 3 magnitude bits placed
 * as exponent (2 bits) and leading mantissa bit of an fp32 give the value
 * times 2^−126 (code 1, 0.5, lands on the subnormal 2^−127), so one exact
 * multiply restores it. */
__device__ __forceinline__ float cu_e2m1(uint32_t n)
{
    return __uint_as_float(((n & 7u) << 22) | ((n & 8u) << 28)) * 0x1p126f;
}

/* One 16-byte load of a row of `avail` bytes from offset 0 of p; bytes past
 * avail read as zero (the last load of a row that does not fill it). */
__device__ __forceinline__ uint4 cu_ld16(const char *p, int64_t avail)
{
    if (avail >= 16) return __ldg((const uint4 *)p);
    uint32_t w[4] = {0, 0, 0, 0};
#pragma unroll
    for (int i = 0; i < 16; i++)
        if (i < avail) w[i >> 2] |= (uint32_t)__ldg((const unsigned char *)p + i) << (8 * (i & 3));
    return make_uint4(w[0], w[1], w[2], w[3]);
}

/* The EPL values of one load u of a row of W at column c (the load's
 * first column), scale applied (srow: the row's scales, cu_scale_row). */
template <int FAM>
__device__ __forceinline__ void cu_decode_load(const dsv4_mat &W, const char *srow, int64_t c, uint4 u, float *f)
{
    uint32_t q[4] = {u.x, u.y, u.z, u.w};
    if (FAM == CU_W_BF16 || FAM == CU_W_F16) {
        cu_unpack8(FAM == CU_W_BF16 ? DT_BF16 : DT_F16, u, f);
    } else if (FAM == CU_W_F32) {
#pragma unroll
        for (int j = 0; j < 4; j++) f[j] = __uint_as_float(q[j]);
    } else if (FAM == CU_W_FP8) {
        float s = cu_scale_at(W, srow, c);
#pragma unroll
        for (int j = 0; j < 4; j++) {
            float2 a = cu_e4m3x2(q[j]), b = cu_e4m3x2(q[j] >> 16);
            f[4 * j] = a.x * s; f[4 * j + 1] = a.y * s; f[4 * j + 2] = b.x * s; f[4 * j + 3] = b.y * s;
        }
    } else {
        float s = cu_scale_at(W, srow, c);
#pragma unroll
        for (int j = 0; j < 32; j++) f[j] = cu_e2m1(q[j >> 3] >> (4 * (j & 7))) * s;
    }
}

/* Element (r, c) of W as a float (any format; the GEMV's unaligned path). */
__device__ __forceinline__ float cu_wget(const dsv4_mat &W, int64_t r, int64_t c)
{
    int fam = cu_wfam(W);
    const unsigned char *row = (const unsigned char *)W.data + r * cu_row_bytes(W);
    if (fam == CU_W_FP8) return cu_e4m3x2(__ldg(row + c)).x * cu_scale_at(W, cu_scale_row(W, r), c);
    if (fam == CU_W_FP4) return cu_e2m1(__ldg(row + c / 2) >> (4 * (c & 1))) * cu_scale_at(W, cu_scale_row(W, r), c);
    return cu_ld(W.dtype, row, c);
}

/* One lane's shares of the fp32 dot products of NW weight rows (row r[i]
 * of W[i]; the W[i] share a format and shape) with nb <= NB vectors xs[j]
 * of n values: acc[i][j]; the
 * caller sums the lanes with cu_warp_sum. vec: 16-byte loads (rows aligned,
 * n a multiple of the load's values, x aligned), lane-strided; otherwise
 * element by element. The order depends only on n, the format and vec,
 * never on nb or the other vectors (batch invariance). */
template <int FAM, int NW, int NB>
__device__ __forceinline__ void cu_dots_fam(const dsv4_mat *W, const int64_t *r, int64_t n, const float *const *xs,
                                            int nb, int vec, float (*acc)[NB])
{
    constexpr int EPL = FAM == CU_W_FP8 ? 16 : FAM == CU_W_FP4 ? 32 : FAM == CU_W_F32 ? 4 : 8;
    int lane = threadIdx.x & 31;
    const char *w[NW], *sr[NW];
#pragma unroll
    for (int i = 0; i < NW; i++) {
        w[i] = (const char *)W[i].data + r[i] * cu_row_bytes(W[i]);
        sr[i] = FAM == CU_W_FP8 || FAM == CU_W_FP4 ? cu_scale_row(W[i], r[i]) : NULL;
    }
#pragma unroll
    for (int i = 0; i < NW; i++)
#pragma unroll
        for (int j = 0; j < NB; j++) acc[i][j] = 0.0f;
    if (vec) {
#pragma unroll 2
        for (int64_t c = lane; c < n / EPL; c += 32) {
            float f[NW][EPL];
#pragma unroll
            for (int i = 0; i < NW; i++) cu_decode_load<FAM>(W[i], sr[i], c * EPL, __ldg((const uint4 *)w[i] + c), f[i]);
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (j >= nb) break;
                const float4 *xv = (const float4 *)(xs[j] + c * EPL);
#pragma unroll
                for (int e = 0; e < EPL / 4; e++) {
                    float4 a = xv[e];
#pragma unroll
                    for (int i = 0; i < NW; i++) {
                        float s = acc[i][j];
                        s = fmaf(f[i][4 * e], a.x, s); s = fmaf(f[i][4 * e + 1], a.y, s);
                        s = fmaf(f[i][4 * e + 2], a.z, s); s = fmaf(f[i][4 * e + 3], a.w, s);
                        acc[i][j] = s;
                    }
                }
            }
        }
    } else {
        for (int64_t c = lane; c < n; c += 32) {
            float wv[NW];
#pragma unroll
            for (int i = 0; i < NW; i++) wv[i] = cu_wget(W[i], r[i], c);
#pragma unroll
            for (int j = 0; j < NB; j++) {
                if (j >= nb) break;
#pragma unroll
                for (int i = 0; i < NW; i++) acc[i][j] = fmaf(wv[i], xs[j][c], acc[i][j]);
            }
        }
    }
}

/* Whether cu_dots can use 16-byte loads for rows of W at w against vectors
 * at x, x + ldx, ... */
__device__ __forceinline__ int cu_dots_vec(const dsv4_mat &W, const char *w, const float *x, int64_t ldx)
{
    int epl = cu_epl(cu_wfam(W));
    return W.cols % epl == 0 && (uintptr_t)w % 16 == 0 && cu_row_bytes(W) % 16 == 0 && (uintptr_t)x % 16 == 0 &&
           ldx % 4 == 0;
}

/* cu_dots_fam for the format of W[0]. */
template <int NW, int NB>
__device__ __forceinline__ void cu_dots(const dsv4_mat *W, const int64_t *r, int64_t n, const float *const *xs, int nb,
                                        int vec, float (*acc)[NB])
{
    switch (cu_wfam(W[0])) {
    case CU_W_BF16: cu_dots_fam<CU_W_BF16, NW, NB>(W, r, n, xs, nb, vec, acc); break;
    case CU_W_F16: cu_dots_fam<CU_W_F16, NW, NB>(W, r, n, xs, nb, vec, acc); break;
    case CU_W_FP8: cu_dots_fam<CU_W_FP8, NW, NB>(W, r, n, xs, nb, vec, acc); break;
    case CU_W_FP4: cu_dots_fam<CU_W_FP4, NW, NB>(W, r, n, xs, nb, vec, acc); break;
    case CU_W_GGUF: gg_dots<NW, NB>(W, r, n, xs, nb, acc); break;
    default: cu_dots_fam<CU_W_F32, NW, NB>(W, r, n, xs, nb, vec, acc); break;
    }
}

#endif

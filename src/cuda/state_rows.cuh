/* Packed session rows on the GPU (dsv4_row_fmt, ops.h): storing a row
 * (block-cooperative, for ring_store and the compressor's entries) and
 * reading single values back (in registers, for attention and the indexer).
 * The CPU's cache_quant.c step for step: the same block maxima (order-free),
 * the same power-of-two scales, the same round-to-nearest-even encoders
 * written with exact operations (rintf, integer rounding of the float
 * bits), so both backends store the same bytes and read back the same
 * floats. */
#ifndef DSV4_CUDA_STATE_ROWS_CUH
#define DSV4_CUDA_STATE_ROWS_CUH
#include <cuda_fp16.h>
#include <string.h>

#include "cuda/cuda_internal.cuh"

/* The widest row a kernel stages in shared memory (48 KB of floats). */
#define CU_ROW_MAX 12288

/* 2^ceil(log2(v)) for v > 0 (pow2_ceil). A normal v is its own power
 * of two without fraction bits, else the next exponent's; subnormal and
 * non-finite v take frexpf/ldexpf (the same results as theirs for every
 * float: the bit form was checked against them over all 2^32 values). */
__device__ __forceinline__ float cq_pow2_ceil(float v)
{
    uint32_t u = __float_as_uint(v), ex = u & 0x7F800000u;
    if (ex != 0 && ex != 0x7F800000u) return (u & 0x7FFFFFu) ? __uint_as_float(ex + 0x800000u) : v;
    int e;
    float m = frexpf(v, &e);
    return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}

/* A normal float a rounded to 3 fraction bits, half to even (a carry into
 * the exponent is the next binade's 1.0): the bits of the e4m3 grid above
 * 2^-6, which frexpf / rintf(m·16) / ldexpf gave before, with integer
 * operations (the same bits for every float, checked over all 2^32). */
__device__ __forceinline__ uint32_t cq_round3(float a)
{
    uint32_t u = __float_as_uint(a);
    return (u + 0x7FFFFu + ((u >> 20) & 1u)) & 0xFFF00000u;
}

/* Round to e4m3fn and back (f32_to_e4m3 then e4m3_to_f32): saturates at
 * 448, round half to even on the subnormal grid m·2^-9 and on 3 fraction
 * bits above it. */
__device__ __forceinline__ float cq_e4m3(float f)
{
    float a = fabsf(f), r;
    if (!(a < 464.0f)) r = 448.0f;
    else if (a < 0x1p-6f) r = rintf(a * 0x1p9f) * 0x1p-9f;
    else r = __uint_as_float(cq_round3(a));
    return signbit(f) ? -r : r;
}

/* The official KV rounding (spec §8.3) of the block of n <= 64 values at
 * row + c0, by one warp, two values a lane: the block's amax is a warp max
 * (fmaxf drops NaN in any order, as the CPU's scan), then each value on
 * its own through e4m3 at the block's power-of-two scale. In place. */
__device__ __forceinline__ void cq_kv_block(float *row, int c0, int n, int lane)
{
    float v[2], amax = 1e-4f;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int cc = lane + 32 * k;
        v[k] = cc < n ? row[c0 + cc] : 0.0f;
        amax = fmaxf(amax, fabsf(v[k]));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float s = cq_pow2_ceil(amax / 448.0f), inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < 2; k++) {
        int cc = lane + 32 * k;
        if (cc < n) row[c0 + cc] = cq_e4m3(v[k] * inv) * s;
    }
}

/* The official numerics' activation rounding (spec §7.1) of the block of
 * 128 values at c0 of a row of width values, each times f first (· 1 is
 * exact), by one warp, 4 values a lane: the block's amax is a warp max
 * (order-free), then each value on its own through e4m3 at the block's
 * power-of-two scale. out may be in. */
__device__ __forceinline__ void cq_act_block(const float *in, float *out, int64_t c0, int64_t width, float f, int lane)
{
    float v[4], amax = 1e-4f;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int64_t cc = c0 + lane + 32 * k;
        v[k] = cc < width ? in[cc] * f : 0.0f;
        amax = fmaxf(amax, fabsf(v[k]));
    }
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float s = cq_pow2_ceil(amax / 448.0f), inv = 1.0f / s;
#pragma unroll
    for (int k = 0; k < 4; k++) {
        int64_t cc = c0 + lane + 32 * k;
        if (cc < width) out[cc] = cq_e4m3(v[k] * inv) * s;
    }
}

/* Host-callable pieces (SR_FN) are checked against the CPU decoders by
 * tests/cuda/test_state_rows.cu. */
#define SR_FN __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define SR_UNROLL _Pragma("unroll")
#else
#define SR_UNROLL /* the host compiler (tests) has no such pragma */
#endif

SR_FN float sr_bits(uint32_t u)
{
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* The f16 with bits b, as a float (one conversion on the device). */
SR_FN float sr_h2f(uint16_t b)
{
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

/* e8m0_to_f32: 2^(e-127); 0 is the subnormal 2^-127, 255 NaN. */
SR_FN float sr_e8m0(uint8_t e)
{
    return e == 255 ? sr_bits(0x7fc00000u) : sr_bits(e ? (uint32_t)e << 23 : 0x00400000u);
}
/* The byte of a normal power-of-two scale: its biased exponent. */
__device__ __forceinline__ uint8_t sr_e8m0_of(float s) { return (uint8_t)(__float_as_uint(s) >> 23); }
/* e4m3_to_f32 (bias 7, S.1111.111 NaN, subnormals m·2^-9) without
 * branches: the byte's exponent and fraction moved into an f16
 * (s.0eeee.mmm0000000) give the value times 2^-8, normals and subnormals
 * alike, and the power-of-two multiply back is exact. */
SR_FN float sr_e4m3(uint8_t b)
{
    float v = sr_h2f((uint16_t)((b & 0x7f) << 7 | (b & 0x80) << 8)) * 256.0f;
    return (b & 0x7f) == 0x7f ? sr_bits(0x7fc00000u) : v;
}
/* f32_to_e4m3: round to nearest even, 448 and beyond saturate. */
__device__ __forceinline__ uint8_t sr_to_e4m3(float f)
{
    uint8_t s = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (!(a < 464.0f)) return s | 0x7e;
    if (a < 0x1p-6f) return s | (uint8_t)(int)rintf(a * 0x1p9f);
    /* exponent and 3 fraction bits of the rounded value, rebiased from 127 to 7 */
    return s | (uint8_t)((cq_round3(a) >> 20) - ((127u - 7u) << 3));
}

/* k_e2m1_values[c] (magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; bit 3 the
 * sign) the same way: s.ee.m moved into an f16 (s.000ee.m000000000) is the
 * value times 2^-14 (0 and 0.5 as subnormals). */
SR_FN float sr_e2m1(int c)
{
    return sr_h2f((uint16_t)((c & 7) << 9 | (c & 8) << 12)) * 16384.0f;
}
/* f32_to_e2m1: ties go to the even code. */
__device__ __forceinline__ int sr_to_e2m1(float f)
{
    const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    float a = fabsf(f);
    int c = 0;
#pragma unroll
    for (int i = 0; i < 7; i++)
        if (a > mid[i] || (a == mid[i] && (i & 1))) c = i + 1;
    return (signbit(f) ? 8 : 0) | c;
}

/* A stored bf16 (little-endian bytes) as a float. */
SR_FN float sr_bf16(const uint8_t *h) { return sr_bits((uint32_t)(h[0] | h[1] << 8) << 16); }
/* f32_to_bf16 (round to nearest even, NaN kept quiet), in integers. */
__device__ __forceinline__ uint16_t sr_to_bf16(float f)
{
    uint32_t u = __float_as_uint(f);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

/* Value c of an FP8 row whose scale for c (that of block c / 64) is s:
 * the e4m3 code times s, or for the rope dims the bf16 (s unused). */
SR_FN float sr_fp8_value(const dsv4_row_fmt &f, const uint8_t *row, int c, float s)
{
    return c < f.n_fp8 ? sr_e4m3(row[c]) * s : sr_bf16(row + f.rope_off + 2 * (c - f.n_fp8));
}

/* Value c of a stored row. */
SR_FN float sr_load(const dsv4_row_fmt &f, const uint8_t *row, int c)
{
    if (f.kind == ROW_F32) return ((const float *)row)[c];
    if (f.kind == ROW_FP8) return sr_fp8_value(f, row, c, c < f.n_fp8 ? sr_e8m0(row[f.scale_off + c / 64]) : 0.0f);
    return sr_e2m1((row[c / 2] >> (4 * (c & 1))) & 15) * sr_e8m0(row[f.scale_off + c / 32]);
}

/* The little-endian 32-bit word at p (4-byte aligned). */
SR_FN uint32_t sr_word(const uint8_t *p)
{
    uint32_t u;
    memcpy(&u, p, 4);
    return u;
}

/* Values c .. c+3 (c a multiple of 4; ROW_F32 rows then 16-byte aligned;
 * ROW_FP4: two bytes and one scale; ROW_FP8 rows, 8-byte aligned: one word
 * of four e4m3 codes times their block's scale, or two words of four bf16
 * rope values, when n_fp8 is a multiple of 4 as in every real layout, else
 * value by value). */
SR_FN float4 sr_load4(const dsv4_row_fmt &f, const uint8_t *row, int c)
{
    if (f.kind == ROW_F32) return ((const float4 *)row)[c / 4];
    if (f.kind == ROW_FP4) {
        uint8_t b0 = row[c / 2], b1 = row[c / 2 + 1];
        float s = sr_e8m0(row[f.scale_off + c / 32]);
        return make_float4(sr_e2m1(b0 & 15) * s, sr_e2m1(b0 >> 4) * s, sr_e2m1(b1 & 15) * s, sr_e2m1(b1 >> 4) * s);
    }
    if (f.n_fp8 & 3)
        return make_float4(sr_load(f, row, c), sr_load(f, row, c + 1), sr_load(f, row, c + 2), sr_load(f, row, c + 3));
    if (c < f.n_fp8) {
        uint32_t u = sr_word(row + c);
        float s = sr_e8m0(row[f.scale_off + c / 64]);
        return make_float4(sr_e4m3((uint8_t)u) * s, sr_e4m3((uint8_t)(u >> 8)) * s, sr_e4m3((uint8_t)(u >> 16)) * s,
                           sr_e4m3((uint8_t)(u >> 24)) * s);
    }
    const uint8_t *h = row + f.rope_off + 2 * (c - f.n_fp8);
    uint32_t h0 = sr_word(h), h1 = sr_word(h + 4); /* the first bf16 in the low half */
    return make_float4(sr_bits(h0 << 16), sr_bits(h0 & 0xffff0000u), sr_bits(h1 << 16), sr_bits(h1 & 0xffff0000u));
}

/* In-place Hadamard transform of x[0 .. w) (w a power of two, in shared
 * memory) by the threads tid, tid + nt, ... of a group that sync() holds
 * together: butterflies stage by stage (a pair's sum and difference, so the
 * order is free: the CPU's values), then the scale w^-1/2. */
template <class SYNC>
__device__ __forceinline__ void sr_hadamard(float *x, int w, int tid, int nt, SYNC sync)
{
    for (int h = 1; h < w; h *= 2) {
        for (int p = tid; p < w / 2; p += nt) { /* pair p: j = its block's start + offset */
            int j = (p / h) * 2 * h + p % h;
            float x0 = x[j], x1 = x[j + h];
            x[j] = x0 + x1;
            x[j + h] = x0 - x1;
        }
        sync();
    }
    float sc = 1.0f / sqrtf((float)w);
    for (int c = tid; c < w; c += nt) x[c] *= sc;
    sync();
}

/* Stores the row x (f.width values in shared memory; ROW_FP4 rotates them
 * in place) at dst in format f. Every thread of the block calls it
 * (blockDim.x a multiple of 32); it ends with a barrier. Warp w encodes the
 * scale blocks w, w + warps, ...: each lane two values of a 64-value FP8
 * block or one of a 32-value FP4 block, the block's max by shuffles (a
 * max is order-free: the CPU's scale), then each lane its own codes. */
static __device__ void sr_store_block(const dsv4_row_fmt &f, float *x, uint8_t *dst)
{
    int w = f.width, tid = threadIdx.x, nt = blockDim.x, lane = tid & 31, warp = tid >> 5, nw = nt >> 5, nb;
    if (f.kind == ROW_F32) {
        for (int c = tid; c < w; c += nt) ((float *)dst)[c] = x[c];
        __syncthreads();
        return;
    }
    if (f.kind == ROW_FP8) {
        nb = (f.n_fp8 + 63) / 64;
        for (int b = warp; b < nb; b += nw) {
            int c0 = 64 * b, n = f.n_fp8 - c0 < 64 ? f.n_fp8 - c0 : 64;
            float amax = 1e-4f;
            for (int c = lane; c < n; c += 32) amax = fmaxf(amax, fabsf(x[c0 + c]));
            for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            float s = cq_pow2_ceil(amax / 448.0f), inv = 1.0f / s;
            for (int c = lane; c < n; c += 32) dst[c0 + c] = sr_to_e4m3(x[c0 + c] * inv);
            if (lane == 0) dst[f.scale_off + b] = sr_e8m0_of(s);
        }
        for (int c = f.n_fp8 + tid; c < w; c += nt) {
            uint16_t h = sr_to_bf16(x[c]);
            dst[f.rope_off + 2 * (c - f.n_fp8)] = (uint8_t)(h & 0xff);
            dst[f.rope_off + 2 * (c - f.n_fp8) + 1] = (uint8_t)(h >> 8);
        }
    } else { /* ROW_FP4: the rotation, then blocks of 32 */
        sr_hadamard(x, w, tid, nt, [] { __syncthreads(); });
        nb = (w + 31) / 32;
        for (int b = warp; b < nb; b += nw) {
            int c0 = 32 * b, n = w - c0 < 32 ? w - c0 : 32;
            float v = lane < n ? x[c0 + lane] : 0.0f, amax = fmaxf(6.0f * 0x1p-126f, fabsf(v));
            for (int o = 16; o; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
            float s = cq_pow2_ceil(amax / 6.0f), inv = 1.0f / s;
            int code = lane < n ? sr_to_e2m1(v * inv) : 0;
            int hi = __shfl_down_sync(0xffffffffu, code, 1); /* the odd neighbour's code */
            if (!(lane & 1) && lane < n) dst[(c0 + lane) / 2] = (uint8_t)(code | (lane + 1 < n ? hi : 0) << 4);
            if (lane == 0) dst[f.scale_off + b] = sr_e8m0_of(s);
        }
    }
    for (int i = f.scale_off + nb + tid; i < f.bytes; i += nt) dst[i] = 0; /* padding */
    __syncthreads();
}

#endif

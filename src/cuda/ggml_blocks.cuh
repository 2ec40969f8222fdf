/* GGUF block formats on the CUDA backend: one decoder per ggml type, turning
 * one 32-value piece of a block (a "chunk": a whole Q8_0/MXFP4 block, or one
 * eighth of a 256-value K/I-quant block) into fp32 values in registers, and
 * the fp32 dot products built on them. No dequantized copy of a weight ever
 * exists in memory.
 *
 * Exactness: every decoder forms the products and differences of
 * base/ggml_quant.c in the same order with correctly rounded, never fused
 * operations (__fmul_rn, __fsub_rn), so each value is bit-identical to the
 * CPU's (and so to ggml and gguf-py). Integers become floats through the
 * 1.5·2^23 trick (exact below 2^22, and full-rate arithmetic on the GPU).
 * The decoders are __host__ __device__: tests/cuda/test_gg_decode.cu runs the
 * very same code on the CPU against ggml_dequant_blocks (no GPU needed).
 *
 * Alignment: a device weight starts on 16 bytes (cu_adopt_weight checks), so
 * a block starts on the largest power of two (at most 16) dividing its byte
 * size; the loaders use 16- or 4-byte loads where that allows, otherwise
 * aligned 4-byte loads realigned by funnel shifts.
 *
 * The grids and value tables come from base/iq_grids.h (generated from the
 * gguf package): its *_VALUES macros fill the device copies below, and host
 * code reads the CPU tables themselves. */
#ifndef DSV4_CUDA_GGML_BLOCKS_CUH
#define DSV4_CUDA_GGML_BLOCKS_CUH
#include <string.h>

#include "base/iq_grids.h"
#include "cuda/cuda_internal.cuh"

#define GG_FN __host__ __device__ __forceinline__
#ifdef __CUDA_ARCH__
#define GG_UNROLL _Pragma("unroll")
#else
#define GG_UNROLL /* the host compiler (tests) has no such pragma */
#endif

static __device__ const __align__(16) uint8_t gg_dev_iq2xxs_grid[256][8] = {IQ2XXS_GRID_VALUES};
static __device__ const __align__(16) uint8_t gg_dev_iq2s_grid[1024][8] = {IQ2S_GRID_VALUES};
static __device__ const __align__(16) uint8_t gg_dev_iq3xxs_grid[256][4] = {IQ3XXS_GRID_VALUES};
static __device__ const __align__(16) uint8_t gg_dev_iq3s_grid[512][4] = {IQ3S_GRID_VALUES};
static __device__ const __align__(16) uint8_t gg_dev_ksigns_iq2xs[128] = {KSIGNS_IQ2XS_VALUES};
static __device__ const __align__(16) int8_t gg_dev_kvalues_iq4nl[16] = {KVALUES_IQ4NL_VALUES};
static __device__ const __align__(16) int8_t gg_dev_kvalues_mxfp4[16] = {KVALUES_MXFP4_VALUES};
#ifdef __CUDA_ARCH__
#define GG_TAB(name) gg_dev_##name
#else
#define GG_TAB(name) name
#endif

/* ---- block geometry (from base/wformat.h's list) ---- */

#define GG_ELEMS_CASE(f, name, ggml, elems, bytes) case f: return elems;
#define GG_BYTES_CASE(f, name, ggml, elems, bytes) case f: return bytes;
GG_FN constexpr int gg_block_elems(int fmt)
{
    switch (fmt) { WF_GGUF_BLOCKS(GG_ELEMS_CASE) default: return 0; }
}
GG_FN constexpr int gg_block_bytes(int fmt)
{
    switch (fmt) { WF_GGUF_BLOCKS(GG_BYTES_CASE) default: return 0; }
}
#undef GG_ELEMS_CASE
#undef GG_BYTES_CASE

/* Whether fmt is a GGUF block format (the ones decoded here). */
GG_FN constexpr int gg_is_fmt(int fmt) { return gg_block_bytes(fmt) != 0; }

GG_FN int64_t gg_row_bytes(int fmt, int64_t cols) { return cols / gg_block_elems(fmt) * gg_block_bytes(fmt); }

/* ---- loads and exact conversions ---- */

GG_FN uint32_t gg_ld8(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return __ldg(p);
#else
    return *p;
#endif
}

GG_FN uint32_t gg_ld16(const uint8_t *p) /* p 2-aligned */
{
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned short *)p);
#else
    return (uint32_t)p[0] | (uint32_t)p[1] << 8;
#endif
}

GG_FN uint32_t gg_ld32(const uint8_t *p) /* p 4-aligned */
{
#ifdef __CUDA_ARCH__
    return __ldg((const unsigned int *)p);
#else
    uint32_t v;
    memcpy(&v, p, 4);
    return v;
#endif
}

GG_FN void gg_ld128(const uint8_t *p, uint32_t *w) /* p 16-aligned */
{
#ifdef __CUDA_ARCH__
    uint4 u = __ldg((const uint4 *)p);
    w[0] = u.x; w[1] = u.y; w[2] = u.z; w[3] = u.w;
#else
    memcpy(w, p, 16);
#endif
}

/* Bits [s, s+32) of the 64-bit hi:lo (s < 32). */
GG_FN uint32_t gg_funnel(uint32_t lo, uint32_t hi, uint32_t s)
{
#ifdef __CUDA_ARCH__
    return __funnelshift_r(lo, hi, s);
#else
    return s ? lo >> s | hi << (32 - s) : lo;
#endif
}

/* The N little-endian words holding bytes p[0 .. 4N) of a block whose
 * address p is ALIGN-aligned. Below 4: aligned words shifted into place (the
 * word past the end only when p is not itself 4-aligned, so nothing outside
 * the words that hold the N·4 bytes is read). */
template <int N, int ALIGN>
GG_FN void gg_words(const uint8_t *p, uint32_t *w)
{
    if (ALIGN >= 16 && N % 4 == 0) {
GG_UNROLL
        for (int i = 0; i < N / 4; i++) gg_ld128(p + 16 * i, w + 4 * i);
    } else if (ALIGN >= 4) {
GG_UNROLL
        for (int i = 0; i < N; i++) w[i] = gg_ld32(p + 4 * i);
    } else {
        uint32_t mis = (uint32_t)((uintptr_t)p & 3), s = 8 * mis;
        const uint8_t *b = p - mis;
        uint32_t a = gg_ld32(b);
GG_UNROLL
        for (int i = 0; i < N; i++) {
            uint32_t nx = i + 1 < N || mis ? gg_ld32(b + 4 * (i + 1)) : 0;
            w[i] = gg_funnel(a, nx, s);
            a = nx;
        }
    }
}

/* Byte k (a constant after unrolling) of the word array w. */
GG_FN uint32_t gg_byte(const uint32_t *w, int k) { return (w[k >> 2] >> (8 * (k & 3))) & 0xFF; }

GG_FN float gg_bits(uint32_t u)
{
#ifdef __CUDA_ARCH__
    return __uint_as_float(u);
#else
    float f;
    memcpy(&f, &u, 4);
    return f;
#endif
}

GG_FN float gg_mul(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fmul_rn(a, b);
#else
    return a * b;
#endif
}

GG_FN float gg_sub(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fsub_rn(a, b);
#else
    return a - b;
#endif
}

GG_FN float gg_add(float a, float b)
{
#ifdef __CUDA_ARCH__
    return __fadd_rn(a, b);
#else
    return a + b;
#endif
}

/* (float)v for |v| < 2^22, exactly: 1.5·2^23 + v is an fp32 with ulp 1. */
GG_FN float gg_i2f(int v) { return gg_sub(gg_bits(0x4B400000u + (uint32_t)v), 12582912.0f); }

/* The f16 at p (2-aligned) as a float, exactly. */
GG_FN float gg_f16(const uint8_t *p)
{
#ifdef __CUDA_ARCH__
    return __half2float(__ushort_as_half((unsigned short)gg_ld16(p)));
#else
    return f16_to_f32((uint16_t)gg_ld16(p));
#endif
}

/* A 16-entry int8 table as 4 words, and its entry q (< 16) by byte permute. */
GG_FN void gg_tab16(const int8_t *tab, uint32_t *t) { gg_words<4, 16>((const uint8_t *)tab, t); }

GG_FN int gg_sel16(const uint32_t *t, uint32_t q)
{
    uint32_t lo = q & 8 ? t[2] : t[0], hi = q & 8 ? t[3] : t[1];
#ifdef __CUDA_ARCH__
    uint32_t b = __byte_perm(lo, hi, q & 7);
#else
    uint32_t b = (uint32_t)((((uint64_t)hi << 32 | lo) >> (8 * (q & 7))));
#endif
    return (int)(int8_t)(b & 0xFF);
}

/* ---- the decoders: chunk j (values 32j .. 32j+31) of the block at b ----
 *
 * A chunk comes out as small integer codes c[l] and per-half affine
 * factors: value l = a[h]·c[l] − m[h], h = l / 16 (sub-blocks of 16 or 32
 * values; m is 0 but for Q2_K, Q4_K, Q5_K). a and m are formed exactly as
 * base/ggml_quant.c forms its scales, so fl(fl(a·c) − m) (or fl(a·c)) is
 * the CPU's value bit for bit (gg_values). The tensor-core products
 * (ggml_tc.cuh) multiply the codes themselves, |c| <= 128: exact in f16. */
typedef struct {
    int c[32];
    float a[2], m[2];
} gg_codes;

/* Q8_0 (34 bytes, 2-aligned): f16 d, int8 q[32]; q·d. */
GG_FN void gg_q8_0(const uint8_t *b, gg_codes *o)
{
    uint32_t w[8];
    gg_words<8, 2>(b + 2, w);
GG_UNROLL
    for (int k = 0; k < 32; k++) o->c[k] = (int)(int8_t)gg_byte(w, k);
    o->a[0] = o->a[1] = gg_f16(b);
    o->m[0] = o->m[1] = 0.0f;
}

/* Q2_K (84, 4-aligned): scales[16], qs[64], f16 d, dmin. Chunk j = 4h + p:
 * 2-bit plane p of qs[32h ..], scale bytes 8h + 2p (first 16) and + 1;
 * (d·sc)·q − dmin·min. */
GG_FN void gg_q2_k(const uint8_t *b, int j, gg_codes *o)
{
    int h = j >> 2, p = j & 3;
    uint32_t s2 = gg_ld16(b + 8 * h + 2 * p), w[8];
    gg_words<8, 4>(b + 16 + 32 * h, w);
    float d = gg_f16(b + 80), dmin = gg_f16(b + 82);
GG_UNROLL
    for (int half = 0; half < 2; half++) {
        uint32_t s = (s2 >> (8 * half)) & 0xFF;
        o->a[half] = gg_mul(d, gg_i2f((int)(s & 0xF)));
        o->m[half] = gg_mul(dmin, gg_i2f((int)(s >> 4)));
    }
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = (int)((gg_byte(w, l) >> (2 * p)) & 3);
}

/* Q3_K (110, 2-aligned): hmask[32], qs[64], scales[12], f16 d. Chunk j =
 * 4h + p: plane p of qs[32h ..], high bit 4h + p of hmask (clear: −4), the
 * 6-bit scales 8h + 2p and + 1 (offset 32). */
GG_FN void gg_q3_k(const uint8_t *b, int j, gg_codes *o)
{
    int h = j >> 2, p = j & 3;
    uint32_t hm[8], qs[8];
    gg_words<8, 2>(b, hm);
    gg_words<8, 2>(b + 32 + 32 * h, qs);
    float d = gg_f16(b + 108);
    const uint8_t *s = b + 96;
GG_UNROLL
    for (int half = 0; half < 2; half++) {
        int i = 8 * h + 2 * p + half;
        uint32_t lo = (gg_ld8(s + (i & 7)) >> (i < 8 ? 0 : 4)) & 0xF;
        uint32_t hi = (gg_ld8(s + 8 + (i & 3)) >> (2 * (i >> 2))) & 3;
        o->a[half] = gg_mul(d, gg_i2f((int)(lo | hi << 4) - 32));
        o->m[half] = 0.0f;
    }
GG_UNROLL
    for (int l = 0; l < 32; l++)
        o->c[l] = (int)((gg_byte(qs, l) >> (2 * p)) & 3) - ((gg_byte(hm, l) >> (4 * h + p)) & 1 ? 0 : 4);
}

/* The 6-bit scale and min of sub-block j of a Q4_K/Q5_K block (scales at
 * b + 4), as ggml's get_scale_min_k4. */
GG_FN void gg_scale_min_k4(const uint8_t *b, int j, int *sc, int *m)
{
    const uint8_t *s = b + 4;
    uint32_t sj = gg_ld8(s + j), sj4 = gg_ld8(s + 4 + j);
    if (j < 4) {
        *sc = (int)(sj & 63);
        *m = (int)(sj4 & 63);
    } else {
        uint32_t sjm4 = gg_ld8(s + j - 4);
        *sc = (int)((sj4 & 0xF) | (sjm4 >> 6) << 4);
        *m = (int)((sj4 >> 4) | (sj >> 6) << 4);
    }
}

/* The factors of sub-block j of a Q4_K/Q5_K block: (d·sc)·q − dmin·m. */
GG_FN void gg_k4_factors(const uint8_t *b, int j, gg_codes *o)
{
    int sc, m;
    gg_scale_min_k4(b, j, &sc, &m);
    o->a[0] = o->a[1] = gg_mul(gg_f16(b), gg_i2f(sc));
    o->m[0] = o->m[1] = gg_mul(gg_f16(b + 2), gg_i2f(m));
}

/* Q4_K (144, 16-aligned): f16 d, dmin, scales[12], qs[128]; sub-block j:
 * nibble j & 1 of qs[32(j/2) ..]. */
GG_FN void gg_q4_k(const uint8_t *b, int j, gg_codes *o)
{
    gg_k4_factors(b, j, o);
    uint32_t w[8];
    gg_words<8, 16>(b + 16 + 32 * (j >> 1), w);
GG_UNROLL
    for (int i = 0; i < 8; i++) w[i] = (w[i] >> (4 * (j & 1))) & 0x0F0F0F0Fu;
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = (int)gg_byte(w, l);
}

/* Q5_K (176, 16-aligned): Q4_K's header, qh[32] (bit j: the fifth bit of
 * sub-block j), qs[128]. */
GG_FN void gg_q5_k(const uint8_t *b, int j, gg_codes *o)
{
    gg_k4_factors(b, j, o);
    uint32_t qh[8], w[8];
    gg_words<8, 16>(b + 16, qh);
    gg_words<8, 16>(b + 48 + 32 * (j >> 1), w);
GG_UNROLL
    for (int i = 0; i < 8; i++) w[i] = ((w[i] >> (4 * (j & 1))) & 0x0F0F0F0Fu) | (((qh[i] >> j) & 0x01010101u) << 4);
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = (int)gg_byte(w, l);
}

/* Q6_K (210, 2-aligned): ql[128], qh[64], int8 scales[16], f16 d. Chunk j =
 * 4h + p: nibble p/2 of ql[64h + 32(p&1) ..], bits 2p of qh[32h ..],
 * scales 8h + 2p and + 1; d·sc·(q − 32). */
GG_FN void gg_q6_k(const uint8_t *b, int j, gg_codes *o)
{
    int h = j >> 2, p = j & 3;
    uint32_t ql[8], qh[8], s2 = gg_ld16(b + 192 + 8 * h + 2 * p);
    gg_words<8, 2>(b + 64 * h + 32 * (p & 1), ql);
    gg_words<8, 2>(b + 128 + 32 * h, qh);
    float d = gg_f16(b + 208);
GG_UNROLL
    for (int i = 0; i < 8; i++) ql[i] = ((ql[i] >> (4 * (p >> 1))) & 0x0F0F0F0Fu) | (((qh[i] >> (2 * p)) & 0x03030303u) << 4);
GG_UNROLL
    for (int half = 0; half < 2; half++) {
        o->a[half] = gg_mul(d, gg_i2f((int)(int8_t)((s2 >> (8 * half)) & 0xFF)));
        o->m[half] = 0.0f;
    }
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = (int)gg_byte(ql, l) - 32;
}

/* IQ4_XS (136, 8-aligned): f16 d, u16 scales_h, scales_l[4], qs[128];
 * sub-block j: 6-bit scale (offset 32), indices into the IQ4_NL levels:
 * element l < 16 low nibble of qs[16j + l], else high nibble of qs[16j + l − 16]. */
GG_FN void gg_iq4_xs(const uint8_t *b, int j, gg_codes *o)
{
    uint32_t sh = gg_ld16(b + 2), sl = gg_ld8(b + 4 + (j >> 1)), w[4], t[4];
    int ls = (int)(((sl >> (4 * (j & 1))) & 0xF) | ((sh >> (2 * j)) & 3) << 4);
    o->a[0] = o->a[1] = gg_mul(gg_f16(b), gg_i2f(ls - 32));
    o->m[0] = o->m[1] = 0.0f;
    gg_words<4, 8>(b + 8 + 16 * j, w);
    gg_tab16(GG_TAB(kvalues_iq4nl), t);
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = gg_sel16(t, l < 16 ? gg_byte(w, l) & 0xF : gg_byte(w, l - 16) >> 4);
}

/* ±g for grid magnitude g and sign bit s (the value is a·(±g) = ±(a·g)). */
GG_FN int gg_signed(uint32_t g, uint32_t s) { return s ? -(int)g : (int)g; }

/* IQ2_XXS (66, 2-aligned): f16 d, 8 × (4 grid index bytes, u32 of 4 7-bit
 * sign groups and a 4-bit scale); chunk j is the j-th of these; d·(0.5 + s)·0.25. */
GG_FN void gg_iq2_xxs(const uint8_t *b, int j, gg_codes *o)
{
    uint32_t w[2];
    gg_words<2, 2>(b + 2 + 8 * j, w);
    o->a[0] = o->a[1] = gg_mul(gg_mul(gg_f16(b), gg_add(0.5f, gg_i2f((int)(w[1] >> 28)))), 0.25f);
    o->m[0] = o->m[1] = 0.0f;
GG_UNROLL
    for (int l = 0; l < 4; l++) {
        uint32_t g[2], signs = GG_TAB(ksigns_iq2xs)[(w[1] >> (7 * l)) & 127];
        gg_words<2, 8>(GG_TAB(iq2xxs_grid)[gg_byte(w, l)], g);
GG_UNROLL
        for (int k = 0; k < 8; k++) o->c[8 * l + k] = gg_signed(gg_byte(g, k), (signs >> k) & 1);
    }
}

/* IQ2_S (82, 2-aligned): f16 d, qs[32] (low 8 bits of 10-bit grid indices),
 * signs[32], qh[8] (2 high bits each), scales[8] (4 bits per 16 values);
 * chunk j holds index groups 4j .. 4j+3. */
GG_FN void gg_iq2_s(const uint8_t *b, int j, gg_codes *o)
{
    uint32_t qs[1], sg[1], qh = gg_ld8(b + 66 + j), sc = gg_ld8(b + 74 + j);
    gg_words<1, 2>(b + 2 + 4 * j, qs);
    gg_words<1, 2>(b + 34 + 4 * j, sg);
    float d = gg_f16(b);
GG_UNROLL
    for (int half = 0; half < 2; half++) {
        o->a[half] = gg_mul(gg_mul(d, gg_add(0.5f, gg_i2f((int)((sc >> (4 * half)) & 0xF)))), 0.25f);
        o->m[half] = 0.0f;
    }
GG_UNROLL
    for (int gi = 0; gi < 4; gi++) {
        uint32_t idx = gg_byte(qs, gi) | ((qh >> (2 * gi)) & 3) << 8, g[2], s = gg_byte(sg, gi);
        gg_words<2, 8>(GG_TAB(iq2s_grid)[idx], g);
GG_UNROLL
        for (int k = 0; k < 8; k++) o->c[8 * gi + k] = gg_signed(gg_byte(g, k), (s >> k) & 1);
    }
}

/* IQ3_XXS (98, 2-aligned): f16 d, qs[64] (grid indices, 4 magnitudes each),
 * 8 × u32 (4 7-bit sign groups, 4-bit scale); chunk j: qs[8j ..] and u32 j;
 * d·(0.5 + s)·0.5. */
GG_FN void gg_iq3_xxs(const uint8_t *b, int j, gg_codes *o)
{
    uint32_t qs[2], aux[1];
    gg_words<2, 2>(b + 2 + 8 * j, qs);
    gg_words<1, 2>(b + 66 + 4 * j, aux);
    o->a[0] = o->a[1] = gg_mul(gg_mul(gg_f16(b), gg_add(0.5f, gg_i2f((int)(aux[0] >> 28)))), 0.5f);
    o->m[0] = o->m[1] = 0.0f;
GG_UNROLL
    for (int l = 0; l < 4; l++) {
        uint32_t signs = GG_TAB(ksigns_iq2xs)[(aux[0] >> (7 * l)) & 127], g1[1], g2[1];
        gg_words<1, 4>(GG_TAB(iq3xxs_grid)[gg_byte(qs, 2 * l)], g1);
        gg_words<1, 4>(GG_TAB(iq3xxs_grid)[gg_byte(qs, 2 * l + 1)], g2);
GG_UNROLL
        for (int k = 0; k < 4; k++) {
            o->c[8 * l + k] = gg_signed(gg_byte(g1, k), (signs >> k) & 1);
            o->c[8 * l + 4 + k] = gg_signed(gg_byte(g2, k), (signs >> (k + 4)) & 1);
        }
    }
}

/* IQ3_S (110, 2-aligned): f16 d, qs[64] (low 8 bits of 9-bit indices), qh[8]
 * (the ninth bits), signs[32] (a bit per value), scales[4] (4 bits per 32
 * values: d·(1 + 2s)); chunk j: index groups 8j .. 8j+7. */
GG_FN void gg_iq3_s(const uint8_t *b, int j, gg_codes *o)
{
    uint32_t qs[2], sg[1], qh = gg_ld8(b + 66 + j), sc = gg_ld8(b + 106 + (j >> 1));
    gg_words<2, 2>(b + 2 + 8 * j, qs);
    gg_words<1, 2>(b + 74 + 4 * j, sg);
    o->a[0] = o->a[1] = gg_mul(gg_f16(b), gg_i2f(1 + 2 * (int)((sc >> (4 * (j & 1))) & 0xF)));
    o->m[0] = o->m[1] = 0.0f;
GG_UNROLL
    for (int gi = 0; gi < 8; gi++) {
        uint32_t g[1];
        gg_words<1, 4>(GG_TAB(iq3s_grid)[gg_byte(qs, gi) | ((qh >> gi) & 1) << 8], g);
GG_UNROLL
        for (int k = 0; k < 4; k++) o->c[4 * gi + k] = gg_signed(gg_byte(g, k), (sg[0] >> (4 * gi + k)) & 1);
    }
}

/* MXFP4 (17 bytes, any alignment): e8m0 e, qs[16]; element l < 16 low nibble
 * of qs[l], else high nibble of qs[l − 16]; doubled E2M1 · 2^(e−128) (ggml's
 * ggml_e8m0_to_fp32_half). */
GG_FN void gg_mxfp4(const uint8_t *b, gg_codes *o)
{
    uint32_t e = gg_ld8(b), w[4], t[4];
    o->a[0] = o->a[1] = gg_bits(e < 2 ? 0x00200000u << e : (e - 1) << 23);
    o->m[0] = o->m[1] = 0.0f;
    gg_words<4, 1>(b + 1, w);
    gg_tab16(GG_TAB(kvalues_mxfp4), t);
GG_UNROLL
    for (int l = 0; l < 32; l++) o->c[l] = gg_sel16(t, l < 16 ? gg_byte(w, l) & 0xF : gg_byte(w, l - 16) >> 4);
}

/* Whether FMT's values have a min term (m != 0). */
GG_FN constexpr int gg_has_min(int fmt) { return fmt == WF_Q2_K || fmt == WF_Q4_K || fmt == WF_Q5_K; }

/* Chunk c (values 32c .. 32c+31) of a row of format FMT at row, as codes. */
template <int FMT>
GG_FN void gg_chunk_codes(const uint8_t *row, int64_t c, gg_codes *o)
{
    constexpr int SUB = gg_block_elems(FMT) / 32, BB = gg_block_bytes(FMT);
    const uint8_t *b = row + (uint64_t)c / SUB * BB;
    int j = (int)((uint64_t)c % SUB);
    if (FMT == WF_Q8_0) gg_q8_0(b, o);
    else if (FMT == WF_Q4_K) gg_q4_k(b, j, o);
    else if (FMT == WF_Q5_K) gg_q5_k(b, j, o);
    else if (FMT == WF_Q6_K) gg_q6_k(b, j, o);
    else if (FMT == WF_Q3_K) gg_q3_k(b, j, o);
    else if (FMT == WF_Q2_K) gg_q2_k(b, j, o);
    else if (FMT == WF_IQ4_XS) gg_iq4_xs(b, j, o);
    else if (FMT == WF_IQ3_XXS) gg_iq3_xxs(b, j, o);
    else if (FMT == WF_IQ3_S) gg_iq3_s(b, j, o);
    else if (FMT == WF_IQ2_XXS) gg_iq2_xxs(b, j, o);
    else if (FMT == WF_IQ2_S) gg_iq2_s(b, j, o);
    else gg_mxfp4(b, o);
}

/* The values of a chunk's codes, rounded as the CPU rounds them. */
template <int FMT>
GG_FN void gg_values(const gg_codes *o, float *v)
{
GG_UNROLL
    for (int l = 0; l < 32; l++) {
        float t = gg_mul(o->a[l >> 4], gg_i2f(o->c[l]));
        v[l] = gg_has_min(FMT) ? gg_sub(t, o->m[l >> 4]) : t;
    }
}

/* Chunk c (values 32c .. 32c+31) of a row of format FMT at row. */
template <int FMT>
GG_FN void gg_chunk(const uint8_t *row, int64_t c, float *v)
{
    gg_codes o;
    gg_chunk_codes<FMT>(row, c, &o);
    gg_values<FMT>(&o, v);
}

/* gg_chunk for a run-time format (small weights read chunk by chunk:
 * embeddings, hyper-connection mixes, position biases). */
#define GG_CHUNK_CASE(f, name, ggml, elems, bytes) case f: gg_chunk<f>(row, c, v); break;
GG_FN void gg_chunk_rt(int fmt, const uint8_t *row, int64_t c, float *v)
{
    switch (fmt) { WF_GGUF_BLOCKS(GG_CHUNK_CASE) default: break; }
}
#undef GG_CHUNK_CASE

/* Element (r, c) of W, plain or GGUF (the element-wise readers). */
__device__ __forceinline__ float cu_wval(const dsv4_mat &W, int64_t r, int64_t c)
{
    if (!gg_is_fmt(W.fmt)) return cu_ld(W.dtype, W.data, r * W.cols + c);
    float v[32];
    gg_chunk_rt(W.fmt, (const uint8_t *)W.data + r * gg_row_bytes(W.fmt, W.cols), c >> 5, v);
    return v[c & 31];
}

/* ---- dot products ---- */

/* One lane's shares of the fp32 dot products of NW rows w[i] (one format,
 * nch chunks each) with nb <= NB vectors xs[j]: the lane takes chunks c0,
 * c0 + cstep, ... and, per chunk, its 32 values in order (fmaf). The order
 * depends only on the row length, c0 and cstep, never on nb, NW or the other
 * vectors (batch invariance); 16-byte loads of x when every vector is
 * aligned, which changes no arithmetic. */
template <int FMT, int NW, int NB>
__device__ __forceinline__ void gg_dots_fmt(const uint8_t *const *w, int64_t nch, const float *const *xs, int nb,
                                            int64_t c0, int64_t cstep, float (*acc)[NB])
{
    int xvec = 1;
GG_UNROLL
    for (int j = 0; j < NB; j++) {
        if (j < nb) xvec &= ((uintptr_t)xs[j] & 15) == 0;
GG_UNROLL
        for (int i = 0; i < NW; i++) acc[i][j] = 0.0f;
    }
#pragma unroll 2 /* the next chunk's loads in flight while one is multiplied */
    for (int64_t c = c0; c < nch; c += cstep) {
        float v[NW][32];
GG_UNROLL
        for (int i = 0; i < NW; i++) gg_chunk<FMT>(w[i], c, v[i]);
GG_UNROLL
        for (int j = 0; j < NB; j++) {
            if (j >= nb) break;
            const float *xp = xs[j] + 32 * c;
GG_UNROLL
            for (int e = 0; e < 8; e++) {
                float4 a = xvec ? ((const float4 *)xp)[e] : make_float4(xp[4 * e], xp[4 * e + 1], xp[4 * e + 2], xp[4 * e + 3]);
GG_UNROLL
                for (int i = 0; i < NW; i++) {
                    float s = acc[i][j];
                    s = fmaf(v[i][4 * e], a.x, s); s = fmaf(v[i][4 * e + 1], a.y, s);
                    s = fmaf(v[i][4 * e + 2], a.z, s); s = fmaf(v[i][4 * e + 3], a.w, s);
                    acc[i][j] = s;
                }
            }
        }
    }
}

/* cu_dots (wload.cuh) for GGUF weights: row r[i] of W[i] (one format and
 * shape), lanes of the warp striding over the chunks. */
template <int NW, int NB>
__device__ __forceinline__ void gg_dots(const dsv4_mat *W, const int64_t *r, int64_t n, const float *const *xs, int nb,
                                        float (*acc)[NB])
{
    const uint8_t *w[NW];
    int64_t rb = gg_row_bytes(W[0].fmt, W[0].cols);
GG_UNROLL
    for (int i = 0; i < NW; i++) w[i] = (const uint8_t *)W[i].data + r[i] * rb;
#define GG_DOTS_CASE(f, name, ggml, elems, bytes) \
    case f: gg_dots_fmt<f, NW, NB>(w, n / 32, xs, nb, threadIdx.x & 31, 32, acc); break;
    switch (W[0].fmt) { WF_GGUF_BLOCKS(GG_DOTS_CASE) default: break; }
#undef GG_DOTS_CASE
}

/* The matmul of GGUF weights (ggml_gemv.cu), from cu_exec_matmul. */
void cu_gg_matmul(cu_impl *c, const cu_matmul_args *a);

#endif

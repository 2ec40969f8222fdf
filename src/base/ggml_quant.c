/* CPU reference dequantization of ggml block formats. Each decoder writes
 * the values of one block in element order; the arithmetic (which products
 * are formed first) mirrors ggml's dequantize_row_* exactly, and ISO C mode
 * keeps the compiler from fusing a·b − c into an FMA, so results are
 * bit-identical to ggml. Block layouts are described at each decoder. */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "base/dtype.h"
#include "base/ggml_quant.h"
#include "base/iq_grids.h"

#define QK_K 256

static const ggml_type_info k_types[GGML_TYPE_LIMIT] = {
    [GGML_F32] = {"F32", 1, 4, 1},          [GGML_F16] = {"F16", 1, 2, 1},
    [GGML_Q4_0] = {"Q4_0", 32, 18, 0},      [GGML_Q4_1] = {"Q4_1", 32, 20, 0},
    [GGML_Q5_0] = {"Q5_0", 32, 22, 0},      [GGML_Q5_1] = {"Q5_1", 32, 24, 0},
    [GGML_Q8_0] = {"Q8_0", 32, 34, 1},      [GGML_Q8_1] = {"Q8_1", 32, 40, 0},
    [GGML_Q2_K] = {"Q2_K", 256, 84, 1},     [GGML_Q3_K] = {"Q3_K", 256, 110, 1},
    [GGML_Q4_K] = {"Q4_K", 256, 144, 1},    [GGML_Q5_K] = {"Q5_K", 256, 176, 1},
    [GGML_Q6_K] = {"Q6_K", 256, 210, 1},    [GGML_Q8_K] = {"Q8_K", 256, 292, 0},
    [GGML_IQ2_XXS] = {"IQ2_XXS", 256, 66, 1}, [GGML_IQ2_XS] = {"IQ2_XS", 256, 74, 0},
    [GGML_IQ3_XXS] = {"IQ3_XXS", 256, 98, 1}, [GGML_IQ1_S] = {"IQ1_S", 256, 50, 0},
    [GGML_IQ4_NL] = {"IQ4_NL", 32, 18, 0},  [GGML_IQ3_S] = {"IQ3_S", 256, 110, 1},
    [GGML_IQ2_S] = {"IQ2_S", 256, 82, 1},   [GGML_IQ4_XS] = {"IQ4_XS", 256, 136, 1},
    [GGML_I8] = {"I8", 1, 1, 0},            [GGML_I16] = {"I16", 1, 2, 0},
    [GGML_I32] = {"I32", 1, 4, 0},          [GGML_I64] = {"I64", 1, 8, 0},
    [GGML_F64] = {"F64", 1, 8, 0},          [GGML_IQ1_M] = {"IQ1_M", 256, 56, 0},
    [GGML_BF16] = {"BF16", 1, 2, 1},        [GGML_TQ1_0] = {"TQ1_0", 256, 54, 0},
    [GGML_TQ2_0] = {"TQ2_0", 256, 66, 0},   [GGML_MXFP4] = {"MXFP4", 32, 17, 1},
};

static const ggml_type_info k_unknown = {NULL, 0, 0, 0};

const ggml_type_info *ggml_type_get(uint32_t t)
{
    return t < GGML_TYPE_LIMIT && k_types[t].name ? &k_types[t] : &k_unknown;
}

const char *ggml_type_name(uint32_t t, char buf[24])
{
    const ggml_type_info *i = ggml_type_get(t);
    if (i->name) return i->name;
    snprintf(buf, 24, "type %u", (unsigned)t);
    return buf;
}

static float rd_f16(const uint8_t *p) { return f16_to_f32((uint16_t)(p[0] | p[1] << 8)); }
static uint32_t rd_u32(const uint8_t *p)
{
    return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/* Q8_0: f16 d, int8 q[32]; y = q·d. */
static void dq_q8_0(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    for (int j = 0; j < 32; j++) y[j] = (float)(int8_t)b[2 + j] * d;
}

/* Q2_K: scales[16] (low nibble scale, high nibble min), qs[64] (2-bit values,
 * four planes per 32 bytes), f16 d, f16 dmin. Elements of 128-halves h, plane
 * j, lane l: q = (qs[32h + l] >> 2j) & 3, scale index 8h + 2j + (l >= 16). */
static void dq_q2_k(const uint8_t *b, float *y)
{
    const uint8_t *sc = b, *qs = b + 16;
    float d = rd_f16(b + 80), dmin = rd_f16(b + 82);
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                uint8_t s = sc[8 * h + 2 * j + (l >= 16)];
                float dl = d * (float)(s & 0xF), ml = dmin * (float)(s >> 4);
                *y++ = dl * (float)((qs[32 * h + l] >> (2 * j)) & 3) - ml;
            }
}

/* Q3_K: hmask[32], qs[64], scales[12] (16 six-bit scales, offset 32), f16 d.
 * q = low 2 bits − (high bit clear ? 4 : 0); high bit of element (h, j, l) is
 * bit 4h + j of hmask[l]. */
static void dq_q3_k(const uint8_t *b, float *y)
{
    const uint8_t *hm = b, *qs = b + 32, *s = b + 96;
    float d = rd_f16(b + 108);
    int sc[16];
    for (int i = 0; i < 16; i++) {
        int lo = i < 8 ? s[i] & 0xF : s[i - 8] >> 4;
        int hi = (s[8 + i % 4] >> (2 * (i / 4))) & 3;
        sc[i] = (int8_t)(uint8_t)(lo | hi << 4) - 32;
    }
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int e = 128 * h + 32 * j + l;
                int q = ((qs[32 * h + l] >> (2 * j)) & 3) - (((hm[l] >> (4 * h + j)) & 1) ? 0 : 4);
                float dl = d * (float)sc[e / 16];
                *y++ = dl * (float)q;
            }
}

/* The 6-bit scale and min of sub-block j of Q4_K/Q5_K (12 packed bytes). */
static void scale_min_k4(int j, const uint8_t *s, int *sc, int *m)
{
    if (j < 4) {
        *sc = s[j] & 63;
        *m = s[j + 4] & 63;
    } else {
        *sc = (s[j + 4] & 0xF) | ((s[j - 4] >> 6) << 4);
        *m = (s[j + 4] >> 4) | ((s[j] >> 6) << 4);
    }
}

/* Q4_K: f16 d, f16 dmin, scales[12], qs[128]; sub-block sb of 32: bytes
 * 32·(sb/2).., low nibble for even sb, high for odd; y = (d·sc)·q − dmin·m. */
static void dq_q4_k(const uint8_t *b, float *y)
{
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *s = b + 4, *qs = b + 16;
    for (int sb = 0; sb < 8; sb++) {
        int sc, m;
        scale_min_k4(sb, s, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++) *y++ = d1 * (float)((qs[32 * (sb / 2) + l] >> (4 * (sb & 1))) & 0xF) - m1;
    }
}

/* Q5_K: Q4_K plus qh[32]: bit sb of qh[l] is the fifth bit. */
static void dq_q5_k(const uint8_t *b, float *y)
{
    float d = rd_f16(b), dmin = rd_f16(b + 2);
    const uint8_t *s = b + 4, *qh = b + 16, *qs = b + 48;
    for (int sb = 0; sb < 8; sb++) {
        int sc, m;
        scale_min_k4(sb, s, &sc, &m);
        float d1 = d * (float)sc, m1 = dmin * (float)m;
        for (int l = 0; l < 32; l++) {
            int q = ((qs[32 * (sb / 2) + l] >> (4 * (sb & 1))) & 0xF) | (((qh[l] >> sb) & 1) << 4);
            *y++ = d1 * (float)q - m1;
        }
    }
}

/* Q6_K: ql[128], qh[64], int8 scales[16], f16 d. Element (h, j, l), h <
 * 2 halves, j < 4 planes, l < 32: low nibble from ql[64h + 32(j&1) + l]
 * (high nibble for j >= 2), two high bits (qh[32h + l] >> 2j) & 3; q − 32. */
static void dq_q6_k(const uint8_t *b, float *y)
{
    const uint8_t *ql = b, *qh = b + 128;
    const int8_t *sc = (const int8_t *)(b + 192);
    float d = rd_f16(b + 208);
    for (int h = 0; h < 2; h++)
        for (int j = 0; j < 4; j++)
            for (int l = 0; l < 32; l++) {
                int lo = (ql[64 * h + 32 * (j & 1) + l] >> (4 * (j >> 1))) & 0xF;
                int hi = (qh[32 * h + l] >> (2 * j)) & 3;
                int e = 128 * h + 32 * j + l;
                float dl = d * (float)sc[e / 16];
                *y++ = dl * (float)((lo | hi << 4) - 32);
            }
}

/* IQ4_XS: f16 d, u16 scales_h, scales_l[4], qs[128]; sub-block ib of 32 has a
 * 6-bit scale (offset 32) and 4-bit indices into the IQ4_NL table: element
 * j < 16 low nibble of qs[16ib + j], j >= 16 high nibble of qs[16ib + j−16]. */
static void dq_iq4_xs(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    unsigned sh = (unsigned)(b[2] | b[3] << 8);
    const uint8_t *sl = b + 4, *qs = b + 8;
    for (int ib = 0; ib < 8; ib++) {
        int ls = ((sl[ib / 2] >> (4 * (ib & 1))) & 0xF) | (((sh >> (2 * ib)) & 3) << 4);
        float dl = d * (float)(ls - 32);
        for (int j = 0; j < 32; j++) {
            int q = j < 16 ? qs[16 * ib + j] & 0xF : qs[16 * ib + j - 16] >> 4;
            *y++ = dl * (float)kvalues_iq4nl[q];
        }
    }
}

/* IQ2_XXS: f16 d, 8 × (u32 grid indices (4 bytes), u32 signs/scale): each
 * index picks 8 magnitudes; 7-bit sign groups expand through ksigns_iq2xs;
 * the top 4 bits scale: db = d·(0.5 + s)·0.25. */
static void dq_iq2_xxs(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    for (int ib = 0; ib < 8; ib++) {
        const uint8_t *g = b + 2 + 8 * ib;
        uint32_t aux = rd_u32(g + 4);
        float db = d * (0.5f + (float)(aux >> 28)) * 0.25f;
        for (int l = 0; l < 4; l++) {
            const uint8_t *grid = iq2xxs_grid[g[l]];
            uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
            for (int j = 0; j < 8; j++) *y++ = db * (float)grid[j] * ((signs >> j) & 1 ? -1.f : 1.f);
        }
    }
}

/* IQ2_S: f16 d, qs[32] (low 8 bits of 10-bit grid indices), signs[32] (one
 * bit per element), qh[8] (2 high index bits each), scales[8] (4 bits per 16
 * elements: db = d·(0.5 + s)·0.25). */
static void dq_iq2_s(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    const uint8_t *qs = b + 2, *sg = b + 34, *qh = b + 66, *sc = b + 74;
    for (int g = 0; g < 32; g++) {
        int idx = qs[g] | (((qh[g / 4] >> (2 * (g % 4))) & 3) << 8);
        float db = d * (0.5f + (float)((sc[g / 4] >> (4 * ((g / 2) & 1))) & 0xF)) * 0.25f;
        const uint8_t *grid = iq2s_grid[idx];
        for (int j = 0; j < 8; j++) *y++ = db * (float)grid[j] * ((sg[g] >> j) & 1 ? -1.f : 1.f);
    }
}

/* IQ3_XXS: f16 d, qs[64] (grid indices, 4 magnitudes each), 8 × u32
 * (4 × 7-bit sign groups, top 4 bits scale: db = d·(0.5 + s)·0.5). */
static void dq_iq3_xxs(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    const uint8_t *qs = b + 2;
    for (int ib = 0; ib < 8; ib++) {
        uint32_t aux = rd_u32(b + 66 + 4 * ib);
        float db = d * (0.5f + (float)(aux >> 28)) * 0.5f;
        for (int l = 0; l < 4; l++) {
            uint8_t signs = ksigns_iq2xs[(aux >> (7 * l)) & 127];
            const uint8_t *g1 = iq3xxs_grid[qs[8 * ib + 2 * l]], *g2 = iq3xxs_grid[qs[8 * ib + 2 * l + 1]];
            for (int j = 0; j < 4; j++) *y++ = db * (float)g1[j] * ((signs >> j) & 1 ? -1.f : 1.f);
            for (int j = 0; j < 4; j++) *y++ = db * (float)g2[j] * ((signs >> (j + 4)) & 1 ? -1.f : 1.f);
        }
    }
}

/* IQ3_S: f16 d, qs[64] (low 8 bits of 9-bit indices), qh[8] (the ninth
 * bits), signs[32] (one bit per element), scales[4] (4 bits per 32
 * elements: db = d·(1 + 2s)). */
static void dq_iq3_s(const uint8_t *b, float *y)
{
    float d = rd_f16(b);
    const uint8_t *qs = b + 2, *qh = b + 66, *sg = b + 74, *sc = b + 106;
    for (int g = 0; g < 64; g++) {
        int idx = qs[g] | (((qh[g / 8] >> (g % 8)) & 1) << 8);
        float db = d * (float)(1 + 2 * ((sc[g / 16] >> (4 * ((g / 8) & 1))) & 0xF));
        const uint8_t *grid = iq3s_grid[idx];
        for (int j = 0; j < 4; j++) {
            int e = 4 * g + j;
            *y++ = db * (float)grid[j] * ((sg[e / 8] >> (e % 8)) & 1 ? -1.f : 1.f);
        }
    }
}

/* Half of the E8M0 scale 2^(e−127), as ggml's ggml_e8m0_to_fp32_half (the
 * E2M1 table below is doubled to stay integral). */
static float e8m0_half(uint8_t e)
{
    uint32_t bits = e < 2 ? 0x00200000u << e : (uint32_t)(e - 1) << 23;
    float f;
    memcpy(&f, &bits, 4);
    return f;
}

/* MXFP4 (ggml): e8m0 e, qs[16]: element j < 16 low nibble of qs[j], j >= 16
 * high nibble of qs[j−16]; y = E2M1·2 · half-scale. */
static void dq_mxfp4(const uint8_t *b, float *y)
{
    float d = e8m0_half(b[0]);
    for (int j = 0; j < 32; j++) {
        int q = j < 16 ? b[1 + j] & 0xF : b[1 + j - 16] >> 4;
        y[j] = (float)kvalues_mxfp4[q] * d;
    }
}

void ggml_dequant_blocks(uint32_t t, const void *src, int64_t n_blocks, float *out)
{
    const uint8_t *b = src;
    const ggml_type_info *ti = ggml_type_get(t);
    void (*fn)(const uint8_t *, float *) = NULL;
    switch (t) {
    case GGML_F32: memcpy(out, src, (size_t)n_blocks * 4); return;
    case GGML_F16:
        for (int64_t i = 0; i < n_blocks; i++) out[i] = rd_f16(b + 2 * i);
        return;
    case GGML_BF16:
        for (int64_t i = 0; i < n_blocks; i++) out[i] = bf16_to_f32((uint16_t)(b[2 * i] | b[2 * i + 1] << 8));
        return;
    case GGML_Q8_0: fn = dq_q8_0; break;
    case GGML_Q2_K: fn = dq_q2_k; break;
    case GGML_Q3_K: fn = dq_q3_k; break;
    case GGML_Q4_K: fn = dq_q4_k; break;
    case GGML_Q5_K: fn = dq_q5_k; break;
    case GGML_Q6_K: fn = dq_q6_k; break;
    case GGML_IQ4_XS: fn = dq_iq4_xs; break;
    case GGML_IQ2_XXS: fn = dq_iq2_xxs; break;
    case GGML_IQ2_S: fn = dq_iq2_s; break;
    case GGML_IQ3_XXS: fn = dq_iq3_xxs; break;
    case GGML_IQ3_S: fn = dq_iq3_s; break;
    case GGML_MXFP4: fn = dq_mxfp4; break;
    default: /* callers admit only decodable types */
        memset(out, 0, (size_t)n_blocks * (size_t)(ti->block_elems > 0 ? ti->block_elems : 1) * sizeof *out);
        return;
    }
    for (int64_t i = 0; i < n_blocks; i++) fn(b + i * ti->block_bytes, out + i * ti->block_elems);
}

/* Byte offsets of the f16 scale fields of a block type (MXFP4: none, its
 * scale is the E8M0 byte 0); the count. */
static int f16_fields(uint32_t t, int off[2])
{
    switch (t) {
    case GGML_Q2_K: off[0] = 80; off[1] = 82; return 2;   /* d, dmin */
    case GGML_Q4_K: case GGML_Q5_K: off[0] = 0; off[1] = 2; return 2;
    case GGML_Q3_K: off[0] = 108; return 1;
    case GGML_Q6_K: off[0] = 208; return 1;
    case GGML_MXFP4: return 0;
    default: off[0] = 0; return 1;                        /* Q8_0 and the i-quants: d first */
    }
}

int64_t ggml_check_blocks(uint32_t t, const void *src, int64_t n_blocks, char *why, int why_len)
{
    const ggml_type_info *ti = ggml_type_get(t);
    int off[2], nf = f16_fields(t, off);
    const uint8_t *b = src;
    for (int64_t i = 0; i < n_blocks; i++, b += ti->block_bytes) {
        if (!nf && b[0] > GGML_MXFP4_MAX_E) {
            if (b[0] == 255) snprintf(why, (size_t)why_len, "E8M0 scale byte 255 is NaN");
            else snprintf(why, (size_t)why_len, "E8M0 scale byte %d is above %d (values up to 2^%d and beyond)",
                          b[0], GGML_MXFP4_MAX_E, b[0] - 128 + 4);
            return i;
        }
        for (int f = 0; f < nf; f++)
            if ((b[off[f] + 1] & 0x7C) == 0x7C) {
                snprintf(why, (size_t)why_len, "f16 scale 0x%04x is %s", b[off[f]] | b[off[f] + 1] << 8,
                         b[off[f]] | (b[off[f] + 1] & 3) ? "NaN" : "infinite");
                return i;
            }
    }
    return -1;
}

static uint64_t splitmix(uint64_t x)
{
    x += 0x9e3779b97f4a7c15ull;
    x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
    x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
    return x ^ (x >> 31);
}

/* The f16 bits of ±2^k, k in [-24, 15] (exact: normal or subnormal). */
static void put_f16_pow2(uint8_t *p, int k, int neg)
{
    uint16_t bits = (uint16_t)(neg ? 0x8000 : 0) | (uint16_t)(k >= -14 ? (k + 15) << 10 : 1 << (k + 24));
    p[0] = (uint8_t)bits;
    p[1] = (uint8_t)(bits >> 8);
}

void ggml_random_blocks(uint32_t t, uint64_t seed, float rms, int64_t n_blocks, void *out)
{
    const ggml_type_info *ti = ggml_type_get(t);
    int bb = ti->block_bytes, be = ti->block_elems, off[2], nf = f16_fields(t, off);
    uint8_t *b = out;
    float vals[256];
    for (int64_t i = 0; i < n_blocks; i++, b += bb) {
        uint64_t s = splitmix(seed ^ splitmix((uint64_t)i)), r = 0;
        for (int k = 0; k < bb; k++) {
            if (k % 8 == 0) r = splitmix(s + (uint64_t)k);
            b[k] = (uint8_t)(r >> (8 * (k % 8)));
        }
        r = splitmix(s ^ 0x5ca1e5ull); /* the scales' own draws */
        if (rms <= 0) { /* full finite range */
            if (!nf) b[0] = (uint8_t)(r % (GGML_MXFP4_MAX_E + 1));
            for (int f = 0; f < nf; f++) {
                uint16_t bits = (uint16_t)(r >> (16 * f));
                if ((bits & 0x7C00) == 0x7C00) bits &= 0x83FF; /* no inf/NaN */
                b[off[f]] = (uint8_t)bits;
                b[off[f] + 1] = (uint8_t)(bits >> 8);
            }
            continue;
        }
        /* unit scales, then the power of two that brings the rms near the target */
        if (!nf) b[0] = 128; /* MXFP4 half-scale 2^0 */
        for (int f = 0; f < nf; f++) put_f16_pow2(b + off[f], 0, (int)(r >> f) & 1);
        ggml_dequant_blocks(t, b, 1, vals);
        double ss = 0;
        for (int k = 0; k < be; k++) ss += (double)vals[k] * vals[k];
        if (!(ss > 0)) continue;
        int k2 = (int)lrint(log2((double)rms / sqrt(ss / be)));
        if (!nf) {
            int e = 128 + k2;
            b[0] = (uint8_t)(e < 1 ? 1 : e > GGML_MXFP4_MAX_E ? GGML_MXFP4_MAX_E : e);
        }
        for (int f = 0; f < nf; f++) put_f16_pow2(b + off[f], k2 < -24 ? -24 : k2 > 15 ? 15 : k2, (int)(r >> f) & 1);
    }
}

/* Weight formats: the table of facts and the CPU row decoder. */
#include "base/wformat.h"

#include <math.h>

#include "base/ggml_quant.h"
#include <string.h>

#define WF_GGUF_FACT(f, name, ggml, elems, bytes) [f] = {name, elems, bytes, 0, 1},
static const wformat_facts k_facts[WF_COUNT] = {
    [WF_F32] = {"F32", 1, 4, 0, 1},
    [WF_BF16] = {"BF16", 1, 2, 0, 1},
    [WF_F16] = {"F16", 1, 2, 0, 1},
    [WF_FP8_E4M3] = {"FP8-E4M3", 1, 1, 1, 1},
    [WF_MXFP4] = {"MXFP4", 2, 1, 1, 1},
    WF_GGUF_BLOCKS(WF_GGUF_FACT) /* decoded through base/ggml_quant.c */
};
static const wformat_facts k_invalid = {"?", 0, 0, 0, 0};

const wformat_facts *wformat_info(dsv4_wformat fmt)
{
    return (unsigned)fmt < WF_COUNT ? &k_facts[fmt] : &k_invalid;
}

int64_t wformat_row_bytes(dsv4_wformat fmt, int64_t cols)
{
    const wformat_facts *f = wformat_info(fmt);
    return f->block_elems ? cols / f->block_elems * f->block_bytes : 0;
}

/* The ggml type id of each GGUF block format (and of the plain ones). */
#define WF_GGUF_TYPE(f, name, ggml, elems, bytes) [f] = ggml,
static const uint32_t k_ggml_type[WF_COUNT] = {
    [WF_F32] = GGML_F32, [WF_BF16] = GGML_BF16, [WF_F16] = GGML_F16,
    [WF_FP8_E4M3] = UINT32_MAX, [WF_MXFP4] = UINT32_MAX,
    WF_GGUF_BLOCKS(WF_GGUF_TYPE)
};

uint32_t wformat_ggml_type(dsv4_wformat fmt)
{
    return (unsigned)fmt < WF_COUNT ? k_ggml_type[fmt] : UINT32_MAX;
}

int wformat_of_ggml(uint32_t ggml_type)
{
    for (int f = 0; f < WF_COUNT; f++)
        if (k_ggml_type[f] == ggml_type) return f;
    return -1;
}

/* GGUF blocks covering columns [c0, c0+n) of row `row`, decoded by ggml's
 * arithmetic; whole blocks go straight to out, edge blocks via a buffer. */
static void decode_ggml_blocks(dsv4_wformat fmt, const char *row, int64_t c0, int64_t n, float *out)
{
    const wformat_facts *f = wformat_info(fmt);
    int64_t be = f->block_elems, b = c0 / be, end = c0 + n;
    float tmp[256];
    for (int64_t c = c0; c < end; b++) {
        const char *blk = row + b * f->block_bytes;
        int64_t lo = c - b * be, take = be - lo < end - c ? be - lo : end - c;
        if (lo == 0 && take == be) {
            ggml_dequant_blocks(k_ggml_type[fmt], blk, 1, out + (c - c0));
        } else {
            ggml_dequant_blocks(k_ggml_type[fmt], blk, 1, tmp);
            memcpy(out + (c - c0), tmp + lo, (size_t)take * sizeof *out);
        }
        c += take;
    }
}

int wformat_of_dtype(dsv4_dtype dt)
{
    return dt == DT_F32 ? WF_F32 : dt == DT_BF16 ? WF_BF16 : dt == DT_F16 ? WF_F16 : -1;
}

dsv4_mat wmat_plain(dsv4_dtype dt, int64_t rows, int64_t cols, const void *data)
{
    dsv4_mat m = {0};
    m.dtype = dt;
    m.fmt = (dsv4_wformat)wformat_of_dtype(dt);
    m.rows = rows;
    m.cols = cols;
    m.data = data;
    return m;
}

uint64_t wmat_scale_bytes(const dsv4_mat *m)
{
    return m->scale ? (uint64_t)m->scale_rows * (uint64_t)m->scale_cols * (uint64_t)dtype_size(m->scale_dtype) : 0;
}

uint64_t wmat_bytes(const dsv4_mat *m)
{
    if (!m->data) return 0;
    return (uint64_t)m->rows * (uint64_t)wformat_row_bytes(m->fmt, m->cols) + wmat_scale_bytes(m);
}

dsv4_mat mat_rows(const dsv4_mat *m, int64_t r0, int64_t n)
{
    dsv4_mat v = *m;
    v.rows = n;
    v.data = (const char *)m->data + (size_t)r0 * (size_t)wformat_row_bytes(m->fmt, m->cols);
    if (m->scale) {
        int64_t sr0 = r0 / m->blk_r;
        v.scale = (const char *)m->scale + (size_t)(sr0 * m->scale_cols) * (size_t)dtype_size(m->scale_dtype);
        v.scale_rows = (n + m->blk_r - 1) / m->blk_r;
    }
    return v;
}

float e8m0_to_f32(uint8_t e)
{
    /* 2^(e−127): e >= 1 is a normal fp32 with that biased exponent; e = 0 is
     * the subnormal 2^−127 (mantissa bit 22). */
    uint32_t u = e ? (uint32_t)e << 23 : 0x00400000u;
    float f;
    memcpy(&f, &u, 4);
    return e == 255 ? NAN : f;
}

float e4m3_to_f32(uint8_t b)
{
    /* e4m3fn: bias 7, no infinities, S.1111.111 is NaN. Normal values map
     * to fp32 by rebiasing the exponent (+120) and shifting the 3 mantissa
     * bits; subnormals are m·2^−9. */
    uint32_t s = (uint32_t)(b & 0x80) << 24, e = (b >> 3) & 15, mant = b & 7;
    float f;
    if ((b & 0x7f) == 0x7f) return NAN;
    if (e) {
        uint32_t u = s | ((e + 120) << 23) | (mant << 20);
        memcpy(&f, &u, 4);
    } else {
        f = (float)mant * 0x1p-9f;
        if (s) f = -f;
    }
    return f;
}

/* e4m3fn by table for the decoder, built from constant expressions: normal
 * (8 + m)·2^(e−10), subnormal m·2^−9, NaN at S.1111.111 (test_wformat checks
 * it against e4m3_to_f32 for every byte). */
#define E4M3_MAG(b) ((((b) >> 3) & 15) ? (float)(8 + ((b) & 7)) * (float)(1u << (((b) >> 3) & 15)) / 1024.0f \
                                        : (float)((b) & 7) / 512.0f)
#define E4M3_VAL(b) (((b) & 0x7f) == 0x7f ? NAN : ((b) & 0x80) ? -E4M3_MAG(b) : E4M3_MAG(b))
#define E4M3_4(b) E4M3_VAL(b), E4M3_VAL((b) + 1), E4M3_VAL((b) + 2), E4M3_VAL((b) + 3)
#define E4M3_16(b) E4M3_4(b), E4M3_4((b) + 4), E4M3_4((b) + 8), E4M3_4((b) + 12)
#define E4M3_64(b) E4M3_16(b), E4M3_16((b) + 16), E4M3_16((b) + 32), E4M3_16((b) + 48)
const float k_e4m3_values[256] = {E4M3_64(0), E4M3_64(64), E4M3_64(128), E4M3_64(192)};

const float k_e2m1_values[16] = {0.0f,  0.5f,  1.0f,  1.5f,  2.0f,  3.0f,  4.0f,  6.0f,
                                 -0.0f, -0.5f, -1.0f, -1.5f, -2.0f, -3.0f, -4.0f, -6.0f};

uint8_t f32_to_e4m3(float f)
{
    uint8_t s = signbit(f) ? 0x80 : 0;
    float a = fabsf(f);
    if (!(a < 464.0f)) return s | 0x7e; /* 448 and beyond (464 would round up to 512) */
    if (a < 0x1p-6f) { /* subnormal grid m·2^-9: rint rounds half to even */
        int m = (int)rintf(a * 0x1p9f);
        return s | (uint8_t)m; /* m = 8 is the smallest normal, code 0x08 */
    }
    int e;
    float m = frexpf(a, &e);                /* a = m·2^e, m in [0.5, 1) */
    int q = (int)rintf(m * 16.0f);          /* 8..16: 1.mmm with 3 fraction bits */
    if (q == 16) { q = 8; e++; }
    return s | (uint8_t)(((e - 1 + 7) << 3) | (q - 8));
}

int f32_to_e2m1(float f)
{
    /* magnitudes 0, .5, 1, 1.5, 2, 3, 4, 6; ties go to the even code
     * (0.25→0, 0.75→1, 1.25→1, 1.75→2, 2.5→2, 3.5→4, 5→4) */
    static const float mid[7] = {0.25f, 0.75f, 1.25f, 1.75f, 2.5f, 3.5f, 5.0f};
    float a = fabsf(f);
    int c = 0;
    while (c < 7 && (a > mid[c] || (a == mid[c] && (c & 1)))) c++;
    return (signbit(f) ? 8 : 0) | c;
}

float pow2_ceil(float v)
{
    int e;
    float m = frexpf(v, &e); /* v = m·2^e */
    return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}

static float scale_at(const dsv4_mat *m, int64_t i)
{
    if (m->scale_dtype == DT_F32) {
        float f;
        memcpy(&f, (const char *)m->scale + 4 * i, 4);
        return f;
    }
    return e8m0_to_f32(((const uint8_t *)m->scale)[i]);
}

__attribute__((target_clones("avx2", "default")))
void wmat_decode_row(const dsv4_mat *m, int64_t r, int64_t c0, int64_t n, float *out)
{
    const char *row = (const char *)m->data + (size_t)r * (size_t)wformat_row_bytes(m->fmt, m->cols);
    switch (m->fmt) {
    case WF_F32:
        memcpy(out, (const float *)row + c0, (size_t)n * sizeof *out);
        break;
    case WF_BF16: {
        const uint16_t *s = (const uint16_t *)row + c0;
        for (int64_t i = 0; i < n; i++) out[i] = bf16_to_f32(s[i]);
        break;
    }
    case WF_F16: {
        const uint16_t *s = (const uint16_t *)row + c0;
        for (int64_t i = 0; i < n; i++) out[i] = f16_to_f32(s[i]);
        break;
    }
    case WF_FP8_E4M3: {
        const uint8_t *s = (const uint8_t *)row;
        int64_t srow = r / m->blk_r * m->scale_cols;
        for (int64_t i = 0; i < n;) { /* one scale per run of columns in the same block */
            int64_t c = c0 + i, jb = c / m->blk_c, end = (jb + 1) * m->blk_c - c0;
            float sc = scale_at(m, srow + jb);
            if (end > n) end = n;
            for (; i < end; i++) out[i] = k_e4m3_values[s[c0 + i]] * sc;
        }
        break;
    }
    case WF_MXFP4: {
        const uint8_t *s = (const uint8_t *)row;
        int64_t srow = r / m->blk_r * m->scale_cols;
        for (int64_t i = 0; i < n;) {
            int64_t c = c0 + i, jb = c / m->blk_c, end = (jb + 1) * m->blk_c - c0;
            float sc = scale_at(m, srow + jb);
            if (end > n) end = n;
            for (; i < end; i++) {
                int64_t j = c0 + i;
                out[i] = k_e2m1_values[(s[j >> 1] >> ((j & 1) * 4)) & 15] * sc;
            }
        }
        break;
    }
    case WF_Q8_0: case WF_Q4_K: case WF_Q5_K: case WF_Q6_K: case WF_Q3_K: case WF_Q2_K: case WF_IQ4_XS:
    case WF_IQ3_XXS: case WF_IQ3_S: case WF_IQ2_XXS: case WF_IQ2_S: case WF_MXFP4_GGUF:
        decode_ggml_blocks(m->fmt, row, c0, n, out);
        break;
    default: /* no binder hands the CPU a format without cpu_decode */
        memset(out, 0, (size_t)n * sizeof *out);
        break;
    }
}

/* Below the decoder: clang refuses to make a function multiversioned
 * (target_clones) after a first use. */
float mat_get(const dsv4_mat *m, int64_t i)
{
    float f;
    wmat_decode_row(m, i / m->cols, i % m->cols, 1, &f);
    return f;
}

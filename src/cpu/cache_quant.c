/* The official numerics on the CPU (spec §8.3): the quantize -> dequantize
 * steps DeepSeek's reference applies to the window KV, the main
 * compressor's entries, the indexer's queries and keys, and the activations
 * entering its FP8/FP4 matmuls; and the packed session rows (ROW_FP8,
 * ROW_FP4) that store the first three, built from the same block encoders,
 * so a stored row reads back as exactly the rounded values. Each row is
 * processed on its own with a fixed order, so results do not depend on the
 * number of rows or threads. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"

/* The UE8M0 byte of a power-of-two scale. The scales below are normal
 * floats (2^-22 .. 2^120 for FP8, 2^-126 .. 2^126 for FP4), so the byte is
 * the biased exponent and e8m0_to_f32 gives the scale back exactly. */
static uint8_t e8m0_of(float s)
{
    uint32_t u;
    memcpy(&u, &s, sizeof u);
    return (uint8_t)(u >> 23);
}

/* One block of n <= 128 values as FP8 e4m3 codes q with a UE8M0 scale (the
 * returned byte): s = 2^ceil(log2(max(amax, 1e-4) / 448)), q = e4m3(x / s).
 * (The reference computes amax · fp32(1/448); for every fp32 amax >= 1e-4
 * that has the same power-of-two ceiling as amax / 448: checked
 * exhaustively.) */
static uint8_t fp8_encode(const float *x, int n, uint8_t *q)
{
    float amax = 1e-4f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = pow2_ceil(amax / 448.0f), inv = 1.0f / s; /* powers of two: exact */
    for (int i = 0; i < n; i++) q[i] = f32_to_e4m3(x[i] * inv);
    return e8m0_of(s);
}

/* The same block through FP8 and back: x = e4m3(x / s) · s. */
static void fp8_block(float *x, int n)
{
    uint8_t q[128];
    float s = e8m0_to_f32(fp8_encode(x, n, q));
    for (int i = 0; i < n; i++) x[i] = k_e4m3_values[q[i]] * s;
}

static void bf16_round(float *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

/* FP4 E2M1 codes (0..15) of n <= 32 values with
 * s = 2^ceil(log2(max(amax, 6·2^-126) / 6)); returns the scale's byte. */
static uint8_t fp4_encode(const float *x, int n, uint8_t *q)
{
    float amax = 6.0f * 0x1p-126f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = pow2_ceil(amax / 6.0f), inv = 1.0f / s;
    for (int i = 0; i < n; i++) q[i] = (uint8_t)f32_to_e2m1(x[i] * inv);
    return e8m0_of(s);
}

static void fp4_block(float *x, int n)
{
    uint8_t q[32];
    float s = e8m0_to_f32(fp4_encode(x, n, q));
    for (int i = 0; i < n; i++) x[i] = k_e2m1_values[q[i]] * s;
}

/* In-place fast Walsh-Hadamard transform in Sylvester order, scaled by
 * n^-1/2 (n a power of two): butterflies of growing span, the scale last. */
static void hadamard(float *x, int n)
{
    for (int h = 1; h < n; h *= 2)
        for (int i = 0; i < n; i += 2 * h)
            for (int j = i; j < i + h; j++) {
                float a = x[j], b = x[j + h];
                x[j] = a + b;
                x[j + h] = a - b;
            }
    float sc = 1.0f / sqrtf((float)n);
    for (int i = 0; i < n; i++) x[i] *= sc;
}

typedef struct {
    float *x;
    int width, n_fp8;
} kv_job;

static void kv_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    kv_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *row = j->x + r * j->width;
        for (int c = 0; c < j->n_fp8; c += 64) fp8_block(row + c, j->n_fp8 - c < 64 ? j->n_fp8 - c : 64);
        bf16_round(row + j->n_fp8, j->width - j->n_fp8);
    }
}

void cpu_kv_fp8_round(dsv4_backend *b, float *x, int T, int width, int n_fp8)
{
    kv_job j = {x, width, n_fp8};
    pool_for(cpu_pool(b), T, 16, kv_rows, &j);
}

static void idx_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    kv_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *row = j->x + r * j->width;
        hadamard(row, j->width);
        for (int c = 0; c < j->width; c += 32) fp4_block(row + c, j->width - c < 32 ? j->width - c : 32);
    }
}

void cpu_idx_fp4_round(dsv4_backend *b, float *x, int rows, int width)
{
    kv_job j = {x, width, 0};
    pool_for(cpu_pool(b), rows, 16, idx_rows, &j);
}

typedef struct {
    const float *x;
    float *y;
    int n;
} act_job;

static void act_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    (void)tid;
    act_job *j = ctx;
    for (int64_t r = r0; r < r1; r++) {
        float *row = j->y + r * j->n;
        if (j->x != j->y) memcpy(row, j->x + r * j->n, (size_t)j->n * sizeof *row);
        for (int c = 0; c < j->n; c += 128) fp8_block(row + c, j->n - c < 128 ? j->n - c : 128);
    }
}

void cpu_act_fp8_round(dsv4_backend *b, const float *x, int T, int n, float *y)
{
    act_job j = {x, y, n};
    pool_for(cpu_pool(b), T, 16, act_rows, &j);
}

/* ---- packed session rows (dsv4_row_fmt, ops.h) ---- */

void cpu_row_store(const dsv4_row_fmt *f, const float *x, uint8_t *dst, float *tmp)
{
    int w = f->width;
    if (f->kind == ROW_F32) {
        memcpy(dst, x, (size_t)w * sizeof *x);
        return;
    }
    memset(dst, 0, (size_t)f->bytes); /* padding, and the nibbles are or-ed in */
    if (f->kind == ROW_FP8) {
        for (int c = 0; c < f->n_fp8; c += 64)
            dst[f->scale_off + c / 64] = fp8_encode(x + c, f->n_fp8 - c < 64 ? f->n_fp8 - c : 64, dst + c);
        for (int c = f->n_fp8; c < w; c++) {
            uint16_t h = f32_to_bf16(x[c]);
            dst[f->rope_off + 2 * (c - f->n_fp8)] = (uint8_t)(h & 0xff);
            dst[f->rope_off + 2 * (c - f->n_fp8) + 1] = (uint8_t)(h >> 8);
        }
        return;
    }
    memcpy(tmp, x, (size_t)w * sizeof *x);
    hadamard(tmp, w);
    for (int c = 0; c < w; c += 32) {
        uint8_t q[32];
        int n = w - c < 32 ? w - c : 32;
        dst[f->scale_off + c / 32] = fp4_encode(tmp + c, n, q);
        for (int i = 0; i < n; i++) dst[(c + i) / 2] |= (uint8_t)(q[i] << (4 * ((c + i) & 1)));
    }
}

void cpu_row_load(const dsv4_row_fmt *f, const uint8_t *src, float *x)
{
    int w = f->width;
    if (f->kind == ROW_F32) {
        memcpy(x, src, (size_t)w * sizeof *x);
    } else if (f->kind == ROW_FP8) {
        for (int c = 0; c < f->n_fp8; c++) x[c] = k_e4m3_values[src[c]] * e8m0_to_f32(src[f->scale_off + c / 64]);
        for (int c = f->n_fp8; c < w; c++) {
            const uint8_t *h = src + f->rope_off + 2 * (c - f->n_fp8);
            x[c] = bf16_to_f32((uint16_t)(h[0] | h[1] << 8));
        }
    } else {
        for (int c = 0; c < w; c++)
            x[c] = k_e2m1_values[(src[c / 2] >> (4 * (c & 1))) & 15] * e8m0_to_f32(src[f->scale_off + c / 32]);
    }
}

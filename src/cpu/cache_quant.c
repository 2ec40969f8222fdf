/* The official numerics on the CPU (spec §8.3): the quantize -> dequantize
 * steps DeepSeek's reference applies to the window KV, the main
 * compressor's entries, the indexer's queries and keys, and the activations
 * entering its FP8/FP4 matmuls. Each row is processed on its own with a
 * fixed order, so results do not depend on the number of rows or threads. */
#include <math.h>
#include <string.h>

#include "cpu/cpu.h"

/* One block of n values through FP8 e4m3 with a UE8M0 scale:
 * s = 2^ceil(log2(max(amax, 1e-4) / 448)); x = e4m3(x / s) · s. (The
 * reference computes amax · fp32(1/448); for every fp32 amax >= 1e-4 that
 * has the same power-of-two ceiling as amax / 448: checked exhaustively.) */
static void fp8_block(float *x, int n)
{
    float amax = 1e-4f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = pow2_ceil(amax / 448.0f), inv = 1.0f / s; /* powers of two: exact */
    for (int i = 0; i < n; i++) x[i] = e4m3_to_f32(f32_to_e4m3(x[i] * inv)) * s;
}

static void bf16_round(float *x, int n)
{
    for (int i = 0; i < n; i++) x[i] = bf16_to_f32(f32_to_bf16(x[i]));
}

/* FP4 E2M1 with s = 2^ceil(log2(max(amax, 6·2^-126) / 6)), blocks of 32. */
static void fp4_block(float *x, int n)
{
    float amax = 6.0f * 0x1p-126f;
    for (int i = 0; i < n; i++) amax = fmaxf(amax, fabsf(x[i]));
    float s = pow2_ceil(amax / 6.0f), inv = 1.0f / s;
    for (int i = 0; i < n; i++) x[i] = k_e2m1_values[f32_to_e2m1(x[i] * inv)] * s;
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

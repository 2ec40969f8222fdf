/* Matrix-vector products for the CPU backend.
 *
 * Work is split over output rows; each thread decodes one weight row to fp32
 * once (wmat_decode_row: any format) and reuses it for every token of the
 * chunk (prefill reads the weights once per chunk, not once per token),
 * four tokens at a time (dot4: four independent accumulator sets where one
 * would wait on its own additions). */
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

/* AVX2 and baseline clones compute the same lanes in the same order (no FMA
 * contraction in ISO C mode), so results do not depend on the CPU. */
__attribute__((target_clones("avx2", "default")))
float cpu_dot(const float *a, const float *b, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) acc[j] += a[i + j] * b[i + j];
    for (; i < n; i++) acc[i & 7] += a[i] * b[i];
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* 8 floats as one value (GCC vector extension): lane j of c += x · w is
 * c[j] + x[j]·w[j], a multiply then an add, as cpu_dot's loop. */
typedef float v8f __attribute__((vector_size(32)));

/* cpu_dot of four vectors a + k·lda (k < 4) with the same b into s[k]:
 * each vector's lanes, order and final sum as cpu_dot's, hence its bits;
 * b's values are loaded once for the four. */
__attribute__((target_clones("avx2", "default")))
static void dot4(const float *a, int64_t lda, const float *b, int64_t n, float *s)
{
    const float *ak[4] = {a, a + lda, a + 2 * lda, a + 3 * lda};
    v8f c[4] = {{0}};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8) {
        v8f w, x;
        memcpy(&w, b + i, sizeof w);
        for (int k = 0; k < 4; k++) {
            memcpy(&x, ak[k] + i, sizeof x);
            c[k] += x * w;
        }
    }
    for (int k = 0; k < 4; k++) {
        float acc[8];
        memcpy(acc, &c[k], sizeof acc);
        for (int64_t r = i; r < n; r++) acc[r & 7] += ak[k][r] * b[r];
        s[k] = ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
    }
}

/* x · bf16 row without a conversion pass: the same lanes and order as
 * cpu_dot over the converted row, hence the same bits. */
__attribute__((target_clones("avx2", "default")))
static float dot_bf16(const float *a, const uint16_t *w, int64_t n)
{
    float acc[8] = {0};
    int64_t i = 0;
    for (; i + 8 <= n; i += 8)
        for (int j = 0; j < 8; j++) {
            uint32_t u = (uint32_t)w[i + j] << 16;
            float f;
            memcpy(&f, &u, 4);
            acc[j] += a[i + j] * f;
        }
    for (; i < n; i++) acc[i & 7] += a[i] * bf16_to_f32(w[i]);
    return ((acc[0] + acc[4]) + (acc[1] + acc[5])) + ((acc[2] + acc[6]) + (acc[3] + acc[7]));
}

/* Up to this many tokens the bf16 row is streamed straight into the dots
 * (decode); beyond, converting it once per row is cheaper. */
#define BF16_DIRECT_MAX_T 4

typedef struct {
    dsv4_backend *b;
    const float *x;
    int64_t ldx, ldy;
    int T;
    const dsv4_mat *W;
    float *y;
    int64_t grp_rows; /* matmul_grouped: rows per block of W (0: plain matmul) */
} matmul_job;

static void matmul_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    matmul_job *j = ctx;
    int64_t n = j->W->cols;
    float *row = cpu_scratch_row(j->b, tid);
    if (j->W->fmt == WF_BF16 && j->T <= BF16_DIRECT_MAX_T) {
        for (int64_t r = r0; r < r1; r++) {
            const uint16_t *w = (const uint16_t *)j->W->data + r * n;
            const float *x = j->x + (j->grp_rows ? r / j->grp_rows * n : 0);
            for (int t = 0; t < j->T; t++) j->y[t * j->ldy + r] = dot_bf16(x + t * j->ldx, w, n);
        }
        return;
    }
    for (int64_t r = r0; r < r1; r++) {
        const float *x = j->x + (j->grp_rows ? r / j->grp_rows * n : 0);
        wmat_decode_row(j->W, r, 0, n, row);
        int t = 0;
        for (; t + 4 <= j->T; t += 4) {
            float s[4];
            dot4(x + t * j->ldx, j->ldx, row, n, s);
            for (int k = 0; k < 4; k++) j->y[(t + k) * j->ldy + r] = s[k];
        }
        for (; t < j->T; t++) j->y[t * j->ldy + r] = cpu_dot(x + t * j->ldx, row, n);
    }
}

void cpu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    matmul_job j = {b, x, ldx, ldy, T, W, y, 0};
    /* ~64K multiply-adds per task keeps threads busy without overhead. */
    int64_t grain = 1 + (1 << 16) / (W->cols * (T > 0 ? T : 1) + 1);
    pool_for(cpu_pool(b), W->rows, grain, matmul_rows, &j);
}

/* Two products in turn: each output is matmul's by construction. */
void cpu_matmul_pair(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1, int64_t ldy1,
                     const dsv4_mat *W2, float *y2, int64_t ldy2)
{
    cpu_matmul(b, x, ldx, T, W1, y1, ldy1);
    cpu_matmul(b, x, ldx, T, W2, y2, ldy2);
}

/* The rows rounded into a buffer of their own (act_fp8_round), then the
 * product: the same values as rounding in place and multiplying. */
void cpu_matmul_fp8in(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    int64_t n = W->cols;
    if (T <= 0) return;
    float *xr = malloc((size_t)T * (size_t)n * sizeof *xr);
    if (!xr) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory for the FP8-rounded rows of a matmul");
        return;
    }
    for (int t = 0; t < T; t++) memcpy(xr + t * n, x + t * ldx, (size_t)n * sizeof *xr);
    cpu_act_fp8_round(b, xr, T, (int)n, xr);
    cpu_matmul(b, xr, n, T, W, y, ldy);
    free(xr);
}

/* The groups in one parallel loop over all rows of W (one dispatch). */
void cpu_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups, float *y,
                        int64_t ldy)
{
    matmul_job j = {b, x, ldx, ldy, T, W, y, W->rows / groups};
    int64_t grain = 1 + (1 << 16) / (W->cols * (T > 0 ? T : 1) + 1);
    pool_for(cpu_pool(b), W->rows, grain, matmul_rows, &j);
}

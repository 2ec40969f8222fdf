/* The official numerics' FP8 roundings on the CPU against an independent
 * reference: tests/data/official_round_vectors.bin holds rows and what
 * tools/oracle/official_cache.py (torch's float8_e4m3fn and bfloat16 casts)
 * makes of them, written by tools/oracle/make_round_vectors.py: the matmul
 * inputs (act_fp8_round, blocks of 128, a partial last block) and the
 * window KV (kv_fp8_round, blocks of 64, the rope dims to bf16). Crafted
 * rows put values on e4m3 rounding midpoints (normal and subnormal), amax
 * on and just above 448·2^k, and blocks under the 1e-4 floor. Every value
 * must be bit-identical. The CUDA backend is held to these bits by
 * tests/cuda/test_cuda_ops.c. */
#include <stdint.h>
#include <string.h>

#include "ops/ops.h"
#include "test.h"

static uint8_t *g_buf;
static size_t g_len;

static void test_vectors_bitwise(void)
{
    CHECKF(g_buf != NULL, "cannot read tests/data/official_round_vectors.bin");
    if (!g_buf) return;
    dsv4_backend *b = cpu_backend_new(2, 1024);
    CHECK(b != NULL);
    if (!b) return;
    size_t off = 0;
    int n_rec[2] = {0, 0};
    while (off + 16 <= g_len) {
        uint32_t h[4];
        memcpy(h, g_buf + off, sizeof h);
        off += sizeof h;
        size_t n = (size_t)h[1] * h[2];
        CHECKF(h[0] <= 1 && off + 8 * n <= g_len, "bad record at byte %zu", off - sizeof h);
        if (t_failed_now) break;
        float *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
        memcpy(x, g_buf + off, 4 * n);
        const uint8_t *want = g_buf + off + 4 * n;
        if (h[0] == 0) b->ops->act_fp8_round(b, x, (int)h[1], (int)h[2], y);
        else {
            memcpy(y, x, 4 * n);
            b->ops->kv_fp8_round(b, y, (int)h[1], (int)h[2], (int)h[3]);
        }
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < n; i++)
            if (memcmp(&y[i], want + 4 * i, 4)) { if (!bad) first = i; bad++; }
        float w;
        memcpy(&w, want + 4 * first, 4);
        CHECKF(!bad, "%s %ux%u: %zu values differ, first [%zu]: %a -> %a, reference %a",
               h[0] ? "kv_fp8_round" : "act_fp8_round", h[1], h[2], bad, first, x[first], y[first], w);
        if (h[0] == 0) { /* in place gives the same */
            b->ops->act_fp8_round(b, x, (int)h[1], (int)h[2], x);
            CHECKF(!memcmp(x, y, 4 * n), "act_fp8_round in place differs from out of place");
        }
        n_rec[h[0]]++;
        free(x);
        free(y);
        off += 8 * n;
    }
    CHECKF(off == g_len && n_rec[0] >= 4 && n_rec[1] >= 3, "%d act and %d kv records, %zu of %zu bytes",
           n_rec[0], n_rec[1], off, g_len);
    b->ops->destroy(b);
}

int main(void)
{
    g_buf = (uint8_t *)test_read_file("tests/data/official_round_vectors.bin", &g_len);
    RUN(test_vectors_bitwise);
    free(g_buf);
    return t_fail ? 1 : 0;
}

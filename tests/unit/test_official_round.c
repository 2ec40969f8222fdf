/* The official numerics' FP8 roundings on the CPU against an independent
 * reference: tests/data/official_round_vectors.bin holds rows and what
 * tools/oracle/official_cache.py (torch's float8_e4m3fn and bfloat16 casts)
 * makes of them, written by tools/oracle/make_round_vectors.py: the matmul
 * inputs (act_fp8_round, blocks of 128, a partial last block) and the
 * window KV (cpu_kv_fp8_round, norm_rope's rounding: blocks of 64, the rope
 * dims to bf16). Crafted
 * rows put values on e4m3 rounding midpoints (normal and subnormal), amax
 * on and just above 448·2^k, and blocks under the 1e-4 floor. Every value
 * must be bit-identical. The CUDA backend is held to these bits by
 * tests/cuda/test_cuda_ops.c.
 *
 * The packed session rows (ROW_FP8, ROW_FP4) store what the roundings
 * compute: a stored row reads back as exactly kv_fp8_round's (or
 * idx_fp4_round's) values, storing those values again gives the same
 * values, and the bytes sit where the layout (FlashMLA's, for Flash) says. */
#include <stdint.h>
#include <string.h>

#include "cpu/cpu.h"
#include "model/model.h"
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
            cpu_kv_fp8_round(b, y, (int)h[1], (int)h[2], (int)h[3]);
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

/* matmul_fp8in against matmul of the reference's rounded rows, bit for bit,
 * on every act record: rows read with a stride (ldx > n) and left as they
 * were. */
static void test_matmul_fp8in(void)
{
    if (!g_buf) return; /* reported by test_vectors_bitwise */
    dsv4_backend *b = cpu_backend_new(2, 1024);
    CHECK(b != NULL);
    if (!b) return;
    uint32_t seed = 12345u;
    size_t off = 0;
    int n_act = 0;
    while (off + 16 <= g_len && !t_failed_now) {
        uint32_t h[4];
        memcpy(h, g_buf + off, sizeof h);
        off += sizeof h;
        int T = (int)h[1], n = (int)h[2], R = 5, ldx = n + 3;
        if (h[0] == 0) {
            float *x = malloc((size_t)T * ldx * sizeof *x), *x0 = malloc((size_t)T * ldx * sizeof *x0);
            float *want = malloc((size_t)T * n * sizeof *want), *w = malloc((size_t)R * n * sizeof *w);
            float *y = malloc((size_t)T * R * sizeof *y), *yr = malloc((size_t)T * R * sizeof *yr);
            for (int t = 0; t < T; t++) {
                memcpy(x + (size_t)t * ldx, g_buf + off + 4 * (size_t)t * n, 4 * (size_t)n);
                for (int c = n; c < ldx; c++) x[(size_t)t * ldx + c] = 1e30f; /* past the row: never read */
            }
            memcpy(x0, x, (size_t)T * ldx * sizeof *x);
            memcpy(want, g_buf + off + 4 * (size_t)T * n, 4 * (size_t)T * n);
            for (int i = 0; i < R * n; i++) {
                seed = seed * 1664525u + 1013904223u;
                w[i] = (float)(seed >> 8) * 0x1p-24f - 0.5f;
            }
            dsv4_mat W = {.dtype = DT_F32, .rows = R, .cols = n, .data = w, .fmt = WF_F32};
            b->ops->matmul_fp8in(b, x, ldx, T, &W, y, R);
            b->ops->matmul(b, want, n, T, &W, yr, R);
            CHECKF(!memcmp(y, yr, (size_t)T * R * sizeof *y), "%dx%d: matmul_fp8in differs from the product of the "
                   "reference's rounded rows", T, n);
            CHECKF(!memcmp(x, x0, (size_t)T * ldx * sizeof *x), "%dx%d: matmul_fp8in changed its input", T, n);
            n_act++;
            free(x); free(x0); free(want); free(w); free(y); free(yr);
        }
        off += 8 * (size_t)T * n;
    }
    CHECKF(n_act >= 4, "%d act records", n_act);
    b->ops->destroy(b);
}

static dsv4_state_layout layout_of(int head_dim, int rope_dim, int idx_head_dim)
{
    dsv4_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = head_dim;
    c.rope_dim = rope_dim;
    c.idx_head_dim = idx_head_dim;
    return state_layout(&c, 1);
}

static void test_flash_row_layout(void)
{
    dsv4_state_layout L = layout_of(512, 64, 128);
    CHECK(L.kv.kind == ROW_FP8 && L.kv.n_fp8 == 448 && L.kv.rope_off == 448 && L.kv.scale_off == 576 &&
          L.kv.bytes == 584);
    CHECK(L.idx.kind == ROW_FP4 && L.idx.scale_off == 64 && L.idx.bytes == 68);
    L = layout_of(128, 32, 32); /* tiny-fp8-official: a partial FP8 block, padding */
    CHECK(L.kv.n_fp8 == 96 && L.kv.scale_off == 160 && L.kv.bytes == 168 && L.idx.bytes == 17);
}

/* rows [n][f->width]: store, load back, compare with the rounding op's
 * bits; then store the rounded values again: the same values. */
static void check_rows(dsv4_backend *b, const dsv4_row_fmt *f, const float *x, int n)
{
    size_t w = (size_t)f->width;
    float *want = malloc(n * w * sizeof *want), *got = malloc(w * sizeof *got), *tmp = malloc(w * sizeof *tmp);
    uint8_t *row = malloc((size_t)f->bytes), *again = malloc((size_t)f->bytes);
    memcpy(want, x, n * w * sizeof *want);
    if (f->kind == ROW_FP8) cpu_kv_fp8_round(b, want, n, f->width, f->n_fp8);
    else b->ops->idx_fp4_round(b, want, n, f->width);
    int bad = 0;
    for (int r = 0; r < n && !bad; r++) {
        cpu_row_store(f, x + r * w, row, tmp);
        cpu_row_load(f, row, got);
        bad += !!memcmp(got, want + r * w, w * sizeof *got);
        CHECKF(!bad, "format %d, %zu values, row %d: the stored row reads back other values than the rounding", f->kind,
               w, r);
        if (f->kind == ROW_FP8) { /* FP4 is not idempotent: it rotates first */
            cpu_row_store(f, got, again, tmp);
            cpu_row_load(f, again, got);
            bad += !!memcmp(got, want + r * w, w * sizeof *got);
            CHECKF(!bad, "format %d row %d: storing the rounded values changes them", f->kind, r);
        }
    }
    free(want); free(got); free(tmp); free(row); free(again);
}

static void test_packed_rows(void)
{
    dsv4_backend *b = cpu_backend_new(1, 1024);
    CHECK(b != NULL);
    if (!b) return;
    /* the kv records of the vector file, then random rows of very different block scales */
    size_t off = 0;
    int n_kv = 0;
    while (g_buf && off + 16 <= g_len) {
        uint32_t h[4];
        memcpy(h, g_buf + off, sizeof h);
        off += sizeof h;
        size_t n = (size_t)h[1] * h[2];
        if (h[0] == 1 && off + 8 * n <= g_len) {
            dsv4_row_fmt f = layout_of((int)h[2], (int)(h[2] - h[3]), 32).kv; /* h[3] e4m3 values, the rest bf16 */
            check_rows(b, &f, (const float *)(g_buf + off), (int)h[1]);
            n_kv++;
        }
        off += 8 * n;
    }
    CHECK(n_kv >= 3);
    uint32_t r = 12345u;
    float *x = malloc((size_t)16 * 512 * sizeof *x);
    for (int i = 0; i < 16 * 512; i++) {
        r = r * 1664525u + 1013904223u;
        x[i] = ((float)(r >> 8) / 8388608.0f - 1.0f) * (i % 7 == 0 ? 1000.0f : i % 11 == 3 ? 1e-6f : 1.0f);
    }
    dsv4_state_layout L[] = {layout_of(512, 64, 128), layout_of(128, 32, 32), layout_of(64, 16, 1024)};
    for (int k = 0; k < 3; k++) {
        check_rows(b, &L[k].kv, x, 16 * 512 / L[k].kv.width);
        check_rows(b, &L[k].idx, x, 16 * 512 / L[k].idx.width);
    }
    free(x);
    b->ops->destroy(b);
}

int main(void)
{
    g_buf = (uint8_t *)test_read_file("tests/data/official_round_vectors.bin", &g_len);
    RUN(test_vectors_bitwise);
    RUN(test_matmul_fp8in);
    RUN(test_flash_row_layout);
    RUN(test_packed_rows);
    free(g_buf);
    return t_fail ? 1 : 0;
}

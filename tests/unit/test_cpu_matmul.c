/* The CPU product's rows do not depend on the rows beside them: T token
 * rows in one call give, bit for bit, what each row gives alone, for F32
 * and BF16 weights (BF16 has a path of its own for a few rows), row lengths
 * with and without a tail past the 8-lane blocks, strided rows, and plain
 * and grouped products. Prefill chunks and decode steps stand on this. The
 * pair op (two weights, one input) gives each weight's product. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"
#include "test.h"

static uint32_t g_seed = 2024u;

static float rnd(void)
{
    g_seed = g_seed * 1664525u + 1013904223u;
    return (float)(g_seed >> 8) * 0x1p-23f - 1.0f;
}

/* W [R][n] of dtype dt (F32 or BF16) from random values: data in *buf. */
static dsv4_mat make_w(dsv4_dtype dt, int R, int n, void **buf)
{
    size_t count = (size_t)R * n;
    if (dt == DT_F32) {
        float *w = malloc(count * sizeof *w);
        for (size_t i = 0; i < count; i++) w[i] = rnd();
        *buf = w;
        return (dsv4_mat){.dtype = DT_F32, .rows = R, .cols = n, .data = w, .fmt = WF_F32};
    }
    uint16_t *w = malloc(count * sizeof *w);
    for (size_t i = 0; i < count; i++) {
        float f = rnd();
        uint32_t u;
        memcpy(&u, &f, 4);
        w[i] = (uint16_t)(u >> 16);
    }
    *buf = w;
    return (dsv4_mat){.dtype = DT_BF16, .rows = R, .cols = n, .data = w, .fmt = WF_BF16};
}

/* groups: 0 for the plain product, else matmul_grouped with that many row
 * blocks (x then holds groups blocks of n columns a token row). */
static void rows_alone(dsv4_backend *b, dsv4_dtype dt, int n, int T, int groups)
{
    enum { R = 12 };
    int G = groups ? groups : 1, ldx = G * n + 5, ldy = R + 3;
    void *wbuf;
    dsv4_mat W = make_w(dt, R, n, &wbuf);
    float *x = malloc((size_t)T * ldx * sizeof *x), *y = malloc((size_t)T * ldy * sizeof *y);
    float *y1 = malloc((size_t)T * ldy * sizeof *y1);
    for (size_t i = 0; i < (size_t)T * ldx; i++) x[i] = rnd();
    memset(y, 0, (size_t)T * ldy * sizeof *y);
    memset(y1, 0, (size_t)T * ldy * sizeof *y1);
    if (groups) b->ops->matmul_grouped(b, x, ldx, T, &W, groups, y, ldy);
    else b->ops->matmul(b, x, ldx, T, &W, y, ldy);
    for (int t = 0; t < T; t++) {
        if (groups) b->ops->matmul_grouped(b, x + (size_t)t * ldx, ldx, 1, &W, groups, y1 + (size_t)t * ldy, ldy);
        else b->ops->matmul(b, x + (size_t)t * ldx, ldx, 1, &W, y1 + (size_t)t * ldy, ldy);
    }
    CHECKF(!memcmp(y, y1, (size_t)T * ldy * sizeof *y), "%s weights, %d columns, %d rows%s: one call and each row "
           "alone differ", dt == DT_F32 ? "F32" : "BF16", n, T, groups ? " (grouped)" : "");
    free(wbuf); free(x); free(y); free(y1);
}

static void test_rows_alone(void)
{
    dsv4_backend *b = cpu_backend_new(2, 4096);
    CHECK(b != NULL);
    if (!b) return;
    static const int ns[] = {5, 64, 131, 1003};
    for (int d = 0; d < 2; d++)
        for (int i = 0; i < 4; i++)
            for (int T = 1; T <= 11; T++) rows_alone(b, d ? DT_BF16 : DT_F32, ns[i], T, 0);
    rows_alone(b, DT_BF16, 64, 9, 3);
    rows_alone(b, DT_F32, 131, 6, 4);
    b->ops->destroy(b);
}

/* matmul_pair gives each weight's matmul, bit for bit: same shapes (the
 * compressors' wkv and wgate), other row counts, F32 beside BF16; the
 * outputs with row strides of their own, their padding untouched. */
static void pair_is_two(dsv4_backend *b, dsv4_dtype d1, int r1, dsv4_dtype d2, int r2, int n, int T)
{
    int ldx = n + 3, l1 = r1 + 2, l2 = r2 + 7;
    void *b1, *b2;
    dsv4_mat W1 = make_w(d1, r1, n, &b1), W2 = make_w(d2, r2, n, &b2);
    float *x = malloc((size_t)T * ldx * sizeof *x);
    float *p1 = calloc((size_t)T * l1, sizeof *p1), *p2 = calloc((size_t)T * l2, sizeof *p2);
    float *m1 = calloc((size_t)T * l1, sizeof *m1), *m2 = calloc((size_t)T * l2, sizeof *m2);
    for (size_t i = 0; i < (size_t)T * ldx; i++) x[i] = rnd();
    b->ops->matmul_pair(b, x, ldx, T, &W1, p1, l1, &W2, p2, l2);
    b->ops->matmul(b, x, ldx, T, &W1, m1, l1);
    b->ops->matmul(b, x, ldx, T, &W2, m2, l2);
    CHECKF(!memcmp(p1, m1, (size_t)T * l1 * sizeof *p1) && !memcmp(p2, m2, (size_t)T * l2 * sizeof *p2),
           "%dx%d %s beside %dx%d %s, %d rows: matmul_pair differs from two matmuls", r1, n,
           d1 == DT_F32 ? "F32" : "BF16", r2, n, d2 == DT_F32 ? "F32" : "BF16", T);
    free(b1); free(b2); free(x); free(p1); free(p2); free(m1); free(m2);
}

static void test_pair(void)
{
    dsv4_backend *b = cpu_backend_new(2, 4096);
    CHECK(b != NULL);
    if (!b) return;
    static const int Ts[] = {1, 2, 7, 9, 33};
    for (int i = 0; i < 5; i++) {
        pair_is_two(b, DT_BF16, 12, DT_BF16, 12, 131, Ts[i]);
        pair_is_two(b, DT_F32, 12, DT_F32, 12, 64, Ts[i]);
        pair_is_two(b, DT_BF16, 12, DT_BF16, 5, 64, Ts[i]);
        pair_is_two(b, DT_F32, 7, DT_BF16, 7, 1003, Ts[i]);
    }
    b->ops->destroy(b);
}

/* cpu_dot on its own: the lanes' fixed order gives the same sum for the
 * same data wherever the vectors sit. */
static void test_dot_aligned_or_not(void)
{
    float a[1040], w[1040];
    for (int i = 0; i < 1040; i++) { a[i] = rnd(); w[i] = rnd(); }
    for (int n = 0; n < 1030; n += 37) {
        float s = cpu_dot(a, w, n);
        float b1[1040], w1[1040];
        memcpy(b1 + 1, a, (size_t)n * sizeof *a);
        memcpy(w1 + 3, w, (size_t)n * sizeof *w);
        float s1 = cpu_dot(b1 + 1, w1 + 3, n);
        CHECKF(!memcmp(&s, &s1, sizeof s), "cpu_dot of %d values depends on where they sit", n);
    }
}

int main(void)
{
    RUN(test_rows_alone);
    RUN(test_pair);
    RUN(test_dot_aligned_or_not);
    TEST_MAIN_END();
}

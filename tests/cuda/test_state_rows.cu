/* The GPU's readers of packed session rows (src/cuda/state_rows.cuh: the
 * branch-free e4m3 / E2M1 decoders through f16 bits, the per-lane FP8 key
 * loader attention uses, the 4-value FP4 loads of the indexer) run on the
 * CPU, no GPU needed, against the CPU's own decoders: every code and scale
 * byte, and rows stored by cpu_row_store in the layouts the engine uses,
 * must read back bit for bit. */
#include "cuda/state_rows.cuh"
extern "C" {
#include "cpu/cpu.h"
#include "model/model.h"
}
#include "test.h"

static uint32_t fbits(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    return u;
}

/* Equal bits, or both NaN (the CPU's and the GPU's NaN payloads may differ). */
static int same(float a, float b) { return fbits(a) == fbits(b) || (isnan(a) && isnan(b)); }

static void test_codes(void)
{
    for (int b = 0; b < 256; b++)
        CHECKF(same(sr_e4m3((uint8_t)b), k_e4m3_values[b]), "e4m3 byte 0x%02x: %.9g vs %.9g", b,
               (double)sr_e4m3((uint8_t)b), (double)k_e4m3_values[b]);
    for (int c = 0; c < 16; c++)
        CHECKF(same(sr_e2m1(c), k_e2m1_values[c]), "e2m1 code %d: %g vs %g", c, (double)sr_e2m1(c),
               (double)k_e2m1_values[c]);
    for (int e = 0; e < 256; e++)
        CHECKF(same(sr_e8m0((uint8_t)e), e8m0_to_f32((uint8_t)e)), "e8m0 byte %d", e);
}

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static double urand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (double)(rng >> 11) / 9007199254740992.0;
}

/* A row of w values whose 32-value blocks have magnitudes from 1e-30 to
 * 1e30 (scales over most of the E8M0 range), with zeros and ties between. */
static void fill(float *x, int w)
{
    for (int c = 0; c < w; c += 32) {
        double mag = pow(10.0, -30.0 + 60.0 * urand());
        for (int i = c; i < w && i < c + 32; i++)
            x[i] = urand() < 0.05 ? 0.0f : (float)((urand() * 2.0 - 1.0) * mag);
    }
}

/* Rows of format f stored by the CPU and read back by every GPU reader. */
static void check_rows(const dsv4_row_fmt *f, const char *what)
{
    int w = f->width;
    float *x = (float *)malloc(sizeof(float) * w), *tmp = (float *)malloc(sizeof(float) * w),
          *want = (float *)malloc(sizeof(float) * w);
    uint8_t *row = (uint8_t *)malloc((size_t)f->bytes + 16);
    int bad = 0;
    for (int it = 0; it < 50; it++) {
        fill(x, w);
        cpu_row_store(f, x, row, tmp);
        cpu_row_load(f, row, want);
        for (int c = 0; c < w; c++) bad += !same(sr_load(*f, row, c), want[c]);
        for (int c = 0; c + 3 < w; c += 4) {
            float4 v = sr_load4(*f, row, c);
            bad += !same(v.x, want[c]) + !same(v.y, want[c + 1]) + !same(v.z, want[c + 2]) + !same(v.w, want[c + 3]);
        }
        /* a flipped code must show: the comparison is against the CPU's values */
        if (it == 0 && f->kind != ROW_F32) {
            float before = sr_load(*f, row, 1);
            row[0] ^= 0x11;
            CHECKF(!same(sr_load(*f, row, f->kind == ROW_FP4 ? 1 : 0), want[f->kind == ROW_FP4 ? 1 : 0]) ||
                       !same(sr_load(*f, row, 0), want[0]), "%s: a flipped code byte reads back unchanged", what);
            row[0] ^= 0x11;
            CHECK(same(sr_load(*f, row, 1), before));
        }
    }
    CHECKF(bad == 0, "%s: %d values differ from the CPU's", what, bad);
    free(x); free(tmp); free(want); free(row);
}

static void test_rows(void)
{
    /* Flash (head 512, rope 64, indexer head 128) and the tiny fixtures'
     * widths (head 64, rope 16, indexer 32), in the official layout; rope 6
     * leaves 58 FP8 values, read value by value */
    int dims[][3] = {{512, 64, 128}, {64, 16, 32}, {96, 32, 64}, {64, 6, 32}};
    for (int i = 0; i < 4; i++) {
        dsv4_config c;
        memset(&c, 0, sizeof c);
        c.head_dim = dims[i][0];
        c.rope_dim = dims[i][1];
        c.idx_head_dim = dims[i][2];
        char what[64];
        dsv4_state_layout L = state_layout(&c, 1);
        snprintf(what, sizeof what, "FP8 kv rows of %d (rope %d)", c.head_dim, c.rope_dim);
        check_rows(&L.kv, what);
        snprintf(what, sizeof what, "FP4 indexer rows of %d", c.idx_head_dim);
        check_rows(&L.idx, what);
    }
}

int main(void)
{
    RUN(test_codes);
    RUN(test_rows);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    TEST_MAIN_END();
}

/* Weight formats: facts and the CPU row decoder against independent
 * definitions (ldexp arithmetic on the bit fields, not the decoder's tricks). */
#include <stdint.h>

#include "base/wformat.h"
#include "test.h"

/* e4m3fn by its definition: (−1)^s · 2^(e−7) · (1 + m/8), subnormal 2^−6 · m/8. */
static double e4m3_ref(int b)
{
    int s = b >> 7, e = (b >> 3) & 15, m = b & 7;
    double v = e ? ldexp(1.0 + m / 8.0, e - 7) : ldexp(m / 8.0, -6);
    return s ? -v : v;
}

static void test_e4m3_all_codes(void)
{
    for (int b = 0; b < 256; b++) {
        float f = e4m3_to_f32((uint8_t)b);
        if ((b & 0x7f) == 0x7f) { CHECKF(isnan(f), "code %#x must be NaN", b); continue; }
        CHECKF((double)f == e4m3_ref(b) && !!signbit(f) == (b >> 7), "code %#x: %g vs %g", b, f, e4m3_ref(b));
    }
    CHECK(e4m3_to_f32(0x7e) == 448.0f);
}

static void test_e8m0_all_codes(void)
{
    for (int e = 0; e < 255; e++) CHECKF((double)e8m0_to_f32((uint8_t)e) == ldexp(1.0, e - 127), "e8m0 %d", e);
    CHECK(isnan(e8m0_to_f32(255)));
}

static void test_facts(void)
{
    CHECK(wformat_row_bytes(WF_F32, 10) == 40 && wformat_row_bytes(WF_BF16, 10) == 20);
    CHECK(wformat_row_bytes(WF_FP8_E4M3, 300) == 300 && wformat_row_bytes(WF_MXFP4, 64) == 32);
    CHECK(wformat_row_bytes(WF_Q4_K, 512) == 288 && wformat_row_bytes(WF_Q8_0, 64) == 68);
    CHECK(wformat_info(WF_FP8_E4M3)->scale_grid && !wformat_info(WF_Q6_K)->scale_grid);
    CHECK(!strcmp(wformat_info((dsv4_wformat)99)->name, "?"));
    CHECK(wformat_of_dtype(DT_BF16) == WF_BF16 && wformat_of_dtype(DT_I8) == -1);
}

/* A 200×300 FP8 matrix (partial 128-blocks on both edges) with E8M0 and F32
 * scale grids [2][3]: every element must be code · its block's scale. */
static void test_fp8_rows(void)
{
    enum { R = 200, C = 300, SR = 2, SC = 3 };
    static uint8_t w[R * C], se[SR * SC];
    static float sf[SR * SC], out[C];
    for (int i = 0; i < R * C; i++) {
        w[i] = (uint8_t)(i * 37 + i / 7);
        if ((w[i] & 0x7f) == 0x7f) w[i] = 1; /* no NaN codes */
    }
    for (int i = 0; i < SR * SC; i++) { se[i] = (uint8_t)(120 + i); sf[i] = (float)ldexp(1.0, i - 7); }
    dsv4_mat m = {0};
    m.dtype = DT_F8_E4M3; m.fmt = WF_FP8_E4M3; m.rows = R; m.cols = C; m.data = w;
    m.blk_r = m.blk_c = 128; m.scale_rows = SR; m.scale_cols = SC;
    for (int pass = 0; pass < 2; pass++) {
        m.scale = pass ? (const void *)sf : (const void *)se;
        m.scale_dtype = pass ? DT_F32 : DT_F8_E8M0;
        int rows[] = {0, 127, 128, 199};
        for (int k = 0; k < 4; k++) {
            int r = rows[k];
            wmat_decode_row(&m, r, 0, C, out);
            for (int c = 0; c < C; c++) {
                int si = r / 128 * SC + c / 128;
                double want = e4m3_ref(w[r * C + c]) * (pass ? (double)sf[si] : ldexp(1.0, se[si] - 127));
                CHECKF((double)out[c] == want, "pass %d [%d][%d]: %g vs %g", pass, r, c, out[c], want);
            }
            wmat_decode_row(&m, r, 120, 20, out); /* a window across a block edge */
            for (int c = 0; c < 20; c++) {
                int si = r / 128 * SC + (120 + c) / 128;
                double want = e4m3_ref(w[r * C + 120 + c]) * (pass ? (double)sf[si] : ldexp(1.0, se[si] - 127));
                CHECKF((double)out[c] == want, "window [%d][%d]", r, 120 + c);
            }
        }
        dsv4_mat v = mat_rows(&m, 128, 72); /* the second block row as its own matrix */
        wmat_decode_row(&v, 5, 0, C, out);
        float full[C];
        wmat_decode_row(&m, 133, 0, C, full);
        CHECK(!memcmp(out, full, sizeof full) && v.scale_rows == 1);
        CHECK(mat_get(&m, 133 * C + 299) == full[299]);
    }
    CHECK(wmat_bytes(&m) == (uint64_t)R * C + SR * SC * 4);
}

/* MXFP4: low nibble = even column, one E8M0 scale per 32 columns. */
static void test_mxfp4_rows(void)
{
    enum { R = 3, C = 64 };
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    uint8_t w[R * C / 2], s[R * C / 32];
    float out[C];
    for (int i = 0; i < R * C / 2; i++) w[i] = (uint8_t)(i * 29 + 3);
    for (int i = 0; i < R * C / 32; i++) s[i] = (uint8_t)(125 + i);
    dsv4_mat m = {0};
    m.dtype = DT_I8; m.fmt = WF_MXFP4; m.rows = R; m.cols = C; m.data = w;
    m.scale = s; m.scale_dtype = DT_F8_E8M0; m.blk_r = 1; m.blk_c = 32; m.scale_rows = R; m.scale_cols = C / 32;
    for (int r = 0; r < R; r++) {
        wmat_decode_row(&m, r, 0, C, out);
        for (int c = 0; c < C; c++) {
            int code = (w[r * C / 2 + c / 2] >> (c % 2 ? 4 : 0)) & 15;
            double want = (code & 8 ? -1 : 1) * e2m1[code & 7] * ldexp(1.0, s[r * 2 + c / 32] - 127);
            CHECKF((double)out[c] == want, "[%d][%d] %g vs %g", r, c, out[c], want);
        }
    }
    dsv4_mat v = mat_rows(&m, 2, 1);
    float o2[C];
    wmat_decode_row(&v, 0, 0, C, o2);
    wmat_decode_row(&m, 2, 0, C, out);
    CHECK(!memcmp(out, o2, sizeof o2));
}

static void test_plain_views(void)
{
    uint16_t h[6] = {0x3f80, 0x4000, 0xbf80, 0, 0x4040, 0x3f00}; /* bf16 1, 2, −1, 0, 3, .5 */
    dsv4_mat m = wmat_plain(DT_BF16, 2, 3, h);
    float out[3];
    wmat_decode_row(&m, 1, 0, 3, out);
    CHECK(m.fmt == WF_BF16 && out[0] == 0 && out[1] == 3 && out[2] == 0.5f);
    CHECK(wmat_bytes(&m) == 12 && mat_get(&m, 2) == -1.0f);
}

int main(void)
{
    RUN(test_e4m3_all_codes);
    RUN(test_e8m0_all_codes);
    RUN(test_facts);
    RUN(test_fp8_rows);
    RUN(test_mxfp4_rows);
    RUN(test_plain_views);
    return t_fail ? 1 : 0;
}

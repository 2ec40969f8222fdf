/* ggml block dequantization against gguf-py's gguf.quants.dequantize on
 * random valid blocks (tests/data/ggml_quant_vectors.bin, made by
 * tools/gguf/make_quant_vectors.py): every value bit-identical. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ggml_quant.h"
#include "base/wformat.h"
#include "test.h"

static uint8_t *g_buf;
static size_t g_len;

static void test_vectors_bitwise(void)
{
    CHECKF(g_buf != NULL, "cannot read tests/data/ggml_quant_vectors.bin");
    if (!g_buf) return;
    size_t off = 0;
    int types = 0;
    while (off + 8 <= g_len) {
        uint32_t t, n;
        memcpy(&t, g_buf + off, 4);
        memcpy(&n, g_buf + off + 4, 4);
        off += 8;
        const ggml_type_info *ti = ggml_type_get(t);
        CHECKF(ti->name && ti->decodable, "type %u not decodable", t);
        if (!ti->name || !ti->decodable) return;
        size_t nb = (size_t)n * (size_t)ti->block_bytes, nv = (size_t)n * (size_t)ti->block_elems;
        CHECK(off + nb + 4 * nv <= g_len);
        if (off + nb + 4 * nv > g_len) return;
        float *got = malloc(nv * sizeof *got);
        ggml_dequant_blocks(t, g_buf + off, n, got);
        const uint8_t *want = g_buf + off + nb;
        size_t bad = 0, first = 0;
        for (size_t i = 0; i < nv; i++)
            if (memcmp(&got[i], want + 4 * i, 4)) { if (!bad) first = i; bad++; }
        float w0;
        memcpy(&w0, want + 4 * first, 4);
        CHECKF(bad == 0, "%s: %zu of %zu values differ (first at %zu: %.9g vs %.9g)", ti->name, bad, nv, first,
               (double)got[first], (double)w0);
        free(got);
        off += nb + 4 * nv;
        types++;
    }
    CHECKF(types == 14, "%d types in the vectors file, expected 14", types);
}

static void test_type_facts(void)
{
    char buf[24];
    CHECK(ggml_type_get(GGML_Q4_K)->block_elems == 256 && ggml_type_get(GGML_Q4_K)->block_bytes == 144);
    CHECK(ggml_type_get(GGML_MXFP4)->block_bytes == 17);
    CHECK(!ggml_type_get(GGML_Q4_0)->decodable);
    CHECK(ggml_type_get(4)->name == NULL && ggml_type_get(1000)->name == NULL);
    CHECK(strcmp(ggml_type_name(4000000000u, buf), "type 4000000000") == 0);
    CHECK(strcmp(ggml_type_name(GGML_IQ2_S, buf), "IQ2_S") == 0);
}

/* The weight formats of GGUF: same block facts as ggml's table, and the
 * row decoder over any column range equals the whole-block decoding. */
static void test_wformat_rows(void)
{
    int seen = 0;
    size_t off = 0;
    while (g_buf && off + 8 <= g_len) {
        uint32_t t, n;
        memcpy(&t, g_buf + off, 4);
        memcpy(&n, g_buf + off + 4, 4);
        const ggml_type_info *ti = ggml_type_get(t);
        size_t nb = (size_t)n * (size_t)ti->block_bytes, nv = (size_t)n * (size_t)ti->block_elems;
        int f = wformat_of_ggml(t);
        CHECKF(f >= 0, "no weight format for %s", ti->name);
        if (f < 0) return;
        const wformat_facts *wf = wformat_info((dsv4_wformat)f);
        CHECKF(wf->block_elems == ti->block_elems && wf->block_bytes == ti->block_bytes && wf->cpu_decode,
               "%s: format facts differ from ggml's", ti->name);
        /* the vectors as a matrix of 3 rows (n divisible by 3 for the quant types) */
        int64_t rows = n % 3 == 0 ? 3 : 1, cols = (int64_t)nv / rows;
        dsv4_mat m = {.dtype = DT_U8, .rows = rows, .cols = cols, .data = g_buf + off + 8, .fmt = (dsv4_wformat)f};
        const uint8_t *want = g_buf + off + 8 + nb;
        float *row = malloc((size_t)cols * sizeof *row);
        int64_t ranges[][2] = {{0, cols}, {1, cols - 1}, {cols / 2 - 3, 7}, {cols - 1, 1}, {5, 300 < cols - 5 ? 300 : cols - 5}};
        for (int64_t r = 0; r < rows; r++)
            for (size_t k = 0; k < sizeof ranges / sizeof ranges[0]; k++) {
                wmat_decode_row(&m, r, ranges[k][0], ranges[k][1], row);
                CHECKF(!memcmp(row, want + 4 * (size_t)(r * cols + ranges[k][0]), 4 * (size_t)ranges[k][1]),
                       "%s row %lld cols %lld+%lld", ti->name, (long long)r, (long long)ranges[k][0],
                       (long long)ranges[k][1]);
            }
        free(row);
        off += 8 + nb + 4 * nv;
        seen++;
    }
    CHECK(seen == 14);
    CHECK(wformat_of_ggml(GGML_Q4_0) == -1 && wformat_of_ggml(GGML_MXFP4) == WF_MXFP4_GGUF);
}

int main(void)
{
    g_buf = (uint8_t *)test_read_file("tests/data/ggml_quant_vectors.bin", &g_len);
    RUN(test_vectors_bitwise);
    RUN(test_type_facts);
    RUN(test_wformat_rows);
    free(g_buf);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    return t_fail != 0;
}

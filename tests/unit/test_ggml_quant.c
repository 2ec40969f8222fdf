/* ggml block dequantization against gguf-py's gguf.quants.dequantize on
 * random valid blocks (tests/data/ggml_quant_vectors.bin, made by
 * tools/gguf/make_quant_vectors.py): every value bit-identical. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/ggml_quant.h"
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

int main(void)
{
    g_buf = (uint8_t *)test_read_file("tests/data/ggml_quant_vectors.bin", &g_len);
    RUN(test_vectors_bitwise);
    RUN(test_type_facts);
    free(g_buf);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    return t_fail != 0;
}

/* The CUDA backend's GGUF block decoders (src/cuda/ggml_blocks.cuh) run on
 * the CPU: they are __host__ __device__, so this checks the very code the
 * kernels run, with no GPU. Every value of every 32-value chunk must be
 * bit-identical to gguf-py's dequantization (the test vectors, f16 scales
 * over the whole finite range) and to the CPU decoder on random blocks of
 * both generator modes. Blocks sit at the offsets rows give them on the
 * device (a row starts on 16 bytes), so every loader path is taken: 16-byte,
 * 4-byte and realigned loads, MXFP4 at every byte offset. */
#include "cuda/ggml_blocks.cuh"
#include "test.h"

static uint32_t ggml_of(int fmt) { return wformat_ggml_type((dsv4_wformat)fmt); }

#define GG_FMT_ENTRY(f, name, ggml, elems, bytes) f,
static const int k_fmts[] = {WF_GGUF_BLOCKS(GG_FMT_ENTRY)};
#undef GG_FMT_ENTRY
#define N_FMTS ((int)(sizeof k_fmts / sizeof k_fmts[0]))

/* n blocks of fmt (copied to a 16-byte-aligned row) decoded chunk by chunk
 * against want; returns the number of differing values. */
static size_t decode_diffs(int fmt, const uint8_t *blocks, int64_t n, const float *want, int64_t *first)
{
    size_t bytes = (size_t)n * gg_block_bytes(fmt), bad = 0;
    uint8_t *row = (uint8_t *)aligned_alloc(16, (bytes + 15) / 16 * 16);
    memcpy(row, blocks, bytes);
    int64_t nch = n * gg_block_elems(fmt) / 32;
    for (int64_t c = 0; c < nch; c++) {
        float v[32];
        gg_chunk_rt(fmt, row, c, v);
        for (int k = 0; k < 32; k++)
            if (memcmp(&v[k], &want[32 * c + k], 4)) {
                if (!bad) *first = 32 * c + k;
                bad++;
            }
    }
    free(row);
    return bad;
}

/* The geometry the decoders are built on is ggml's. */
static void test_geometry(void)
{
    CHECK(N_FMTS == 12);
    for (int i = 0; i < N_FMTS; i++) {
        const ggml_type_info *ti = ggml_type_get(ggml_of(k_fmts[i]));
        CHECKF(ti->decodable && ti->block_elems == gg_block_elems(k_fmts[i]) &&
                   ti->block_bytes == gg_block_bytes(k_fmts[i]) && gg_is_fmt(k_fmts[i]),
               "%s: block geometry differs from ggml's", ti->name);
    }
    CHECK(!gg_is_fmt(WF_BF16) && !gg_is_fmt(WF_MXFP4) && !gg_is_fmt(WF_FP8_E4M3) && !gg_is_fmt(WF_F32));
}

/* gguf-py's values (tests/data/ggml_quant_vectors.bin, see test_ggml_quant). */
static void test_vectors(void)
{
    size_t len = 0;
    uint8_t *buf = (uint8_t *)test_read_file("tests/data/ggml_quant_vectors.bin", &len);
    CHECKF(buf != NULL, "cannot read tests/data/ggml_quant_vectors.bin");
    if (!buf) return;
    int seen = 0;
    for (size_t off = 0; off + 8 <= len;) {
        uint32_t t, n;
        memcpy(&t, buf + off, 4);
        memcpy(&n, buf + off + 4, 4);
        const ggml_type_info *ti = ggml_type_get(t);
        size_t nb = (size_t)n * ti->block_bytes, nv = (size_t)n * ti->block_elems;
        int fmt = wformat_of_ggml(t);
        if (fmt >= 0 && gg_is_fmt(fmt)) {
            float *want = (float *)malloc(nv * 4);
            memcpy(want, buf + off + 8 + nb, nv * 4);
            int64_t first = 0;
            size_t bad = decode_diffs(fmt, buf + off + 8, n, want, &first);
            CHECKF(bad == 0, "%s: %zu of %zu values differ from gguf-py (first at %lld)", ti->name, bad, nv,
                   (long long)first);
            free(want);
            seen++;
        }
        off += 8 + nb + 4 * nv;
    }
    CHECKF(seen == N_FMTS, "%d block types in the vectors file, expected %d", seen, N_FMTS);
    free(buf);
}

/* Random blocks (both scale modes) against the CPU decoder. */
static void test_random(void)
{
    const float rms[] = {0.0f, 0.02f, 1.0f};
    for (int i = 0; i < N_FMTS; i++)
        for (int m = 0; m < 3; m++) {
            int fmt = k_fmts[i], n = 96;
            uint32_t t = ggml_of(fmt);
            size_t nv = (size_t)n * gg_block_elems(fmt);
            uint8_t *blk = (uint8_t *)malloc((size_t)n * gg_block_bytes(fmt));
            float *want = (float *)malloc(nv * 4);
            ggml_random_blocks(t, 1234 + i, rms[m], n, blk);
            ggml_dequant_blocks(t, blk, n, want);
            double ss = 0;
            for (size_t k = 0; k < nv; k++) ss += (double)want[k] * want[k];
            if (rms[m] > 0) /* the generator's promise: within sqrt(2) per block, so overall */
                CHECKF(sqrt(ss / nv) > rms[m] / 1.5 && sqrt(ss / nv) < rms[m] * 1.5, "%s: rms %g for target %g",
                       ggml_type_get(t)->name, sqrt(ss / nv), (double)rms[m]);
            int64_t first = 0;
            size_t bad = decode_diffs(fmt, blk, n, want, &first);
            CHECKF(bad == 0, "%s (rms %g): %zu of %zu values differ from the CPU decoder (first at %lld)",
                   ggml_type_get(t)->name, (double)rms[m], bad, nv, (long long)first);
            free(blk);
            free(want);
        }
}

/* The exact int-to-float of the decoders over the range they use. */
static void test_i2f(void)
{
    int bad = 0;
    for (int v = -70000; v <= 70000; v++) bad += gg_i2f(v) != (float)v || (v == 0 && signbit(gg_i2f(v)));
    CHECK(bad == 0);
}

int main(void)
{
    RUN(test_geometry);
    RUN(test_vectors);
    RUN(test_random);
    RUN(test_i2f);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    TEST_MAIN_END();
}

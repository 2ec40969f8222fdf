/* Per-op timings of the CUDA backend at DeepSeek-V4-Flash decode shapes
 * (bf16, FP8/MXFP4 and GGUF block weights). Each measurement records a step of N identical calls,
 * which the backend captures once as a CUDA graph and then replays; time
 * per call = step time / N (the step's launch and sync are amortised).
 * usage: bench_ops [filter] */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/ggml_quant.h"
#include "model/model.h" /* state_layout */
#include "ops/ops.h"

static dsv4_backend *gpu;

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return ts.tv_sec * 1e3 + ts.tv_nsec / 1e6;
}

/* Device bf16 weight of random values (a repeated random block). */
static dsv4_mat weight(int64_t rows, int64_t cols, float scale)
{
    size_t n = (size_t)(rows * cols), blk = 1 << 20;
    uint16_t *h = malloc(n * 2);
    uint64_t r = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < (n < blk ? n : blk); i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        h[i] = f32_to_bf16(((float)((r >> 40) & 0xffffff) / 8388608.0f - 1.0f) * scale);
    }
    for (size_t i = blk; i < n; i += blk) memcpy(h + i, h, (n - i < blk ? n - i : blk) * 2);
    dsv4_mat m = wmat_plain(DT_BF16, rows, cols, h);
    if (gpu->ops->adopt_weight(gpu, &m)) { fprintf(stderr, "adopt: %s\n", dsv4_last_error()); exit(1); }
    return m; /* h stays allocated: the backend dedupes adopted weights by host address */
}

/* Device FP8 (128x128 E8M0 scales) or MXFP4 (1x32 E8M0 scales) weight of
 * random codes (a repeated random block) and scales around 2^-7. */
static dsv4_mat weight_q(dsv4_wformat fmt, int64_t rows, int64_t cols)
{
    int br = fmt == WF_FP8_E4M3 ? 128 : 1, bc = fmt == WF_FP8_E4M3 ? 128 : 32;
    dsv4_mat m = {0};
    m.dtype = fmt == WF_FP8_E4M3 ? DT_F8_E4M3 : DT_U8;
    m.fmt = fmt;
    m.rows = rows;
    m.cols = cols;
    m.blk_r = br;
    m.blk_c = bc;
    m.scale_rows = (rows + br - 1) / br;
    m.scale_cols = (cols + bc - 1) / bc;
    m.scale_dtype = DT_F8_E8M0;
    size_t n = (size_t)(rows * wformat_row_bytes(fmt, cols)), ns = (size_t)(m.scale_rows * m.scale_cols), blk = 1 << 20;
    uint8_t *h = malloc(n), *sc = malloc(ns);
    uint64_t r = 0x9E3779B97F4A7C15ULL ^ n;
    for (size_t i = 0; i < (n < blk ? n : blk); i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        h[i] = (uint8_t)(r >> 56);
        if (fmt == WF_FP8_E4M3 && (h[i] & 0x7f) == 0x7f) h[i] ^= 1;
    }
    for (size_t i = blk; i < n; i += blk) memcpy(h + i, h, n - i < blk ? n - i : blk);
    for (size_t i = 0; i < ns; i++) sc[i] = (uint8_t)(118 + i % 5);
    m.data = h;
    m.scale = sc;
    if (gpu->ops->adopt_weight(gpu, &m)) { fprintf(stderr, "adopt: %s\n", dsv4_last_error()); exit(1); }
    return m;
}

/* Device GGUF block weight: random valid blocks (values' rms 0.02; a
 * repeated random run of blocks). */
static dsv4_mat weight_g(dsv4_wformat fmt, int64_t rows, int64_t cols)
{
    size_t n = (size_t)(rows * wformat_row_bytes(fmt, cols)), bb = (size_t)wformat_info(fmt)->block_bytes;
    size_t blk = (1 << 20) / bb * bb;
    uint8_t *h = malloc(n);
    ggml_random_blocks(wformat_ggml_type(fmt), n, 0.02f, (int64_t)((n < blk ? n : blk) / bb), h);
    for (size_t i = blk; i < n; i += blk) memcpy(h + i, h, n - i < blk ? n - i : blk);
    dsv4_mat m = {.dtype = DT_U8, .rows = rows, .cols = cols, .data = h, .fmt = fmt};
    if (gpu->ops->adopt_weight(gpu, &m)) { fprintf(stderr, "adopt: %s\n", dsv4_last_error()); exit(1); }
    return m;
}

static float *dev_rand(size_t n, float scale)
{
    float *h = malloc(n * 4);
    uint64_t r = 0x1234567ULL + n;
    for (size_t i = 0; i < n; i++) {
        r ^= r << 13; r ^= r >> 7; r ^= r << 17;
        h[i] = ((float)((r >> 40) & 0xffffff) / 8388608.0f - 1.0f) * scale;
    }
    float *d = gpu->ops->alloc(gpu, n * 4);
    gpu->ops->upload(gpu, d, h, n * 4);
    free(h);
    return d;
}

typedef void (*body_fn)(void *ctx, int i);

/* Milliseconds per call of body over steps of n calls (graph replays). */
static double time_calls(body_fn body, void *ctx, int n)
{
    double best = 1e30;
    for (int rep = 0; rep < 8; rep++) {
        double t0 = now_ms();
        gpu->ops->step_begin(gpu, 1);
        for (int i = 0; i < n; i++) body(ctx, i);
        gpu->ops->step_end(gpu);
        if (gpu->ops->sync(gpu)) { fprintf(stderr, "sync: %s\n", dsv4_last_error()); exit(1); }
        double t = now_ms() - t0;
        if (rep >= 2 && t < best) best = t; /* rep 0 captures */
    }
    return best / n;
}

static void row(const char *name, double ms, double bytes)
{
    printf("%-44s %9.1f us  %8.1f MB  %7.0f GB/s\n", name, ms * 1e3, bytes / 1e6, bytes / (ms * 1e-3) / 1e9);
    fflush(stdout);
}

/* ---- matmul ---- */
/* act: the official numerics' product (matmul_fp8in: rows through FP8 1x128) */
typedef struct { dsv4_mat *W; int nW, T; float *x, *y; int act; } mm_ctx;
static void mm_body(void *p, int i)
{
    mm_ctx *c = p;
    const dsv4_mat *W = &c->W[i % c->nW];
    if (c->act) gpu->ops->matmul_fp8in(gpu, c->x, W->cols, c->T, W, c->y, W->rows);
    else gpu->ops->matmul(gpu, c->x, W->cols, c->T, W, c->y, W->rows);
}

/* only: the shapes whose name contains it (NULL: all); warm: the same
 * copy every call (L2-resident where it fits: what a product costs when
 * its weights were brought into L2 before it) instead of copies rotated
 * past the L2 (weights from HBM, as in a decode step) */
static void bench_matmul(const char *only, int warm)
{
    /* fmt: -1 bf16 */
    struct { int64_t R, C; int fmt; const char *name; } sh[] = {
        {129280, 4096, -1, "lm head 129280x4096 bf16"}, {32768, 1024, -1, "wq_b 32768x1024 bf16"},
        {4096, 8192, -1, "wo_b 4096x8192 bf16"},        {1024, 4096, -1, "wq_a 1024x4096 bf16"},
        {2048, 4096, -1, "expert-size 2048x4096 bf16"},  {512, 4096, -1, "idx wq 512x4096 bf16"},
        {32768, 1024, WF_FP8_E4M3, "wq_b 32768x1024 fp8"}, {4096, 8192, WF_FP8_E4M3, "wo_b 4096x8192 fp8"},
        {1024, 4096, WF_FP8_E4M3, "wq_a 1024x4096 fp8"},   {2048, 4096, WF_FP8_E4M3, "shared w1 2048x4096 fp8"},
        {2048, 4096, WF_MXFP4, "expert w1 2048x4096 fp4"}, {4096, 2048, WF_MXFP4, "expert w2 4096x2048 fp4"},
        /* GGUF (the UD-IQ3_XXS mix: Q8_0 dense, IQ3_XXS experts, Q6_K head; more block types) */
        {129280, 4096, WF_Q6_K, "lm head 129280x4096 q6_k"}, {32768, 1024, WF_Q8_0, "wq_b 32768x1024 q8_0"},
        {4096, 8192, WF_Q8_0, "wo_b 4096x8192 q8_0"},       {1024, 4096, WF_Q8_0, "wq_a 1024x4096 q8_0"},
        {2048, 4096, WF_IQ3_XXS, "expert w1 2048x4096 iq3_xxs"}, {4096, 2048, WF_IQ3_XXS, "expert w2 4096x2048 iq3_xxs"},
        {2048, 4096, WF_Q4_K, "expert w1 2048x4096 q4_k"},  {2048, 4096, WF_IQ2_XXS, "expert w1 2048x4096 iq2_xxs"},
        {2048, 4096, WF_MXFP4_GGUF, "expert w1 2048x4096 mxfp4 (gguf)"},
    };
    for (size_t s = 0; s < sizeof sh / sizeof sh[0]; s++) {
        if (only && !strstr(sh[s].name, only)) continue;
        int64_t R = sh[s].R, C = sh[s].C;
        int gg = sh[s].fmt >= 0 && wformat_info((dsv4_wformat)sh[s].fmt)->block_elems > 2;
        dsv4_mat probe = sh[s].fmt < 0 ? wmat_plain(DT_BF16, R, C, NULL) : (dsv4_mat){0};
        if (gg) {
            probe.fmt = (dsv4_wformat)sh[s].fmt; probe.rows = R; probe.cols = C; probe.data = "";
        } else if (sh[s].fmt >= 0) {
            probe.fmt = (dsv4_wformat)sh[s].fmt; probe.rows = R; probe.cols = C;
            probe.blk_r = sh[s].fmt == WF_FP8_E4M3 ? 128 : 1; probe.blk_c = sh[s].fmt == WF_FP8_E4M3 ? 128 : 32;
            probe.scale_rows = (R + probe.blk_r - 1) / probe.blk_r; probe.scale_cols = (C + probe.blk_c - 1) / probe.blk_c;
            probe.scale_dtype = DT_F8_E8M0; probe.data = probe.scale = "";
        } else probe.data = "";
        double bytes = (double)wmat_bytes(&probe);
        int nW = warm || bytes > 200e6 ? 1 : (int)(400e6 / bytes) + 1; /* rotate copies past the 50 MB L2 */
        if (nW > 64) nW = 64;
        mm_ctx c = {malloc(sizeof(dsv4_mat) * nW), nW, 1, dev_rand((size_t)8 * C, 1.0f), NULL, 0};
        c.y = gpu->ops->alloc(gpu, (size_t)8 * R * 4);
        for (int i = 0; i < nW; i++)
            c.W[i] = sh[s].fmt < 0 ? weight(R, C, 0.05f)
                     : gg ? weight_g((dsv4_wformat)sh[s].fmt, R, C) : weight_q((dsv4_wformat)sh[s].fmt, R, C);
        int Ts[] = {1, 2, 4, 8}; /* 2: a k = 1 verify step */
        for (c.act = 0; c.act <= (sh[s].fmt == WF_FP8_E4M3); c.act++)
            for (int ti = 0; ti < 4; ti++) {
                c.T = Ts[ti];
                char nm[96];
                snprintf(nm, sizeof nm, "%smatmul %s%s T=%d", warm ? "warm " : "", sh[s].name, c.act ? " (fp8 rows)" : "",
                         c.T);
                row(nm, time_calls(mm_body, &c, bytes > 200e6 ? 4 : 32), bytes);
            }
        gpu->ops->free(gpu, c.x); gpu->ops->free(gpu, c.y);
        free(c.W);
    }
}

/* Prefill-size products: T = 4096 token rows, TFLOP/s. */
static void bench_prefill(void)
{
    int64_t n = 4096;
    int fmts[] = {-1, WF_FP8_E4M3, WF_FP8_E4M3, WF_MXFP4};
    const char *names[] = {"bf16", "fp8", "fp8 (fp8 rows)", "fp4"};
    mm_ctx c = {malloc(sizeof(dsv4_mat)), 1, (int)n, dev_rand((size_t)n * n, 1.0f), NULL, 0};
    c.y = gpu->ops->alloc(gpu, (size_t)n * n * 4);
    for (int f = 0; f < 4; f++) {
        c.act = f == 2;
        c.W[0] = fmts[f] < 0 ? weight(n, n, 0.05f) : weight_q((dsv4_wformat)fmts[f], n, n);
        double ms = time_calls(mm_body, &c, 2);
        printf("%-44s %9.1f us  %8.1f TFLOP/s\n", names[f], ms * 1e3, 2.0 * n * n * n / (ms * 1e-3) / 1e12);
        fflush(stdout);
    }
    gpu->ops->free(gpu, c.x); gpu->ops->free(gpu, c.y);
    free(c.W);
}

/* ---- moe ---- */
typedef struct { dsv4_moe_params p; float *x, *out; int32_t *tok; int T; } moe_ctx;
static void moe_body(void *p, int i)
{
    (void)i;
    moe_ctx *c = p;
    gpu->ops->moe(gpu, c->x, c->tok, c->T, 4096, &c->p, c->out);
}

/* quant 0: bf16; 1: the official mix (MXFP4 experts, FP8 shared); 2: the
 * GGUF UD-IQ3_XXS mix (IQ3_XXS experts, Q8_0 shared). */
static void bench_moe_fmt(int quant)
{
    int E = 16, D = 4096, I = 2048, K = 6;
    dsv4_mat *w1 = malloc(sizeof(dsv4_mat) * E), *w2 = malloc(sizeof(dsv4_mat) * E), *w3 = malloc(sizeof(dsv4_mat) * E);
    for (int e = 0; e < E; e++) {
        if (quant == 1) { w1[e] = weight_q(WF_MXFP4, I, D); w2[e] = weight_q(WF_MXFP4, D, I); w3[e] = weight_q(WF_MXFP4, I, D); }
        else if (quant == 2) { w1[e] = weight_g(WF_IQ3_XXS, I, D); w2[e] = weight_g(WF_IQ3_XXS, D, I); w3[e] = weight_g(WF_IQ3_XXS, I, D); }
        else { w1[e] = weight(I, D, 0.02f); w2[e] = weight(D, I, 0.02f); w3[e] = weight(I, D, 0.02f); }
    }
    static dsv4_mat gate, bias, s1, s2, s3;
    gate = weight(E, D, 0.05f); bias = weight(1, E, 0.01f);
    if (quant == 1) { s1 = weight_q(WF_FP8_E4M3, I, D); s2 = weight_q(WF_FP8_E4M3, D, I); s3 = weight_q(WF_FP8_E4M3, I, D); }
    else if (quant == 2) { s1 = weight_g(WF_Q8_0, I, D); s2 = weight_g(WF_Q8_0, D, I); s3 = weight_g(WF_Q8_0, I, D); }
    else { s1 = weight(I, D, 0.02f); s2 = weight(D, I, 0.02f); s3 = weight(I, D, 0.02f); }
    moe_ctx c;
    c.p = (dsv4_moe_params){&gate, &bias, NULL, w1, w2, w3, &s1, &s2, &s3, E, K, I, SCORE_SQRTSOFTPLUS, 1.5f, 10.0f, 0,
                              {NULL, 0, NULL, NULL}};
    c.x = dev_rand((size_t)8 * D, 1.0f);
    c.out = gpu->ops->alloc(gpu, (size_t)8 * D * 4);
    c.tok = gpu->ops->alloc(gpu, 8 * 4);
    int Ts[] = {1, 2, 4, 8}; /* 2: a k = 1 verify step */
    double ebytes = (double)wmat_bytes(&w1[0]) * 3, sbytes = (double)wmat_bytes(&s1) * 3;
    for (int ti = 0; ti < 4; ti++) {
        c.T = Ts[ti];
        /* bytes: distinct experts touched (at most E) x 3 matrices + shared */
        int distinct = c.T * K < E ? c.T * K : E;
        double bytes = distinct * ebytes + sbytes;
        char nm[96];
        snprintf(nm, sizeof nm, "moe 16 experts %s top-6 + shared T=%d",
                 quant == 1 ? "fp4 (+fp8 shared)" : quant == 2 ? "iq3_xxs (+q8_0 shared)" : "bf16", c.T);
        row(nm, time_calls(moe_body, &c, 8), bytes);
    }
}

static void bench_moe(void)
{
    bench_moe_fmt(0);
    bench_moe_fmt(1);
    bench_moe_fmt(2);
}

/* Flash's state rows: kv (512 values, 64 rope) and indexer keys (128), fp32
 * or as the official cache packs them. */
static dsv4_state_layout flash_layout(int official)
{
    dsv4_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = 512;
    c.rope_dim = 64;
    c.idx_head_dim = 128;
    return state_layout(&c, official);
}

/* n random rows stored in format f by the GPU. */
static uint8_t *dev_rows(const dsv4_row_fmt *f, int64_t n)
{
    float *x = dev_rand((size_t)n * f->width, 1.0f);
    uint8_t *d = gpu->ops->alloc(gpu, (size_t)n * f->bytes);
    gpu->ops->ring_store(gpu, d, (int)n, f, x, (int)n, 0);
    gpu->ops->free(gpu, x);
    return d;
}

/* ---- attention ---- */
typedef struct {
    float *q, *kv, *out;
    uint8_t *ring, *ent;
    dsv4_row_fmt kf;
    int32_t *sel, *sn;
    dsv4_mat sinks;
    int64_t pos0;
    int ratio, use_sel;
} att_ctx;
static void att_body(void *p, int i)
{
    (void)i;
    att_ctx *c = p;
    gpu->ops->attention(gpu, c->q, 1, c->pos0, 64, 512, 128, c->ring, c->kv, c->ent, &c->kf, c->use_sel ? 0 : c->ratio,
                        c->use_sel ? c->sel : NULL, c->use_sel ? c->sn : NULL, 512, &c->sinks, 0.044f, 0, NULL, c->out);
}

static void bench_attention_fmt(int official)
{
    att_ctx c;
    int64_t n_ent = 32768;
    c.kf = flash_layout(official).kv;
    double rb = c.kf.bytes;
    const char *tag = official ? " (packed FP8)" : "";
    char nm[96];
    c.q = dev_rand(64 * 512, 1.0f); c.ring = dev_rows(&c.kf, 128); c.kv = dev_rand(512, 1.0f);
    c.ent = dev_rows(&c.kf, n_ent); c.out = gpu->ops->alloc(gpu, 64 * 512 * 4);
    c.sinks = weight(1, 64, 1.0f);
    int32_t sel[512], sn = 512;
    for (int i = 0; i < 512; i++) sel[i] = i * 15;
    c.sel = gpu->ops->alloc(gpu, sizeof sel); c.sn = gpu->ops->alloc(gpu, 4);
    gpu->ops->upload(gpu, c.sel, sel, sizeof sel); gpu->ops->upload(gpu, c.sn, &sn, 4);
    c.pos0 = 32768; c.ratio = 4; c.use_sel = 1;
    snprintf(nm, sizeof nm, "attention CSA 64x512, window 128 + top-512%s", tag);
    row(nm, time_calls(att_body, &c, 16), (128 + 512) * rb);
    c.use_sel = 0; c.ratio = 128;
    snprintf(nm, sizeof nm, "attention HCA 64x512, window 128 + 256 entries%s", tag);
    row(nm, time_calls(att_body, &c, 16), (128 + 256) * rb);
    c.pos0 = 131072;
    snprintf(nm, sizeof nm, "attention HCA at 128K: window + 1024 entries%s", tag);
    row(nm, time_calls(att_body, &c, 16), (128 + 1024) * rb);
    c.ratio = 0; c.pos0 = 32768;
    snprintf(nm, sizeof nm, "attention SWA 64x512, window 128%s", tag);
    row(nm, time_calls(att_body, &c, 16), 128 * rb);
}

static void bench_attention(void)
{
    bench_attention_fmt(0);
    bench_attention_fmt(1);
}

/* ---- indexer ---- */
typedef struct { float *q, *w; uint8_t *keys; dsv4_row_fmt kf; int32_t *idx, *n; int64_t pos0; } idx_ctx;
static void idx_body(void *p, int i)
{
    (void)i;
    idx_ctx *c = p;
    gpu->ops->indexer(gpu, c->q, c->w, 1, c->pos0, 64, c->keys, &c->kf, 4, 512, 0.088f, 0.125f, c->idx, c->n);
}

static void bench_indexer(void)
{
    for (int official = 0; official < 2; official++) {
        idx_ctx c;
        c.kf = flash_layout(official).idx;
        c.q = dev_rand(64 * 128, 1.0f); c.w = dev_rand(64, 1.0f); c.keys = dev_rows(&c.kf, 32768);
        c.idx = gpu->ops->alloc(gpu, 512 * 4); c.n = gpu->ops->alloc(gpu, 4);
        int64_t ps[] = {4096, 32768, 131068};
        for (int i = 0; i < 3; i++) {
            c.pos0 = ps[i];
            char nm[96];
            snprintf(nm, sizeof nm, "indexer 64x128 top-512 at pos %lld%s", (long long)ps[i],
                     official ? " (packed FP4)" : "");
            row(nm, time_calls(idx_body, &c, 16), (double)(ps[i] / 4) * c.kf.bytes);
        }
    }
}

/* ---- small ops ---- */
typedef struct { float *X, *x, *post, *comb, *a; dsv4_mat fn, base, scale, nw; } hc_ctx;
static void hc_body(void *p, int i)
{
    (void)i;
    hc_ctx *c = p;
    gpu->ops->hc_pre(gpu, c->X, 1, 4, 4096, &c->fn, &c->base, &c->scale, 20, 1e-6f, 1e-6f, &c->nw, c->x, c->post,
                     c->comb);
}
static void post_body(void *p, int i)
{
    (void)i;
    hc_ctx *c = p;
    gpu->ops->hc_post(gpu, c->X, 1, 4, 4096, c->a, c->post, c->comb);
}
static void norm_body(void *p, int i)
{
    (void)i;
    hc_ctx *c = p;
    gpu->ops->rmsnorm(gpu, c->a, 1, 4096, &c->nw, 1e-6f, c->x);
}

static void bench_small(void)
{
    hc_ctx c;
    c.X = dev_rand(4 * 4096, 1.0f); c.x = gpu->ops->alloc(gpu, 4096 * 4); c.a = dev_rand(4096, 1.0f);
    c.post = dev_rand(4, 1.0f); c.comb = dev_rand(16, 0.3f);
    c.fn = weight(24, 4 * 4096, 0.02f); c.base = weight(1, 24, 0.1f); c.scale = weight(1, 3, 1.0f);
    c.nw = weight(1, 4096, 1.0f);
    row("hc_pre hc=4 D=4096 (with its norm)", time_calls(hc_body, &c, 32), 24 * 4 * 4096 * 2.0);
    row("hc_post hc=4 D=4096", time_calls(post_body, &c, 32), 5 * 4 * 4096 * 4.0);
    row("rmsnorm 4096", time_calls(norm_body, &c, 32), 2 * 4096 * 4.0);
}

int main(int argc, char **argv)
{
    const char *f = argc > 1 ? argv[1] : "";
    gpu = cuda_backend_new(0, 1 << 16);
    if (!gpu) { fprintf(stderr, "%s\n", dsv4_last_error()); return 1; }
    if (!*f || strstr(f, "small")) bench_small();
    /* "matmul:NAME": the matmul shapes whose name contains NAME (e.g. fp8);
     * "warm:NAME" the same with L2-resident weights; parts separated by
     * commas (e.g. "attention,matmul:fp8") */
    char mo[64] = "", mw[64] = "";
    const char *p = strstr(f, "matmul:"), *q = strstr(f, "warm:");
    if (p) snprintf(mo, sizeof mo, "%.*s", (int)strcspn(p + 7, ","), p + 7);
    if (q) snprintf(mw, sizeof mw, "%.*s", (int)strcspn(q + 5, ","), q + 5);
    if (!*f || strstr(f, "matmul")) bench_matmul(p ? mo : NULL, 0);
    if (q) bench_matmul(mw, 1);
    if (!*f || strstr(f, "moe")) bench_moe();
    if (!*f || strstr(f, "prefill")) bench_prefill();
    if (!*f || strstr(f, "attention")) bench_attention();
    if (!*f || strstr(f, "indexer")) bench_indexer();
    printf("weights resident on the GPU: %.1f MB (checkpoint bytes and scale grids)\n", gpu->weight_bytes / 1e6);
    gpu->ops->destroy(gpu);
    return 0;
}

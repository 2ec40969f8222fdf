/* Every CUDA op against the CPU reference op on random inputs (needs a GPU;
 * built and run by `make cuda-test`, not by `make test`), for every weight
 * format: plain, the official FP8/MXFP4 and every GGUF block type (random
 * valid blocks, ggml_random_blocks). Also checks batch invariance of the
 * GEMV, matmul_pair against two matmuls, run-to-run determinism, graph
 * record/replay with a changing position, and the device-side fault word. */
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/dtype.h"
#include "base/error.h"
#include "base/ggml_quant.h"
#include "cpu/cpu.h" /* cpu_row_store: the packed state rows' reference */
#include "model/model.h" /* state_layout */
#include "ops/ops.h"
#include "test.h"

static dsv4_backend *cpu, *gpu;
static uint64_t rng = 88172645463325252ULL;

static float frand(void) /* uniform in [-1, 1) */
{
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return (float)((rng >> 40) & 0xffffff) / 8388608.0f - 1.0f;
}

static float *rnd(size_t n, float scale)
{
    float *p = malloc(n * sizeof *p);
    for (size_t i = 0; i < n; i++) p[i] = frand() * scale;
    return p;
}

/* Device copy of host floats. */
static float *dev(const float *h, size_t n)
{
    float *d = gpu->ops->alloc(gpu, n * sizeof *d + 16);
    gpu->ops->upload(gpu, d, h, n * sizeof *d);
    return d;
}

/* n floats on the GPU, not initialised */
static float *dalloc(size_t n) { return gpu->ops->alloc(gpu, n * sizeof(float) + 16); }

static void *devb(const void *h, size_t bytes)
{
    void *d = gpu->ops->alloc(gpu, bytes + 16);
    gpu->ops->upload(gpu, d, h, bytes);
    return d;
}

static uint8_t *backb(const void *d, size_t bytes)
{
    uint8_t *h = malloc(bytes + 1);
    gpu->ops->download(gpu, h, d, bytes);
    CHECKF(gpu->ops->sync(gpu) == DSV4_OK, "sync: %s", dsv4_last_error());
    return h;
}

/* The session layout's format of rows of `width` values: ROW_F32, ROW_FP8
 * (the last `rope` values bf16) or ROW_FP4. */
static dsv4_row_fmt row_fmt(int kind, int width, int rope)
{
    dsv4_config c;
    memset(&c, 0, sizeof c);
    c.head_dim = c.idx_head_dim = width;
    c.rope_dim = rope;
    dsv4_state_layout L = state_layout(&c, kind != ROW_F32);
    return kind == ROW_FP4 ? L.idx : L.kv;
}

/* n rows of x stored in format f by the CPU (calloc'd). */
static uint8_t *packed(const dsv4_row_fmt *f, const float *x, int n)
{
    uint8_t *p = calloc((size_t)n * (size_t)f->bytes + 16, 1);
    float *tmp = malloc((size_t)f->width * sizeof *tmp);
    for (int i = 0; i < n; i++) cpu_row_store(f, x + (size_t)i * f->width, p + (size_t)i * f->bytes, tmp);
    free(tmp);
    return p;
}

static float *back(const float *d, size_t n)
{
    float *h = malloc(n * sizeof *h);
    gpu->ops->download(gpu, h, d, n * sizeof *h);
    CHECKF(gpu->ops->sync(gpu) == DSV4_OK, "sync: %s", dsv4_last_error());
    return h;
}

/* A random host matrix of a dtype, plus its device twin. The host copy is
 * never freed: the backend dedupes weights by host address. */
typedef struct { dsv4_mat h, d; void *mem; } tmat;

static tmat mk(dsv4_dtype dt, int64_t rows, int64_t cols, float scale)
{
    tmat m;
    size_t n = (size_t)(rows * cols), es = (size_t)dtype_size(dt);
    m.mem = malloc(n * es + 16);
    for (size_t i = 0; i < n; i++) {
        float f = frand() * scale;
        if (dt == DT_F32) ((float *)m.mem)[i] = f;
        else if (dt == DT_BF16) ((uint16_t *)m.mem)[i] = f32_to_bf16(f);
        else { /* f16 via a simple conversion of small values */
            uint16_t h;
            float a = fabsf(f);
            int e;
            float mant = frexpf(a, &e); /* a = mant·2^e, mant in [0.5,1) */
            if (a < 6.1e-5f) h = 0;
            else h = (uint16_t)(((e + 14) << 10) | ((int)((mant * 2 - 1) * 1024) & 0x3ff));
            if (f < 0) h |= 0x8000;
            ((uint16_t *)m.mem)[i] = h;
        }
    }
    m.h = wmat_plain(dt, rows, cols, m.mem);
    m.d = m.h;
    CHECK(gpu->ops->adopt_weight(gpu, &m.d) == DSV4_OK);
    return m;
}

/* A random block-scaled matrix: FP8 e4m3 (128x128 scale blocks, E8M0 or
 * F32 scale grid) or MXFP4 (1x32 E8M0 scales), every code except NaN, the
 * scales powers of two from 2^-9 to 2^-3; plus its device twin. */
static tmat mkq(dsv4_wformat fmt, dsv4_dtype sdt, int64_t rows, int64_t cols)
{
    tmat m;
    memset(&m, 0, sizeof m);
    int br = fmt == WF_FP8_E4M3 ? 128 : 1, bc = fmt == WF_FP8_E4M3 ? 128 : 32;
    int64_t sr = (rows + br - 1) / br, sc = (cols + bc - 1) / bc;
    size_t nb = (size_t)(rows * wformat_row_bytes(fmt, cols)), ns = (size_t)(sr * sc);
    uint8_t *w = malloc(nb + 16);
    for (size_t i = 0; i < nb; i++) {
        uint8_t b = (uint8_t)(frand() * 128.0f + 128.0f);
        if (fmt == WF_FP8_E4M3 && (b & 0x7f) == 0x7f) b ^= 1; /* e4m3fn NaN */
        w[i] = b;
    }
    void *s = malloc(ns * 4 + 16);
    for (size_t i = 0; i < ns; i++) {
        int e = 118 + (int)((frand() + 1.0f) * 3.0f);
        if (sdt == DT_F32) ((float *)s)[i] = ldexpf(1.0f, e - 127);
        else ((uint8_t *)s)[i] = (uint8_t)e;
    }
    m.mem = w;
    m.h.dtype = fmt == WF_FP8_E4M3 ? DT_F8_E4M3 : DT_U8;
    m.h.fmt = fmt;
    m.h.rows = rows;
    m.h.cols = cols;
    m.h.data = w;
    m.h.scale = s;
    m.h.scale_dtype = sdt;
    m.h.blk_r = br;
    m.h.blk_c = bc;
    m.h.scale_rows = sr;
    m.h.scale_cols = sc;
    m.d = m.h;
    CHECKF(gpu->ops->adopt_weight(gpu, &m.d) == DSV4_OK, "adopt: %s", dsv4_last_error());
    return m;
}

/* A matrix of random valid GGUF blocks (values' rms about `rms`; 0: f16
 * scales over the whole finite range), plus its device twin. */
static tmat mkg(dsv4_wformat fmt, int64_t rows, int64_t cols, float rms)
{
    static uint64_t seed = 7;
    tmat m;
    memset(&m, 0, sizeof m);
    size_t nb = (size_t)(rows * wformat_row_bytes(fmt, cols));
    m.mem = malloc(nb + 16);
    ggml_random_blocks(wformat_ggml_type(fmt), seed++, rms, (int64_t)nb / wformat_info(fmt)->block_bytes, m.mem);
    m.h = (dsv4_mat){.dtype = DT_U8, .rows = rows, .cols = cols, .data = m.mem, .fmt = fmt};
    m.d = m.h;
    CHECKF(gpu->ops->adopt_weight(gpu, &m.d) == DSV4_OK, "adopt: %s", dsv4_last_error());
    return m;
}

/* The weight formats every weight-reading op is tested with (a shape whose
 * row length is no multiple of a format's block is skipped for it). */
typedef struct { const char *name; dsv4_wformat fmt; dsv4_dtype dt; } wcase;
#define GG_WCASE(f, name, ggml, elems, bytes) {name, f, DT_U8},
static const wcase k_wcases[] = {
    {"F32", WF_F32, DT_F32},           {"BF16", WF_BF16, DT_BF16},
    {"F16", WF_F16, DT_F16},           {"FP8/E8M0", WF_FP8_E4M3, DT_F8_E8M0},
    {"FP8/F32", WF_FP8_E4M3, DT_F32},  {"MXFP4", WF_MXFP4, DT_F8_E8M0},
    WF_GGUF_BLOCKS(GG_WCASE)
};
#undef GG_WCASE
#define N_WCASES ((int)(sizeof k_wcases / sizeof k_wcases[0]))
#define GG_FIRST 6 /* k_wcases[GG_FIRST..]: the GGUF block formats */

static int is_gguf(const wcase *w) { return wformat_info(w->fmt)->block_elems > 2; }
static int fits(const wcase *w, int64_t cols) { return cols % wformat_info(w->fmt)->block_elems == 0; }

/* Shapes of 8M values and more (TC16_MIN_VALUES: where BF16/F16 take the
 * tensor cores) run for the 16-bit formats only (the others' paths do not
 * change with size; their CPU references would take long). */
static int big_ok(const wcase *w, int64_t R, int64_t C)
{
    return R * C < ((int64_t)1 << 23) || w->fmt == WF_BF16 || w->fmt == WF_F16;
}

/* scale: plain values uniform in ±scale; GGUF values of the same rms */
static tmat mkw(const wcase *w, int64_t rows, int64_t cols, float scale)
{
    if (is_gguf(w)) return mkg(w->fmt, rows, cols, scale / sqrtf(3.0f));
    return w->fmt == WF_FP8_E4M3 || w->fmt == WF_MXFP4 ? mkq(w->fmt, w->dt, rows, cols) : mk(w->dt, rows, cols, scale);
}

static double maxdiff(const float *a, const float *b, size_t n, double *ref_max)
{
    double md = 0, rm = 0;
    for (size_t i = 0; i < n; i++) {
        double d = fabs((double)a[i] - (double)b[i]);
        if (isnan(a[i]) != isnan(b[i])) d = INFINITY;
        if (d > md) md = d;
        if (fabs(b[i]) > rm) rm = fabs(b[i]);
    }
    if (ref_max) *ref_max = rm;
    return md;
}

#define CLOSE(gpu_v, cpu_v, n, tol)                                                          \
    do {                                                                                 \
        double rm_, md_ = maxdiff((gpu_v), (cpu_v), (n), &rm_);                          \
        CHECKF(md_ <= (tol) * (1.0 + rm_), "max |diff| %g (ref max %g) > tol %g", md_, rm_, (double)(tol)); \
    } while (0)

static void test_matmul(void)
{
    /* tensor-core and GEMV paths, several warps per row (split sums: GGUF
     * 300x4096 two, 40x16384 eight), rows and columns that end inside a chunk
     * or a scale block; 33x200 has rows the 16-byte loads do not fit (FP8:
     * element by element; MXFP4 and GGUF need whole blocks and skip it) */
    int64_t shapes[][2] = {{37, 64}, {256, 1024}, {33, 224}, {129, 96}, {300, 4096}, {1000, 2048}, {33, 200}, {20, 336},
                           {40, 16384}, {2056, 4096}, {8192, 1032}};
    int Ts[] = {1, 3, 8, 9, 40, 70};
    for (int wi = 0; wi < N_WCASES; wi++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
            for (int ti = 0; ti < 6; ti++) {
                int64_t R = shapes[si][0], C = shapes[si][1], ldx = C + 8, ldy = R + 4;
                if (!fits(&k_wcases[wi], C) || !big_ok(&k_wcases[wi], R, C)) continue;
                int T = Ts[ti];
                tmat W = mkw(&k_wcases[wi], R, C, 0.5f);
                float *x = rnd((size_t)T * ldx, 1.0f), *y = calloc((size_t)T * ldy, 4);
                cpu->ops->matmul(cpu, x, ldx, T, &W.h, y, ldy);
                float *dx = dev(x, (size_t)T * ldx), *dy = dev(y, (size_t)T * ldy);
                gpu->ops->matmul(gpu, dx, ldx, T, &W.d, dy, ldy);
                float *gy = back(dy, (size_t)T * ldy);
                double rm, md = maxdiff(gy, y, (size_t)T * ldy, &rm);
                CHECKF(md <= 2e-5 * sqrt((double)C) * (1.0 + rm), "%s %lldx%lld T=%d: max |diff| %g (ref max %g)",
                       k_wcases[wi].name, (long long)R, (long long)C, T, md, rm);
                free(x); free(y); free(gy);
                gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
            }
}

/* Batch invariance of the matmul, bit for bit, for every format: the rows
 * of a 512-row call equal the same rows computed in calls of 64, 33, 9, 8,
 * 4 and 1 rows (the sizes run different kernel instances: prefill,
 * mid-size, decode) and row 0 alone. */
static void test_matmul_invariance(void)
{
    int64_t shapes[][2] = {{4096, 1024}, {300, 4096}, {64, 336}, {40, 16384}, {2056, 4096}};
    int Ts[] = {64, 33, 9, 8, 4, 1}, nts = (int)(sizeof Ts / sizeof Ts[0]);
    int n = 512;
    for (int wi = 0; wi < N_WCASES; wi++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            int64_t R = shapes[si][0], C = shapes[si][1], ldx = C + 4;
            if (!fits(&k_wcases[wi], C) || !big_ok(&k_wcases[wi], R, C)) continue;
            tmat W = mkw(&k_wcases[wi], R, C, 0.1f);
            float *x = rnd((size_t)n * ldx, 1.0f);
            float *dx = dev(x, (size_t)n * ldx), *dy = gpu->ops->alloc(gpu, (size_t)n * R * 4);
            gpu->ops->matmul(gpu, dx, ldx, n, &W.d, dy, R);
            float *all = back(dy, (size_t)n * R);
            for (int ti = 0; ti < nts; ti++) {
                int T = Ts[ti];
                int64_t t0 = ti == nts - 1 ? 511 : 100 + ti; /* odd offsets into the prompt */
                gpu->ops->matmul(gpu, dx + t0 * ldx, ldx, T, &W.d, dy, R);
                float *part = back(dy, (size_t)T * R);
                CHECKF(!memcmp(part, all + t0 * R, (size_t)T * R * 4),
                       "%s %lldx%lld: rows %lld.. of a %d-row call differ from the 512-row call", k_wcases[wi].name,
                       (long long)R, (long long)C, (long long)t0, T);
                free(part);
            }
            gpu->ops->matmul(gpu, dx, ldx, 1, &W.d, dy, R);
            float *one = back(dy, (size_t)R);
            CHECKF(!memcmp(one, all, (size_t)R * 4), "%s %lldx%lld: row 0 alone differs", k_wcases[wi].name,
                   (long long)R, (long long)C);
            free(one); free(x); free(all);
            gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
        }
}

/* Q8_0 and IQ3_XXS products with exact integer block sums (src/cuda/int_dot.cuh): the
 * GPU's bits equal this host emulation of the numerics the header states
 * (22-bit block fixed point in three int8 limbs, exact int32 block sums,
 * v = fma(float(s2*256 + s1), 256, float(s0)), fma(v, d*2^-e, acc) block
 * after block in slices of 32-block chunks, slices added in order), on the
 * GEMV (1..8 rows) and the IMMA kernel (more), with tiny, zero and large
 * activation blocks, rows that end inside a warp's 32 and columns that end
 * inside a chunk; a token with a NaN or an infinity gets NaN in every row
 * (limbs alone would have made it finite). */
static int int_splits_ref(int64_t rows, int64_t cols)
{
    int64_t nch = (cols / 32 + 31) / 32;
    int ks = 1;
    while (ks < 4 && ks < nch && rows * ks < 32768) ks *= 2;
    return ks;
}

/* Block b (32 columns) of row r of an integer-sums format: its int8 codes
 * and factor. IQ3_XXS through the CPU's dequantization: every value is the
 * block's factor d·(0.5 + s)·0.5 times a signed grid magnitude, exactly. */
static void int_block_ref(const dsv4_mat *W, int64_t r, int64_t b, int8_t *q, float *f)
{
    const uint8_t *row = (const uint8_t *)W->data + r * wformat_row_bytes(W->fmt, W->cols);
    if (W->fmt == WF_Q8_0) {
        const uint8_t *blk = row + b * 34;
        for (int i = 0; i < 32; i++) q[i] = (int8_t)blk[2 + i];
        *f = f16_to_f32((uint16_t)(blk[0] | blk[1] << 8));
        return;
    }
    const uint8_t *sb = row + b / 8 * 98;
    float v[256];
    ggml_dequant_blocks(GGML_IQ3_XXS, sb, 1, v);
    const uint8_t *au = sb + 66 + 4 * (b % 8);
    float s = (float)(au[3] >> 4);
    *f = f16_to_f32((uint16_t)(sb[0] | sb[1] << 8)) * (0.5f + s) * 0.5f;
    for (int i = 0; i < 32; i++) q[i] = (int8_t)(v[32 * (b % 8) + i] / *f);
}

static void int_matmul_ref(const dsv4_mat *W, const float *x, float *y)
{
    int64_t R = W->rows, C = W->cols, nb = C / 32, nch = (nb + 31) / 32;
    int ks = int_splits_ref(R, C);
    int8_t *lim = malloc((size_t)C * 3);
    float *xs = malloc((size_t)nb * sizeof(float));
    for (int64_t b = 0; b < nb; b++) {
        float m = 0;
        int bad = 0;
        for (int i = 0; i < 32; i++) {
            m = fmaxf(m, fabsf(x[b * 32 + i]));
            bad |= !isfinite(x[b * 32 + i]);
        }
        int e = 0;
        if (m > 0 && !bad) {
            frexpf(m, &e);
            e = 22 - e < 126 ? 22 - e : 126;
        }
        xs[b] = bad ? NAN : ldexpf(1.0f, -e); /* a block that is not finite: NaN sums */
        for (int i = 0; i < 32; i++) {
            int xi = bad ? 0 : (int)rintf(ldexpf(x[b * 32 + i], e));
            int a0 = ((xi + 128) & 255) - 128, q = (xi - a0) >> 8;
            int a1 = ((q + 128) & 255) - 128, a2 = (q - a1) >> 8;
            lim[b * 96 + i] = (int8_t)a0;
            lim[b * 96 + 32 + i] = (int8_t)a1;
            lim[b * 96 + 64 + i] = (int8_t)a2;
        }
    }
    for (int64_t r = 0; r < R; r++) {
        float tot = 0;
        for (int sl = 0; sl < ks; sl++) {
            float acc = 0;
            for (int64_t ch = sl; ch < nch; ch += ks)
                for (int64_t b = ch * 32; b < ch * 32 + 32 && b < nb; b++) {
                    int8_t q[32];
                    float d;
                    int_block_ref(W, r, b, q, &d);
                    int s[3] = {0, 0, 0};
                    for (int l = 0; l < 3; l++)
                        for (int i = 0; i < 32; i++) s[l] += q[i] * lim[b * 96 + 32 * l + i];
                    float v = fmaf((float)(s[2] * 256 + s[1]), 256.0f, (float)s[0]);
                    acc = fmaf(v, d * xs[b], acc);
                }
            tot = sl == 0 ? acc : tot + acc;
        }
        y[r] = tot;
    }
    free(lim);
    free(xs);
}

static void test_int_matmul_bits(void)
{
    /* the last two: columns that end inside a 32-block chunk (IQ3_XXS: in
     * whole 256-column super-blocks) */
    int64_t shapes[][2] = {{256, 1024}, {4096, 1024}, {512, 4096}, {40, 1056}, {100, 2080}};
    int64_t iq3_cols[] = {1024, 1024, 4096, 1280, 2304};
    dsv4_wformat fmts[] = {WF_Q8_0, WF_IQ3_XXS};
    int Ts[] = {1, 2, 8, 9, 40};
    for (int ci = 0; ci < 10; ci++) /* both formats, five shapes each */
        for (int ti = 0; ti < 5; ti++) {
            int si = ci % 5;
            dsv4_wformat fmt = fmts[ci / 5];
            int64_t R = shapes[si][0], C = fmt == WF_Q8_0 ? shapes[si][1] : iq3_cols[si], ldx = C + 4;
            int T = Ts[ti];
            tmat W = mkg(fmt, R, C, 0.05f);
            float *x = rnd((size_t)T * ldx, 1.0f);
            for (int64_t c = 0; c < 32; c++) { /* block 0 of token 0 zero, block 1 tiny, block 2 large */
                x[c] = 0.0f;
                x[32 + c] *= 1e-35f;
                x[64 + c] *= 1e30f;
            }
            if (T >= 2) x[(T - 1) * ldx + 100] = NAN;     /* the last token: a NaN in block 3 */
            if (T >= 9) x[(T - 2) * ldx + 40] = INFINITY; /* the one before: an infinity in block 1 */
            float *dx = dev(x, (size_t)T * ldx), *dy = gpu->ops->alloc(gpu, (size_t)T * R * 4);
            gpu->ops->matmul(gpu, dx, ldx, T, &W.d, dy, R);
            float *gy = back(dy, (size_t)T * R), *hy = malloc((size_t)R * 4);
            for (int t = 0; t < T; t++) {
                int_matmul_ref(&W.h, x + t * ldx, hy);
                int64_t bad = 0, first = -1;
                int nonfinite = (T >= 2 && t == T - 1) || (T >= 9 && t == T - 2);
                for (int64_t r = 0; r < R; r++) {
                    float g = gy[t * R + r];
                    int same = isnan(g) && isnan(hy[r]) ? 1 : !memcmp(&hy[r], &g, 4);
                    if (!same || (nonfinite && !isnan(g))) { bad++; if (first < 0) first = r; }
                }
                CHECKF(!bad, "%s %lldx%lld T=%d token %d: %lld rows differ from the host's emulation (row %lld: %.9g vs %.9g)",
                       fmt == WF_Q8_0 ? "Q8_0" : "IQ3_XXS", (long long)R, (long long)C, T, t, (long long)bad, (long long)first,
                       first >= 0 ? gy[t * R + first] : 0.0, first >= 0 ? hy[first] : 0.0);
            }
            free(x); free(gy); free(hy);
            gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
            }
}

/* matmul_fp8in (the official numerics' products): the CPU's values for every
 * format, the tensor-core kinds rounding in the rows' preparation (staged
 * for 1..8 rows, a preparation launch for more) and the others through a
 * rounding pass of their own (also rows too long for the preparation's
 * shared memory: 12288 columns, DSpark's main_proj, and 16384); x left as
 * it was; a row's bits the same at any T. */
static void test_matmul_fp8in(void)
{
    int64_t shapes[][2] = {{256, 1024}, {300, 4096}, {33, 224}, {24, 12288}, {40, 16384}, {2048, 4096}};
    int Ts[] = {1, 8, 9, 70}, nts = (int)(sizeof Ts / sizeof Ts[0]);
    for (int wi = 0; wi < N_WCASES; wi++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            int64_t R = shapes[si][0], C = shapes[si][1];
            if (!fits(&k_wcases[wi], C) || !big_ok(&k_wcases[wi], R, C)) continue;
            tmat W = mkw(&k_wcases[wi], R, C, 0.5f);
            int n = 70;
            float *x = rnd((size_t)n * C, 1.0f), *y = calloc((size_t)n * R, 4);
            float *dx = dev(x, (size_t)n * C), *dy = gpu->ops->alloc(gpu, (size_t)n * R * 4);
            cpu->ops->matmul_fp8in(cpu, x, C, n, &W.h, y, R);
            gpu->ops->matmul_fp8in(gpu, dx, C, n, &W.d, dy, R);
            float *all = back(dy, (size_t)n * R), *gx = back(dx, (size_t)n * C);
            double rm, md = maxdiff(all, y, (size_t)n * R, &rm);
            CHECKF(md <= 2e-5 * sqrt((double)C) * (1.0 + rm), "%s %lldx%lld: max |diff| %g (ref max %g)",
                   k_wcases[wi].name, (long long)R, (long long)C, md, rm);
            CHECKF(!memcmp(gx, x, (size_t)n * C * 4), "%s %lldx%lld: x was changed", k_wcases[wi].name,
                   (long long)R, (long long)C);
            for (int ti = 0; ti < nts - 1; ti++) {
                int T = Ts[ti];
                int64_t t0 = 3 + ti;
                gpu->ops->matmul_fp8in(gpu, dx + t0 * C, C, T, &W.d, dy, R);
                float *part = back(dy, (size_t)T * R);
                CHECKF(!memcmp(part, all + t0 * R, (size_t)T * R * 4),
                       "%s %lldx%lld: rows %lld.. of a %d-row call differ from the %d-row call", k_wcases[wi].name,
                       (long long)R, (long long)C, (long long)t0, T, n);
                free(part);
            }
            free(x); free(y); free(all); free(gx);
            gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
        }
}

/* The tensor cores scale each activation row by its own power of two
 * before splitting it into f16 (bf16) terms: rows far outside f16's range
 * (1e-30, 1e30, one huge value among small ones, all zero) still match the
 * CPU's fp32 products relative to the row's size, and a zero row gives 0
 * (BF16/F16 at a size that takes the tensor cores). */
/* Residual streams [T][hc][D] and their mixing (post [T][hc], comb
 * [T][hc][hc]) on the device, for the hc_post epilogues (dsv4_hc_post). */
typedef struct { float *X, *post, *comb; } hc_bufs;

static hc_bufs hc_bufs_new(int T, int hc, int64_t D)
{
    float *X = rnd((size_t)T * hc * D, 1.0f), *po = rnd((size_t)T * hc, 1.0f), *cm = rnd((size_t)T * hc * hc, 0.5f);
    hc_bufs r = {dev(X, (size_t)T * hc * D), dev(po, (size_t)T * hc), dev(cm, (size_t)T * hc * hc)};
    free(X); free(po); free(cm);
    return r;
}

static void hc_bufs_free(hc_bufs *h)
{
    gpu->ops->free(gpu, h->X); gpu->ops->free(gpu, h->post); gpu->ops->free(gpu, h->comb);
}

/* A copy of the streams X (n floats) on the device. */
static float *dev_copy(const float *dX, size_t n)
{
    float *c = dalloc(n);
    gpu->ops->copy(gpu, c, dX, n * sizeof(float));
    return c;
}

/* matmul_post against its two ops (matmul or matmul_fp8in, then hc_post)
 * on the GPU, bit for bit, at several row counts: the FP8 products apply
 * hc_post where they store (fp8_mma.cu), the others fall back to the two
 * ops. */
static void test_matmul_post(void)
{
    int64_t shapes[][2] = {{256, 1024}, {320, 320}, {1024, 4096}};
    int Ts[] = {1, 3, 9, 70}, hc = 4;
    for (int wi = 0; wi < GG_FIRST; wi++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++)
            for (int ti = 0; ti < (int)(sizeof Ts / sizeof Ts[0]); ti++)
                for (int fp8in = 0; fp8in <= 1; fp8in++) {
                    int64_t R = shapes[si][0], C = shapes[si][1];
                    int T = Ts[ti];
                    if (!fits(&k_wcases[wi], C)) continue;
                    tmat W = mkw(&k_wcases[wi], R, C, 0.5f);
                    float *x = rnd((size_t)T * C, 1.0f), *dx = dev(x, (size_t)T * C), *dy = dalloc((size_t)T * R);
                    hc_bufs h = hc_bufs_new(T, hc, R);
                    float *X2 = dev_copy(h.X, (size_t)T * hc * R);
                    if (fp8in) gpu->ops->matmul_fp8in(gpu, dx, C, T, &W.d, dy, R);
                    else gpu->ops->matmul(gpu, dx, C, T, &W.d, dy, R);
                    gpu->ops->hc_post(gpu, X2, T, hc, (int)R, dy, h.post, h.comb);
                    dsv4_hc_post post = {h.X, hc, h.post, h.comb};
                    gpu->ops->matmul_post(gpu, dx, C, T, &W.d, fp8in, dy, &post);
                    float *a = back(h.X, (size_t)T * hc * R), *b = back(X2, (size_t)T * hc * R);
                    CHECKF(!memcmp(a, b, (size_t)T * hc * R * 4), "%s %lldx%lld T=%d%s: matmul_post differs from "
                           "the product and hc_post", k_wcases[wi].name, (long long)R, (long long)C, T,
                           fp8in ? " (fp8 rows)" : "");
                    free(x); free(a); free(b);
                    hc_bufs_free(&h);
                    gpu->ops->free(gpu, X2); gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
                }
}

/* matmul_pair's outputs against two matmuls on the GPU, bit for bit (and
 * the rows' padding left as it was): T token rows of x (C columns), A's
 * output with its own row stride and B's with another; eager, then (decode
 * sizes) recorded as a graph step. */
static void pair_check(const char *what, const dsv4_mat *A, const dsv4_mat *B, int64_t C, int T)
{
    int64_t ldx = C + 4, la = A->rows + 3, lb = B->rows + 5;
    size_t na = (size_t)T * la, nb = (size_t)T * lb;
    float *x = rnd((size_t)T * ldx, 1.0f), *za = calloc(na, 4), *zb = calloc(nb, 4);
    float *dx = dev(x, (size_t)T * ldx), *ra = dev(za, na), *rb = dev(zb, nb), *pa = dalloc(na), *pb = dalloc(nb);
    gpu->ops->matmul(gpu, dx, ldx, T, A, ra, la);
    gpu->ops->matmul(gpu, dx, ldx, T, B, rb, lb);
    float *wa = back(ra, na), *wb = back(rb, nb);
    for (int rec = 0; rec <= (T <= 8); rec++) {
        gpu->ops->zero(gpu, pa, na * 4);
        gpu->ops->zero(gpu, pb, nb * 4);
        if (rec) gpu->ops->step_begin(gpu, T);
        gpu->ops->matmul_pair(gpu, dx, ldx, T, A, pa, la, B, pb, lb);
        if (rec) gpu->ops->step_end(gpu);
        float *ga = back(pa, na), *gb = back(pb, nb);
        CHECKF(!memcmp(ga, wa, na * 4) && !memcmp(gb, wb, nb * 4),
               "%s T=%d%s: matmul_pair's outputs (first %s) differ from two matmuls", what, T,
               rec ? " (recorded step)" : "", memcmp(ga, wa, na * 4) ? "W1's" : "W2's");
        free(ga); free(gb);
    }
    free(x); free(za); free(zb); free(wa); free(wb);
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, ra); gpu->ops->free(gpu, rb);
    gpu->ops->free(gpu, pa); gpu->ops->free(gpu, pb);
}

/* matmul_pair (the compressors' wkv and wgate) for every format and shape
 * kind: two weights of one shape and format that take the GEMV run in one
 * launch, the second half of its blocks on the second weight (16-byte loads
 * with one to eight warps a row: 256x1024, 40x16384, 33x200; element by
 * element: 37x130, and FP8 rows the loads do not fit); the tensor-core,
 * integer and GGUF paths (BF16 2048x4096 among them) run two products.
 * Then pairs that must not share a launch: other shapes, other formats,
 * another FP8 scale grid, a weight whose rows are not 16-byte aligned
 * beside one whose rows are. Every output must keep matmul's bits. */
static void test_matmul_pair(void)
{
    int64_t shapes[][2] = {{256, 1024}, {40, 16384}, {33, 200}, {37, 130}, {2048, 4096}};
    int Ts[] = {1, 2, 7, 9, 33};
    char what[96];
    for (int wi = 0; wi < N_WCASES; wi++)
        for (int si = 0; si < (int)(sizeof shapes / sizeof shapes[0]); si++) {
            int64_t R = shapes[si][0], C = shapes[si][1];
            if (!fits(&k_wcases[wi], C) || !big_ok(&k_wcases[wi], R, C)) continue;
            tmat A = mkw(&k_wcases[wi], R, C, 0.5f), B = mkw(&k_wcases[wi], R, C, 0.5f);
            snprintf(what, sizeof what, "%s %lldx%lld", k_wcases[wi].name, (long long)R, (long long)C);
            for (int ti = 0; ti < (int)(sizeof Ts / sizeof Ts[0]); ti++) pair_check(what, &A.d, &B.d, C, Ts[ti]);
        }
    tmat big = mk(DT_BF16, 256, 1024, 0.5f), small = mk(DT_BF16, 128, 1024, 0.5f), f32 = mk(DT_F32, 256, 1024, 0.5f);
    tmat e8 = mkq(WF_FP8_E4M3, DT_F8_E8M0, 33, 200), s32 = mkq(WF_FP8_E4M3, DT_F32, 33, 200);
    tmat wide = mk(DT_F32, 257, 1024, 0.5f);
    dsv4_mat off = wide.d; /* rows from the matrix's second value: not 16-byte aligned */
    off.rows = 256;
    off.data = (const float *)wide.d.data + 1;
    for (int ti = 0; ti < (int)(sizeof Ts / sizeof Ts[0]); ti++) {
        int T = Ts[ti];
        pair_check("BF16 256x1024 beside 128x1024", &big.d, &small.d, 1024, T);
        pair_check("BF16 beside F32 256x1024", &big.d, &f32.d, 1024, T);
        pair_check("FP8 33x200, E8M0 scales beside F32 scales", &e8.d, &s32.d, 200, T);
        pair_check("F32 256x1024, aligned rows beside unaligned", &f32.d, &off, 1024, T);
        pair_check("F32 256x1024, unaligned rows beside aligned", &off, &f32.d, 1024, T);
    }
}

static void test_matmul_range(void)
{
    const float mags[] = {1e-30f, 1e30f, 1.0f, 0.0f};
    for (int wi = 1; wi < N_WCASES; wi++) {
        int is16 = k_wcases[wi].fmt == WF_BF16 || k_wcases[wi].fmt == WF_F16;
        int64_t R = is16 ? 2048 : 256, C = is16 ? 4096 : 1024;
        tmat W = mkw(&k_wcases[wi], R, C, 0.5f);
        int T = 4;
        float *x = rnd((size_t)T * C, 1.0f), *y = calloc((size_t)T * R, 4);
        for (int t = 0; t < T; t++)
            for (int64_t k = 0; k < C; k++) x[t * C + k] *= mags[t];
        x[2 * C + 17] = 6.0e4f; /* row 2: one value near f16's top, the rest about 1 */
        cpu->ops->matmul(cpu, x, C, T, &W.h, y, R);
        float *dx = dev(x, (size_t)T * C), *dy = dev(y, (size_t)T * R);
        gpu->ops->matmul(gpu, dx, C, T, &W.d, dy, R);
        float *gy = back(dy, (size_t)T * R);
        for (int t = 0; t < T; t++) {
            double rm, md = maxdiff(gy + t * R, y + t * R, (size_t)R, &rm);
            CHECKF(md <= 2e-5 * sqrt((double)C) * rm || (rm == 0 && md == 0),
                   "%s row of magnitude %g: max |diff| %g (ref max %g)", k_wcases[wi].name, (double)mags[t], md, rm);
        }
        free(x); free(y); free(gy);
        gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
    }
}

/* Block-diagonal matmul (the grouped wo_a, plain or FP8): against the CPU
 * op, and batch invariant (rows of each call equal the row alone). */
static void test_matmul_grouped(void)
{
    int64_t shapes[][3] = {{4, 64, 40}, {8, 1024, 512}, {3, 96, 200}, {4, 24, 64}, {8, 2048, 4096}};
    int Ts[] = {1, 4, 8, 11, 70};
    for (int wi = 0; wi < N_WCASES; wi++) {
        if (k_wcases[wi].fmt == WF_MXFP4) continue;
        for (int si = 0; si < 5; si++)
            for (int ti = 0; ti < 5; ti++) {
                int G = (int)shapes[si][0], T = Ts[ti];
                int64_t R = shapes[si][1], C = shapes[si][2], ldx = G * C + 4, ldy = R + 4;
                if (k_wcases[wi].fmt == WF_FP8_E4M3 && (R / G) % 128) continue; /* scale blocks inside a group */
                if (!fits(&k_wcases[wi], C) || !big_ok(&k_wcases[wi], R, C)) continue;
                tmat W = mkw(&k_wcases[wi], R, C, 0.5f);
                float *x = rnd((size_t)T * ldx, 1.0f), *y = calloc((size_t)T * ldy, 4);
                cpu->ops->matmul_grouped(cpu, x, ldx, T, &W.h, G, y, ldy);
                float *dx = dev(x, (size_t)T * ldx), *dy = dev(y, (size_t)T * ldy);
                gpu->ops->matmul_grouped(gpu, dx, ldx, T, &W.d, G, dy, ldy);
                float *gy = back(dy, (size_t)T * ldy);
                double rm, md = maxdiff(gy, y, (size_t)T * ldy, &rm);
                CHECKF(md <= 2e-5 * sqrt((double)C) * (1.0 + rm), "%s grouped %dx%lldx%lld T=%d: max |diff| %g",
                       k_wcases[wi].name, G, (long long)R, (long long)C, T, md);
                for (int t = 0; T > 1 && t < T; t += T / 3 + 1) {
                    gpu->ops->matmul_grouped(gpu, dx + t * ldx, ldx, 1, &W.d, G, dy, ldy);
                    float *g1 = back(dy, (size_t)R);
                    CHECKF(!memcmp(g1, gy + t * ldy, (size_t)R * 4), "%s grouped row %d of %d differs alone",
                           k_wcases[wi].name, t, T);
                    free(g1);
                }
                free(x); free(y); free(gy);
                gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
            }
    }
}

/* GGUF blocks decode on the GPU to exactly the CPU decoder's values: with
 * one-hot token rows x[t] = e_t, y[t][r] is W[r][t] alone (every other
 * product is an exact zero). Blocks with f16 scales over the whole finite
 * range; both row split counts of the GEMV. */
static void test_gguf_exact(void)
{
    int64_t shapes[][2] = {{24, 256}, {3, 4096}};
    for (int wi = GG_FIRST; wi < N_WCASES; wi++)
        for (int si = 0; si < 2; si++) {
            int64_t R = shapes[si][0], C = shapes[si][1];
            int T = (int)C;
            tmat W = mkg(k_wcases[wi].fmt, R, C, 0.0f);
            float *x = calloc((size_t)T * C, 4), *want = malloc((size_t)R * C * 4);
            for (int t = 0; t < T; t++) x[(size_t)t * C + t] = 1.0f;
            for (int64_t r = 0; r < R; r++) wmat_decode_row(&W.h, r, 0, C, want + r * C);
            float *dx = dev(x, (size_t)T * C), *dy = gpu->ops->alloc(gpu, (size_t)T * R * 4);
            gpu->ops->matmul(gpu, dx, C, T, &W.d, dy, R);
            float *gy = back(dy, (size_t)T * R);
            int64_t bad = 0, first = -1;
            for (int t = 0; t < T; t++)
                for (int64_t r = 0; r < R; r++)
                    if (!(gy[(size_t)t * R + r] == want[r * C + t])) { /* == : an exact zero may lose its sign */
                        if (first < 0) first = r * C + t;
                        bad++;
                    }
            CHECKF(bad == 0, "%s %lldx%lld: %lld decoded values differ (first W[%lld][%lld]: %.9g vs %.9g)",
                   k_wcases[wi].name, (long long)R, (long long)C, (long long)bad, (long long)(first / C),
                   (long long)(first % C), first < 0 ? 0.0 : (double)gy[(first % C) * R + first / C],
                   first < 0 ? 0.0 : (double)want[first]);
            free(x); free(want); free(gy);
            gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
        }
}

static void test_rmsnorm(void)
{
    int ns[] = {64, 1000, 4096};
    for (int i = 0; i < 3; i++)
        for (int wt = 0; wt < 2; wt++) {
            int n = ns[i], T = 5;
            tmat w = mk(DT_BF16, 1, n, 1.0f);
            float *x = rnd((size_t)T * n, 3.0f), *y = calloc((size_t)T * n, 4);
            cpu->ops->rmsnorm(cpu, x, T, n, wt ? &w.h : NULL, 1e-6f, y);
            float *dx = dev(x, (size_t)T * n);
            gpu->ops->rmsnorm(gpu, dx, T, n, wt ? &w.d : NULL, 1e-6f, dx); /* in place */
            float *g = back(dx, (size_t)T * n);
            CLOSE(g, y, (size_t)T * n, 1e-6);
            free(x); free(y); free(g);
            gpu->ops->free(gpu, dx);
        }
}

static void test_rope(void)
{
    int T = 4, H = 3, hd = 64, rd = 16;
    float *f = rnd(rd / 2, 0.5f);
    for (int i = 0; i < rd / 2; i++) f[i] = fabsf(f[i]);
    float *df = dev(f, rd / 2);
    int64_t p0s[] = {0, 7, 100000};
    for (int pi = 0; pi < 3; pi++)
        for (int inv = 0; inv < 2; inv++)
            for (int step = 0; step < 2; step++) {
                float *x = rnd((size_t)T * H * hd, 1.0f);
                float *dx = dev(x, (size_t)T * H * hd);
                cpu->ops->rope(cpu, x, T, H, hd, rd, p0s[pi], step, NULL, f, inv);
                gpu->ops->rope(gpu, dx, T, H, hd, rd, p0s[pi], step, NULL, df, inv);
                float *g = back(dx, (size_t)T * H * hd);
                CLOSE(g, x, (size_t)T * H * hd, p0s[pi] > 1000 ? 2e-3 : 1e-5); /* large angles: sin/cos ulps */
                free(x); free(g);
                gpu->ops->free(gpu, dx);
            }
    /* rows at positions of their own (several lanes' rows in one call):
     * close to the CPU's, and each row the bits of a call for it alone */
    int64_t pos[4] = {100000, 3, 4, 0};
    int64_t *dpos = devb(pos, sizeof pos);
    for (int inv = 0; inv < 2; inv++) {
        size_t n = (size_t)T * H * hd, nr = (size_t)H * hd;
        float *x = rnd(n, 1.0f), *dx = dev(x, n), *dy = dev(x, n);
        cpu->ops->rope(cpu, x, T, H, hd, rd, 0, 0, pos, f, inv);
        gpu->ops->rope(gpu, dx, T, H, hd, rd, 0, 0, dpos, df, inv);
        for (int t = 0; t < T; t++) gpu->ops->rope(gpu, dy + t * nr, 1, H, hd, rd, pos[t], 1, NULL, df, inv);
        float *g = back(dx, n), *g1 = back(dy, n);
        CLOSE(g, x, n, 2e-3);
        CHECKF(!memcmp(g, g1, n * 4), "rope (inverse %d): rows at their own positions differ from calls for each", inv);
        free(x); free(g); free(g1);
        gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
    }
    free(f);
    gpu->ops->free(gpu, df); gpu->ops->free(gpu, dpos);
}

/* norm_rope: close to the CPU's, and the same bits as the GPU's rmsnorm
 * then rope (the fused kernel shares their arithmetic). Head sizes of the
 * real models (512, rope 64) and small ones, weighted and not; rows at
 * consecutive positions and the last one at a position of its own (as the
 * first row of another lane). With the
 * official KV rounding (n_fp8 >= 0, also a partial last block and none):
 * the CPU's rounding (cpu_kv_fp8_round) of the GPU's unrounded heads, bit
 * for bit, on rows whose blocks mix large and tiny values. */
static void test_norm_rope(void)
{
    int hds[] = {512, 64, 96}, rds[] = {64, 16, 32};
    int64_t p0s[] = {0, 100000};
    for (int c = 0; c < 3; c++)
        for (int wt = 0; wt < 2; wt++)
            for (int pi = 0; pi < 2; pi++) {
                int T = 3, H = 5, hd = hds[c], rd = rds[c];
                size_t n = (size_t)T * H * hd;
                tmat w = mk(DT_BF16, 1, hd, 1.0f);
                float *f = rnd(rd / 2, 0.5f);
                for (int i = 0; i < rd / 2; i++) f[i] = fabsf(f[i]);
                float *x = rnd(n, 3.0f);
                for (size_t k = 0; k < n; k += 7) x[k] *= 1000.0f;
                for (size_t k = 3; k < n; k += 11) x[k] *= 1e-6f;
                int64_t pos[3] = {p0s[pi], p0s[pi] + 1, 5}, *dpos = devb(pos, sizeof pos);
                float *df = dev(f, rd / 2), *dx = dev(x, n), *dy = dev(x, n), *dz = dev(x, n);
                cpu->ops->norm_rope(cpu, x, T, H, hd, rd, wt ? &w.h : NULL, 1e-6f, pos, f, -1);
                gpu->ops->norm_rope(gpu, dx, T, H, hd, rd, wt ? &w.d : NULL, 1e-6f, dpos, df, -1);
                gpu->ops->rmsnorm(gpu, dy, T * H, hd, wt ? &w.d : NULL, 1e-6f, dy);
                gpu->ops->rope(gpu, dy, T - 1, H, hd, rd, p0s[pi], 1, NULL, df, 0);
                gpu->ops->rope(gpu, dy + (size_t)(T - 1) * H * hd, 1, H, hd, rd, pos[T - 1], 1, NULL, df, 0);
                int n_fp8 = c == 2 ? 40 : c == 1 && wt ? 0 : hd - rd; /* 40: a partial block of 64 */
                gpu->ops->norm_rope(gpu, dz, T, H, hd, rd, wt ? &w.d : NULL, 1e-6f, dpos, df, n_fp8);
                float *g = back(dx, n), *g2 = back(dy, n), *g3 = back(dz, n);
                CLOSE(g, x, n, p0s[pi] > 1000 ? 2e-3 : 1e-5); /* large angles: sin/cos ulps */
                CHECKF(!memcmp(g, g2, n * sizeof(float)), "norm_rope, head %d: bits differ from rmsnorm + rope", hd);
                cpu_kv_fp8_round(cpu, g, T * H, hd, n_fp8);
                CHECKF(!memcmp(g, g3, n * sizeof(float)), "norm_rope, head %d, n_fp8 %d: the rounding differs from the CPU's",
                       hd, n_fp8);
                free(f); free(x); free(g); free(g2); free(g3);
                gpu->ops->free(gpu, df); gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy); gpu->ops->free(gpu, dz);
                gpu->ops->free(gpu, dpos);
            }
}

static void test_embed_ring(void)
{
    int V = 50, D = 40, T = 6, hc = 4;
    tmat E = mk(DT_BF16, V, D, 1.0f);
    int32_t tok[6] = {3, 0, 49, 7, 7, 12};
    float *X = calloc((size_t)T * hc * D, 4);
    cpu->ops->embed(cpu, &E.h, tok, T, hc, X);
    int32_t *dt = devb(tok, sizeof tok);
    float *dX = dev(X, (size_t)T * hc * D);
    gpu->ops->zero(gpu, dX, (size_t)T * hc * D * 4);
    gpu->ops->embed(gpu, &E.d, dt, T, hc, dX);
    float *g = back(dX, (size_t)T * hc * D);
    CHECK(!memcmp(g, X, (size_t)T * hc * D * 4));
    free(g); free(X);
    /* GGUF embeddings (llama.cpp files quantize token_embd): the CPU's bits */
    for (int wi = GG_FIRST; wi < N_WCASES; wi++) {
        int Dg = 512;
        tmat Eg = mkg(k_wcases[wi].fmt, V, Dg, 0.0f);
        float *Xg = calloc((size_t)T * hc * Dg, 4), *dXg = gpu->ops->alloc(gpu, (size_t)T * hc * Dg * 4);
        cpu->ops->embed(cpu, &Eg.h, tok, T, hc, Xg);
        gpu->ops->embed(gpu, &Eg.d, dt, T, hc, dXg);
        float *gg = back(dXg, (size_t)T * hc * Dg);
        CHECKF(!memcmp(gg, Xg, (size_t)T * hc * Dg * 4), "%s embedding differs from the CPU", k_wcases[wi].name);
        free(gg); free(Xg);
        gpu->ops->free(gpu, dXg);
    }
    /* ring: T below and above the window, in every row format (the packed
     * ones: the CPU's bytes, padding included) */
    int W = 5;
    int Ts[] = {3, 12};
    dsv4_row_fmt fm[] = {row_fmt(ROW_F32, 8, 0), row_fmt(ROW_FP8, 96, 32), row_fmt(ROW_FP8, 512, 64),
                         row_fmt(ROW_FP4, 128, 0), row_fmt(ROW_FP4, 32, 0)};
    for (int fi = 0; fi < 5; fi++)
        for (int i = 0; i < 2; i++) {
            const dsv4_row_fmt *f = &fm[fi];
            size_t rb = (size_t)W * f->bytes;
            float *kv = rnd((size_t)Ts[i] * f->width, 1.0f);
            for (int k = 0; k < Ts[i] * f->width; k += 7) kv[k] *= 1000.0f; /* blocks of very different scales */
            for (int k = 3; k < Ts[i] * f->width; k += 11) kv[k] *= 1e-6f;
            uint8_t *ring = calloc(rb, 1);
            uint8_t *dr = devb(ring, rb);
            float *dk = dev(kv, (size_t)Ts[i] * f->width);
            cpu->ops->ring_store(cpu, ring, W, f, kv, Ts[i], 13);
            gpu->ops->ring_store(gpu, dr, W, f, dk, Ts[i], 13);
            uint8_t *gr = backb(dr, rb);
            CHECKF(!memcmp(gr, ring, rb), "ring_store, format %d of %d values, T %d: bytes differ from the CPU",
                   f->kind, f->width, Ts[i]);
            free(ring); free(kv); free(gr);
            gpu->ops->free(gpu, dr); gpu->ops->free(gpu, dk);
        }
    gpu->ops->free(gpu, dt); gpu->ops->free(gpu, dX);
}

/* The GPU's hc_pre (head: hc_head) of T rows, then of each row alone: the
 * same bits (a prompt's rows share the mixing blocks' loads, never their
 * sums). */
static void hc_rows_alone(int hc, int D, int T, const float *dX, const tmat *fn, const tmat *base, const tmat *sc,
                          const tmat *nw, int head)
{
    float *dx = dalloc((size_t)T * D), *dp = dalloc((size_t)T * hc), *dc = dalloc((size_t)T * hc * hc);
    float *dx1 = dalloc((size_t)T * D), *dp1 = dalloc((size_t)T * hc), *dc1 = dalloc((size_t)T * hc * hc);
    for (int t = -1; t < T; t++) { /* t = -1: all rows in one call */
        const float *X = dX + (t < 0 ? 0 : (size_t)t * hc * D);
        int n = t < 0 ? T : 1;
        size_t o = t < 0 ? 0 : (size_t)t;
        float *x = t < 0 ? dx : dx1 + o * D, *p = t < 0 ? dp : dp1 + o * hc, *c = t < 0 ? dc : dc1 + o * hc * hc;
        if (head) gpu->ops->hc_head(gpu, X, n, hc, D, &fn->d, &base->d, &sc->d, 1e-6f, 1e-6f, &nw->d, x);
        else gpu->ops->hc_pre(gpu, X, n, hc, D, &fn->d, &base->d, &sc->d, 20, 1e-6f, 1e-6f, &nw->d, x, p, c);
    }
    uint8_t *a = backb(dx, (size_t)T * D * 4), *b = backb(dx1, (size_t)T * D * 4);
    CHECKF(!memcmp(a, b, (size_t)T * D * 4), "hc_%s (hc %d): %d rows in one call and alone differ", head ? "head" : "pre",
           hc, T);
    free(a); free(b);
    if (!head) {
        a = backb(dc, (size_t)T * hc * hc * 4);
        b = backb(dc1, (size_t)T * hc * hc * 4);
        CHECKF(!memcmp(a, b, (size_t)T * hc * hc * 4), "hc_pre (hc %d): comb of %d rows and alone differ", hc, T);
        free(a); free(b);
    }
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dp); gpu->ops->free(gpu, dc);
    gpu->ops->free(gpu, dx1); gpu->ops->free(gpu, dp1); gpu->ops->free(gpu, dc1);
}

/* fw: the format of the mixing matrices (NULL: F32 / BF16); GGUF ones get
 * streams of 256 values. T = 11: the prompt instance (8 rows a block) and
 * a partial group. */
static void hc_case(int hc, const wcase *fw)
{
    int D = fw ? 256 : 96, T = 11, n_mix = (2 + hc) * hc;
    tmat fn = fw ? mkw(fw, n_mix, (int64_t)hc * D, 0.3f) : mk(DT_F32, n_mix, (int64_t)hc * D, 0.3f);
    tmat base = mk(DT_F32, 1, n_mix, 0.5f), sc = mk(DT_F32, 1, 3, 1.0f);
    tmat hfn = fw ? mkw(fw, hc, (int64_t)hc * D, 0.3f) : mk(DT_BF16, hc, (int64_t)hc * D, 0.3f);
    tmat hbase = mk(DT_F32, 1, hc, 0.5f), hsc = mk(DT_F32, 1, 1, 1.0f);
    tmat nw = mk(DT_BF16, 1, D, 1.0f), hnw = mk(DT_F32, 1, D, 1.0f); /* the norms the ops end in */
    float *X = rnd((size_t)T * hc * D, 2.0f), *dX = dev(X, (size_t)T * hc * D);
    float *x = calloc((size_t)T * D, 4), *post = calloc((size_t)T * hc, 4), *comb = calloc((size_t)T * hc * hc, 4);
    float *dxv = dev(x, (size_t)T * D), *dpost = dev(post, (size_t)T * hc), *dcomb = dev(comb, (size_t)T * hc * hc);
    cpu->ops->hc_pre(cpu, X, T, hc, D, &fn.h, &base.h, &sc.h, 20, 1e-6f, 1e-6f, &nw.h, x, post, comb);
    gpu->ops->hc_pre(gpu, dX, T, hc, D, &fn.d, &base.d, &sc.d, 20, 1e-6f, 1e-6f, &nw.d, dxv, dpost, dcomb);
    hc_rows_alone(hc, D, T, dX, &fn, &base, &sc, &nw, 0);
    float *gx = back(dxv, (size_t)T * D), *gp = back(dpost, (size_t)T * hc), *gc = back(dcomb, (size_t)T * hc * hc);
    CLOSE(gx, x, (size_t)T * D, 1e-5);
    CLOSE(gp, post, (size_t)T * hc, 1e-5);
    CLOSE(gc, comb, (size_t)T * hc * hc, 1e-5);
    /* post: feed the CPU's own post/comb to both */
    float *a = rnd((size_t)T * D, 1.0f), *da = dev(a, (size_t)T * D);
    gpu->ops->upload(gpu, dpost, post, (size_t)T * hc * 4);
    gpu->ops->upload(gpu, dcomb, comb, (size_t)T * hc * hc * 4);
    cpu->ops->hc_post(cpu, X, T, hc, D, a, post, comb);
    gpu->ops->hc_post(gpu, dX, T, hc, D, da, dpost, dcomb);
    float *gX = back(dX, (size_t)T * hc * D);
    CLOSE(gX, X, (size_t)T * hc * D, 1e-6);
    cpu->ops->hc_head(cpu, X, T, hc, D, &hfn.h, &hbase.h, &hsc.h, 1e-6f, 1e-6f, &hnw.h, x);
    gpu->ops->hc_head(gpu, dX, T, hc, D, &hfn.d, &hbase.d, &hsc.d, 1e-6f, 1e-6f, &hnw.d, dxv);
    hc_rows_alone(hc, D, T, dX, &hfn, &hbase, &hsc, &hnw, 1);
    free(gx);
    gx = back(dxv, (size_t)T * D);
    CLOSE(gx, x, (size_t)T * D, 1e-5);
    free(X); free(x); free(post); free(comb); free(gx); free(gp); free(gc); free(a); free(gX);
   
    gpu->ops->free(gpu, dX); gpu->ops->free(gpu, dxv); gpu->ops->free(gpu, dpost); gpu->ops->free(gpu, dcomb);
    gpu->ops->free(gpu, da);
}

/* One compressor fed in chunks; states and entries compared after each. */
static void test_hc(void)
{
    hc_case(4, NULL); /* the real models: register Sinkhorn */
    hc_case(3, NULL); /* one warp */
    hc_case(6, NULL); /* whole block */
    for (int wi = GG_FIRST; wi < N_WCASES; wi++) hc_case(4, &k_wcases[wi]); /* GGUF files may quantize hc_*_fn */
}

/* One compressor's state on one backend (entries in `fmt`). */
typedef struct { dsv4_comp_state st; dsv4_comp_params p; size_t nopen, nprev, nent; } comp_run;

static comp_run comp_new(dsv4_backend *b, int ratio, int overlap, int rd, dsv4_row_fmt fmt, const dsv4_mat *ape,
                         const dsv4_mat *norm, const float *f, int cap)
{
    comp_run r;
    memset(&r, 0, sizeof r);
    int d = fmt.width, cw = d * (overlap ? 2 : 1);
    r.nopen = (size_t)ratio * cw * 4;
    r.nprev = (size_t)ratio * d * 4;
    r.nent = (size_t)cap * fmt.bytes;
    r.st.open_u = b->ops->alloc(b, r.nopen);
    r.st.open_g = b->ops->alloc(b, r.nopen);
    r.st.prev_u = overlap ? b->ops->alloc(b, r.nprev) : NULL;
    r.st.prev_g = overlap ? b->ops->alloc(b, r.nprev) : NULL;
    r.st.entries = b->ops->alloc(b, r.nent);
    r.p = (dsv4_comp_params){ratio, overlap, rd, fmt, ape, norm, f, 1e-6f};
    return r;
}

static void comp_free(dsv4_backend *b, comp_run *r)
{
    b->ops->free(b, r->st.open_u); b->ops->free(b, r->st.open_g); b->ops->free(b, r->st.prev_u);
    b->ops->free(b, r->st.prev_g); b->ops->free(b, r->st.entries);
}

/* af: the position bias's format (NULL: F32); kind: the entries' row
 * format. The fp32 entries of the two backends agree to rounding; packed,
 * each backend's entries are the CPU packer's bytes of its own fp32 ones
 * (the same inputs fed to both formats). */
static void compress_case(int ratio, int overlap, const wcase *af, int kind)
{
    int d = 32, rd = 16, cw = d * (overlap ? 2 : 1), cap = 64;
    tmat ape = af ? mkw(af, ratio, cw, 0.5f) : mk(DT_F32, ratio, cw, 0.5f), norm = mk(DT_BF16, 1, d, 1.0f);
    float *f = rnd(rd / 2, 0.3f);
    for (int i = 0; i < rd / 2; i++) f[i] = fabsf(f[i]);
    float *df = dev(f, rd / 2);
    dsv4_row_fmt f32 = row_fmt(ROW_F32, d, rd), pk = row_fmt(kind, d, rd);
    comp_run h = comp_new(cpu, ratio, overlap, rd, f32, &ape.h, &norm.h, f, cap);
    comp_run g = comp_new(gpu, ratio, overlap, rd, f32, &ape.d, &norm.d, df, cap);
    comp_run hp = comp_new(cpu, ratio, overlap, rd, pk, &ape.h, &norm.h, f, cap);
    comp_run gp = comp_new(gpu, ratio, overlap, rd, pk, &ape.d, &norm.d, df, cap);
    int chunks[] = {1, 3, 7, 1, 1, 20, 2, 9}, N = 44; /* N: their sum */
    float *u = rnd((size_t)N * cw, 1.0f), *gg = rnd((size_t)N * cw, 2.0f);
    float *du = dev(u, (size_t)N * cw), *dg = dev(gg, (size_t)N * cw);
    int64_t pos = 0;
    for (int i = 0; i < 8; i++) {
        int T = chunks[i];
        size_t o = (size_t)pos * cw;
        cpu->ops->compress(cpu, u + o, gg + o, T, pos, &h.p, &h.st);
        gpu->ops->compress(gpu, du + o, dg + o, T, pos, &g.p, &g.st);
        if (kind != ROW_F32) {
            cpu->ops->compress(cpu, u + o, gg + o, T, pos, &hp.p, &hp.st);
            gpu->ops->compress(gpu, du + o, dg + o, T, pos, &gp.p, &gp.st);
        }
        pos += T;
    }
    /* the GPU fed all N tokens in one call: the chunked run's bits */
    comp_run g1 = comp_new(gpu, ratio, overlap, rd, pk, &ape.d, &norm.d, df, cap);
    gpu->ops->compress(gpu, du, dg, N, 0, &g1.p, &g1.st);
    {
        const comp_run *gc = kind != ROW_F32 ? &gp : &g;
        size_t eb = (size_t)(N / ratio) * pk.bytes;
        uint8_t *e1 = backb(g1.st.entries, eb), *ec = backb(gc->st.entries, eb);
        uint8_t *o1 = backb(g1.st.open_u, g1.nopen), *oc = backb(gc->st.open_u, g1.nopen);
        uint8_t *q1 = backb(g1.st.open_g, g1.nopen), *qc = backb(gc->st.open_g, g1.nopen);
        CHECKF(!memcmp(e1, ec, eb) && !memcmp(o1, oc, g1.nopen) && !memcmp(q1, qc, g1.nopen),
               "compress (ratio %d, format %d): one call and chunks differ", ratio, kind);
        free(e1); free(ec); free(o1); free(oc); free(q1); free(qc);
        if (overlap) {
            uint8_t *p1 = backb(g1.st.prev_g, g1.nprev), *pc = backb(gc->st.prev_g, g1.nprev);
            CHECKF(!memcmp(p1, pc, g1.nprev), "compress (ratio %d): series A after one call and chunks differ", ratio);
            free(p1); free(pc);
        }
    }
    comp_free(gpu, &g1);
    free(u); free(gg);
    gpu->ops->free(gpu, du); gpu->ops->free(gpu, dg);
    int n = (int)(pos / ratio);
    float *ge = back((float *)g.st.entries, (size_t)n * d), *gu = back(g.st.open_u, g.nopen / 4);
    float *go = back(g.st.open_g, g.nopen / 4);
    CLOSE(ge, (float *)h.st.entries, (size_t)n * d, 1e-5);
    CHECK(!memcmp(gu, h.st.open_u, g.nopen));
    CLOSE(go, h.st.open_g, g.nopen / 4, 1e-6);
    if (kind != ROW_F32) {
        uint8_t *want_g = packed(&pk, ge, n), *want_h = packed(&pk, (float *)h.st.entries, n);
        uint8_t *got_g = backb(gp.st.entries, (size_t)n * pk.bytes);
        CHECKF(!memcmp(got_g, want_g, (size_t)n * pk.bytes), "compress: the GPU's packed entries (format %d)", kind);
        CHECKF(!memcmp(hp.st.entries, want_h, (size_t)n * pk.bytes), "compress: the CPU's packed entries (format %d)",
               kind);
        free(want_g); free(want_h); free(got_g);
    }
    free(ge); free(gu); free(go);
    if (overlap) {
        float *pu = back(g.st.prev_u, g.nprev / 4);
        CHECK(!memcmp(pu, h.st.prev_u, g.nprev));
        free(pu);
    }
    free(f);
    comp_free(cpu, &h); comp_free(gpu, &g); comp_free(cpu, &hp); comp_free(gpu, &gp);
    gpu->ops->free(gpu, df);
}

static void test_compress(void)
{
    compress_case(4, 1, NULL, ROW_F32);
    compress_case(16, 0, NULL, ROW_F32);
    compress_case(1, 0, NULL, ROW_F32);
    compress_case(4, 1, &k_wcases[GG_FIRST], ROW_F32); /* Q8_0 */
    compress_case(4, 1, NULL, ROW_FP8);  /* CSA main compressor, official */
    compress_case(16, 0, NULL, ROW_FP8); /* HCA, official */
    compress_case(4, 1, NULL, ROW_FP4);  /* the indexer's keys, official */
}

/* kind: the keys' row format (ROW_F32, or ROW_FP4 as the official cache
 * stores them) */
static void indexer_case(int n_ent, int T, int64_t pos0, int ratio, int topk, int ties, int kind)
{
    int H = 8, hd = 32;
    float *q = rnd((size_t)T * H * hd, 1.0f), *w = rnd((size_t)T * H, 1.0f), *kf = rnd((size_t)n_ent * hd, 1.0f);
    if (ties) /* every other key repeats key 0: equal scores, lower index wins */
        for (int s = 2; s < n_ent; s += 2) memcpy(kf + (size_t)s * hd, kf, (size_t)hd * 4);
    dsv4_row_fmt fm = row_fmt(kind, hd, 0);
    uint8_t *keys = packed(&fm, kf, n_ent);
    int32_t *idx = calloc((size_t)T * topk, 4), *n = calloc((size_t)T, 4);
    cpu->ops->indexer(cpu, q, w, T, pos0, H, keys, &fm, ratio, topk, 0.2f, 0.35f, idx, n);
    float *dq = dev(q, (size_t)T * H * hd), *dw = dev(w, (size_t)T * H);
    uint8_t *dk = devb(keys, (size_t)n_ent * fm.bytes);
    int32_t *di = gpu->ops->alloc(gpu, (size_t)T * topk * 4), *dn = gpu->ops->alloc(gpu, (size_t)T * 4);
    gpu->ops->indexer(gpu, dq, dw, T, pos0, H, dk, &fm, ratio, topk, 0.2f, 0.35f, di, dn);
    int32_t *gi = (int32_t *)back((float *)di, (size_t)T * topk), *gn = (int32_t *)back((float *)dn, (size_t)T);
    for (int t = 0; t < T; t++) {
        CHECKF(gn[t] == n[t], "query %d: count %d vs %d", t, gn[t], n[t]);
        CHECKF(!memcmp(gi + (size_t)t * topk, idx + (size_t)t * topk, (size_t)n[t] * 4),
               "query %d: selection differs (n_ent %d topk %d ties %d format %d)", t, n_ent, topk, ties, kind);
    }
    free(q); free(w); free(kf); free(keys); free(idx); free(n); free(gi); free(gn);
    gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dw); gpu->ops->free(gpu, dk);
    gpu->ops->free(gpu, di); gpu->ops->free(gpu, dn);
}

static void test_indexer(void)
{
    static const int kinds[] = {ROW_F32, ROW_FP4};
    for (int i = 0; i < 2; i++) {
        int kind = kinds[i];
        indexer_case(10, 3, 30, 4, 4, 0, kind);      /* few entries: nvis <= topk for some */
        indexer_case(300, 5, 1190, 4, 16, 0, kind);  /* radix select */
        indexer_case(300, 5, 1190, 4, 16, 1, kind);  /* ties at the threshold */
        indexer_case(5000, 2, 19990, 4, 512, 0, kind);
    }
}

/* A CSA-like selection for T query rows at pos0: up to cap of the entries
 * each row sees (ratio 4), in a scrambled order. */
static void fill_selection(int T, int64_t pos0, int cap, int32_t *sel, int32_t *sn)
{
    for (int t = 0; t < T; t++) {
        int64_t nvis = (pos0 + t + 1) / 4;
        sn[t] = (int)(nvis < cap ? nvis : cap);
        for (int k = 0; k < sn[t]; k++) sel[t * cap + k] = (int32_t)((k * 7 + t) % (nvis ? nvis : 1));
    }
}

/* Rope frequencies of rd dims (rd / 2 of them), as the model's table. */
static float *rope_freqs(int rd)
{
    float *f = malloc((size_t)(rd / 2) * sizeof *f);
    for (int i = 0; i < rd / 2; i++) f[i] = powf(10000.0f, -2.0f * (float)i / (float)rd);
    return f;
}

/* kind: the ring's and the entries' row format (ROW_F32, or ROW_FP8 as the
 * official cache stores them); rd > 0: the output's last rd dims rotated
 * back, against the CPU, and bit for bit against attention without the
 * rotation followed by the rope op (the launch the rotation replaces) */
static void attention_case(int T, int64_t pos0, int window, int ratio, int use_sel, int kind, int rd)
{
    int H = 4, hd = 64, n_ent = (int)((pos0 + T) / (ratio > 0 ? ratio : 4)) + 1, cap = 6;
    dsv4_row_fmt fm = row_fmt(kind, hd, 16);
    float *q = rnd((size_t)T * H * hd, 1.0f), *kv = rnd((size_t)T * hd, 1.0f);
    float *rf = rnd((size_t)window * hd, 1.0f), *ef = rnd((size_t)n_ent * hd, 1.0f);
    uint8_t *ring = packed(&fm, rf, window), *ent = packed(&fm, ef, n_ent);
    tmat sinks = mk(DT_F32, 1, H, 1.0f);
    int32_t *sel = calloc((size_t)T * cap, 4), *sn = calloc((size_t)T, 4);
    fill_selection(T, pos0, cap, sel, sn);
    float *out = calloc((size_t)T * H * hd, 4), *freq = rd ? rope_freqs(rd) : NULL;
    cpu->ops->attention(cpu, q, T, pos0, H, hd, window, ring, kv, ent, &fm, use_sel ? 0 : ratio, use_sel ? sel : NULL,
                        use_sel ? sn : NULL, cap, &sinks.h, 0.125f, rd, freq, out);
    float *dq = dev(q, (size_t)T * H * hd), *dkv = dev(kv, (size_t)T * hd), *dout = dev(out, (size_t)T * H * hd);
    float *dfreq = rd ? dev(freq, (size_t)rd / 2) : NULL;
    uint8_t *dr = devb(ring, (size_t)window * fm.bytes), *de = devb(ent, (size_t)n_ent * fm.bytes);
    int32_t *dsel = devb(sel, (size_t)T * cap * 4), *dsn = devb(sn, (size_t)T * 4);
    gpu->ops->attention(gpu, dq, T, pos0, H, hd, window, dr, dkv, de, &fm, use_sel ? 0 : ratio,
                        use_sel ? dsel : NULL, use_sel ? dsn : NULL, cap, &sinks.d, 0.125f, rd, dfreq, dout);
    float *g = back(dout, (size_t)T * H * hd);
    CLOSE(g, out, (size_t)T * H * hd, 1e-5);
    if (rd) {
        gpu->ops->attention(gpu, dq, T, pos0, H, hd, window, dr, dkv, de, &fm, use_sel ? 0 : ratio,
                            use_sel ? dsel : NULL, use_sel ? dsn : NULL, cap, &sinks.d, 0.125f, 0, NULL, dout);
        gpu->ops->rope(gpu, dout, T, H, hd, rd, pos0, 1, NULL, dfreq, 1);
        float *r = back(dout, (size_t)T * H * hd);
        CHECKF(!memcmp(r, g, (size_t)T * H * hd * 4), "T %d pos0 %lld rope dims %d: the rotation inside attention "
               "differs from the rope op's", T, (long long)pos0, rd);
        free(r);
        gpu->ops->free(gpu, dfreq);
    }
    free(q); free(kv); free(rf); free(ef); free(ring); free(ent); free(sel); free(sn); free(out); free(g); free(freq);
    gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dkv); gpu->ops->free(gpu, dr); gpu->ops->free(gpu, de);
    gpu->ops->free(gpu, dout); gpu->ops->free(gpu, dsel); gpu->ops->free(gpu, dsn);
}

/* Chunking invariance of attention: T rows in one call against each row
 * alone, with the ring holding what a token-by-token run would have stored
 * there: the step's earlier rows, packed. In-step rows are given as the
 * packed values (as the official cache rounds them before attention), so
 * either way reads the same numbers. Bitwise: the grid's slice count
 * follows the step's longest key list, which must not change a row. */
static void attention_chunk_case(int T, int64_t pos0, int H, int hd, int window, int ratio, int use_sel, int kind)
{
    int n_ent = (int)((pos0 + T) / (ratio > 0 ? ratio : 4)) + 1, cap = 24, rd = 16;
    dsv4_row_fmt fm = row_fmt(kind, hd, 16);
    float *freq = rope_freqs(rd), *dfreq = dev(freq, (size_t)rd / 2); /* the rows' rotation back included */
    float *q = rnd((size_t)T * H * hd, 1.0f), *kv = rnd((size_t)T * hd, 1.0f);
    float *rf = rnd((size_t)window * hd, 1.0f), *ef = rnd((size_t)n_ent * hd, 1.0f);
    uint8_t *kvp = packed(&fm, kv, T), *ring = packed(&fm, rf, window), *ent = packed(&fm, ef, n_ent);
    for (int t = 0; t < T; t++) cpu_row_load(&fm, kvp + (size_t)t * fm.bytes, kv + (size_t)t * hd);
    tmat sinks = mk(DT_F32, 1, H, 1.0f);
    int32_t *sel = calloc((size_t)T * cap, 4), *sn = calloc((size_t)T, 4);
    fill_selection(T, pos0, cap, sel, sn);
    size_t nq = (size_t)T * H * hd;
    float *dq = dev(q, nq), *dkv = dev(kv, (size_t)T * hd), *dout = gpu->ops->alloc(gpu, nq * 4);
    uint8_t *dr = devb(ring, (size_t)window * fm.bytes), *de = devb(ent, (size_t)n_ent * fm.bytes);
    int32_t *dsel = devb(sel, (size_t)T * cap * 4), *dsn = devb(sn, (size_t)T * 4);
    gpu->ops->attention(gpu, dq, T, pos0, H, hd, window, dr, dkv, de, &fm, use_sel ? 0 : ratio,
                        use_sel ? dsel : NULL, use_sel ? dsn : NULL, cap, &sinks.d, 0.125f, rd, dfreq, dout);
    float *all = back(dout, nq);
    for (int t = 0; t < T; t++) {
        if (t) /* row t-1 stored as decoding would have (the earlier ones are there already) */
            memcpy(ring + (size_t)((pos0 + t - 1) % window) * fm.bytes, kvp + (size_t)(t - 1) * fm.bytes, fm.bytes);
        gpu->ops->upload(gpu, dr, ring, (size_t)window * fm.bytes);
        gpu->ops->attention(gpu, dq + (size_t)t * H * hd, 1, pos0 + t, H, hd, window, dr, dkv + (size_t)t * hd, de, &fm,
                            use_sel ? 0 : ratio, use_sel ? dsel + (size_t)t * cap : NULL, use_sel ? dsn + t : NULL, cap,
                            &sinks.d, 0.125f, rd, dfreq, dout);
        float *one = back(dout, (size_t)H * hd);
        CHECKF(!memcmp(one, all + (size_t)t * H * hd, (size_t)H * hd * 4),
               "row %d of %d (pos0 %lld, window %d, ratio %d, sel %d, format %d): alone differs from the chunk", t, T,
               (long long)pos0, window, ratio, use_sel, kind);
        free(one);
    }
    free(q); free(kv); free(rf); free(ef); free(kvp); free(ring); free(ent); free(sel); free(sn); free(all); free(freq);
    gpu->ops->free(gpu, dfreq);
    gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dkv); gpu->ops->free(gpu, dr); gpu->ops->free(gpu, de);
    gpu->ops->free(gpu, dout); gpu->ops->free(gpu, dsel); gpu->ops->free(gpu, dsn);
}

static void test_attention(void)
{
    for (int kind = ROW_F32; kind <= ROW_FP8; kind++) {
        attention_case(1, 0, 10, 0, 0, kind, 0);
        attention_case(7, 3, 10, 0, 0, kind, 16);
        attention_case(1, 50, 10, 0, 0, kind, 16);    /* ring + window */
        attention_case(5, 300, 128, 16, 0, kind, 0);  /* HCA: all entries */
        attention_case(3, 40, 10, 0, 1, kind, 16);    /* CSA: selected entries */
        attention_case(20, 8, 10, 4, 0, kind, 0);     /* T above the window */
        attention_case(40, 300, 128, 16, 0, kind, 16); /* several slices */
        attention_case(33, 40, 10, 0, 1, kind, 64);   /* every dim rotated */
        attention_chunk_case(20, 8, 4, 64, 10, 4, 0, kind);
        attention_chunk_case(33, 40, 4, 64, 10, 0, 1, kind);
        attention_chunk_case(40, 300, 4, 64, 128, 16, 0, kind);
        attention_chunk_case(24, 200, 8, 512, 128, 0, 1, kind); /* the model's head size, two head groups */
        attention_chunk_case(16, 0, 8, 512, 32, 4, 0, kind);
    }
    /* FP8 rows whose e4m3 part is not whole words (no real layout): refused
     * with a message, nothing computed */
    dsv4_row_fmt odd = row_fmt(ROW_FP8, 64, 18);
    CHECK(odd.n_fp8 % 4 != 0);
    float *dq = gpu->ops->alloc(gpu, 4 * 64 * 4), *dout = gpu->ops->alloc(gpu, 4 * 64 * 4);
    uint8_t *dr = gpu->ops->alloc(gpu, (size_t)10 * odd.bytes);
    tmat sinks = mk(DT_F32, 1, 4, 1.0f);
    gpu->ops->attention(gpu, dq, 1, 3, 4, 64, 10, dr, dq, dr, &odd, 0, NULL, NULL, 0, &sinks.d, 0.125f, 0, NULL, dout);
    CHECK(gpu->ops->sync(gpu) == DSV4_ERR_UNSUPPORTED);
    CHECK(strstr(dsv4_last_error(), "whole words") != NULL);
    backend_clear_error(gpu);
    CHECK(gpu->ops->sync(gpu) == DSV4_OK);
    gpu->ops->free(gpu, dq); gpu->ops->free(gpu, dout); gpu->ops->free(gpu, dr);
}

/* ew[3], sw[3]: the formats of the routed experts' and the shared expert's
 * w1 (gate), w3 (up), w2 (down); GGUF files may mix them (blocks of 256
 * values: I = D = 256). ew->name, sw->name: for messages. */
/* act: the official numerics (dsv4_moe_params.act_fp8). Its FP8 rounding of
 * the SwiGLU outputs turns the backends' fp32 difference (~1e-7) into one
 * e4m3 step wherever a value sits within that noise of a rounding boundary
 * (odds of about 1e-6 per value: a case of 70 tokens holds 70 000 of them,
 * and adding a test before this one changes its random inputs), which
 * moves that token's output row by up to a rounding step times the w2
 * column: the check allows that in few rows (the bitwise checks of each
 * row alone stay exact). */
static void moe_case_d(int score_func, int hash, const wcase *const *ew, const wcase *const *sw, int T, int act, int I,
                       int D)
{
    int E = 8, K = 3, V = 40;
    tmat gate = mk(DT_BF16, E, D, 0.5f), bias = mk(DT_F32, 1, E, 0.2f);
    tmat w1[8], w2[8], w3[8];
    dsv4_mat h1[8], h2[8], h3[8], d1[8], d2[8], d3[8];
    for (int e = 0; e < E; e++) {
        w1[e] = mkw(ew[0], I, D, 0.3f); w3[e] = mkw(ew[1], I, D, 0.3f); w2[e] = mkw(ew[2], D, I, 0.3f);
        h1[e] = w1[e].h; h2[e] = w2[e].h; h3[e] = w3[e].h;
        d1[e] = w1[e].d; d2[e] = w2[e].d; d3[e] = w3[e].d;
    }
    tmat s1 = mkw(sw[0], I, D, 0.3f), s3 = mkw(sw[1], I, D, 0.3f), s2 = mkw(sw[2], D, I, 0.3f);
    int32_t *t2e = malloc((size_t)V * K * 4);
    for (int i = 0; i < V * K; i++) t2e[i] = (i * 5 + i / K) % E;
    int32_t *dt2e = devb(t2e, (size_t)V * K * 4);
    int32_t tok[128];
    if (T > 128) { CHECKF(0, "moe case of %d rows: at most 128", T); return; }
    for (int t = 0; t < T; t++) tok[t] = (t * 11) % V;
    dsv4_mat nob = wmat_plain(DT_F32, 1, E, NULL);
    dsv4_moe_params hp = {&gate.h, hash ? &nob : &bias.h, hash ? t2e : NULL, h1, h2, h3, &s1.h, &s2.h, &s3.h,
                          E, K, I, score_func, 1.5f, 1.5f, act, {NULL, 0, NULL, NULL}};
    dsv4_moe_params dp = {&gate.d, hash ? &nob : &bias.d, hash ? dt2e : NULL, d1, d2, d3, &s1.d, &s2.d, &s3.d,
                          E, K, I, score_func, 1.5f, 1.5f, act, {NULL, 0, NULL, NULL}};
    float *x = rnd((size_t)T * D, 1.0f), *out = calloc((size_t)T * D, 4);
    cpu->ops->moe(cpu, x, tok, T, D, &hp, out);
    float *dx = dev(x, (size_t)T * D), *dout = dev(out, (size_t)T * D);
    int32_t *dtok = devb(tok, (size_t)T * 4);
    gpu->ops->moe(gpu, dx, dtok, T, D, &dp, dout);
    float *g = back(dout, (size_t)T * D);
    double rm, md = maxdiff(g, out, (size_t)T * D, &rm);
    double tol = 1e-5 * sqrt((D + I) / 96.0); /* rounding grows with the dot products' length */
    if (act) {
        /* the official numerics: every row within tol but for at most one
         * in 32 (at least one), those by no more than a rounding step of
         * one H value would move them (1% of the largest output here); a
         * wrong expert, weight or slot moves many rows by far more */
        int far = 0;
        double worst = 0;
        for (int t = 0; t < T; t++) {
            double rmt, mdt = maxdiff(g + (size_t)t * D, out + (size_t)t * D, (size_t)D, &rmt);
            if (mdt > tol * (1.0 + rm)) far++;
            if (mdt > worst) worst = mdt;
        }
        if (far)
            printf("  moe %s/%s T=%d official: %d of %d rows beyond tol (a rounding step), max |diff| %g of %g\n",
                   ew[0]->name, sw[0]->name, T, far, T, worst, rm);
        CHECKF(far <= (T + 31) / 32 && worst <= 0.01 * (1.0 + rm),
               "moe %s/%s T=%d official: %d rows off, max |diff| %g (ref max %g)", ew[0]->name, sw[0]->name, T, far,
               worst, rm);
    } else {
        CHECKF(md <= tol * (1.0 + rm), "moe %s/%s T=%d: max |diff| %g (ref max %g)", ew[0]->name, sw[0]->name, T,
               md, rm);
    }
    /* batch invariance: each row alone gives the same bits as in the batch,
     * whether or not other rows chose the same experts */
    for (int t = 0; t < T; t++) {
        gpu->ops->moe(gpu, dx + t * D, dtok + t, 1, D, &dp, dout);
        float *g1 = back(dout, (size_t)D);
        CHECKF(!memcmp(g1, g + t * D, (size_t)D * 4), "moe %s/%s row %d of %d differs alone", ew[0]->name, sw[0]->name, t, T);
        free(g1);
    }
    /* the output through hc_post in the combine: the bits of moe, then hc_post */
    int hc = 4;
    hc_bufs h = hc_bufs_new(T, hc, D);
    float *X2 = dev_copy(h.X, (size_t)T * hc * D);
    gpu->ops->moe(gpu, dx, dtok, T, D, &dp, dout);
    gpu->ops->hc_post(gpu, X2, T, hc, D, dout, h.post, h.comb);
    dsv4_moe_params dpp = dp;
    dpp.post = (dsv4_hc_post){h.X, hc, h.post, h.comb};
    gpu->ops->moe(gpu, dx, dtok, T, D, &dpp, dout);
    float *xa = back(h.X, (size_t)T * hc * D), *xb = back(X2, (size_t)T * hc * D);
    CHECKF(!memcmp(xa, xb, (size_t)T * hc * D * 4), "moe %s/%s T=%d: with hc_post differs from moe, then hc_post",
           ew[0]->name, sw[0]->name, T);
    free(xa); free(xb);
    hc_bufs_free(&h);
    gpu->ops->free(gpu, X2);
    free(x); free(out); free(g); free(t2e);
    gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dout); gpu->ops->free(gpu, dtok); gpu->ops->free(gpu, dt2e);
}

/* I = D = 256 where a block format needs it, else I = 32, D = 64. */
static void moe_case_f(int score_func, int hash, const wcase *const *ew, const wcase *const *sw, int T, int act)
{
    int blk = 0;
    for (int k = 0; k < 3; k++) blk |= !fits(ew[k], 32) || !fits(sw[k], 32);
    moe_case_d(score_func, hash, ew, sw, T, act, blk ? 256 : 32, blk ? 256 : 64);
}

/* One format for all of an expert's matrices. */
static void moe_case_a(int score_func, int hash, const wcase *ew, const wcase *sw, int T, int act)
{
    const wcase *e3[3] = {ew, ew, ew}, *s3[3] = {sw, sw, sw};
    moe_case_f(score_func, hash, e3, s3, T, act);
}

static void moe_case(int score_func, int hash, const wcase *ew, const wcase *sw, int T)
{
    moe_case_a(score_func, hash, ew, sw, T, 0);
}

static void test_moe(void)
{
    const wcase *f32 = &k_wcases[0], *bf16 = &k_wcases[1], *f16 = &k_wcases[2], *fp8 = &k_wcases[3],
                *fp8f = &k_wcases[4], *fp4 = &k_wcases[5];
    moe_case(SCORE_SQRTSOFTPLUS, 0, bf16, bf16, 1);
    moe_case(SCORE_SQRTSOFTPLUS, 0, bf16, bf16, 8);
    moe_case(SCORE_SQRTSOFTPLUS, 0, bf16, bf16, 12); /* groups of more than 8 tokens */
    moe_case(SCORE_SIGMOID, 0, f32, bf16, 5);
    moe_case(SCORE_SOFTMAX, 0, f16, bf16, 3);
    moe_case(SCORE_SQRTSOFTPLUS, 1, bf16, bf16, 7);
    /* the official checkpoints: MXFP4 routed experts, FP8 shared expert */
    moe_case(SCORE_SQRTSOFTPLUS, 0, fp4, fp8, 1);
    moe_case(SCORE_SQRTSOFTPLUS, 0, fp4, fp8, 6);
    moe_case(SCORE_SQRTSOFTPLUS, 0, fp4, fp8f, 12);
    moe_case(SCORE_SQRTSOFTPLUS, 1, fp8, fp8, 9);
    /* and their official numerics: FP8 expert inputs, the routing weight before w2 */
    moe_case_a(SCORE_SQRTSOFTPLUS, 0, fp4, fp8, 1, 1);
    moe_case_a(SCORE_SQRTSOFTPLUS, 0, fp4, fp8, 6, 1);
    moe_case_a(SCORE_SQRTSOFTPLUS, 1, fp8, fp8, 9, 1);
    moe_case_a(SCORE_SQRTSOFTPLUS, 0, bf16, bf16, 12, 1); /* the fp32 expert kernels (small BF16 matrices) */
    /* Flash-sized BF16 experts (I = 2048, D = 4096: TC16_MIN_VALUES) on
     * tensor cores: three-term rows, staged for one token, rounded in the
     * preparation launch with the official numerics (never staged so);
     * routed and shared experts wanting differently prepared rows (the
     * shared one on the fp32 kernels) */
    const wcase *b3[3] = {bf16, bf16, bf16}, *f3[3] = {f16, f16, f16}, *p3[3] = {fp8, fp8, fp8};
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, b3, b3, 1, 0, 2048, 4096);
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, b3, b3, 9, 0, 2048, 4096);
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, b3, b3, 1, 1, 2048, 4096);
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, f3, b3, 6, 1, 2048, 4096);
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, p3, b3, 6, 0, 2048, 4096);
    /* prompts (more than 64 rows): FP8/MXFP4 experts in block tiles (the
     * official mix in one launch a kind; one kind for all), against the CPU
     * and each row alone; the shared expert's w1/w3 of 4096 columns in two
     * slices */
    const wcase *e4[3] = {fp4, fp4, fp4};
    moe_case(SCORE_SQRTSOFTPLUS, 0, fp4, fp8, 100);
    moe_case_a(SCORE_SQRTSOFTPLUS, 1, fp8, fp8, 70, 1);
    moe_case_d(SCORE_SQRTSOFTPLUS, 0, e4, p3, 70, 1, 256, 4096);
    /* GGUF: the community UD-IQ3_XXS mix (IQ3_XXS routed, Q8_0 shared), a
     * Q8_0/MXFP4 file's, every block type on both sides, and GGUF experts
     * with a plain shared expert (run-time format dispatch) */
    const wcase *q8 = &k_wcases[GG_FIRST], *iq3 = NULL, *mx = NULL;
    for (int wi = GG_FIRST; wi < N_WCASES; wi++) {
        if (k_wcases[wi].fmt == WF_IQ3_XXS) iq3 = &k_wcases[wi];
        if (k_wcases[wi].fmt == WF_MXFP4_GGUF) mx = &k_wcases[wi];
    }
    moe_case(SCORE_SQRTSOFTPLUS, 0, iq3, q8, 1);
    moe_case(SCORE_SQRTSOFTPLUS, 0, iq3, q8, 6);
    moe_case(SCORE_SQRTSOFTPLUS, 0, iq3, q8, 12);
    moe_case(SCORE_SQRTSOFTPLUS, 1, iq3, q8, 9);
    moe_case(SCORE_SQRTSOFTPLUS, 0, mx, q8, 7);
    for (int wi = GG_FIRST; wi < N_WCASES; wi++) {
        moe_case(SCORE_SQRTSOFTPLUS, 0, &k_wcases[wi], &k_wcases[wi], 1);
        moe_case(SCORE_SQRTSOFTPLUS, 0, &k_wcases[wi], &k_wcases[wi], 5);
    }
    moe_case(SCORE_SQRTSOFTPLUS, 0, iq3, bf16, 4);
    moe_case(SCORE_SIGMOID, 0, q8, f32, 3);
    /* gate, up and down of different block types (the gguf-all-types fixture's
     * layers), with a shared expert mixed likewise or BF16 down */
    const wcase *q4k = NULL, *q5k = NULL, *iq2s = NULL, *q6k = NULL, *q2k = NULL;
    for (int wi = GG_FIRST; wi < N_WCASES; wi++) {
        dsv4_wformat f = k_wcases[wi].fmt;
        if (f == WF_Q4_K) q4k = &k_wcases[wi];
        if (f == WF_Q5_K) q5k = &k_wcases[wi];
        if (f == WF_IQ2_S) iq2s = &k_wcases[wi];
        if (f == WF_Q6_K) q6k = &k_wcases[wi];
        if (f == WF_Q2_K) q2k = &k_wcases[wi];
    }
    const wcase *ex[3] = {q4k, q5k, mx}, *sx[3] = {q6k, q2k, bf16}, *ey[3] = {iq3, iq2s, q8}, *sy[3] = {q2k, q6k, q8};
    for (int T = 1; T <= 9; T += 4) {
        moe_case_f(SCORE_SQRTSOFTPLUS, 0, ex, sx, T, 0);
        moe_case_f(SCORE_SQRTSOFTPLUS, 0, ey, sy, T, 0);
    }
}

/* The official cache numerics: the GPU's rounding gives the CPU's bits. */
static void test_cache_quant(void)
{
    /* (the KV heads' rounding: test_norm_rope) the matmul inputs: blocks of 128, partial last blocks, out of place and in place */
    int ac[][2] = {{5, 320}, {3, 128}, {9, 7}, {2, 1000}};
    for (int i = 0; i < 4; i++) {
        int T = ac[i][0], w = ac[i][1];
        float *x = rnd((size_t)T * w, 1.0f), *y = malloc((size_t)T * w * 4);
        for (int k = 0; k < T * w; k += 7) x[k] *= 1000.0f;
        for (int k = 3; k < T * w; k += 11) x[k] *= 1e-6f;
        float *dx = dev(x, (size_t)T * w), *dy = dev(x, (size_t)T * w);
        cpu->ops->act_fp8_round(cpu, x, T, w, y);
        gpu->ops->act_fp8_round(gpu, dx, T, w, dy);
        gpu->ops->act_fp8_round(gpu, dx, T, w, dx);
        float *g = back(dy, (size_t)T * w), *g2 = back(dx, (size_t)T * w);
        CHECKF(!memcmp(g, y, (size_t)T * w * 4), "act_fp8_round %dx%d differs from the CPU", T, w);
        CHECKF(!memcmp(g2, y, (size_t)T * w * 4), "act_fp8_round %dx%d in place differs from the CPU", T, w);
        free(x); free(y); free(g); free(g2);
        gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
    }
    /* a block whose scale is 1 (largest value 448): rounding ties on the
     * normal grid (to even, carries into the next binade), the subnormal
     * grid (steps of 2^-9) and its edge 2^-6, both signs */
    {
        const float e[] = {1.0625f, 1.1875f, 1.9375f, 15.5f, 248.0f, 440.0f, 0x1p-6f, 0x1.fp-7f, 0x1.0p-10f,
                           0x1.8p-10f, 0x1.4p-9f, 0x1.08p-6f, 0x1.18p-6f, 3.0e-3f, 0.0f, 447.0f, 1e-30f};
        int ne = (int)(sizeof e / sizeof e[0]);
        float x[128], y[128];
        for (int k = 0; k < 128; k++) x[k] = k == 0 ? 448.0f : (k & 1 ? -1.0f : 1.0f) * e[k % ne] * (1.0f + (k / ne) * 0x1p-20f);
        float *dx = dev(x, 128), *dy = dev(x, 128);
        cpu->ops->act_fp8_round(cpu, x, 1, 128, y);
        gpu->ops->act_fp8_round(gpu, dx, 1, 128, dy);
        float *g = back(dy, 128);
        CHECKF(!memcmp(g, y, sizeof y), "act_fp8_round of the edge values differs from the CPU");
        free(g);
        gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy);
    }
    int ix[][2] = {{7, 128}, {130, 32}, {2, 1024}};
    for (int i = 0; i < 3; i++) {
        int R = ix[i][0], w = ix[i][1];
        float *x = rnd((size_t)R * w, 2.0f);
        for (int k = 0; k < R * w; k += 5) x[k] *= 64.0f;
        float *dx = dev(x, (size_t)R * w);
        cpu->ops->idx_fp4_round(cpu, x, R, w);
        gpu->ops->idx_fp4_round(gpu, dx, R, w);
        float *g = back(dx, (size_t)R * w);
        CHECKF(!memcmp(g, x, (size_t)R * w * 4), "idx_fp4_round %dx%d differs from the CPU", R, w);
        free(x); free(g);
        gpu->ops->free(gpu, dx);
    }
}

/* Steps recorded between step_begin/step_end replay as graphs with the
 * position changing each step; results must equal eager execution. */
/* pick_sum: the GPU's ids, sums and bad ids are the CPU's (the host scan)
 * over rows with the maximum tied in several places, all-zero rows of both
 * signs, rows of -inf sums (overflow), vocabulary-sized rows and a row
 * whose c holds an infinity before a NaN (its bad id only: the others are
 * meaningless there). */
static void test_pick_sum(void)
{
    int n = 6, V = 129280;
    int64_t lda = V + 3, ldc = V + 5;
    float *a = rnd((size_t)n * lda, 4.0f), *c = rnd((size_t)n * ldc, 4.0f);
    a[1 * lda + 7] = 40.0f, c[1 * ldc + 7] = 2.0f; /* row 1: 42 at 7, 9000 and 100000 */
    a[1 * lda + 9000] = 41.0f, c[1 * ldc + 9000] = 1.0f;
    a[1 * lda + 100000] = 42.0f, c[1 * ldc + 100000] = 0.0f;
    for (int v = 0; v < V; v++) {
        a[2 * lda + v] = v % 3 ? 0.0f : -0.0f; /* row 2: zeros of both signs */
        c[2 * ldc + v] = v % 5 ? -0.0f : 0.0f;
        a[3 * lda + v] = -3e38f; /* row 3: every sum -inf */
        c[3 * ldc + v] = -3e38f;
    }
    a[4 * lda + V - 1] = 1e38f, c[4 * ldc + V - 1] = 3e38f; /* row 4: +inf at the last id */
    c[5 * ldc + 50] = INFINITY, c[5 * ldc + 100] = NAN;     /* row 5: bad at 50 */
    int32_t ci[6], cb[6];
    float ct[6];
    cpu->ops->pick_sum(cpu, a, lda, c, ldc, n, V, ci, ct, cb);
    CHECK(ci[1] == 7 && ci[2] == 0 && ci[3] == 0 && ci[4] == V - 1 && cb[5] == 50 && cb[0] == -1);
    float *da = dev(a, (size_t)n * lda), *dc = dev(c, (size_t)n * ldc);
    int32_t *gi = gpu->ops->alloc(gpu, 64), *gb = gpu->ops->alloc(gpu, 64);
    float *gt = gpu->ops->alloc(gpu, 64);
    gpu->ops->pick_sum(gpu, da, lda, dc, ldc, n, V, gi, gt, gb);
    int32_t hi[6], hb[6];
    float ht[6];
    gpu->ops->download(gpu, hi, gi, sizeof hi);
    gpu->ops->download(gpu, ht, gt, sizeof ht);
    gpu->ops->download(gpu, hb, gb, sizeof hb);
    CHECK(gpu->ops->sync(gpu) == DSV4_OK);
    for (int r = 0; r < n; r++)
        CHECKF(hb[r] == cb[r] && (cb[r] >= 0 || (hi[r] == ci[r] && !memcmp(&ht[r], &ct[r], sizeof ht[r]))),
               "pick_sum row %d: GPU id %d sum %g bad %d, CPU id %d sum %g bad %d", r, hi[r], (double)ht[r], hb[r],
               ci[r], (double)ct[r], cb[r]);
    free(a); free(c);
    gpu->ops->free(gpu, da); gpu->ops->free(gpu, dc); gpu->ops->free(gpu, gi); gpu->ops->free(gpu, gt); gpu->ops->free(gpu, gb);
}

/* Concurrent groups in a recorded step (two side ones and the main one),
 * each a chain on buffers of its own, the side ones with a product whose
 * activation rows are prepared in a workspace (4 rows of 4096: not staged;
 * each group's is its own), the main one rotating rows at positions
 * uploaded in the step; then a third side group opened after that main
 * work, which reads its result, beside more main work: the eager step's
 * bytes, captured and replayed. */
static void test_concurrent_groups(void)
{
    CHECK(gpu->ops->concurrent != NULL);
    int T = 4, H = 3, hd = 64, rd = 16, n = 4096;
    tmat W = mkq(WF_FP8_E4M3, DT_F8_E8M0, 256, n);
    float *f = rnd(rd / 2, 0.5f), *df = dev(f, rd / 2);
    float *dx = gpu->ops->alloc(gpu, (size_t)T * n * 4), *dy = gpu->ops->alloc(gpu, (size_t)T * 256 * 4);
    float *dq = gpu->ops->alloc(gpu, (size_t)T * H * hd * 4), *dz = gpu->ops->alloc(gpu, (size_t)T * 256 * 4);
    size_t ny = (size_t)T * 256, nq = (size_t)T * H * hd;
    float *ey = malloc(ny * 4), *eq = malloc(nq * 4), *gy = malloc(ny * 4), *gq = malloc(nq * 4);
    float *ez = malloc(ny * 4), *gz = malloc(ny * 4);
    float *dw = gpu->ops->alloc(gpu, nq * 4), *dv = gpu->ops->alloc(gpu, nq * 4);
    float *ew = malloc(nq * 4), *gw = malloc(nq * 4), *ev = malloc(nq * 4), *gv = malloc(nq * 4);
    int64_t *dpos = gpu->ops->alloc(gpu, (size_t)T * sizeof(int64_t));
    for (int step = 0; step < 6; step++) {
        float *x = rnd((size_t)T * n, 1.0f), *q = rnd(nq, 1.0f);
        int64_t pos[4] = {step, step + 1, 2 * step, 7};
        for (int rec = 0; rec < 2; rec++) {
            if (rec) gpu->ops->step_begin(gpu, T);
            gpu->ops->upload(gpu, dx, x, (size_t)T * n * 4);
            gpu->ops->upload(gpu, dq, q, nq * 4);
            gpu->ops->upload(gpu, dv, q, nq * 4);
            gpu->ops->upload(gpu, dpos, pos, sizeof pos);
            if (rec) gpu->ops->concurrent(gpu, 1);
            gpu->ops->matmul(gpu, dx, n, T, &W.d, dy, 256);
            gpu->ops->rmsnorm(gpu, dy, T, 256, NULL, 1e-6f, dy);
            if (rec) gpu->ops->concurrent(gpu, 1);
            gpu->ops->matmul(gpu, dx, n, T, &W.d, dz, 256); /* both side groups read dx */
            if (rec) gpu->ops->concurrent(gpu, 2);
            gpu->ops->norm_rope(gpu, dq, T, H, hd, rd, NULL, 1e-6f, dpos, df, -1);
            if (rec) gpu->ops->concurrent(gpu, 1); /* after the main group's norm_rope */
            gpu->ops->rmsnorm(gpu, dq, T * H, hd, NULL, 1e-6f, dw);
            if (rec) gpu->ops->concurrent(gpu, 2);
            gpu->ops->rope(gpu, dv, T, H, hd, rd, 0, 0, dpos, df, 1);
            if (rec) gpu->ops->concurrent(gpu, 0);
            gpu->ops->download(gpu, rec ? gy : ey, dy, ny * 4);
            gpu->ops->download(gpu, rec ? gq : eq, dq, nq * 4);
            gpu->ops->download(gpu, rec ? gz : ez, dz, ny * 4);
            gpu->ops->download(gpu, rec ? gw : ew, dw, nq * 4);
            gpu->ops->download(gpu, rec ? gv : ev, dv, nq * 4);
            if (rec) gpu->ops->step_end(gpu);
            CHECK(gpu->ops->sync(gpu) == DSV4_OK);
        }
        CHECKF(!memcmp(gy, ey, ny * 4) && !memcmp(gq, eq, nq * 4) && !memcmp(gz, ez, ny * 4) &&
               !memcmp(gw, ew, nq * 4) && !memcmp(gv, ev, nq * 4), "step %d: the grouped step differs from the eager one",
               step);
        free(x); free(q);
    }
    free(f); free(ey); free(eq); free(gy); free(gq); free(ez); free(gz); free(ew); free(gw); free(ev); free(gv);
    gpu->ops->free(gpu, df); gpu->ops->free(gpu, dx); gpu->ops->free(gpu, dy); gpu->ops->free(gpu, dq);
    gpu->ops->free(gpu, dz); gpu->ops->free(gpu, dw); gpu->ops->free(gpu, dv); gpu->ops->free(gpu, dpos);
}

static void test_graph_replay(void)
{
    int T = 1, H = 2, hd = 32, rd = 8, W = 6;
    dsv4_row_fmt fm = row_fmt(ROW_FP8, hd, rd); /* the packed ring: its kernel stages rows in shared memory */
    float *f = rnd(rd / 2, 0.5f), *df = dev(f, rd / 2);
    uint8_t *ring_e = gpu->ops->alloc(gpu, (size_t)W * fm.bytes), *ring_g = gpu->ops->alloc(gpu, (size_t)W * fm.bytes);
    float *dx = gpu->ops->alloc(gpu, (size_t)H * hd * 4);
    float *host_out = malloc((size_t)H * hd * 4), *eager_out = malloc((size_t)H * hd * 4);
    for (int step = 0; step < 12; step++) {
        float *x = rnd((size_t)H * hd, 1.0f);
        /* eager */
        gpu->ops->upload(gpu, dx, x, (size_t)H * hd * 4);
        gpu->ops->rope(gpu, dx, T, H, hd, rd, step, 1, NULL, df, 0);
        gpu->ops->ring_store(gpu, ring_e, W, &fm, dx, T, step);
        gpu->ops->download(gpu, eager_out, dx, (size_t)H * hd * 4);
        CHECK(gpu->ops->sync(gpu) == DSV4_OK);
        /* recorded */
        gpu->ops->step_begin(gpu, T);
        gpu->ops->upload(gpu, dx, x, (size_t)H * hd * 4);
        gpu->ops->rope(gpu, dx, T, H, hd, rd, step, 1, NULL, df, 0);
        gpu->ops->ring_store(gpu, ring_g, W, &fm, dx, T, step);
        gpu->ops->download(gpu, host_out, dx, (size_t)H * hd * 4);
        gpu->ops->step_end(gpu);
        CHECK(gpu->ops->sync(gpu) == DSV4_OK);
        CHECKF(!memcmp(host_out, eager_out, (size_t)H * hd * 4), "step %d: graph output differs", step);
        free(x);
    }
    uint8_t *re = backb(ring_e, (size_t)W * fm.bytes), *rg = backb(ring_g, (size_t)W * fm.bytes);
    CHECK(!memcmp(re, rg, (size_t)W * fm.bytes));
    free(re); free(rg); free(f); free(host_out); free(eager_out);
    gpu->ops->free(gpu, df); gpu->ops->free(gpu, ring_e); gpu->ops->free(gpu, ring_g); gpu->ops->free(gpu, dx);
}

/* A token id outside the table is caught on the device and reported by sync. */
static void test_fault(void)
{
    tmat E = mk(DT_F32, 10, 8, 1.0f);
    int32_t tok[1] = {10};
    int32_t *dt = devb(tok, 4);
    float *dX = gpu->ops->alloc(gpu, 8 * 4);
    gpu->ops->embed(gpu, &E.d, dt, 1, 1, dX);
    CHECK(gpu->ops->sync(gpu) == DSV4_ERR_DEVICE);
    CHECK(strstr(dsv4_last_error(), "token") != NULL);
    CHECK(gpu->sticky_row == 0);
    CHECK(gpu->ops->sync(gpu) == DSV4_ERR_DEVICE); /* sticky until cleared */
    backend_clear_error(gpu);
    CHECK(gpu->ops->sync(gpu) == DSV4_OK);
   
    gpu->ops->free(gpu, dt); gpu->ops->free(gpu, dX);
}

static void test_profile(void)
{
    const char *names[16];
    double ms[16];
    gpu->ops->profile_enable(gpu, 1);
    test_rmsnorm();
    int n = gpu->ops->profile_report(gpu, names, ms, 16);
    gpu->ops->profile_enable(gpu, 0);
    int found = 0;
    for (int i = 0; i < n; i++) found |= !strcmp(names[i], "rmsnorm") && ms[i] > 0;
    CHECK(found);
}

int main(void)
{
    cpu = cpu_backend_new(2, 1 << 16);
    gpu = cuda_backend_new(0, 1 << 16);
    if (!gpu) {
        printf("FAIL cuda_backend_new: %s\n", dsv4_last_error());
        return 1;
    }
    RUN(test_matmul);
    RUN(test_matmul_invariance);
    RUN(test_int_matmul_bits);
    RUN(test_matmul_range);
    RUN(test_matmul_fp8in);
    RUN(test_matmul_post);
    RUN(test_matmul_pair);
    RUN(test_matmul_grouped);
    RUN(test_gguf_exact);
    RUN(test_rmsnorm);
    RUN(test_rope);
    RUN(test_norm_rope);
    RUN(test_concurrent_groups);
    RUN(test_embed_ring);
    RUN(test_hc);
    RUN(test_compress);
    RUN(test_indexer);
    RUN(test_attention);
    RUN(test_moe);
    RUN(test_cache_quant);
    RUN(test_pick_sum);
    RUN(test_graph_replay);
    RUN(test_fault);
    RUN(test_profile);
    gpu->ops->destroy(gpu);
    cpu->ops->destroy(cpu);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    TEST_MAIN_END();
}

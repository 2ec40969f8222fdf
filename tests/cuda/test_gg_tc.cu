/* The GGUF tensor-core products (src/cuda/ggml_tc.cuh) emulated on the CPU,
 * no GPU needed: the staging (ggtc_put), the fragment reads (ggtc_frag,
 * ggtc_bfrag) and the job layout are the kernels' own host-callable code;
 * mma.m16n8k16 is emulated from the PTX fragment layout (the one the FP8
 * kernels use), and the slice loop follows ggtc_slice. For every block type
 * the result must be the fp32 product with the CPU's dequantized weights
 * (within the 22-bit activation split), each k-step must pair weight and
 * activation columns of one 16-column half, and the 16-row (MT = 1) and
 * 32-row (MT = 2) instances and every K-slice count must agree bit for bit
 * where the kernels promise it. What this cannot check (the GPU's own MMA,
 * barriers, launch shapes) the CUDA op tests check on the device. */
#include <cuda_fp16.h>

#include "cuda/ggml_tc.cuh"
#include "test.h"

#define NTOK 8

static uint16_t h_bits(float f)
{
    __half_raw r = __float2half_rn(f);
    return r.x;
}

static float h_val(uint16_t b)
{
    __half_raw r;
    r.x = b;
    return __half2float(__half(r));
}

/* Half i of a prepared row (stored as uint4, the type the fragment reads
 * use: no aliasing between them and these byte copies). */
static void put_half(uint4 *o, int i, uint16_t h) { memcpy((char *)o + 2 * i, &h, 2); }
static uint16_t get_half(const uint4 *o, int i)
{
    uint16_t h;
    memcpy(&h, (const char *)o + 2 * i, 2);
    return h;
}

/* A prepared activation row as tc_prep writes it: x·2^e split into f16 hi
 * and lo, 8-column groups in the paired order, hi then lo; returns 2^-e. */
static float prep_row(const float *x, int n, uint4 *o)
{
    float mx = 0.0f;
    for (int i = 0; i < n; i++) mx = fmaxf(mx, fabsf(x[i]));
    int e = 0;
    if (mx > 0.0f && isfinite(mx)) {
        int E;
        frexpf(mx, &E);
        e = 15 - E < 126 ? 15 - E : 126;
    }
    int npad = (int)tc_npad(n);
    for (int g8 = 0; g8 < npad / 8; g8++)
        for (int j = 0; j < 8; j++) {
            int c = g8 * 8 + j, p = (j & 3) * 2 + (j >> 2);
            float v = c < n ? ldexpf(x[c], e) : 0.0f;
            uint16_t h = h_bits(v);
            put_half(o, g8 * 16 + p, h);
            put_half(o, g8 * 16 + 8 + p, h_bits(v - h_val(h)));
        }
    return ldexpf(1.0f, -e);
}

/* d += A·B over the fragments of the 32 lanes (PTX m16n8k16, f16 in,
 * fp32 accumulate; the emulation sums in double). */
static void emu_mma(float (*d)[4], const uint32_t (*a)[4], const uint32_t (*b)[2])
{
    float A[16][16], B[16][8];
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, q = l & 3;
        for (int h = 0; h < 2; h++) {
            A[g][2 * q + h] = h_val((uint16_t)(a[l][0] >> (16 * h)));
            A[g + 8][2 * q + h] = h_val((uint16_t)(a[l][1] >> (16 * h)));
            A[g][2 * q + 8 + h] = h_val((uint16_t)(a[l][2] >> (16 * h)));
            A[g + 8][2 * q + 8 + h] = h_val((uint16_t)(a[l][3] >> (16 * h)));
            B[2 * q + h][g] = h_val((uint16_t)(b[l][0] >> (16 * h)));
            B[2 * q + 8 + h][g] = h_val((uint16_t)(b[l][1] >> (16 * h)));
        }
    }
    for (int l = 0; l < 32; l++) {
        int g = l >> 2, q = l & 3;
        for (int i = 0; i < 4; i++) {
            int r = g + (i >= 2 ? 8 : 0), c = 2 * q + (i & 1);
            double s = 0;
            for (int k = 0; k < 16; k++) s += (double)A[r][k] * B[k][c];
            d[l][i] = (float)((double)d[l][i] + s);
        }
    }
}

/* One slice of a warp (MT tiles of rows starting at row0, one 8-token
 * tile), as ggtc_slice computes it: acc[lane][m][i]. */
template <int FMT>
static void emu_slice(int MT, float (*acc)[2][4], const uint8_t *W, int64_t rows, int64_t rb, int64_t row0,
                      int64_t nch, int sp, int ks, const uint4 *const *xr)
{
    static ggtc_stage st;
    int CPI = 2 / MT;
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < 2; m++)
            for (int i = 0; i < 4; i++) acc[l][m][i] = 0.0f;
    for (int64_t base = sp; base < nch; base += (int64_t)CPI * ks) {
        for (int l = 0; l < 32; l++) { /* each lane decodes its job */
            int64_t r = row0 + ggtc_job_row(l, MT), cj = base + (int64_t)ggtc_job_chunk(l, MT) * ks;
            if (cj >= nch) continue;
            gg_codes o;
            gg_chunk_codes<FMT>(W + (r < rows ? r : rows - 1) * rb, cj, &o);
            ggtc_put(&o, st.code[l], &st.f[l]);
        }
        for (int u = 0; u < CPI; u++) {
            int64_t c = base + (int64_t)u * ks;
            if (c >= nch) break;
            for (int s = 0; s < 2; s++) {
                uint4 bw[32];
                uint32_t bh[32][2], bl[32][2], one[32][4];
                float sig[32][4];
                for (int l = 0; l < 32; l++) {
                    bw[l] = ggtc_bfrag((const __half *)xr[l >> 2], c, s, l & 3);
                    bh[l][0] = bw[l].x, bh[l][1] = bw[l].y, bl[l][0] = bw[l].z, bl[l][1] = bw[l].w;
                    for (int i = 0; i < 4; i++) one[l][i] = 0x3C003C00u, sig[l][i] = 0.0f;
                }
                emu_mma(sig, one, bh);
                emu_mma(sig, one, bl);
                for (int m = 0; m < MT; m++) {
                    uint32_t af[32][4];
                    float blk[32][4];
                    for (int l = 0; l < 32; l++) {
                        int g = l >> 2, q = l & 3, j0 = (u * MT + m) * 16 + g, j1 = j0 + 8;
                        uint2 f0 = ggtc_frag(st.code[j0], s, q), f1 = ggtc_frag(st.code[j1], s, q);
                        af[l][0] = f0.x, af[l][1] = f1.x, af[l][2] = f0.y, af[l][3] = f1.y;
                        for (int i = 0; i < 4; i++) blk[l][i] = 0.0f;
                    }
                    emu_mma(blk, af, bh);
                    emu_mma(blk, af, bl);
                    for (int l = 0; l < 32; l++) {
                        int g = l >> 2, j0 = (u * MT + m) * 16 + g, j1 = j0 + 8;
                        float4 F0 = st.f[j0], F1 = st.f[j1];
                        for (int i = 0; i < 4; i++) {
                            float a = i < 2 ? (s ? F0.y : F0.x) : (s ? F1.y : F1.x);
                            float mm = i < 2 ? (s ? F0.w : F0.z) : (s ? F1.w : F1.z);
                            acc[l][m][i] = fmaf(a, blk[l][i], acc[l][m][i]);
                            if (gg_has_min(FMT)) acc[l][m][i] = fmaf(-mm, sig[l][i], acc[l][m][i]);
                        }
                    }
                }
            }
        }
    }
}

/* y[r][t] for rows row0 .. row0 + 16·MT of W through the emulated warp with
 * ks slices (added in slice order, as tc_slices_sum). */
template <int FMT>
static void emu_rows(int MT, int ks, const uint8_t *W, int64_t rows, int64_t rb, int64_t row0, int64_t nch,
                     const uint4 *const *xr, const float *P, float (*y)[NTOK])
{
    static float tot[32][2][4], acc[32][2][4];
    for (int sp = 0; sp < ks; sp++) {
        emu_slice<FMT>(MT, acc, W, rows, rb, row0, nch, sp, ks, xr);
        for (int l = 0; l < 32; l++)
            for (int m = 0; m < MT; m++)
                for (int i = 0; i < 4; i++) tot[l][m][i] = sp ? tot[l][m][i] + acc[l][m][i] : acc[l][m][i];
    }
    for (int l = 0; l < 32; l++)
        for (int m = 0; m < MT; m++)
            for (int i = 0; i < 4; i++) {
                int r = m * 16 + (l >> 2) + (i >= 2 ? 8 : 0), t = 2 * (l & 3) + (i & 1);
                y[r][t] = tot[l][m][i] * P[t];
            }
}

/* Each k-step of thread q covers the columns of one half, and its A and B
 * words name the same columns: the staging of a row of column numbers. */
static void test_pairing(void)
{
    static ggtc_stage st;
    gg_codes o;
    for (int l = 0; l < 32; l++) o.c[l] = l; /* code = its column */
    o.a[0] = o.a[1] = 1.0f;
    o.m[0] = o.m[1] = 0.0f;
    ggtc_put(&o, st.code[0], &st.f[0]);
    float x[32];
    for (int c = 0; c < 32; c++) x[c] = (float)c;
    uint4 xr[2 * 128 / 8];
    prep_row(x, 32, xr);
    float scale = h_val(get_half(xr, 2)) / x[1]; /* column 1: paired slot 2 of group 0's hi */
    for (int s = 0; s < 2; s++) {
        int seen[32] = {0};
        for (int q = 0; q < 4; q++) {
            uint2 a = ggtc_frag(st.code[0], s, q);
            uint4 b = ggtc_bfrag((const __half *)xr, 0, s, q);
            uint32_t aw[2] = {a.x, a.y}, bw[2] = {b.x, b.y};
            for (int w = 0; w < 2; w++)
                for (int h = 0; h < 2; h++) {
                    int col = (int)h_val((uint16_t)(aw[w] >> (16 * h)));
                    float xv = h_val((uint16_t)(bw[w] >> (16 * h))) / scale;
                    CHECKF(col / 16 == s, "k-step %d, thread %d: column %d is not in half %d", s, q, col, s);
                    CHECKF(xv == (float)col, "k-step %d, thread %d: weight column %d meets activation column %g", s, q,
                           col, (double)xv);
                    seen[col]++;
                }
        }
        for (int c = 16 * s; c < 16 * s + 16; c++) CHECKF(seen[c] == 1, "k-step %d: column %d taken %d times", s, c, seen[c]);
    }
}

/* The f16 bits of small integers. */
static void test_h16(void)
{
    int bad = 0;
    for (int c = -2048; c <= 2048; c++) bad += gg_h16(c) != h_bits((float)c);
    CHECK(bad == 0);
}

template <int FMT>
static void check_fmt(uint64_t seed)
{
    uint32_t type = wformat_ggml_type((dsv4_wformat)FMT);
    const ggml_type_info *ti = ggml_type_get(type);
    int be = gg_block_elems(FMT), nblk = be == 32 ? 7 : 2; /* odd chunk counts for 32-value blocks */
    int64_t n = (int64_t)nblk * be, nch = n / 32, rows = 40, rb = gg_row_bytes(FMT, n);
    uint8_t *W = (uint8_t *)aligned_alloc(16, (size_t)((rows * rb + 15) / 16 * 16));
    float *w = (float *)malloc((size_t)(rows * n) * 4);
    ggml_random_blocks(type, seed, 0.05f, rows * nblk, W);
    ggml_dequant_blocks(type, W, rows * nblk, w);
    static float x[NTOK][2048];
    static uint4 xp[NTOK][2 * 2048 / 8];
    float P[NTOK];
    const uint4 *xr[NTOK];
    uint64_t st = seed * 2654435761u + 1;
    for (int t = 0; t < NTOK; t++) {
        /* token 5 all zero; tokens 6 and 7 far from 1 */
        float mag = t == 6 ? 1e20f : t == 7 ? 1e-20f : 1.0f + t;
        for (int c = 0; c < n; c++) {
            st = st * 6364136223846793005ull + 1442695040888963407ull;
            x[t][c] = t == 5 ? 0.0f : mag * ((float)(st >> 40) / (float)(1 << 24) - 0.5f);
        }
        P[t] = prep_row(x[t], (int)n, xp[t]);
        xr[t] = xp[t];
    }
    double worst = 0;
    int same = 1;
    for (int64_t row0 = 0; row0 < rows; row0 += 32) {
        static float y1[32][NTOK], y2[32][NTOK], y1k[32][NTOK], tmp[32][NTOK];
        for (int ks = 1; ks <= 3; ks++) {
            emu_rows<FMT>(2, ks, W, rows, rb, row0, nch, xr, P, y2);
            emu_rows<FMT>(1, ks, W, rows, rb, row0, nch, xr, P, y1);
            emu_rows<FMT>(1, ks, W, rows, rb, row0 + 16, nch, xr, P, tmp);
            memcpy(y1[16], tmp[0], sizeof(float) * 16 * NTOK);
            same &= !memcmp(y1, y2, sizeof y1); /* the instances agree bit for bit */
            if (ks == 1) memcpy(y1k, y1, sizeof y1);
            for (int r = 0; r < 32 && row0 + r < rows; r++)
                for (int t = 0; t < NTOK; t++) {
                    double ref = 0, mag = 0;
                    for (int c = 0; c < n; c++) {
                        ref += (double)w[(row0 + r) * n + c] * x[t][c];
                        mag += fabs((double)w[(row0 + r) * n + c] * x[t][c]);
                    }
                    double err = fabs(y2[r][t] - ref) / (mag > 0 ? mag : 1.0);
                    if (t == 5) CHECKF(y2[r][t] == 0.0f, "%s: zero row gives %g", ti->name, (double)y2[r][t]);
                    if (err > worst) worst = err;
                }
        }
    }
    CHECKF(worst < 2e-6, "%s: relative error %g against the dequantized fp64 product", ti->name, worst);
    CHECKF(same, "%s: the 16-row and 32-row instances differ", ti->name);
    free(W);
    free(w);
}

#define GG_CHECK_CASE(f, name, ggml, elems, bytes) check_fmt<f>(77 + f);
static void test_products(void) { WF_GGUF_BLOCKS(GG_CHECK_CASE) }
#undef GG_CHECK_CASE

int main(void)
{
    RUN(test_h16);
    RUN(test_pairing);
    RUN(test_products);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    TEST_MAIN_END();
}

/* Dense products with exact integer block sums (int_dot.cuh: numerics and
 * the warp routines): the preparation of activation rows, shared with the
 * experts, and the matmul's two kernels (the GEMV up to INT_GEMV_MAX token
 * rows, the integer tensor cores beyond), which give a row the same bits. */
#include "cuda/int_dot.cuh"

int cu_int_matmul_ok(const dsv4_mat *W, int64_t grp_rows)
{
    return int_ok(*W) && grp_rows % 32 == 0;
}

size_t cu_int_prep_bytes(int64_t rows, int64_t cols)
{
    return int_limbs_bytes(rows, cols) + (size_t)rows * (size_t)(cols / 32) * sizeof(float);
}

/* One warp per (prepared row, block): its factor and limbs. Prepared row
 * r is token t = r / G, row group g = r % G: x + t*ldx + g*n. */
__global__ void __launch_bounds__(256) int_prep_kernel(const float *x, int64_t ldx, int G, int64_t n, int64_t nrows,
                                                       int8_t *lim, float *ex)
{
    cu_pdl();
    int lane = threadIdx.x & 31;
    int64_t nb = n / 32, job = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (job >= nrows * nb) return;
    int64_t r = job / nb, b = job % nb, t = r / G, g = r % G;
    float v = x[t * ldx + g * n + b * 32 + lane], m = fabsf(v);
    int bad = __any_sync(0xffffffffu, !isfinite(v)); /* fmaxf would pass over a NaN */
    for (int o = 16; o; o >>= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    int e = 0;
    if (m > 0.0f && !bad) {
        frexpf(m, &e);
        e = min(22 - e, 126); /* 2^-e stays a normal float (blocks below 2^-104 lose their low bits) */
    }
    int xi = bad ? 0 : (int)rintf(ldexpf(v, e));
    int a0 = ((xi + 128) & 255) - 128, q = (xi - a0) >> 8;
    int a1 = ((q + 128) & 255) - 128, a2 = (q - a1) >> 8;
    int8_t *o = lim + job * INT_LIMB_BYTES;
    o[lane] = (int8_t)a0;
    o[32 + lane] = (int8_t)a1;
    o[64 + lane] = (int8_t)a2;
    if (lane == 0) ex[job] = bad ? __int_as_float(0x7fc00000) : __int_as_float((127 - e) << 23);
}

void cu_int_prep(cu_impl *c, const float *x, int64_t ldx, int G, int64_t n, int64_t nrows, void *ws)
{
    int8_t *lim = (int8_t *)ws;
    float *ex = (float *)int_factors(lim, nrows, n);
    cu_launch(c, "int_prep_kernel", int_prep_kernel, dim3(cu_blocks(nrows * (n / 32), 8)), dim3(256), 0, x, ldx, G,
              n, nrows, lim, ex);
}

/* Block = 4 warps: 4 / ks row groups of rw rows (int_gemv_rows), ks
 * slices each; the slices' sums are added in slice order through shared
 * memory. */
template <int FMT>
__global__ void __launch_bounds__(128) int_gemv_kernel(const int8_t *lim, const float *ex, int T, int G, dsv4_mat W,
                                                       float *y, int64_t ldy, int ks, int rw, int64_t grp_rows)
{
    __shared__ float2 vs[4][32][33];
    __shared__ float sl_sum[4][INT_GEMV_MAX][32];
    cu_pdl();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = warp % ks;
    int64_t row0 = ((int64_t)blockIdx.x * (4 / ks) + warp / ks) * rw;
    int active = row0 < W.rows;
    int64_t g = active && grp_rows ? row0 / grp_rows : 0;
    float acc[1][INT_GEMV_MAX];
    if (active)
        int_gemv_warp<1, FMT>(&W, row0, rw, T, sl, ks, lim, ex, [&](int t) { return (int64_t)t * G + g; }, vs[warp],
                         acc);
    int64_t r = row0 + lane;
    active = active && lane < rw;
    if (ks == 1) {
        if (active && r < W.rows)
            for (int t = 0; t < T; t++) y[t * ldy + r] = acc[0][t];
        return;
    }
    if (active)
        for (int t = 0; t < T; t++) sl_sum[warp][t][lane] = acc[0][t];
    __syncthreads();
    if (sl == 0 && active && r < W.rows)
        for (int t = 0; t < T; t++) {
            float v = sl_sum[warp][t][lane];
            for (int s = 1; s < ks; s++) v = __fadd_rn(v, sl_sum[warp + s][t][lane]);
            y[t * ldy + r] = v;
        }
}

/* Block = 4 warps of 16 weight rows, 8*NT token rows (blockIdx.y). */
template <int NT, int FMT>
__global__ void __launch_bounds__(128) int_tc_kernel(const int8_t *lim, const float *ex, int T, int G, dsv4_mat W,
                                                     float *y, int64_t ldy, int ks, int64_t grp_rows)
{
    cu_pdl();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = lane >> 2, q = lane & 3;
    int64_t row0 = ((int64_t)blockIdx.x * 4 + warp) * 16, tok0 = (int64_t)blockIdx.y * 8 * NT;
    if (row0 >= W.rows) return;
    int64_t g = grp_rows ? row0 / grp_rows : 0;
    float tot[1][NT][4];
    int_tile_warp<1, NT, FMT>(&W, row0, ks, lim, ex, [&](int i) {
        int64_t u = tok0 + i;
        return (u < T ? u : T - 1) * G + g;
    }, tot);
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int64_t r = row0 + gq + (i >= 2 ? 8 : 0), t = tok0 + 8 * j + 2 * q + (i & 1);
            if (r < W.rows && t < T) y[t * ldy + r] = tot[0][j][i];
        }
}

void cu_int_matmul(cu_impl *c, const cu_matmul_args *a)
{
    const dsv4_mat *W = &a->W;
    if (!a->xq) return; /* no workspace: cu_ws has failed the step */
    int G = a->grp_rows ? (int)(W->rows / a->grp_rows) : 1;
    int64_t nrows = (int64_t)a->T * G;
    cu_int_prep(c, a->x, a->ldx, G, W->cols, nrows, a->xq);
    const int8_t *lim = (const int8_t *)a->xq;
    const float *ex = int_factors(lim, nrows, W->cols);
    int ks = int_splits(W->rows, W->cols), rw = int_gemv_rows(W->rows, ks);
    int_fmt_dispatch(W->fmt, [&](auto f) {
        constexpr int FMT = decltype(f)::value;
        if (a->T <= INT_GEMV_MAX)
            cu_launch(c, "int_gemv_kernel", int_gemv_kernel<FMT>, dim3(cu_blocks(W->rows, 4 / ks * rw)), dim3(128), 0,
                      lim, ex, a->T, G, *W, a->y, a->ldy, ks, rw, a->grp_rows);
        else
            cu_launch(c, "int_tc_kernel", int_tc_kernel<4, FMT>, dim3(cu_blocks(W->rows, 64), cu_blocks(a->T, 32)),
                      dim3(128), 0, lim, ex, a->T, G, *W, a->y, a->ldy, ks, a->grp_rows);
    });
}

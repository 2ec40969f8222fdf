/* Q8_0 and IQ3_XXS experts with exact integer block sums (int_dot.cuh):
 * groups of up to INT_GEMV_MAX pairs on the CUDA cores (every group of a
 * decode step), larger groups (prompts) on the integer
 * tensor cores; a pair's sums are the same bits either way, so they do not
 * depend on how many pairs share its expert. UP: the w1 and w3 rows of the
 * group's expert against the pairs' prepared x rows (a->xl), SwiGLU into
 * H; down: w2 rows against the pairs' prepared H rows (a->hl) into Y. */
#include "cuda/int_dot.cuh"
#include "cuda/moe_internal.cuh"

/* Entry i of the pair list (a one-token step's groups are its pairs), and
 * the prepared row a pair reads. */
__device__ __forceinline__ int int_group_pair(const moe_args &a, int i, int single)
{
    return single ? i : group_pair(a, i);
}

template <int UP>
__device__ __forceinline__ int64_t int_pair_row(const moe_args &a, int p)
{
    return UP ? (int64_t)pair_token(a, p) : (int64_t)p;
}

/* Block (row block, group), 4 warps: 4 / ks row groups of rw rows
 * (int_gemv_rows), ks slices each, added in slice order through shared
 * memory. */
template <int UP>
__global__ void __launch_bounds__(128) expert_int_gemv_kernel(moe_args a, int part, int ks, int rw)
{
    constexpr int NM = UP ? 2 : 1;
    __shared__ float2 vs[4][32][33];
    __shared__ float sl_sum[4][NM][INT_GEMV_MAX][32];
    cu_pdl();
    int single = a.T == 1;
    moe_group G = single ? group_at<1>(a, blockIdx.y) : group_at<4>(a, blockIdx.y);
    int np = G.i1 - G.i0;
    if (np == 0 || np > INT_GEMV_MAX || part_skips(part, G.e)) return; /* the whole block */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, sl = warp % ks;
    int64_t R = UP ? a.I : a.D, row0 = ((int64_t)blockIdx.x * (4 / ks) + warp / ks) * rw, r = row0 + lane;
    int active = row0 < R;
    dsv4_mat W[NM];
    W[0] = group_weight(a, G.e, UP ? 0 : 2);
    if (UP) W[NM - 1] = group_weight(a, G.e, 1);
    const int8_t *lim = UP ? a.xl : a.hl;
    const float *ex = int_factors(lim, UP ? a.T : a.T * a.K + a.T, UP ? a.D : a.I);
    float acc[NM][INT_GEMV_MAX];
    auto xi = [&](int t) { return int_pair_row<UP>(a, int_group_pair(a, G.i0 + t, single)); };
    if (active) { /* the group's format (routed and shared experts may differ; w1 and w3 do not) */
        if (W[0].fmt == WF_IQ3_XXS) int_gemv_warp<NM, WF_IQ3_XXS>(W, row0, rw, np, sl, ks, lim, ex, xi, vs[warp], acc);
        else int_gemv_warp<NM, WF_Q8_0>(W, row0, rw, np, sl, ks, lim, ex, xi, vs[warp], acc);
    }
    if (ks > 1) {
        if (active)
            for (int m = 0; m < NM; m++)
                for (int t = 0; t < np; t++) sl_sum[warp][m][t][lane] = acc[m][t];
        __syncthreads();
        if (sl != 0 || !active) return;
        for (int m = 0; m < NM; m++)
            for (int t = 0; t < np; t++) {
                float v = sl_sum[warp][m][t][lane];
                for (int s = 1; s < ks; s++) v = __fadd_rn(v, sl_sum[warp + s][m][t][lane]);
                acc[m][t] = v;
            }
    }
    if (!active || lane >= rw || r >= R) return;
    for (int t = 0; t < np; t++) {
        int p = int_group_pair(a, G.i0 + t, single);
        if (UP) a.H[(int64_t)p * a.I + r] = swiglu(a, acc[0][t], acc[NM - 1][t]);
        else a.Y[(int64_t)p * a.D + r] = acc[0][t];
    }
}

/* Block (row block of 4 warps x 16 rows, group, token-tile lane z): the
 * groups of more than INT_GEMV_MAX pairs, 8*NT pairs a tile. */
template <int UP, int NT>
__global__ void __launch_bounds__(128) expert_int_tile_kernel(moe_args a, int part, int ks)
{
    constexpr int NM = UP ? 2 : 1;
    cu_pdl();
    moe_group G = group_at<4>(a, blockIdx.y);
    if (G.i1 - G.i0 <= INT_GEMV_MAX || part_skips(part, G.e)) return;
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, gq = lane >> 2, q = lane & 3;
    int64_t R = UP ? a.I : a.D, row0 = ((int64_t)blockIdx.x * 4 + warp) * 16;
    if (row0 >= R) return;
    dsv4_mat W[NM];
    W[0] = group_weight(a, G.e, UP ? 0 : 2);
    if (UP) W[NM - 1] = group_weight(a, G.e, 1);
    const int8_t *lim = UP ? a.xl : a.hl;
    const float *ex = int_factors(lim, UP ? a.T : a.T * a.K + a.T, UP ? a.D : a.I);
    for (int64_t tt = blockIdx.z; tt * 8 * NT < G.i1 - G.i0; tt += gridDim.z) {
        int64_t ib = G.i0 + tt * 8 * NT; /* the tile's first entry of the pair list */
        float tot[NM][NT][4];
        auto xi = [&](int i) {
            int64_t ii = ib + i;
            return int_pair_row<UP>(a, group_pair(a, (int)(ii < G.i1 ? ii : G.i1 - 1)));
        };
        if (W[0].fmt == WF_IQ3_XXS) int_tile_warp<NM, NT, WF_IQ3_XXS>(W, row0, ks, lim, ex, xi, tot);
        else int_tile_warp<NM, NT, WF_Q8_0>(W, row0, ks, lim, ex, xi, tot);
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int64_t r = row0 + gq + (i >= 2 ? 8 : 0), ii = ib + 8 * j + 2 * q + (i & 1);
                if (r >= R || ii >= G.i1) continue;
                int p = group_pair(a, (int)ii);
                if (UP) a.H[(int64_t)p * a.I + r] = swiglu(a, tot[0][j][i], tot[NM - 1][j][i]);
                else a.Y[(int64_t)p * a.D + r] = tot[0][j][i];
            }
    }
}

template <int UP>
static void launch_int(cu_impl *c, const moe_args *a, int part)
{
    int64_t R = UP ? a->I : a->D, n = UP ? a->D : a->I;
    int ks = int_splits(R, n), rw = int_gemv_rows(R, ks);
    cu_launch(c, UP ? "moe up (int)" : "moe down (int)", expert_int_gemv_kernel<UP>,
              dim3(cu_blocks(R, 4 / ks * rw), (unsigned)a->gmax), dim3(128), 0, *a, part, ks, rw);
    if (a->T > INT_GEMV_MAX) { /* only then can a group have more pairs */
        unsigned z = a->T / 256 < 1 ? 1u : a->T / 256 > 8 ? 8u : (unsigned)(a->T / 256);
        cu_launch(c, UP ? "moe up (int tiles)" : "moe down (int tiles)", expert_int_tile_kernel<UP, 4>,
                  dim3(cu_blocks(R, 64), (unsigned)a->gmax, z), dim3(128), 0, *a, part, ks);
    }
}

int moe_int_ok(const dsv4_mat *w1, const dsv4_mat *w3, const dsv4_mat *w2)
{
    return int_ok(*w1) && int_ok(*w3) && int_ok(*w2) && w1->fmt == w3->fmt; /* the up launch reads both alike */
}

void moe_int_part(cu_impl *c, const moe_args *a, int up, int part)
{
    if (up) launch_int<1>(c, a, part);
    else launch_int<0>(c, a, part);
}

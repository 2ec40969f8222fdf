/* The experts as fp32 dot products (formats without a tensor-core path,
 * and GGUF experts whose gate and up types differ), as templates over the
 * routed and shared experts' format families; moe_fp32_*.cu instantiate
 * moe_fp32_fam for the pairs launch_fp32_part (moe.cu) names, in parallel
 * translation units (one missing fails the link). */
#ifndef DSV4_CUDA_MOE_FP32_CUH
#define DSV4_CUDA_MOE_FP32_CUH
#include "cuda/moe_internal.cuh"

/* cu_dots for group e's weight (e < 0: the shared expert) with the routed
 * experts' format family FR and the shared expert's FS known at compile
 * time (-1: dispatch at run time), so the common cases keep a plain dot
 * product's registers. */
template <int FR, int FS, int NW, int NB>
__device__ __forceinline__ void group_dots(int e, const dsv4_mat *W, const int64_t *r, int64_t n,
                                           const float *const *xs, int nb, int vec, float (*acc)[NB])
{
    int f = e < 0 ? FS : FR;
    if (f == CU_W_BF16) cu_dots_fam<CU_W_BF16, NW, NB>(W, r, n, xs, nb, vec, acc);
    else if (f == CU_W_FP8) cu_dots_fam<CU_W_FP8, NW, NB>(W, r, n, xs, nb, vec, acc);
    else if (f == CU_W_FP4) cu_dots_fam<CU_W_FP4, NW, NB>(W, r, n, xs, nb, vec, acc);
    else if (f == CU_W_GGUF) gg_dots<NW, NB>(W, r, n, xs, nb, acc);
    else cu_dots<NW, NB>(W, r, n, xs, nb, vec, acc);
}

/* The w1 and w3 dots of row r, one matrix at a time, into g and u. With a
 * run-time format dispatch (FR < 0, or GGUF's block types) every block
 * decoder the dispatch can meet is inlined at each call, which is most of
 * these kernels' compile time: there the two dots run as a loop that is not
 * unrolled, one copy of the code (and the kernel has no two-row dot either);
 * the common formats keep the two unrolled calls. The sums are the same
 * either way: a row's order does not depend on how many rows a dot takes. */
__host__ __device__ constexpr bool moe_one_copy(int fr) { return fr < 0 || fr == CU_W_GGUF; }

template <int FR, int FS, int NB>
__device__ __forceinline__ void pair_dots(int e, const dsv4_mat *w1, const dsv4_mat *w3, const int64_t *rr,
                                          int64_t n, const float *const *xs, int nb, int vec, float *g, float *u)
{
#pragma unroll(moe_one_copy(FR) ? 1 : 2)
    for (int m = 0; m < 2; m++) {
        float t[1][NB];
        group_dots<FR, FS, 1, NB>(e, m ? w3 : w1, rr, n, xs, nb, vec, t);
#pragma unroll
        for (int j = 0; j < NB; j++) {
            if (m) u[j] = t[0][j];
            else g[j] = t[0][j];
        }
    }
}

/* Block (row block, group): each warp takes one row of w1 and w3 of the
 * group's expert and applies it to the group's tokens, NB at a time (a lone
 * token through cu_lane_dot: the same products in the same order). NB = 1
 * for one-token steps keeps the registers, and so the occupancy, of a plain
 * GEMV. */
template <int FR, int FS, int NB>
__global__ void __launch_bounds__(256) expert_up_kernel(moe_args a, int part)
{
    cu_pdl();
    int64_t r = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    moe_group G = group_at<NB>(a, blockIdx.y);
    int g0 = G.i0, g1 = G.i1;
    if (r >= a.I || g0 == g1 || part_skips(part, G.e)) return;
    /* w1 and w3 share a shape, and a format but in GGUF files (checked when the op is submitted) */
    dsv4_mat w1 = group_weight(a, G.e, 0), w3 = group_weight(a, G.e, 1);
    int64_t rr[2] = {r, r};
    const char *r1 = (const char *)w1.data + r * cu_row_bytes(w1), *r3 = (const char *)w3.data + r * cu_row_bytes(w3);
    int vec = cu_dots_vec(w1, r1, a.x, a.D) && cu_dots_vec(w3, r3, a.x, a.D);
    if (NB == 1) { /* one-token step: the group is pair g0 of token 0 */
        float gv, uv;
        pair_dots<FR, FS, 1>(G.e, &w1, &w3, rr, a.D, &a.x, 1, vec, &gv, &uv);
        swiglu_store(a, g0, r, cu_warp_sum(gv), cu_warp_sum(uv));
    } else {
        for (int i0 = g0; i0 < g1; i0 += NB) {
            int nb = g1 - i0 < NB ? g1 - i0 : NB;
            if (nb == 1) { /* the same products as the one-token step */
                int p = group_pair(a, i0);
                const float *x = a.x + (int64_t)pair_token(a, p) * a.D;
                float gv, uv;
                pair_dots<FR, FS, 1>(G.e, &w1, &w3, rr, a.D, &x, 1, vec, &gv, &uv);
                swiglu_store(a, p, r, cu_warp_sum(gv), cu_warp_sum(uv));
                continue;
            }
            const float *xs[NB];
            for (int j = 0; j < NB; j++)
                xs[j] = a.x + (int64_t)pair_token(a, group_pair(a, i0 + (j < nb ? j : 0))) * a.D;
            const dsv4_mat w13[2] = {w1, w3};
            float acc[2][NB];
            if (!moe_one_copy(FR) && w1.fmt == w3.fmt) {
                group_dots<FR, FS, 2, NB>(G.e, w13, rr, a.D, xs, nb, vec, acc);
            } else { /* one row at a time: the same sums (a row's order does not depend on NW) */
                pair_dots<FR, FS, NB>(G.e, &w1, &w3, rr, a.D, xs, nb, vec, acc[0], acc[1]);
            }
            for (int j = 0; j < NB; j++) {
                if (j >= nb) break;
                swiglu_store(a, group_pair(a, i0 + j), r, cu_warp_sum(acc[0][j]), cu_warp_sum(acc[1][j]));
            }
        }
    }
}

/* Y[p][d] = w2[d]·H[p] for the group's pairs, one w2 row per warp. */
template <int FR, int FS, int NB>
__global__ void __launch_bounds__(256) expert_down_kernel(moe_args a, int part)
{
    cu_pdl();
    int64_t d = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    moe_group G = group_at<NB>(a, blockIdx.y);
    int g0 = G.i0, g1 = G.i1;
    if (d >= a.D || g0 == g1 || part_skips(part, G.e)) return;
    dsv4_mat w2 = group_weight(a, G.e, 2);
    const char *r2 = (const char *)w2.data + d * cu_row_bytes(w2);
    int64_t rr[1] = {d};
    int vec = cu_dots_vec(w2, r2, a.H, a.I);
    if (NB == 1) { /* one-token step: pair g0 */
        const float *h = a.H + (int64_t)g0 * a.I;
        float acc[1][1];
        group_dots<FR, FS, 1, 1>(G.e, &w2, rr, a.I, &h, 1, vec, acc);
        float y = cu_warp_sum(acc[0][0]);
        if ((threadIdx.x & 31) == 0) a.Y[(int64_t)g0 * a.D + d] = y;
    } else {
        for (int i0 = g0; i0 < g1; i0 += NB) {
            int nb = g1 - i0 < NB ? g1 - i0 : NB;
            const float *hs[NB];
            for (int j = 0; j < NB; j++) hs[j] = a.H + (int64_t)group_pair(a, i0 + (j < nb ? j : 0)) * a.I;
            float acc[1][NB];
            if (nb == 1) group_dots<FR, FS, 1, 1>(G.e, &w2, rr, a.I, hs, 1, vec, (float (*)[1])acc);
            else group_dots<FR, FS, 1, NB>(G.e, &w2, rr, a.I, hs, nb, vec, acc);
            for (int j = 0; j < nb; j++) {
                float y = cu_warp_sum(acc[0][j]);
                if ((threadIdx.x & 31) == 0) a.Y[(int64_t)group_pair(a, i0 + j) * a.D + d] = y;
            }
        }
    }
}

/* The fp32 expert kernels for the experts' formats (UP: w1·w3, else w2), for a
 * part of the groups, NB tokens per pass of a weight row (larger groups take
 * it again, from L2). */
template <int FR, int FS, int UP, int NB>
void moe_fp32_fam(cu_impl *c, const moe_args *a, int part)
{
    dim3 grid(cu_blocks(UP ? a->I : a->D, 8), (unsigned)a->gmax);
    if (UP) cu_launch(c, "moe up", expert_up_kernel<FR, FS, NB>, grid, dim3(256), 0, *a, part);
    else cu_launch(c, "moe down", expert_down_kernel<FR, FS, NB>, grid, dim3(256), 0, *a, part);
}

#endif

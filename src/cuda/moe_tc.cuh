/* The experts on tensor cores, as templates over the weight kind. Each
 * moe_tc_*.cu instantiates moe_tc_kind for a few kinds, so that the kinds
 * (about 20 s of nvcc each) compile in parallel; every kind
 * tc_kind_dispatch names has its instance in exactly one of them (one
 * missing fails the link). */
#ifndef DSV4_CUDA_MOE_TC_CUH
#define DSV4_CUDA_MOE_TC_CUH
#include "cuda/moe_internal.cuh"
#include "cuda/tc_tile.cuh"

/* The experts on tensor cores (FP8/MXFP4 weights, tc_f16.cuh; GGUF block
 * weights, ggml_tc.cuh), one group's block (row tile block, group G,
 * token-tile lane z) for weight kind KIND with ks K slices. UP: a warp
 * holds the same 16 rows of w1 and w3 (MT = 2) against 8·NT of the group's
 * pairs at a time (token tiles z, z + gridDim.z, ...), prepared rows of
 * their tokens (xq), and stores SwiGLU into H; otherwise 16 rows of w2
 * against the pairs' H rows (hq) into Y. A pair's sums are those of
 * tc_kernel: fixed by the shapes, whichever warp, tile or launch computes
 * them. Shared memory: the GGUF kinds' staging, the slice sums, the staged
 * row. */
template <int KIND, int NT, int SEQ, int U, int UP>
__device__ __forceinline__ void expert_tc_group(const moe_args &a, const moe_group &G, int ks)
{
    constexpr int MT = UP ? 2 : 1, GG = tc_is_gg(KIND), TERMS = tc_terms(KIND);
    extern __shared__ float smem[];
    float *sm = smem + tc_lead_bytes(KIND, MT, U) / 4; /* SEQ = 0, ks > 1: [8 warps][MT][NT][4][32] */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    int single = a.T == 1; /* one-token steps are not grouped: group k is slot k (group_at) */
    int wpt = SEQ ? 1 : ks, sp0 = warp % wpt;
    int64_t R = UP ? a.I : a.D, n = UP ? a.D : a.I, npad = tc_npad(n);
    /* one-token steps: the block prepares its one row (x, or the pair's H)
     * in shared memory instead of reading the prepared rows (tc_prep_block) */
    float *stg = sm + tc_part_floats(SEQ, MT, NT, ks), *spf = stg + tc_stage_row_floats(1, n, TERMS);
    int stage = UP ? a.stage_up : a.stage_down, prepped = 0;
    /* once per block, by every warp (barriers); FP8/MXFP4 slices call it
     * once their first weight copies are in flight */
    auto prep = [&]() {
        if (stage && !prepped) /* act_prep: x, or H times the pair's routing weight, through FP8 first */
            tc_prep_block<TERMS>(UP ? a.x : a.H + (int64_t)G.i0 * a.I, 0, 1, n, (__half *)stg, spf, spf + 8,
                                 a.act_prep, !UP && G.i0 < a.T * a.K ? a.wt[G.i0] : 1.0f);
        prepped = 1;
    };
    int64_t row0 = ((int64_t)blockIdx.x * (8 / wpt) + warp / wpt) * 16;
    int active = row0 < R;
    if (wpt == 1 && !active) {
        prep();
        return;
    }
    if (!active) row0 = 0; /* a dummy tile, so every warp reaches the barriers */
    dsv4_mat W[2] = {group_weight(a, G.e, UP ? 0 : 2), group_weight(a, G.e, UP ? 1 : 2)};
    tc_rows<MT> WR;
    const uint8_t *jrow = NULL; /* GGUF: this lane's job row (tile m = the matrix W[m]) */
    if constexpr (GG) {
        int jr = ggtc_job_row(lane, MT), m = jr / 16;
        int64_t r = row0 + jr % 16;
        jrow = (const uint8_t *)W[m].data + (r < R ? r : R - 1) * cu_row_bytes(W[0]);
    } else {
#pragma unroll
        for (int m = 0; m < MT; m++) tc_rows_set<KIND, MT>(WR, m, W[m], row0, g, q);
    }
    const __half *pq = UP ? a.xq : a.hq;
    const float *ppf = UP ? a.xpf : a.hpf;
    int np = G.i1 - G.i0;
    for (int64_t tt = blockIdx.z; tt * 8 * NT < np; tt += gridDim.z) {
        int64_t ib = G.i0 + tt * 8 * NT; /* the tile's first entry of the pair list */
        const __half *xr[NT];
#pragma unroll
        for (int j = 0; j < NT; j++) {
            int64_t i = ib + 8 * j + g;
            int p = single ? (int)(i < G.i1 ? i : G.i1 - 1) : group_pair(a, (int)(i < G.i1 ? i : G.i1 - 1));
            xr[j] = stage ? (const __half *)stg : pq + (int64_t)(UP ? pair_token(a, p) : p) * TERMS * npad;
        }
        /* UP: the w1 and w3 rows as the two tiles, one pass over the pairs' x */
        float tot[MT][NT][4];
        int store;
        if constexpr (GG) {
            prep();
            ggtc_stage *st = (ggtc_stage *)smem + warp;
            store = tc_slices_sum<MT, NT, SEQ>(tot, ks, sp0, sm, [&](float (*acc)[NT][4], int sp) {
                ggtc_slice<tc_gg_fmt(KIND), MT, NT>(acc, jrow, n / 32, sp, ks, xr, st);
            });
        } else {
            uint4 *ring = (uint4 *)smem + warp * tc_ring_u4(MT, U) + lane;
            store = tc_warp_sums<KIND, MT, NT, SEQ, U>(tot, W[0], WR, ks, sp0, xr, q, sm, ring, prep);
        }
        float P[NT][2]; /* the rows' factors (a staged one is written by prep) */
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                int64_t i2 = ib + 8 * j + 2 * q + e;
                int p2 = single ? (int)(i2 < G.i1 ? i2 : G.i1 - 1)
                                : group_pair(a, (int)(i2 < G.i1 ? i2 : G.i1 - 1));
                P[j][e] = stage ? tc_row_factor<KIND>(spf, 0) : tc_row_factor<KIND>(ppf, UP ? pair_token(a, p2) : p2);
            }
#pragma unroll
        for (int m = 0; m < MT; m++) /* the sums are of the scaled rows: their factor comes last */
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int i = 0; i < 4; i++) tot[m][j][i] *= P[j][i & 1];
        if (!store || !active) continue;
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) {
                int64_t r = row0 + g + (i >= 2 ? 8 : 0), ii = ib + 8 * j + 2 * q + (i & 1);
                if (r >= R || ii >= G.i1) continue;
                int p = single ? (int)ii : group_pair(a, (int)ii);
                if (UP) a.H[(int64_t)p * a.I + r] = swiglu(a, tot[0][j][i], tot[MT - 1][j][i]);
                else a.Y[(int64_t)p * a.D + r] = tot[0][j][i];
            }
    }
}

/* The tensor-core expert launch's blocks (row tile block, group, token-tile
 * lane): the routed experts' groups in kind KR with ks_r slices and bx_r
 * row tile blocks, the shared expert's in KS with ks_s and bx_s (the
 * official checkpoints: MXFP4 routed, FP8 shared, in one launch instead of
 * two; KR = KS: one kind for the groups of the part). PART_SHARED launches
 * have one group row: the shared expert's, the last group. */
template <int KR, int KS, int NT, int SEQ, int U, int UP>
__global__ void __launch_bounds__(256, SEQ ? 1 : 2)
    expert_tc_kernel(moe_args a, int part, int ks_r, int ks_s, unsigned bx_r, unsigned bx_s)
{
    cu_pdl();
    int single = a.T == 1;
    int gi = part == PART_SHARED ? (single ? a.K : a.grp[0] - 1) : (int)blockIdx.y;
    moe_group G = single ? group_at<1>(a, gi) : group_at<4>(a, gi);
    if (G.i0 == G.i1 || part_skips(part, G.e)) return; /* the whole block */
    if constexpr (KR == KS) {
        expert_tc_group<KR, NT, SEQ, U, UP>(a, G, ks_r);
    } else if (G.e < 0) {
        if (blockIdx.x < bx_s) expert_tc_group<KS, NT, SEQ, U, UP>(a, G, ks_s);
    } else if (blockIdx.x < bx_r) {
        expert_tc_group<KR, NT, SEQ, U, UP>(a, G, ks_r);
    }
}

/* A prompt's experts of an FP8/MXFP4 kind in block tiles (tc_tile.cuh):
 * block (row tile, group, token-tile lane z) for the group's pairs z,
 * z + gridDim.z, ... in tiles of the block's tokens, the same sums as
 * expert_tc_group. UP: each warp's MT tiles are MT/2 tiles of w1 rows and
 * the same rows of w3 (SwiGLU in registers), so a block covers half as
 * many rows of I as the tile has. */
template <int KIND, int UP>
__global__ void __launch_bounds__(256, 1) expert_tt_kernel(moe_args a, int part, int ks)
{
    constexpr int MT = TT_MT, NT = TT_NT, WM = TT_WM;
    using C = tt_cfg<KIND, MT, NT, WM>;
    constexpr int RT = UP ? C::BM / 2 : C::BM; /* rows of the output a block covers */
    cu_pdl();
    moe_group G = group_at<4>(a, part == PART_SHARED ? a.grp[0] - 1 : (int)blockIdx.y);
    if (G.i0 == G.i1 || part_skips(part, G.e)) return; /* the whole block */
    const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    const int wm = warp % WM, wn = warp / WM;
    const int64_t R = UP ? a.I : a.D, n = UP ? a.D : a.I, npad = tc_npad(n), r0 = (int64_t)blockIdx.x * RT;
    const dsv4_mat W0 = group_weight(a, G.e, UP ? 0 : 2), W1 = UP ? group_weight(a, G.e, 1) : W0;
    const int64_t rb = cu_row_bytes(W0);
    const __half *pq = UP ? a.xq : a.hq;
    const float *ppf = UP ? a.xpf : a.hpf;
    auto pair = [&](int64_t i) { return group_pair(a, (int)(i < G.i1 ? i : G.i1 - 1)); };
    auto prow = [&](int p) { return (int64_t)(UP ? pair_token(a, p) : p); }; /* the pair's prepared row */
    for (int64_t tt = blockIdx.z; tt * C::BN < G.i1 - G.i0; tt += gridDim.z) {
        int64_t ib = G.i0 + tt * C::BN; /* the tile's first entry of the pair list */
        float acc[MT][NT][4];
        tt_sums<KIND, MT, NT, WM>(
            acc, W0, ks,
            [&](int ri) {
                int w = ri / (16 * MT), m = ri % (16 * MT) / 16, up3 = UP && m >= MT / 2;
                int64_t r = UP ? r0 + w * 8 * MT + (m % (MT / 2)) * 16 + ri % 16 : r0 + ri;
                r = r < R ? r : R - 1;
                const dsv4_mat &M = up3 ? W1 : W0;
                return tt_wrow{(const char *)M.data + r * rb, cu_scale_row(M, r)};
            },
            [&](int ti) { return (const char *)(pq + prow(pair(ib + ti)) * 2 * npad); }, [] {});
        int pp[NT][2];
        float P[NT][2]; /* the rows' factors */
#pragma unroll
        for (int j = 0; j < NT; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
                pp[j][e] = pair(ib + wn * 8 * NT + 8 * j + 2 * q + e);
                P[j][e] = tc_row_factor<KIND>(ppf, prow(pp[j][e]));
            }
#pragma unroll
        for (int m = 0; m < (UP ? MT / 2 : MT); m++)
#pragma unroll
            for (int j = 0; j < NT; j++)
#pragma unroll
                for (int e = 0; e < 4; e++) {
                    int64_t r = r0 + wm * (UP ? 8 : 16) * MT + m * 16 + g + (e >= 2 ? 8 : 0),
                            ii = ib + wn * 8 * NT + 8 * j + 2 * q + (e & 1);
                    if (r >= R || ii >= G.i1) continue;
                    int p = pp[j][e & 1];
                    float f = P[j][e & 1];
                    if (UP) a.H[(int64_t)p * a.I + r] = swiglu(a, acc[m][j][e] * f, acc[m + MT / 2][j][e] * f);
                    else a.Y[(int64_t)p * a.D + r] = acc[m][j][e] * f;
                }
    }
}

template <int KIND, int UP>
static void launch_tt(cu_impl *c, const moe_args *a, int part, int ks)
{
    using C = tt_cfg<KIND, TT_MT, TT_NT, TT_WM>;
    size_t shm = tt_smem_bytes<KIND, TT_MT, TT_NT, TT_WM>(ks);
    static size_t allowed[CU_SMEM_GPUS];
    if (cu_allow_smem(c, expert_tt_kernel<KIND, UP>, shm, allowed)) return;
    unsigned z = a->T / 256 < 1 ? 1u : a->T / 256 > 8 ? 8u : (unsigned)(a->T / 256);
    dim3 grid(cu_blocks(UP ? a->I : a->D, UP ? C::BM / 2 : C::BM), part == PART_SHARED ? 1u : (unsigned)a->gmax, z);
    cu_launch(c, UP ? "moe up (tiles)" : "moe down (tiles)", expert_tt_kernel<KIND, UP>, grid, dim3(256), shm, *a,
              part, ks);
}

#define TC_EXPERT_SLICE 16

/* Shared bytes of a kind's share of an expert launch: its staging or copy
 * rings, the slice sums (SEQ = 0), the staged row. */
template <int KIND, int UP>
static size_t expert_tc_smem(const moe_args *a, int seq, int nt, int u, int ks)
{
    constexpr int MT = UP ? 2 : 1;
    int64_t n = UP ? a->D : a->I;
    size_t s = tc_lead_bytes(KIND, MT, u);
    if (!seq)
        s += (size_t)tc_part_floats(0, MT, nt, ks) * sizeof(float) +
             ((UP ? a->stage_up : a->stage_down) ? tc_stage_bytes(1, n, tc_terms(KIND)) : 0);
    return s;
}

/* One tensor-core expert launch (UP or down) for a part of the groups,
 * routed kind KR and shared kind KS. The instance (NT, SEQ, U, z lanes)
 * follows the step's size; the sums do not. */
template <int KR, int KS, int UP>
static void launch_tc(cu_impl *c, const moe_args *a, int part)
{
    int64_t R = UP ? a->I : a->D, n = UP ? a->D : a->I;
    /* an expert launch has K + 1 matrices side by side: FP8/MXFP4 slices
     * of at least TC_EXPERT_SLICE chunks (1 KB of each row), where a
     * matmul's are 4 (docs/PERFORMANCE.md, "Experts in one launch") */
    int ks_r = tc_splits(R, (n + tc_chunk_cols(KR) - 1) / tc_chunk_cols(KR), tc_is_gg(KR) ? 4 : TC_EXPERT_SLICE);
    int ks_s = tc_splits(R, (n + tc_chunk_cols(KS) - 1) / tc_chunk_cols(KS), tc_is_gg(KS) ? 4 : TC_EXPERT_SLICE);
    unsigned gy = part == PART_SHARED ? 1u : (unsigned)a->gmax;
    const char *what = UP ? "moe up (tensor cores)" : "moe down (tensor cores)";
    if constexpr (tt_kind(KR) && tt_kind(KS)) {
        if (a->T > 64) { /* a prompt: block tiles, one launch a kind */
            if (KR == KS) {
                launch_tt<KR, UP>(c, a, part, ks_r);
            } else {
                if (part != PART_SHARED) launch_tt<KR, UP>(c, a, PART_ROUTED, ks_r);
                if (part != PART_ROUTED) launch_tt<KS, UP>(c, a, PART_SHARED, ks_s);
            }
            return;
        }
    }
    if (a->T <= 64) {
        /* U = 2 chunks in flight per tile through the copy rings, two
         * blocks an SM: faster than 3 or 4 (docs/PERFORMANCE.md,
         * 2026-12-02, "Copy rings") */
        constexpr int U = 2;
        size_t shm_r = expert_tc_smem<KR, UP>(a, 0, 1, U, ks_r), shm_s = expert_tc_smem<KS, UP>(a, 0, 1, U, ks_s);
        size_t shm = shm_r > shm_s ? shm_r : shm_s;
        unsigned bx_r = cu_blocks(R, 8 / ks_r * 16), bx_s = cu_blocks(R, 8 / ks_s * 16);
        static size_t allowed[CU_SMEM_GPUS];
        if (cu_allow_smem(c, expert_tc_kernel<KR, KS, 1, 0, U, UP>, shm, allowed)) return;
        dim3 grid(bx_r > bx_s ? bx_r : bx_s, gy, 1);
        cu_launch(c, what, expert_tc_kernel<KR, KS, 1, 0, U, UP>, grid, dim3(256), shm, *a, part, ks_r, ks_s, bx_r, bx_s);
    } else {
        constexpr int NT = UP ? 2 : 4, U = 2;
        unsigned z = a->T / 256 < 1 ? 1u : a->T / 256 > 8 ? 8u : (unsigned)(a->T / 256);
        size_t shm_r = expert_tc_smem<KR, UP>(a, 1, NT, U, ks_r), shm_s = expert_tc_smem<KS, UP>(a, 1, NT, U, ks_s);
        size_t shm = shm_r > shm_s ? shm_r : shm_s;
        unsigned bx = cu_blocks(R, 8 * 16);
        static size_t allowed[CU_SMEM_GPUS];
        if (cu_allow_smem(c, expert_tc_kernel<KR, KS, NT, 1, U, UP>, shm, allowed)) return;
        dim3 grid(bx, gy, z);
        cu_launch(c, what, expert_tc_kernel<KR, KS, NT, 1, U, UP>, grid, dim3(256), shm, *a, part, ks_r, ks_s, bx, bx);
    }
}

template <int KIND>
void moe_tc_kind(cu_impl *c, const moe_args *a, int up, int part)
{
    if (up) launch_tc<KIND, KIND, 1>(c, a, part);
    else launch_tc<KIND, KIND, 0>(c, a, part);
}

template <int KR, int KS>
void moe_tc_pair(cu_impl *c, const moe_args *a, int up)
{
    if (up) launch_tc<KR, KS, 1>(c, a, PART_ALL);
    else launch_tc<KR, KS, 0>(c, a, PART_ALL);
}

#endif

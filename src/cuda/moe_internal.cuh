/* The MoE kernels' shared facts (moe.cu: routing, grouping, combine;
 * moe_fp32.cuh: the fp32 experts; moe_tc.cuh: the tensor-core experts): the
 * launch arguments, the step's groups and pairs, SwiGLU. The expert
 * kernels of each family live in their own translation units (moe_fp32.cuh,
 * moe_tc.cuh) because they are most of the backend's compile time. */
#ifndef DSV4_CUDA_MOE_INTERNAL_CUH
#define DSV4_CUDA_MOE_INTERNAL_CUH
#include "cuda/ggml_tc.cuh"

#define MOE_MAX_K 32

typedef struct {
    int64_t pos0;
    const float *x;
    const int32_t *tok;
    int T, D, E, K, I, score_func;
    float route_scale, swiglu_limit;
    dsv4_mat gate, bias, sh1, sh2, sh3;
    const int32_t *tid2eid;
    const void *const *tab; /* device [6][E]: w1, w3, w2 data, then their scale grids */
    dsv4_mat e13, e2;       /* the routed experts' format and shape (w1/w3, w2); data from tab */
    float *out;
    float *logits, *wt, *H, *Y;
    int32_t *sel, *ord;
    int32_t *grp;   /* see group_kernel */
    int gmax;       /* most groups a step can have: min(E, T·K) + 1 */
    int tk_r[2], tk_s[2]; /* tensor-core kinds of the routed / shared experts' w2 [0] and w1·w3 [1] (-1: fp32 kernels) */
    int stage_up, stage_down; /* one-token step: the expert kernels prepare their row themselves */
    int e3_fmt;      /* w3's format: e13's, except in GGUF files (gate and up block types may differ) */
    __half *xq, *hq; /* tensor-core experts: prepared rows of x (T) and of H (pairs), */
    float *xpf, *hpf; /* and their factors (tc_f16.cuh); NULL when no expert takes that path */
    int act;          /* official numerics (dsv4_moe_params.act_fp8): the experts read xa, x through */
    float *xa;        /* FP8, and H rounded after the routing weights went into it */
    int act_prep;     /* ... rounded by the rows' preparation instead (every expert on tensor cores) */
    int int_r, int_s; /* the routed / shared experts take the integer sums (int_dot.cuh; then tk_* are -1) */
    const int8_t *xl, *hl; /* their prepared rows of x (T) and of H (pairs): limbs, then exponents */
    dsv4_hc_post post; /* the output through hc_post into these streams in the combine (X NULL: into out) */
    int *err;
    int layer; /* for fault reports */
} moe_args;

/* Group g's expert matrix (which = 0: w1, 1: w3, 2: w2), e < 0: shared. */
__device__ __forceinline__ dsv4_mat group_weight(const moe_args &a, int e, int which)
{
    if (e < 0) return which == 0 ? a.sh1 : which == 1 ? a.sh3 : a.sh2;
    dsv4_mat m = which == 2 ? a.e2 : a.e13;
    if (which == 1) m.fmt = (dsv4_wformat)a.e3_fmt;
    m.data = a.tab[(int64_t)which * a.E + e];
    m.scale = a.tab[(int64_t)(3 + which) * a.E + e];
    return m;
}

/* Group g of the step: its expert (-1: shared) and its entries [i0, i1) of
 * the pair list (empty when there is no such group). A one-token step
 * (NB = 1) is not grouped (no group_kernel): group k is slot k, i.e. pair k,
 * and group K the shared expert, pair K. */
typedef struct { int e, i0, i1; } moe_group;

template <int NB>
__device__ __forceinline__ moe_group group_at(const moe_args &a, int g)
{
    moe_group r;
    if (NB == 1) {
        r.e = g < a.K ? a.sel[g] : -1;
        r.i0 = g;
        r.i1 = g <= a.K && (g == a.K || r.e >= 0) ? g + 1 : g;
        return r;
    }
    const int32_t *ge = a.grp + 1, *go = ge + a.gmax;
    if (g >= a.grp[0]) {
        r.e = -1;
        r.i0 = r.i1 = 0;
        return r;
    }
    r.e = ge[g];
    r.i0 = go[g];
    r.i1 = go[g + 1];
    return r;
}

/* Entry i of the pair list of a grouped step. */
__device__ __forceinline__ int group_pair(const moe_args &a, int i) { return a.grp[2 + 2 * a.gmax + i]; }

__device__ __forceinline__ int pair_token(const moe_args &a, int p)
{
    int TK = a.T * a.K;
    return p >= TK ? p - TK : p / a.K;
}

/* SwiGLU(g, u), clamped (spec §4). */
__device__ __forceinline__ float swiglu(const moe_args &a, float g, float u)
{
    float L = a.swiglu_limit;
    if (L > 0) {
        g = fminf(g, L);
        u = fminf(fmaxf(u, -L), L);
    }
    return g / (1.0f + expf(-g)) * u;
}

/* H[p][r] = SwiGLU(g, u) (lane 0 of the warp writes). */
__device__ __forceinline__ void swiglu_store(const moe_args &a, int p, int64_t r, float g, float u)
{
    if ((threadIdx.x & 31) == 0) a.H[(int64_t)p * a.I + r] = swiglu(a, g, u);
}

/* Which groups an expert launch computes: all, the routed experts' or the
 * shared expert's (their formats may differ). */
enum { PART_ALL, PART_ROUTED, PART_SHARED };

__device__ __forceinline__ int part_skips(int part, int e)
{
    return (part == PART_ROUTED && e < 0) || (part == PART_SHARED && e >= 0);
}

/* The tensor-core experts of weight kind KIND (tc_kind), up (w1·w3 and
 * SwiGLU) or down (w2), for a part of the groups (moe_tc.cuh). */
template <int KIND>
void moe_tc_kind(cu_impl *c, const moe_args *a, int up, int part);

/* Both parts in one launch: routed experts of kind KR, the shared expert
 * of kind KS (the official checkpoints' MXFP4 + FP8, moe_tc_fp8_fp4.cu). */
template <int KR, int KS>
void moe_tc_pair(cu_impl *c, const moe_args *a, int up);

/* The experts with exact integer block sums (moe_int.cu): whether an
 * expert's three matrices take them, and the up or down launch of a part
 * of the groups. */
int moe_int_ok(const dsv4_mat *w1, const dsv4_mat *w3, const dsv4_mat *w2);
void moe_int_part(cu_impl *c, const moe_args *a, int up, int part);

/* The fp32 experts for the routed / shared format families FR, FS (cu_wfam;
 * -1: decided per group at run time), UP (w1·w3 and SwiGLU) or down (w2),
 * NB tokens per pass of a weight row, for a part of the groups
 * (moe_fp32.cuh). */
template <int FR, int FS, int UP, int NB>
void moe_fp32_fam(cu_impl *c, const moe_args *a, int part);

#endif

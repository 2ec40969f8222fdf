/* Mixture of experts (spec §4) on the GPU, with routing on the device (no
 * host round trip): gate matmul, a router kernel per token (scores, top-k or
 * hash selection, weights, and the combine order), a grouping of the
 * (token, slot) pairs by expert (plus one pair per token for the shared
 * expert), fused expert kernels over the groups, so each selected expert is
 * read once per step for all the tokens that chose it: up (w1 and w3 rows,
 * clamped SwiGLU), down (w2); and a combine that adds a token's experts in
 * increasing expert id and then the shared expert, as the CPU. A pair's
 * arithmetic does not depend on the other tokens of the step or on how many
 * share its expert. */
#include <stdlib.h>
#include <string.h>

#include "cuda/hc_post.cuh"
#include "cuda/moe_internal.cuh"

__device__ __forceinline__ float score_of(float l, int fn)
{
    if (fn == SCORE_SIGMOID) return 1.0f / (1.0f + expf(-l));
    float sp = l > 20.0f ? l : log1pf(expf(l));
    return sqrtf(sp);
}

/* (v, e) beats (bv, be): higher value, ties to the lower expert id; a
 * missing candidate (e < 0) never wins. Same choice as the CPU's scan. */
__device__ __forceinline__ int route_better(float v, int e, float bv, int be)
{
    if (e < 0) return 0;
    if (be < 0) return 1;
    return v > bv || (!(v < bv) && !(v > bv) && e < be) || (isnan(bv) && !isnan(v));
}

/* One block per token: scores, selection (top-K by parallel argmax rounds,
 * or the hash table), normalised weights, and the combine order. The
 * rounds compare the biased scores, added once before them (a round's
 * global loads of the bias were most of the kernel's time: K rounds of
 * dependent latency). */
__global__ void route_kernel(moe_args a)
{
    cu_pdl();
    extern __shared__ float s[]; /* [E] scores, [E] taken flags, [E] biased scores */
    __shared__ float rv[32];
    __shared__ int re[32], ss[MOE_MAX_K], so[MOE_MAX_K]; /* the selection and its order, before they go out */
    int t = blockIdx.x, E = a.E, K = a.K, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int *taken = (int *)(s + E);
    float *sb = s + 2 * E;
    const float *lg = a.logits + (int64_t)t * E;
    int32_t *st = a.sel + (int64_t)t * K;
    if (a.score_func != SCORE_SOFTMAX)
        for (int e = threadIdx.x; e < E; e += blockDim.x) s[e] = score_of(lg[e], a.score_func);
    else if (threadIdx.x == 0) {
        float mx = -INFINITY, sum = 0.0f;
        for (int e = 0; e < E; e++) mx = fmaxf(mx, lg[e]);
        for (int e = 0; e < E; e++) sum += (s[e] = expf(lg[e] - mx));
        for (int e = 0; e < E; e++) s[e] /= sum;
    }
    __syncthreads();
    for (int e = threadIdx.x; e < E; e += blockDim.x) {
        taken[e] = 0;
        sb[e] = s[e] + (a.bias.data ? cu_ld(a.bias.dtype, a.bias.data, e) : 0.0f);
    }
    __syncthreads();
    if (a.tid2eid) {
        if (threadIdx.x == 0) {
            int32_t id = a.tok[t];
            for (int k = 0; k < K; k++) {
                int32_t e = id >= 0 ? a.tid2eid[(int64_t)id * K + k] : -1;
                if (e < 0 || e >= E) {
                    cu_fault(a.err, CU_FAULT_EXPERT, t, a.layer);
                    e = -1;
                }
                ss[k] = e;
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            float bv = 0.0f;
            int be = -1;
            for (int e = threadIdx.x; e < E; e += blockDim.x) {
                if (taken[e]) continue;
                if (route_better(sb[e], e, bv, be)) { bv = sb[e]; be = e; }
            }
            for (int o = 16; o > 0; o >>= 1) {
                float ov = __shfl_xor_sync(0xffffffffu, bv, o);
                int oe = __shfl_xor_sync(0xffffffffu, be, o);
                if (route_better(ov, oe, bv, be)) { bv = ov; be = oe; }
            }
            if (lane == 0) { rv[warp] = bv; re[warp] = be; }
            __syncthreads();
            if (threadIdx.x == 0) {
                for (int w = 1; w < (int)(blockDim.x >> 5); w++)
                    if (route_better(rv[w], re[w], bv, be)) { bv = rv[w]; be = re[w]; }
                ss[k] = be;
                if (be >= 0) taken[be] = 1;
            }
            __syncthreads();
        }
    }
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++) sum += ss[k] >= 0 ? s[ss[k]] : 0.0f;
    int32_t *ord = a.ord + (int64_t)t * K;
    for (int k = 0; k < K; k++) {
        st[k] = ss[k];
        a.wt[(int64_t)t * K + k] = ss[k] >= 0 ? s[ss[k]] / (sum + 1e-20f) * a.route_scale : 0.0f;
        /* insertion by (expert id, slot): the order the CPU adds experts in */
        int j = k;
        while (j > 0 && ss[so[j - 1]] > ss[k]) { so[j] = so[j - 1]; j--; }
        so[j] = k;
    }
    for (int k = 0; k < K; k++) ord[k] = so[k];
}

/* The pairs of the step grouped by expert, so each selected expert's weights
 * are streamed once for every token that chose it: groups of the distinct
 * routed experts in increasing id, then one group for the shared expert
 * (every token). grp[0] = number of groups, then per group its expert
 * (-1: shared) and the offset of its pairs in the pair list. One block; the
 * order of pairs inside a group is arbitrary (atomics) and harmless: a pair's
 * result depends only on its own token and expert. */
__global__ void __launch_bounds__(256) group_kernel(moe_args a)
{
    cu_pdl();
    extern __shared__ int cnt[]; /* [E] pairs per expert, then [E] scatter cursors */
    __shared__ int wsum[2][8];
    int E = a.E, TK = a.T * a.K, *cur = cnt + E;
    int32_t *ng = a.grp, *ge = a.grp + 1, *go = ge + a.gmax, *gp = go + a.gmax + 1;
    for (int e = threadIdx.x; e < E; e += blockDim.x) cnt[e] = 0;
    __syncthreads();
    for (int p = threadIdx.x; p < TK; p += blockDim.x)
        if (a.sel[p] >= 0) atomicAdd(&cnt[a.sel[p]], 1);
    __syncthreads();
    /* exclusive scans of (non-empty flag, count) over the experts, 256 at a time */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g0 = 0, o0 = 0;
    for (int base = 0; base < E; base += blockDim.x) {
        int e = base + threadIdx.x, c = e < E ? cnt[e] : 0, f = c > 0, sc = c, sf = f;
        for (int o = 1; o < 32; o <<= 1) {
            int uc = __shfl_up_sync(0xffffffffu, sc, o), uf = __shfl_up_sync(0xffffffffu, sf, o);
            if (lane >= o) { sc += uc; sf += uf; }
        }
        if (lane == 31) { wsum[0][warp] = sf; wsum[1][warp] = sc; }
        __syncthreads();
        int pf = g0, pc = o0, tf = g0, tc = o0;
        for (int w = 0; w < (int)(blockDim.x >> 5); w++) {
            if (w < warp) { pf += wsum[0][w]; pc += wsum[1][w]; }
            tf += wsum[0][w];
            tc += wsum[1][w];
        }
        if (f) {
            int g = pf + sf - 1, off = pc + sc - c;
            ge[g] = e;
            go[g] = off;
            cur[e] = off;
        }
        g0 = tf;
        o0 = tc;
        __syncthreads();
    }
    if (threadIdx.x == 0) { /* the shared expert's group closes the list */
        ge[g0] = -1;
        go[g0] = o0;
        go[g0 + 1] = o0 + a.T;
        ng[0] = g0 + 1;
    }
    for (int t = threadIdx.x; t < a.T; t += blockDim.x) gp[o0 + t] = TK + t;
    for (int p = threadIdx.x; p < TK; p += blockDim.x)
        if (a.sel[p] >= 0) gp[atomicAdd(&cur[a.sel[p]], 1)] = p;
}


/* Up or down of one part on tensor cores, for the weight kind of that
 * part's matrices (expert_kinds): the instances live in moe_tc_*.cu. */
static void launch_tc_part(cu_impl *c, const moe_args *a, int kind, int up, int part)
{
    tc_kind_dispatch(kind, [&](auto k) { moe_tc_kind<decltype(k)::value>(c, a, up, part); });
}

/* Block (column block, tokens blockIdx.y + i·gridDim.y): a token's slots in
 * combine order, their pairs and weights read once into shared memory (not
 * a chain of dependent loads per slot in every thread), then each column
 * adds its experts in that order and the shared expert last. */
__global__ void combine_kernel(moe_args a)
{
    cu_pdl();
    __shared__ int sp[MOE_MAX_K];
    __shared__ float sw[MOE_MAX_K];
    int64_t d = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    for (int64_t t = blockIdx.y; t < a.T; t += gridDim.y) {
        if (threadIdx.x < a.K) {
            int k = a.ord[t * a.K + threadIdx.x];
            int64_t p = t * a.K + k;
            sp[threadIdx.x] = a.sel[p] >= 0 ? (int)p : -1;
            sw[threadIdx.x] = a.wt[p];
        }
        __syncthreads();
        if (d < a.D) {
            /* eight slots' loads (and the shared expert's) issued before
             * their sums, which go in slot order as before */
            float acc = 0.0f, ysh = a.Y[((int64_t)a.T * a.K + t) * a.D + d];
            for (int j0 = 0; j0 < a.K; j0 += 8) {
                float y[8];
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    int j = j0 + i;
                    y[i] = j < a.K && sp[j] >= 0 ? a.Y[(int64_t)sp[j] * a.D + d] : 0.0f;
                }
#pragma unroll
                for (int i = 0; i < 8; i++) {
                    int j = j0 + i;
                    if (j < a.K && sp[j] >= 0) acc += a.act ? y[i] : y[i] * sw[j]; /* act: wt is in Y */
                }
            }
            acc += ysh;
            if (a.post.X) hc_post_elem(a.post, a.D, t, d, acc);
            else a.out[t * a.D + d] = acc;
        }
        __syncthreads(); /* sp, sw are rewritten for the next token */
    }
}

/* The fp32 expert kernels (moe_fp32.cuh) for the experts' formats, up or
 * down, for a part of the groups: one-token steps (not grouped) take a
 * single-token instance that keeps a plain dot product's registers, others
 * 4 tokens per pass of a weight row. */
static void launch_fp32_part(cu_impl *c, const moe_args *a, int up, int part)
{
    int fr = cu_wfam(a->e13), fs = cu_wfam(a->sh1), one = a->T == 1;
    if (cu_wfam(a->e2) != fr || cu_wfam(a->sh2) != fs) fr = fs = -1; /* mixed within an expert: run-time dispatch */
#define FAM(R, S)                                                                                \
    (up ? (one ? moe_fp32_fam<R, S, 1, 1>(c, a, part) : moe_fp32_fam<R, S, 1, 4>(c, a, part))   \
        : (one ? moe_fp32_fam<R, S, 0, 1>(c, a, part) : moe_fp32_fam<R, S, 0, 4>(c, a, part)))
    if (fr == CU_W_BF16 && fs == CU_W_BF16) FAM(CU_W_BF16, CU_W_BF16);
    else if (fr == CU_W_FP4 && fs == CU_W_FP8) FAM(CU_W_FP4, CU_W_FP8);
    else if (fr == CU_W_FP8 && fs == CU_W_FP8) FAM(CU_W_FP8, CU_W_FP8);
    else if (fr == CU_W_GGUF && fs == CU_W_GGUF) FAM(CU_W_GGUF, CU_W_GGUF);
    else FAM(-1, -1);
#undef FAM
}

/* The tensor-core kinds (tc_kind) of an expert's w2 (k[0]) and w1·w3
 * (k[1]); both -1 when a matrix has none, w1 and w3 differ (GGUF files
 * may give gate and up different block types: the fp32 kernels read them
 * apart) or the two want differently prepared rows (tc_terms: the down
 * launch's rows are prepared like the up launch's). */
static void expert_kinds(const dsv4_mat *w1, const dsv4_mat *w3, const dsv4_mat *w2, int *k)
{
    k[0] = tc_kind(*w2);
    k[1] = tc_kind(*w1);
    if (k[0] < 0 || k[1] < 0 || tc_kind(*w3) != k[1] || tc_terms(k[0]) != tc_terms(k[1])) k[0] = k[1] = -1;
}

/* The kind whose prepared rows the tensor-core experts read (routed and
 * shared agree on their terms, cu_moe sees to it): the routed one's up,
 * else the shared one's; -1 when neither takes the tensor cores. */
static int expert_prep_kind(const int *tk_r, const int *tk_s) { return tk_r[1] >= 0 ? tk_r[1] : tk_s[1]; }

void cu_exec_moe(cu_impl *c, const void *args, const int64_t *dpos)
{
    const moe_args *a = (const moe_args *)args;
    if (a->T <= 0) return;
    cu_matmul_args g;
    memset(&g, 0, sizeof g);
    g.x = a->x;
    g.ldx = a->D;
    g.T = a->T;
    g.W = a->gate;
    g.y = a->logits;
    g.ldy = a->E;
    g.xq = a->xq; /* used only when the gate takes the tensor-core path */
    g.pf = a->xpf;
    cu_exec_matmul(c, &g, dpos);
    /* one warp while it holds few experts per lane: no block-wide barriers
     * in the top-k rounds (the choice is the same: route_better orders) */
    cu_launch(c, "moe route", route_kernel, dim3(a->T), dim3(a->E <= 256 ? 32 : 256), (size_t)a->E * 3 * sizeof(float), *a);
    if (a->T > 1)
        cu_launch(c, "moe group", group_kernel, dim3(1), dim3(256), (size_t)a->E * 2 * sizeof(int), *a);
    /* routed experts and shared expert: Q8_0 on the integer sums, others on
     * the tensor cores where their format and shapes allow, else the fp32
     * kernels; one launch where both parts take the same kernels */
    int tr = a->tk_r[1] >= 0, ts = a->tk_s[1] >= 0, tc_all = tr && ts && a->tk_r[0] >= 0 && a->tk_s[0] >= 0;
    /* the experts' view of the step: official numerics give them x through
     * FP8 (the gate had x) and H rounded after the routing weights went
     * into it; where every expert is on tensor cores the rows' preparation
     * rounds them (the same values, no rounding launches) */
    moe_args ea = *a;
    ea.act_prep = a->act && tc_all && tc_prep_act_ok(a->D) && tc_prep_act_ok(a->I);
    if (a->act && !ea.act_prep) {
        cu_launch_act_fp8(c, a->x, a->xa, a->T, a->D, NULL, 0);
        ea.x = a->xa;
    }
    a = &ea;
    int TK = a->T * a->K, ap = a->act_prep, te = tc_terms(expert_prep_kind(a->tk_r, a->tk_s));
    int ir = a->int_r, is = a->int_s;
    if ((tr || ts) && !a->stage_up) tc_prep(c, a->x, a->D, a->T, 1, a->D, a->xq, a->xpf, te, ap);
    if (ir || is) cu_int_prep(c, a->x, a->D, 1, a->D, a->T, (void *)a->xl);
    for (int up = 1; up >= 0; up--) {
        /* official numerics: the routed pairs' H times their weights (pairs < T·K), every row through FP8 */
        if (!up && a->act && !ap) cu_launch_act_fp8(c, a->H, a->H, TK + a->T, a->I, a->wt, TK);
        if (!up && (tr || ts) && !a->stage_down)
            tc_prep(c, a->H, a->I, TK + a->T, 1, a->I, a->hq, a->hpf, te, ap, a->wt, TK);
        if (!up && (ir || is)) cu_int_prep(c, a->H, a->I, 1, a->I, TK + a->T, (void *)a->hl);
        if (ir && is) {
            moe_int_part(c, a, up, PART_ALL);
            continue;
        }
        if (!ir && !is && !tr && !ts) {
            launch_fp32_part(c, a, up, PART_ALL);
            continue;
        }
        if (tr && ts && a->tk_r[0] == a->tk_s[0] && a->tk_r[1] == a->tk_s[1]) {
            launch_tc_part(c, a, a->tk_r[up], up, PART_ALL);
            continue;
        }
        if (a->tk_r[0] == CU_W_FP4 && a->tk_r[1] == CU_W_FP4 && a->tk_s[0] == CU_W_FP8 && a->tk_s[1] == CU_W_FP8) {
            moe_tc_pair<CU_W_FP4, CU_W_FP8>(c, a, up);
            continue;
        }
        if (ir) moe_int_part(c, a, up, PART_ROUTED);
        else if (tr) launch_tc_part(c, a, a->tk_r[up], up, PART_ROUTED);
        else launch_fp32_part(c, a, up, PART_ROUTED);
        if (is) moe_int_part(c, a, up, PART_SHARED);
        else if (ts) launch_tc_part(c, a, a->tk_s[up], up, PART_SHARED);
        else launch_fp32_part(c, a, up, PART_SHARED);
    }
    cu_launch(c, "moe combine", combine_kernel, dim3(cu_blocks(a->D, 256), (unsigned)(a->T < 65535 ? a->T : 65535)), dim3(256), 0, *a);
}

/* Whether two weight views have one format, shape and scale layout. */
static int same_layout(const dsv4_mat *a, const dsv4_mat *b)
{
    return a->fmt == b->fmt && a->dtype == b->dtype && a->rows == b->rows && a->cols == b->cols &&
           !a->scale == !b->scale && a->scale_dtype == b->scale_dtype && a->blk_r == b->blk_r &&
           a->blk_c == b->blk_c && a->scale_rows == b->scale_rows && a->scale_cols == b->scale_cols;
}

/* Whether an expert's w1 and w3 fit the kernels: one layout, or (GGUF
 * files) block formats of one shape, which the fp32 kernels read apart. */
static int gate_up_ok(const dsv4_mat *w1, const dsv4_mat *w3)
{
    return same_layout(w1, w3) || (gg_is_fmt(w1->fmt) && gg_is_fmt(w3->fmt) && w1->rows == w3->rows &&
                                   w1->cols == w3->cols);
}

/* Device table of the experts' w1, w3, w2 data and scale pointers for one
 * layer, built once and reused while the layer's expert views still point
 * at the same data. */
static const cu_expert_tab *expert_table(cu_impl *c, const dsv4_moe_params *p)
{
    int E = p->n_experts;
    size_t bytes = (size_t)6 * E * sizeof(void *);
    const void **h = (const void **)malloc(bytes);
    if (!h) {
        backend_fail(c->b, DSV4_ERR_NOMEM, "out of memory for the expert table");
        return NULL;
    }
    for (int e = 0; e < E; e++) {
        const dsv4_mat *m[3] = {&p->w1[e], &p->w3[e], &p->w2[e]};
        for (int j = 0; j < 3; j++) {
            const dsv4_mat *first = j == 0 ? &p->w1[0] : j == 1 ? &p->w3[0] : &p->w2[0];
            if (!same_layout(m[j], first) || (j == 1 && !gate_up_ok(&p->w1[0], first)) || !m[j]->data) {
                free(h);
                backend_fail(c->b, DSV4_ERR_UNSUPPORTED,
                             "CUDA MoE: the experts of one layer must share one format and shape");
                return NULL;
            }
            h[(size_t)j * E + e] = m[j]->data;
            h[(size_t)(3 + j) * E + e] = m[j]->scale;
        }
    }
    cu_expert_tab *t = NULL;
    for (int i = 0; i < c->n_etab && !t; i++)
        if (c->etab[i].key == p->w1) t = &c->etab[i];
    if (t && t->n == E && !memcmp(t->host, h, bytes)) {
        free(h);
        return t;
    }
    if (!t) {
        cu_expert_tab *grown = (cu_expert_tab *)realloc(c->etab, (size_t)(c->n_etab + 1) * sizeof *c->etab);
        if (!grown) {
            free(h);
            backend_fail(c->b, DSV4_ERR_NOMEM, "out of memory for the expert table");
            return NULL;
        }
        c->etab = grown;
        t = &c->etab[c->n_etab++];
        memset(t, 0, sizeof *t);
    } else { /* the views moved: replace (after queued work that reads the old table) */
        cu_flush(c);
        cudaStreamSynchronize(c->stream);
        cudaFree((void *)t->tab);
        free(t->host);
        memset(t, 0, sizeof *t);
        t->key = NULL;
    }
    void *d = NULL;
    if (cu_check(c, cudaMalloc(&d, bytes), "expert table") ||
        cu_check(c, cudaMemcpy(d, h, bytes, cudaMemcpyHostToDevice), "expert table")) {
        free(h);
        return NULL;
    }
    t->key = p->w1;
    t->tab = (const void **)d;
    t->host = h;
    t->n = E;
    return t;
}

static size_t al(size_t n) { return (n + 255) & ~(size_t)255; }

void cu_moe(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D, const dsv4_moe_params *p, float *out)
{
    cu_impl *c = cu_of(b);
    int E = p->n_experts, K = p->n_active, I = p->inter;
    if (K > MOE_MAX_K || K < 1 || E < 1) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA MoE: n_active must be 1..32");
        return;
    }
    if (p->post.X && p->post.hc > HC_MAX) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "hc_mult above 16");
        return;
    }
    if (!gate_up_ok(p->sh_w1, p->sh_w3)) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA MoE: the shared expert's w1 and w3 must share one format and shape");
        return;
    }
    const cu_expert_tab *tab = expert_table(c, p);
    if (!tab) return;
    moe_args a;
    memset(&a, 0, sizeof a);
    a.x = x;
    a.tok = tok;
    a.T = T;
    a.D = D;
    a.E = E;
    a.K = K;
    a.I = I;
    a.score_func = p->score_func;
    a.e13 = p->w1[0];
    a.e2 = p->w2[0];
    a.e13.data = a.e13.scale = a.e2.data = a.e2.scale = NULL; /* per expert from the table */
    a.e3_fmt = p->w3[0].fmt;
    a.route_scale = p->route_scale;
    a.swiglu_limit = p->swiglu_limit;
    a.gate = *p->gate;
    if (p->gate_bias && p->gate_bias->data) a.bias = *p->gate_bias;
    a.sh1 = *p->sh_w1;
    a.sh2 = *p->sh_w2;
    a.sh3 = *p->sh_w3;
    a.tid2eid = p->tid2eid;
    a.tab = tab->tab;
    a.out = out;
    a.post = p->post;
    a.err = c->err_dev;
    a.layer = b->cur_layer;
    size_t t = (size_t)(T > 0 ? T : 1), pairs = t * (size_t)K + t;
    a.gmax = T == 1 ? K + 1 : (int)((size_t)E < t * K ? (size_t)E : t * K) + 1; /* see group_at */
    size_t o_grp = 0, o_lg = o_grp + al(((size_t)a.gmax * 2 + 2 + pairs) * 4), o_wt = o_lg + al(t * E * 4),
           o_sel = o_wt + al(t * K * 4), o_ord = o_sel + al(t * K * 4),
           o_h = o_ord + al(t * K * 4), o_y = o_h + al(pairs * I * 4), o_xq = o_y + al(pairs * D * 4);
    /* prepared rows for the tensor-core experts (and an FP8 gate) */
    /* every expert has expert 0's layout (expert_table checked it) */
    expert_kinds(&p->w1[0], &p->w3[0], &p->w2[0], a.tk_r);
    expert_kinds(p->sh_w1, p->sh_w3, p->sh_w2, a.tk_s);
    /* the routed and the shared experts read one preparation of x and of
     * H: a shared expert wanting other terms takes the fp32 kernels */
    if (a.tk_r[1] >= 0 && a.tk_s[1] >= 0 && tc_terms(a.tk_r[1]) != tc_terms(a.tk_s[1])) a.tk_s[0] = a.tk_s[1] = -1;
    /* Q8_0 experts take the exact integer sums instead */
    a.int_r = moe_int_ok(&p->w1[0], &p->w3[0], &p->w2[0]);
    a.int_s = moe_int_ok(p->sh_w1, p->sh_w3, p->sh_w2);
    if (a.int_r) a.tk_r[0] = a.tk_r[1] = -1;
    if (a.int_s) a.tk_s[0] = a.tk_s[1] = -1;
    int gk = tc_kind(a.gate), tcx = a.tk_r[1] >= 0 || a.tk_s[1] >= 0 || gk >= 0;
    /* terms of the experts' prepared rows, and of x's (which a
     * tensor-core gate prepares first, in its own terms) */
    int ek = expert_prep_kind(a.tk_r, a.tk_s), te = tc_terms(ek);
    int tx = gk >= 0 && tc_terms(gk) > te ? tc_terms(gk) : te;
    /* a one-token step stages its rows when they fit next to the GGUF
     * staging and the slice sums (4 slices of 2 tiles) */
    size_t kb_up = tc_kind_bytes(tc_is_gg(a.tk_r[1]) ? a.tk_r[1] : a.tk_s[1]);
    size_t kb_dn = tc_kind_bytes(tc_is_gg(a.tk_r[0]) ? a.tk_r[0] : a.tk_s[0]);
    int stage_ok = T == 1 && (!p->act_fp8 || tc_stage_act_ok(ek));
    a.stage_up = stage_ok && D <= TC_STAGE_MAX_N &&
                 kb_up + (size_t)tc_part_floats(0, 2, 1, 2) * sizeof(float) + tc_stage_bytes(1, D, te) <= tc_stage_max(te);
    a.stage_down = stage_ok && I <= TC_STAGE_MAX_N &&
                   kb_dn + (size_t)tc_part_floats(0, 2, 1, 2) * sizeof(float) + tc_stage_bytes(1, I, te) <= tc_stage_max(te);
    size_t o_hq = o_xq + (tcx ? al(tc_prep_bytes((int64_t)t, D, tx)) : 0);
    size_t o_xa = o_hq + (tcx ? al(tc_prep_bytes((int64_t)pairs, I, te)) : 0);
    a.act = p->act_fp8;
    int ints = a.int_r || a.int_s;
    size_t o_xl = o_xa + (a.act ? al(t * D * 4) : 0);
    size_t o_hl = o_xl + (ints ? al(cu_int_prep_bytes((int64_t)t, D)) : 0);
    size_t total = o_hl + (ints ? al(cu_int_prep_bytes((int64_t)pairs, I)) : 0);
    char *ws = (char *)cu_ws(c, WS_MOE, total);
    if (!ws) return;
    if (tcx) {
        a.xq = (__half *)(ws + o_xq);
        a.xpf = (float *)(ws + o_xq + tc_prep_pf_offset((int64_t)t, D, tx));
        a.hq = (__half *)(ws + o_hq);
        a.hpf = (float *)(ws + o_hq + tc_prep_pf_offset((int64_t)pairs, I, te));
    }
    if (a.act) a.xa = (float *)(ws + o_xa);
    if (ints) {
        a.xl = (const int8_t *)(ws + o_xl);
        a.hl = (const int8_t *)(ws + o_hl);
    }
    a.grp = (int32_t *)(ws + o_grp);
    a.logits = (float *)(ws + o_lg);
    a.wt = (float *)(ws + o_wt);
    a.sel = (int32_t *)(ws + o_sel);
    a.ord = (int32_t *)(ws + o_ord);
    a.H = (float *)(ws + o_h);
    a.Y = (float *)(ws + o_y);
    static_assert(sizeof a <= CU_REC_ARGS, "MoE arguments must fit a graph record");
    cu_submit(c, K_MOE, &a, sizeof a);
}

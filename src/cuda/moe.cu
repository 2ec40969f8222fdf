/* Mixture of experts (spec §4) on the GPU, with routing on the device (no
 * host round trip): gate matmul, a router kernel per token (scores, top-k or
 * hash selection, weights, and the combine order), then fused expert kernels
 * over (token, slot) pairs plus one pair per token for the shared expert:
 * up (w1 and w3 rows of the pair's expert, clamped SwiGLU), down (w2), and a
 * combine that adds a token's experts in increasing expert id and then the
 * shared expert, as the CPU. A pair's arithmetic does not depend on the
 * other tokens of the step. */
#include <stdlib.h>
#include <string.h>

#include "cuda/cuda_internal.cuh"
#include "model/config.h"

#define MOE_MAX_K 32

typedef struct {
    int64_t pos0;
    const float *x;
    const int32_t *tok;
    int T, D, E, K, I, score_func, edt;
    float route_scale, swiglu_limit;
    dsv4_mat gate, bias, sh1, sh2, sh3;
    const int32_t *tid2eid;
    const void *const *tab; /* device [3][E]: w1, w3, w2 */
    float *out;
    float *logits, *wt, *H, *Y;
    int32_t *sel, *ord;
    float *gate_conv;
    size_t gate_conv_bytes;
    int *err;
    int layer; /* for fault reports */
} moe_args;

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
 * or the hash table), normalised weights, and the combine order. */
__global__ void route_kernel(moe_args a)
{
    cu_pdl();
    extern __shared__ float s[]; /* [E] scores, then [E] taken flags */
    __shared__ float rv[32];
    __shared__ int re[32];
    int t = blockIdx.x, E = a.E, K = a.K, lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int *taken = (int *)(s + E);
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
    for (int e = threadIdx.x; e < E; e += blockDim.x) taken[e] = 0;
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
                st[k] = e;
            }
        }
    } else {
        for (int k = 0; k < K; k++) {
            float bv = 0.0f;
            int be = -1;
            for (int e = threadIdx.x; e < E; e += blockDim.x) {
                if (taken[e]) continue;
                float v = s[e] + (a.bias.data ? cu_ld(a.bias.dtype, a.bias.data, e) : 0.0f);
                if (route_better(v, e, bv, be)) { bv = v; be = e; }
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
                st[k] = be;
                if (be >= 0) taken[be] = 1;
            }
            __syncthreads();
        }
    }
    if (threadIdx.x != 0) return;
    float sum = 0.0f;
    for (int k = 0; k < K; k++) sum += st[k] >= 0 ? s[st[k]] : 0.0f;
    int32_t *ord = a.ord + (int64_t)t * K;
    for (int k = 0; k < K; k++) {
        a.wt[(int64_t)t * K + k] = st[k] >= 0 ? s[st[k]] / (sum + 1e-20f) * a.route_scale : 0.0f;
        /* insertion by (expert id, slot): the order the CPU adds experts in */
        int j = k;
        while (j > 0 && st[ord[j - 1]] > st[k]) { ord[j] = ord[j - 1]; j--; }
        ord[j] = k;
    }
}

/* The weight matrix of pair p (which = 0: w1, 1: w3, 2: w2); NULL if invalid. */
__device__ __forceinline__ const void *pair_weight(const moe_args &a, int p, int which, int *dt)
{
    int TK = a.T * a.K;
    if (p >= TK) {
        const dsv4_mat &m = which == 0 ? a.sh1 : which == 1 ? a.sh3 : a.sh2;
        *dt = m.dtype;
        return m.data;
    }
    int e = a.sel[p];
    *dt = a.edt;
    return e < 0 ? NULL : a.tab[(int64_t)which * a.E + e];
}

__device__ __forceinline__ int pair_token(const moe_args &a, int p)
{
    int TK = a.T * a.K;
    return p >= TK ? p - TK : p / a.K;
}

__global__ void __launch_bounds__(256) expert_up_kernel(moe_args a)
{
    cu_pdl();
    int p = blockIdx.y;
    int64_t r = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (r >= a.I) return;
    int dt1, dt3;
    const void *w1 = pair_weight(a, p, 0, &dt1), *w3 = pair_weight(a, p, 1, &dt3);
    if (!w1 || !w3) return;
    const float *x = a.x + (int64_t)pair_token(a, p) * a.D;
    const char *r1 = (const char *)w1 + r * a.D * (dt1 == DT_F32 ? 4 : 2);
    const char *r3 = (const char *)w3 + r * a.D * (dt3 == DT_F32 ? 4 : 2);
    float g = cu_warp_sum(cu_lane_dot(dt1, r1, a.D, x, cu_vec_ok(dt1, r1, a.D, x, 0)));
    float u = cu_warp_sum(cu_lane_dot(dt3, r3, a.D, x, cu_vec_ok(dt3, r3, a.D, x, 0)));
    if ((threadIdx.x & 31) == 0) {
        float L = a.swiglu_limit;
        if (L > 0) {
            g = fminf(g, L);
            u = fminf(fmaxf(u, -L), L);
        }
        a.H[(int64_t)p * a.I + r] = g / (1.0f + expf(-g)) * u;
    }
}

__global__ void __launch_bounds__(256) expert_down_kernel(moe_args a)
{
    cu_pdl();
    int p = blockIdx.y;
    int64_t d = (int64_t)blockIdx.x * 8 + (threadIdx.x >> 5);
    if (d >= a.D) return;
    int dt;
    const void *w2 = pair_weight(a, p, 2, &dt);
    if (!w2) return;
    const float *h = a.H + (int64_t)p * a.I;
    const char *r2 = (const char *)w2 + d * a.I * (dt == DT_F32 ? 4 : 2);
    float y = cu_warp_sum(cu_lane_dot(dt, r2, a.I, h, cu_vec_ok(dt, r2, a.I, h, 0)));
    if ((threadIdx.x & 31) == 0) a.Y[(int64_t)p * a.D + d] = y;
}

__global__ void combine_kernel(moe_args a)
{
    cu_pdl();
    int64_t i = (int64_t)blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= (int64_t)a.T * a.D) return;
    int64_t t = i / a.D, d = i % a.D;
    float acc = 0.0f;
    for (int j = 0; j < a.K; j++) {
        int k = a.ord[t * a.K + j];
        int64_t p = t * a.K + k;
        if (a.sel[p] >= 0) acc += a.Y[p * a.D + d] * a.wt[p];
    }
    acc += a.Y[((int64_t)a.T * a.K + t) * a.D + d];
    a.out[i] = acc;
}

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
    g.conv = a->gate_conv;
    g.conv_bytes = a->gate_conv_bytes;
    cu_exec_matmul(c, &g, dpos);
    cu_launch(c, "moe route", route_kernel, dim3(a->T), dim3(256), (size_t)a->E * 2 * sizeof(float), *a);
    unsigned pairs = (unsigned)(a->T * a->K + a->T);
    cu_launch(c, "moe up", expert_up_kernel, dim3(dim3(cu_blocks(a->I, 8), pairs)), dim3(256), 0, *a);
    cu_launch(c, "moe down", expert_down_kernel, dim3(dim3(cu_blocks(a->D, 8), pairs)), dim3(256), 0, *a);
    cu_launch(c, "moe combine", combine_kernel, dim3(cu_blocks((int64_t)a->T * a->D, 256)), dim3(256), 0, *a);
}

/* Device table of the experts' w1, w3, w2 pointers for one layer, built once
 * and reused while the layer's expert views still point at the same data. */
static const cu_expert_tab *expert_table(cu_impl *c, const dsv4_moe_params *p)
{
    int E = p->n_experts, dt = p->w1[0].dtype;
    size_t bytes = (size_t)3 * E * sizeof(void *);
    const void **h = (const void **)malloc(bytes);
    if (!h) {
        backend_fail(c->b, DSV4_ERR_NOMEM, "out of memory for the expert table");
        return NULL;
    }
    for (int e = 0; e < E; e++) {
        const dsv4_mat *m[3] = {&p->w1[e], &p->w3[e], &p->w2[e]};
        for (int j = 0; j < 3; j++) {
            if (m[j]->dtype != dt || !m[j]->data) {
                free(h);
                backend_fail(c->b, DSV4_ERR_UNSUPPORTED, "CUDA MoE: experts of one layer must share one dtype");
                return NULL;
            }
            h[(size_t)j * E + e] = m[j]->data;
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
    t->dtype = dt;
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
    a.edt = tab->dtype;
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
    a.err = c->err_dev;
    a.layer = b->cur_layer;
    size_t t = (size_t)(T > 0 ? T : 1), pairs = t * (size_t)K + t;
    size_t o_lg = 0, o_wt = o_lg + al(t * E * 4), o_sel = o_wt + al(t * K * 4), o_ord = o_sel + al(t * K * 4),
           o_h = o_ord + al(t * K * 4), o_y = o_h + al(pairs * I * 4), total = o_y + al(pairs * D * 4);
    char *ws = (char *)cu_ws(c, WS_MOE, total);
    if (!ws) return;
    a.logits = (float *)(ws + o_lg);
    a.wt = (float *)(ws + o_wt);
    a.sel = (int32_t *)(ws + o_sel);
    a.ord = (int32_t *)(ws + o_ord);
    a.H = (float *)(ws + o_h);
    a.Y = (float *)(ws + o_y);
    cu_matmul_args g;
    memset(&g, 0, sizeof g);
    g.T = T;
    g.W = *p->gate;
    cu_matmul_prepare(c, &g);
    a.gate_conv = g.conv;
    a.gate_conv_bytes = g.conv_bytes;
    cu_submit(c, K_MOE, &a, sizeof a);
}

/* Mixture of experts (spec §4) on the CPU: router scores, top-k or hash
 * selection, clamped SwiGLU experts and the shared expert.
 *
 * Each routed expert runs once over the tokens that chose it (its weights are
 * read once per chunk); a token's output accumulates its experts in
 * increasing expert id, then adds the shared expert — an order that does not
 * depend on which other tokens are in the chunk. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

static float score_of(float logit, int fn)
{
    if (fn == SCORE_SIGMOID) return 1.0f / (1.0f + expf(-logit));
    /* sqrt(softplus), softplus with PyTorch's threshold of 20 */
    float sp = logit > 20.0f ? logit : log1pf(expf(logit));
    return sqrtf(sp);
}

/* Router: sel[t][k] expert ids and wt[t][k] weights. */
/* s: scratch of n_experts floats. */
static void route(const float *logits, const int32_t *tok, int T, const dsv4_moe_params *p, int32_t *sel, float *wt,
                  float *s)
{
    int E = p->n_experts, K = p->n_active;
    for (int t = 0; t < T; t++) {
        const float *lg = logits + (int64_t)t * E;
        if (p->score_func == SCORE_SOFTMAX) {
            float mx = -INFINITY, sum = 0;
            for (int e = 0; e < E; e++) mx = fmaxf(mx, lg[e]);
            for (int e = 0; e < E; e++) sum += (s[e] = expf(lg[e] - mx));
            for (int e = 0; e < E; e++) s[e] /= sum;
        } else {
            for (int e = 0; e < E; e++) s[e] = score_of(lg[e], p->score_func);
        }
        int32_t *st = sel + (int64_t)t * K;
        if (p->tid2eid) {
            memcpy(st, p->tid2eid + (int64_t)tok[t] * K, (size_t)K * sizeof *st);
        } else {
            /* top-K of s + bias; ties go to the lower expert id */
            for (int k = 0; k < K; k++) {
                int best = -1;
                float bv = -INFINITY;
                for (int e = 0; e < E; e++) {
                    int taken = 0;
                    for (int q = 0; q < k; q++) taken |= st[q] == e;
                    if (taken) continue;
                    float v = s[e] + (p->gate_bias->data ? mat_get(p->gate_bias, e) : 0.0f);
                    if (best < 0 || v > bv) { best = e; bv = v; }
                }
                st[k] = best;
            }
        }
        /* a corrupted tid2eid id (cpu_moe refuses it next) must not be read past s */
        float sum = 0;
        for (int k = 0; k < K; k++) sum += st[k] >= 0 && st[k] < E ? s[st[k]] : 0.0f;
        for (int k = 0; k < K; k++)
            wt[(int64_t)t * K + k] = (st[k] >= 0 && st[k] < E ? s[st[k]] : 0.0f) / (sum + 1e-20f) * p->route_scale;
    }
}

static float silu(float x) { return x / (1.0f + expf(-x)); }

/* h = silu(min(G, L)) · clamp(U, −L, L); L <= 0 disables the clamp. */
static void swiglu(float *G, const float *U, int64_t n, float L)
{
    for (int64_t i = 0; i < n; i++) {
        float g = G[i], u = U[i];
        if (L > 0) {
            g = fminf(g, L);
            u = fminf(fmaxf(u, -L), L);
        }
        G[i] = silu(g) * u;
    }
}

void cpu_moe(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D, const dsv4_moe_params *p, float *out)
{
    int E = p->n_experts, K = p->n_active, I = p->inter;
    size_t nTK = (size_t)T * (size_t)K;
    float *logits = malloc((size_t)T * (size_t)E * sizeof(float));
    int32_t *sel = malloc(nTK * sizeof *sel), *rows = malloc((size_t)T * sizeof *rows);
    float *wt = malloc(nTK * sizeof *wt), *rw = malloc((size_t)T * sizeof *rw);
    float *xe = malloc((size_t)T * (size_t)D * sizeof(float));
    float *G = malloc((size_t)T * (size_t)I * sizeof(float)), *U = malloc((size_t)T * (size_t)I * sizeof(float));
    float *Y = malloc((size_t)T * (size_t)D * sizeof(float)), *scores = malloc((size_t)E * sizeof(float));
    /* the experts' input: x, or (official numerics) x through FP8 */
    float *xa = p->act_fp8 ? malloc((size_t)T * (size_t)D * sizeof(float)) : (float *)x;
    if (!logits || !sel || !rows || !wt || !rw || !xe || !G || !U || !Y || !scores || !xa) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory in the MoE layer");
        goto done;
    }
    cpu_matmul(b, x, D, T, p->gate, logits, E);
    route(logits, tok, T, p, sel, wt, scores);
    for (int64_t i = 0; i < (int64_t)T * K; i++)
        if (sel[i] < 0 || sel[i] >= E) { /* a corrupted table must not index past the experts */
            char msg[96];
            snprintf(msg, sizeof msg, "routed to expert %d, outside 0..%d", sel[i], E - 1);
            backend_fail_row(b, DSV4_ERR_DEVICE, (int)(i / K), msg);
            goto done;
        }
    if (p->act_fp8) cpu_act_fp8_round(b, x, T, D, xa);
    memset(out, 0, (size_t)T * (size_t)D * sizeof *out);
    for (int e = 0; e < E; e++) {
        int n = 0;
        for (int t = 0; t < T; t++)
            for (int k = 0; k < K; k++)
                if (sel[(int64_t)t * K + k] == e) {
                    rows[n] = t;
                    rw[n] = wt[(int64_t)t * K + k];
                    memcpy(xe + (int64_t)n * D, xa + (int64_t)t * D, (size_t)D * sizeof *xe);
                    n++;
                }
        if (!n) continue;
        cpu_matmul(b, xe, D, n, &p->w1[e], G, I);
        cpu_matmul(b, xe, D, n, &p->w3[e], U, I);
        swiglu(G, U, (int64_t)n * I, p->swiglu_limit);
        if (p->act_fp8) { /* the weight goes into w2's input, which then passes through FP8 */
            for (int r = 0; r < n; r++)
                for (int i = 0; i < I; i++) G[(int64_t)r * I + i] *= rw[r];
            cpu_act_fp8_round(b, G, n, I, G);
        }
        cpu_matmul(b, G, I, n, &p->w2[e], Y, D);
        for (int r = 0; r < n; r++)
            for (int d = 0; d < D; d++)
                out[(int64_t)rows[r] * D + d] += p->act_fp8 ? Y[(int64_t)r * D + d] : Y[(int64_t)r * D + d] * rw[r];
    }
    cpu_matmul(b, xa, D, T, p->sh_w1, G, I);
    cpu_matmul(b, xa, D, T, p->sh_w3, U, I);
    swiglu(G, U, (int64_t)T * I, p->swiglu_limit);
    if (p->act_fp8) cpu_act_fp8_round(b, G, T, I, G);
    cpu_matmul(b, G, I, T, p->sh_w2, Y, D);
    for (int64_t i = 0; i < (int64_t)T * D; i++) out[i] += Y[i];
    if (p->post.X) cpu_hc_post(b, p->post.X, T, p->post.hc, D, out, p->post.post, p->post.comb);
done:
    free(logits); free(sel); free(rows); free(wt); free(rw); free(xe); free(G); free(U); free(Y); free(scores);
    if (xa != x) free(xa);
}

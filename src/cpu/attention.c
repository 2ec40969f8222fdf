/* Shared-KV multi-query attention with a sink (spec §3.6-3.7) on the CPU.
 * Two passes per (query, head): logits and their max (sink included), then
 * exp-weighted sum of the keys (V = K). Recomputing the logits avoids a
 * buffer whose size would grow with the context. A stored key in a packed
 * format is read back into the thread's key buffer when it is used. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

typedef struct {
    const float *q;
    int64_t pos0;
    int H, hd, window;
    const uint8_t *ring, *entries;
    const float *kv;
    const dsv4_row_fmt *kf;
    float *keybuf; /* [threads][hd] */
    int ratio;
    const int32_t *sel_idx, *sel_n;
    int sel_cap;
    const dsv4_mat *sinks;
    float scale;
    float *out;
} attn_job;

/* The k-th key of query t: window keys first (oldest first), then compressed. */
typedef struct {
    int64_t w_first, n_win, n_comp;
    const int32_t *sel;
} key_set;

static const float *key_at(const attn_job *j, const key_set *ks, int64_t k, float *buf)
{
    const uint8_t *row;
    if (k < ks->n_win) {
        int64_t s = ks->w_first + k;
        if (s >= j->pos0) return j->kv + (s - j->pos0) * j->hd;
        row = j->ring + (s % j->window) * j->kf->bytes;
    } else {
        k -= ks->n_win;
        row = j->entries + (ks->sel ? ks->sel[k] : k) * j->kf->bytes;
    }
    if (j->kf->kind == ROW_F32) return (const float *)row;
    cpu_row_load(j->kf, row, buf);
    return buf;
}

static void attn_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    attn_job *j = ctx;
    float *buf = j->keybuf ? j->keybuf + (int64_t)tid * j->hd : NULL;
    for (int64_t r = r0; r < r1; r++) {
        int64_t t = r / j->H;
        int h = (int)(r % j->H);
        int64_t pos = j->pos0 + t;
        key_set ks;
        ks.w_first = pos - j->window + 1 < 0 ? 0 : pos - j->window + 1;
        ks.n_win = pos - ks.w_first + 1;
        ks.sel = NULL;
        ks.n_comp = 0;
        if (j->sel_idx) {
            ks.sel = j->sel_idx + t * j->sel_cap;
            ks.n_comp = j->sel_n[t];
        } else if (j->ratio > 0) {
            ks.n_comp = (pos + 1) / j->ratio;
        }
        int64_t nk = ks.n_win + ks.n_comp;
        const float *q = j->q + (t * j->H + h) * j->hd;
        float sink = mat_get(j->sinks, h);
        float mx = sink;
        for (int64_t k = 0; k < nk; k++) mx = fmaxf(mx, cpu_dot(q, key_at(j, &ks, k, buf), j->hd) * j->scale);
        float *o = j->out + (t * j->H + h) * j->hd;
        memset(o, 0, (size_t)j->hd * sizeof *o);
        float denom = expf(sink - mx);
        for (int64_t k = 0; k < nk; k++) {
            const float *key = key_at(j, &ks, k, buf);
            float p = expf(cpu_dot(q, key, j->hd) * j->scale - mx);
            denom += p;
            for (int d = 0; d < j->hd; d++) o[d] += p * key[d];
        }
        float inv = 1.0f / denom;
        for (int d = 0; d < j->hd; d++) o[d] *= inv;
    }
}

void cpu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window,
                   const uint8_t *ring, const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio,
                   const int32_t *sel_idx, const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale,
                   float *out)
{
    float *keybuf = NULL; /* fp32 rows are read in place */
    if (kf->kind != ROW_F32 && !(keybuf = malloc((size_t)pool_size(cpu_pool(b)) * (size_t)hd * sizeof *keybuf))) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory in attention");
        return;
    }
    attn_job j = {q, pos0, H, hd, window, ring, entries, kv, kf, keybuf, ratio, sel_idx, sel_n, sel_cap, sinks, scale,
                  out};
    pool_for(cpu_pool(b), (int64_t)T * H, 1, attn_rows, &j);
    free(keybuf);
}

/* Shared-KV multi-query attention with a sink (spec §3.6-3.7) on the CPU.
 * Two passes per (query, head): logits and their max (sink included), then
 * exp-weighted sum of the keys (V = K). Recomputing the logits avoids a
 * buffer whose size would grow with the context. A stored key in a packed
 * format is read back into the thread's key buffer when it is used, once per
 * pass for all the heads of a query a thread holds. */
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
    float *scratch; /* per thread: a key [hd], the heads' maxima and denominators [H] each */
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

/* Rows r0..r1 (row = query t, head h); the heads of one query share their
 * keys, so each key is read (and, packed, decoded) once per pass for all of
 * them. Each row's arithmetic is still its own, in key order. */
static void attn_rows(void *ctx, int64_t r0, int64_t r1, int tid)
{
    attn_job *j = ctx;
    float *buf = j->scratch + (int64_t)tid * (j->hd + 2 * j->H), *mx = buf + j->hd, *den = mx + j->H;
    for (int64_t ra = r0, rb; ra < r1; ra = rb) {
        int64_t t = ra / j->H;
        rb = (t + 1) * j->H < r1 ? (t + 1) * j->H : r1;
        int h0 = (int)(ra % j->H), nh = (int)(rb - ra);
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
        const float *q = j->q + (t * j->H + h0) * j->hd;
        float *o = j->out + (t * j->H + h0) * j->hd;
        for (int i = 0; i < nh; i++) mx[i] = mat_get(j->sinks, h0 + i);
        for (int64_t k = 0; k < nk; k++) {
            const float *key = key_at(j, &ks, k, buf);
            for (int i = 0; i < nh; i++) mx[i] = fmaxf(mx[i], cpu_dot(q + (int64_t)i * j->hd, key, j->hd) * j->scale);
        }
        memset(o, 0, (size_t)nh * (size_t)j->hd * sizeof *o);
        for (int i = 0; i < nh; i++) den[i] = expf(mat_get(j->sinks, h0 + i) - mx[i]);
        for (int64_t k = 0; k < nk; k++) {
            const float *key = key_at(j, &ks, k, buf);
            for (int i = 0; i < nh; i++) {
                float p = expf(cpu_dot(q + (int64_t)i * j->hd, key, j->hd) * j->scale - mx[i]);
                float *oi = o + (int64_t)i * j->hd;
                den[i] += p;
                for (int d = 0; d < j->hd; d++) oi[d] += p * key[d];
            }
        }
        for (int i = 0; i < nh; i++) {
            float inv = 1.0f / den[i], *oi = o + (int64_t)i * j->hd;
            for (int d = 0; d < j->hd; d++) oi[d] *= inv;
        }
    }
}

void cpu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window,
                   const uint8_t *ring, const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio,
                   const int32_t *sel_idx, const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale,
                   int rope_dim, const float *out_freq, float *out)
{
    float *scratch = malloc((size_t)pool_size(cpu_pool(b)) * ((size_t)hd + 2 * (size_t)H) * sizeof *scratch);
    if (!scratch) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory in attention");
        return;
    }
    attn_job j = {q, pos0, H, hd, window, ring, entries, kv, kf, scratch, ratio, sel_idx, sel_n, sel_cap, sinks, scale,
                  out};
    pool_for(cpu_pool(b), (int64_t)T * H, 1, attn_rows, &j);
    free(scratch);
    if (out_freq) cpu_rope(b, out, T, H, hd, rope_dim, pos0, 1, NULL, out_freq, 1); /* the rope op's values */
}

/* Lightning indexer scoring and top-k selection (spec §3.5) on the CPU. A
 * key stored packed is read back into a local buffer each time a query scores it. */
#include <math.h>
#include <stdlib.h>

#include "cpu/cpu.h"

typedef struct {
    dsv4_backend *b;
    const float *q, *w;
    const uint8_t *keys;
    const dsv4_row_fmt *kf;
    int64_t pos0;
    int heads, hd, ratio, topk;
    float scale, w_scale;
    int32_t *idx, *n;
} idx_job;

/* a ranks above b: higher score, then lower index (deterministic ties). */
static int better(float sa, int32_t ia, float sb, int32_t ib) { return sa > sb || (sa == sb && ia < ib); }

/* Min-heap of the k best (score, index) pairs seen so far; root = worst. */
static void sift_down(float *s, int32_t *ix, int n, int i)
{
    for (;;) {
        int l = 2 * i + 1, r = l + 1, m = i;
        if (l < n && better(s[m], ix[m], s[l], ix[l])) m = l;
        if (r < n && better(s[m], ix[m], s[r], ix[r])) m = r;
        if (m == i) return;
        float ts = s[i]; s[i] = s[m]; s[m] = ts;
        int32_t ti = ix[i]; ix[i] = ix[m]; ix[m] = ti;
        i = m;
    }
}

static int cmp_i32(const void *a, const void *b)
{
    int32_t x = *(const int32_t *)a, y = *(const int32_t *)b;
    return (x > y) - (x < y);
}

static void idx_tokens(void *ctx, int64_t t0, int64_t t1, int tid)
{
    (void)tid;
    idx_job *j = ctx;
    float *hs = malloc(((size_t)j->topk + (size_t)j->hd) * sizeof *hs), *buf = hs + j->topk;
    if (!hs) { backend_fail(j->b, DSV4_ERR_NOMEM, "out of memory in the lightning indexer"); return; }
    for (int64_t t = t0; t < t1; t++) {
        int64_t nvis = (j->pos0 + t + 1) / j->ratio;
        int k = nvis < j->topk ? (int)nvis : j->topk, filled = 0;
        int32_t *out = j->idx + t * j->topk;
        const float *q = j->q + t * j->heads * j->hd, *w = j->w + t * j->heads;
        for (int64_t s = 0; k > 0 && s < nvis; s++) {
            const float *key = buf;
            if (j->kf->kind == ROW_F32) key = (const float *)(j->keys + s * j->kf->bytes);
            else cpu_row_load(j->kf, j->keys + s * j->kf->bytes, buf);
            float score = 0;
            for (int h = 0; h < j->heads; h++) {
                float dot = cpu_dot(q + (int64_t)h * j->hd, key, j->hd);
                score += (fmaxf(dot, 0.0f) * j->scale) * (w[h] * j->w_scale);
            }
            if (filled < k) { /* grow the heap */
                hs[filled] = score;
                out[filled] = (int32_t)s;
                if (++filled == k)
                    for (int i = k / 2 - 1; i >= 0; i--) sift_down(hs, out, k, i);
            } else if (better(score, (int32_t)s, hs[0], out[0])) {
                hs[0] = score;
                out[0] = (int32_t)s;
                sift_down(hs, out, k, 0);
            }
        }
        qsort(out, (size_t)k, sizeof *out, cmp_i32);
        j->n[t] = k;
    }
    free(hs);
}

void cpu_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads, const uint8_t *keys,
                 const dsv4_row_fmt *kf, int ratio, int topk, float score_scale, float w_scale, int32_t *idx,
                 int32_t *n)
{
    idx_job j = {b, q, w, keys, kf, pos0, heads, kf->width, ratio, topk, score_scale, w_scale, idx, n};
    pool_for(cpu_pool(b), T, 1, idx_tokens, &j);
}

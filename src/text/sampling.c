#include "text/sampling.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/argmax.h"
#include "base/error.h"

typedef struct {
    float w; /* weight (probability times a constant) or raw logit */
    int32_t id;
} cand;

struct sampler {
    sampling_params p;
    int n;
    uint64_t rng[4];
    float *work;     /* penalized logits, then weights */
    int32_t *counts; /* penalty scratch, all zero between calls */
    cand *cands;
};

sampling_params sampling_default_params(void)
{
    return (sampling_params){.temperature = 1.0f, .top_k = 0, .top_p = 1.0f, .min_p = 0.0f,
                             .repetition_penalty = 1.0f, .presence_penalty = 0.0f,
                             .frequency_penalty = 0.0f, .seed = 0};
}

/* ---- RNG: xoshiro256** (Blackman & Vigna), seeded with splitmix64 -------- */

static uint64_t splitmix64(uint64_t *x)
{
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next_u64(uint64_t s[4])
{
    uint64_t r = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return r;
}

/* Uniform in [0, 1) with 53 random bits. */
static double next_unit(uint64_t s[4]) { return (double)(next_u64(s) >> 11) * 0x1.0p-53; }

void sampler_reseed(sampler *s, uint64_t seed)
{
    for (int i = 0; i < 4; i++) s->rng[i] = splitmix64(&seed);
}

sampler_rng sampler_rng_state(const sampler *s)
{
    sampler_rng st;
    memcpy(st.s, s->rng, sizeof st.s);
    return st;
}

void sampler_rng_restore(sampler *s, sampler_rng st) { memcpy(s->rng, st.s, sizeof st.s); }

dsv4_status sampler_new(const sampling_params *p, int n_vocab, sampler **out)
{
    *out = NULL;
    if (n_vocab <= 0) return dsv4_fail(DSV4_ERR_ARG, "sampler: vocabulary size %d", n_vocab);
    if (!(p->temperature >= 0) || !isfinite(p->temperature))
        return dsv4_fail(DSV4_ERR_ARG, "sampler: temperature %g must be >= 0", p->temperature);
    if (p->top_k < 0) return dsv4_fail(DSV4_ERR_ARG, "sampler: top_k %d must be >= 0", p->top_k);
    if (!(p->top_p > 0 && p->top_p <= 1))
        return dsv4_fail(DSV4_ERR_ARG, "sampler: top_p %g must be in (0, 1]", p->top_p);
    if (!(p->min_p >= 0 && p->min_p <= 1))
        return dsv4_fail(DSV4_ERR_ARG, "sampler: min_p %g must be in [0, 1]", p->min_p);
    if (!(p->repetition_penalty > 0) || !isfinite(p->repetition_penalty))
        return dsv4_fail(DSV4_ERR_ARG, "sampler: repetition_penalty %g must be > 0",
                         p->repetition_penalty);
    if (!isfinite(p->presence_penalty) || !isfinite(p->frequency_penalty))
        return dsv4_fail(DSV4_ERR_ARG, "sampler: presence/frequency penalties must be finite");
    sampler *s = calloc(1, sizeof *s);
    if (s) {
        s->work = malloc((size_t)n_vocab * sizeof *s->work);
        s->counts = calloc((size_t)n_vocab, sizeof *s->counts);
        s->cands = malloc((size_t)n_vocab * sizeof *s->cands);
    }
    if (!s || !s->work || !s->counts || !s->cands) {
        sampler_free(s);
        return dsv4_fail(DSV4_ERR_NOMEM, "sampler: out of memory for %d tokens", n_vocab);
    }
    s->p = *p;
    s->n = n_vocab;
    sampler_reseed(s, p->seed);
    *out = s;
    return DSV4_OK;
}

void sampler_free(sampler *s)
{
    if (!s) return;
    free(s->work);
    free(s->counts);
    free(s->cands);
    free(s);
}

void sampling_apply_penalties(const sampling_params *p, float *logits, const int32_t *prev,
                              int n_prev, int32_t *counts)
{
    float r = p->repetition_penalty, f = p->frequency_penalty, pr = p->presence_penalty;
    if (r == 1.0f && f == 0.0f && pr == 0.0f) return;
    for (int i = 0; i < n_prev; i++) counts[prev[i]]++;
    for (int i = 0; i < n_prev; i++) {
        int32_t t = prev[i];
        int32_t c = counts[t];
        if (c == 0) continue; /* already done: a repeated token */
        counts[t] = 0;
        float l = logits[t];
        if (r != 1.0f) l = l > 0 ? l / r : l * r;
        logits[t] = l - (float)c * f - pr;
    }
}

/* Better = higher weight, then lower id: the order every cut uses. */
static int better(const cand *a, const cand *b) { return a->w > b->w || (a->w == b->w && a->id < b->id); }

static int cmp_better(const void *a, const void *b)
{
    return better(a, b) ? -1 : better(b, a) ? 1 : 0;
}

static void swap_c(cand *a, cand *b)
{
    cand t = *a;
    *a = *b;
    *b = t;
}

/* Lomuto partition of c[lo..hi) around c[pv]: better ones first. Returns
 * the pivot's final place. */
static int partition(cand *c, int lo, int hi, int pv)
{
    swap_c(&c[pv], &c[hi - 1]);
    int store = lo;
    for (int i = lo; i < hi - 1; i++)
        if (better(&c[i], &c[hi - 1])) swap_c(&c[i], &c[store++]);
    swap_c(&c[store], &c[hi - 1]);
    return store;
}

static int median3(const cand *c, int a, int b, int d)
{
    if (better(&c[a], &c[b])) {
        if (better(&c[b], &c[d])) return b;
        return better(&c[a], &c[d]) ? d : a;
    }
    if (better(&c[a], &c[d])) return a;
    return better(&c[b], &c[d]) ? d : b;
}

static void sift_worst_down(cand *c, int k, int j)
{
    for (;;) {
        int l = 2 * j + 1, w = j;
        if (l < k && better(&c[w], &c[l])) w = l;
        if (l + 1 < k && better(&c[w], &c[l + 1])) w = l + 1;
        if (w == j) return;
        swap_c(&c[j], &c[w]);
        j = w;
    }
}

/* Keeps the k best of c[0..n) in c[0..k), best first: a size-k heap whose
 * root is the worst kept, so most tokens cost one comparison (O(n log k)). */
static void select_top_k(cand *c, int n, int k)
{
    if (k < n) {
        for (int i = k / 2 - 1; i >= 0; i--) sift_worst_down(c, k, i);
        for (int i = k; i < n; i++) {
            if (!better(&c[i], &c[0])) continue;
            c[0] = c[i];
            sift_worst_down(c, k, 0);
        }
    }
    qsort(c, (size_t)(k < n ? k : n), sizeof *c, cmp_better);
}

/* Moves the fewest best tokens of c[0..n) whose weights reach `need` to the
 * front, in no particular order, and returns how many (n if they never do).
 * Quickselect on the weight-then-id order, expected O(n); after 64 rounds
 * the rest is sorted, which bounds the worst case. */
static int select_mass(cand *c, int n, double need)
{
    int lo = 0, hi = n, rounds = 0;
    double acc = 0; /* weight of c[0..lo), all better than c[lo..) */
    while (hi - lo > 16 && rounds++ < 64) {
        int p = partition(c, lo, hi, median3(c, lo, lo + (hi - lo) / 2, hi - 1));
        double ma = 0;
        for (int i = lo; i < p; i++) ma += c[i].w;
        if (acc + ma >= need) {
            hi = p;
        } else if (acc + ma + c[p].w >= need) {
            return p + 1;
        } else {
            acc += ma + c[p].w;
            lo = p + 1;
        }
    }
    qsort(c + lo, (size_t)(hi - lo), sizeof *c, cmp_better);
    for (int i = lo; i < hi; i++) {
        acc += c[i].w;
        if (acc >= need) return i + 1;
    }
    return hi;
}

/* Draws an index of c[0..n) with probability w / total. */
static int draw(sampler *s, const cand *c, int n, double total)
{
    double target = next_unit(s->rng) * total, cum = 0;
    int last = 0;
    for (int i = 0; i < n; i++) {
        if (c[i].w <= 0) continue;
        cum += c[i].w;
        last = i;
        if (cum > target) return i;
    }
    return last; /* rounding left target at the very end */
}

/* Steps 3-5 on the penalized logits l (max m, inverse temperature inv_t):
 * the kept tokens with their weights in s->cands[0..return), their sum in
 * *total. z is the normalizer sum of exp((l - m) * inv_t) over the
 * vocabulary, needed only by top-p without top-k (pass a negative value
 * otherwise). */
static int truncated(sampler *s, const float *l, float m, float inv_t, double z, double *total)
{
    const sampling_params *p = &s->p;
    int n = s->n, k = p->top_k > 0 && p->top_k < n ? p->top_k : 0;
    cand *c = s->cands;
    int nc = 0;
    if (!k && p->top_p >= 1.0f) {
        /* Only min-p: order does not matter, one filtering pass; the top
         * token's weight is exactly 1, so the cut is weight >= min_p, i.e.
         * l >= m + ln(min_p) / inv_t. */
        float lt = m + logf(p->min_p) / inv_t;
        double tot = 0;
        for (int i = 0; i < n; i++) {
            if (l[i] < lt) continue;
            float w = expf((l[i] - m) * inv_t);
            if (w > 0) { c[nc++] = (cand){w, i}; tot += w; }
        }
        *total = tot;
        return nc;
    }
    /* Candidates: tokens whose weight exp((l - m) * inv_t) is at least t,
     * i.e. l >= m + ln(t) / inv_t, with t lowered until they must hold the
     * kept set: the top k when k is set, else a top-p share of z. (Every
     * token outside weighs less than every candidate.) Only candidates pay
     * for an exp. */
    for (float t = 1e-3f;; t = t > 1e-30f ? t * 1e-4f : 0) {
        float lt = t > 0 ? m + logf(t) / inv_t : -INFINITY;
        double mass = 0;
        nc = 0;
        for (int i = 0; i < n; i++) {
            if (l[i] < lt) continue;
            float w = expf((l[i] - m) * inv_t);
            if (w > 0) { c[nc++] = (cand){w, i}; mass += w; }
        }
        if (t == 0 || (k ? nc >= k : mass >= (double)p->top_p * z)) break;
    }
    int kept = nc;
    double zk = z;
    if (k) {
        kept = k < nc ? k : nc;
        select_top_k(c, nc, kept);
        zk = 0;
        for (int i = 0; i < kept; i++) zk += c[i].w;
    }
    if (p->top_p < 1.0f) kept = select_mass(c, kept, (double)p->top_p * zk);
    if (p->min_p > 0) {
        /* The top token (weight 1) is always kept; drop what is below. */
        int j = 0;
        for (int i = 0; i < kept; i++)
            if (c[i].w >= p->min_p) c[j++] = c[i];
        kept = j;
    }
    double tot = 0;
    for (int i = 0; i < kept; i++) tot += c[i].w;
    *total = tot;
    return kept;
}

/* Step 6 after truncation. */
static int32_t sample_truncated(sampler *s, const float *l, float m, float inv_t, double z)
{
    double tot;
    int kept = truncated(s, l, m, inv_t, z, &tot);
    return s->cands[draw(s, s->cands, kept, tot)].id;
}

/* Raw log-softmax outputs: the chosen token's, and the n_top best. */
static void raw_logprobs(sampler *s, const float *logits, int32_t tok, float *logprob,
                         sampling_logprob *top, int n_top)
{
    float m = -INFINITY;
    for (int i = 0; i < s->n; i++)
        if (logits[i] > m) m = logits[i];
    double sum = 0;
    for (int i = 0; i < s->n; i++) sum += expf(logits[i] - m);
    double lse = m + log(sum);
    if (logprob) *logprob = (float)(logits[tok] - lse);
    if (top && n_top > 0) {
        if (n_top > s->n) n_top = s->n;
        for (int i = 0; i < s->n; i++) s->cands[i] = (cand){logits[i], i};
        select_top_k(s->cands, s->n, n_top);
        for (int i = 0; i < n_top; i++)
            top[i] = (sampling_logprob){s->cands[i].id, (float)(s->cands[i].w - lse)};
    }
}

void sampler_logprobs(sampler *s, const float *logits, int32_t token, float *logprob, sampling_logprob *top,
                      int n_top)
{
    raw_logprobs(s, logits, token, logprob, top, n_top);
}

/* The logits a sampler takes: no NaN or +inf (the first one is named) and
 * not every one -inf. A pass of flags without an exit (it vectorizes; this
 * runs for every sampled token over the whole vocabulary), then the search
 * for the culprit only when a flag is set. */
static dsv4_status check_logits(const float *l, int n)
{
    int bad = 0, any = 0;
    for (int i = 0; i < n; i++) {
        bad |= (l[i] != l[i]) | (l[i] == INFINITY);
        any |= l[i] > -INFINITY;
    }
    for (int i = 0; bad && i < n; i++)
        if (isnan(l[i]) || l[i] == INFINITY) return dsv4_fail(DSV4_ERR_ARG, "sampler: logit %d is %g", i, l[i]);
    if (!any) return dsv4_fail(DSV4_ERR_ARG, "sampler: every logit is -inf");
    return DSV4_OK;
}

dsv4_status sampler_sample(sampler *s, const float *logits, const int32_t *prev, int n_prev,
                           int32_t *token, float *logprob, sampling_logprob *top, int n_top)
{
    const sampling_params *p = &s->p;
    int n = s->n;
    for (int i = 0; i < n_prev; i++)
        if (prev[i] < 0 || prev[i] >= n)
            return dsv4_fail(DSV4_ERR_ARG, "sampler: previous token %d outside vocabulary of %d",
                             prev[i], n);
    dsv4_status st = check_logits(logits, n);
    if (st) return st;

    float *w = s->work;
    memcpy(w, logits, (size_t)n * sizeof *w);
    sampling_apply_penalties(p, w, prev, n_prev, s->counts);

    int32_t tok = argmax_f32(w, n); /* greedy: the lowest id wins ties */
    if (p->temperature != 0) {
        float m = w[tok], inv_t = 1.0f / p->temperature;
        int k_on = p->top_k > 0 && p->top_k < n;
        if (k_on || p->min_p > 0 || p->top_p < 1.0f) {
            double z = -1;
            if (!k_on && p->top_p < 1.0f) {
                z = 0;
                for (int i = 0; i < n; i++) z += expf((w[i] - m) * inv_t);
            }
            tok = sample_truncated(s, w, m, inv_t, z);
        } else {
            double z = 0;
            for (int i = 0; i < n; i++) {
                w[i] = expf((w[i] - m) * inv_t);
                z += w[i];
            }
            double target = next_unit(s->rng) * z, cum = 0;
            for (tok = 0; tok < n - 1; tok++) {
                cum += w[tok];
                if (cum > target && w[tok] > 0) break;
            }
            while (w[tok] <= 0 && tok > 0) tok--; /* rounding ran past the end */
        }
    }
    *token = tok;
    if (logprob || (top && n_top > 0)) raw_logprobs(s, logits, tok, logprob, top, n_top);
    return DSV4_OK;
}

dsv4_status sampler_distribution(sampler *s, const float *logits, const int32_t *prev, int n_prev, float *probs)
{
    const sampling_params *p = &s->p;
    int n = s->n;
    for (int i = 0; i < n_prev; i++)
        if (prev[i] < 0 || prev[i] >= n)
            return dsv4_fail(DSV4_ERR_ARG, "sampler: previous token %d outside vocabulary of %d", prev[i], n);
    dsv4_status st = check_logits(logits, n);
    if (st) return st;
    float *w = s->work;
    memcpy(w, logits, (size_t)n * sizeof *w);
    sampling_apply_penalties(p, w, prev, n_prev, s->counts);
    memset(probs, 0, (size_t)n * sizeof *probs);
    int best = argmax_f32(w, n);
    if (p->temperature == 0) {
        probs[best] = 1.0f;
        return DSV4_OK;
    }
    float m = w[best];
    float inv_t = 1.0f / p->temperature;
    double z = 0;
    for (int i = 0; i < n; i++) z += expf((w[i] - m) * inv_t);
    double tot;
    int kept = truncated(s, w, m, inv_t, z, &tot);
    for (int i = 0; i < kept; i++) probs[s->cands[i].id] = (float)(s->cands[i].w / tot);
    return DSV4_OK;
}

double sampler_uniform(sampler *s) { return next_unit(s->rng); }

const sampling_params *sampler_params(const sampler *s) { return &s->p; }

int32_t sampler_draw(sampler *s, const float *probs, int n)
{
    double tot = 0;
    for (int i = 0; i < n; i++) tot += probs[i];
    double target = next_unit(s->rng) * tot, cum = 0;
    int32_t last = 0;
    for (int i = 0; i < n; i++) {
        if (probs[i] <= 0) continue;
        cum += probs[i];
        last = i;
        if (cum > target) return i;
    }
    return last;
}

int sampling_stop_check(const char *text, size_t len, size_t checked_len,
                        const char *const *stops, int n_stops, size_t *cut, size_t *hold)
{
    int best = -1;
    size_t best_at = 0, h = 0;
    if (checked_len > len) checked_len = len;
    for (int i = 0; i < n_stops; i++) {
        size_t sl = stops[i] ? strlen(stops[i]) : 0;
        if (!sl) continue;
        /* A match ending inside the old text was seen already. */
        size_t from = checked_len >= sl ? checked_len - sl + 1 : 0;
        if (from < len) {
            const char *at = memmem(text + from, len - from, stops[i], sl);
            if (at && (best < 0 || (size_t)(at - text) < best_at)) {
                best = i;
                best_at = (size_t)(at - text);
            }
        }
        for (size_t k = sl - 1 < len ? sl - 1 : len; k > h; k--)
            if (!memcmp(text + len - k, stops[i], k)) { h = k; break; }
    }
    if (best >= 0) {
        *cut = best_at;
        *hold = 0;
    } else {
        *cut = len;
        *hold = h;
    }
    return best;
}

int sampling_is_stop_token(const int32_t *stop_ids, int n, int32_t tok)
{
    for (int i = 0; i < n; i++)
        if (stop_ids[i] == tok) return 1;
    return 0;
}

/* Sampling: statistical checks of each cut against the renormalized target
 * distribution, seed determinism, greedy ties, penalties, raw logprobs,
 * stop strings, and speed at DeepSeek-V4's vocabulary size. */
#include <time.h>

#include "base/argmax.h"
#include "test.h"
#include "text/sampling.h"

#define NS 20000

/* 10 tokens with these probabilities, scattered over a vocabulary of n
 * whose other tokens share `rest` of the mass. Returns the logits. */
static const double P10[10] = {0.3, 0.2, 0.15, 0.1, 0.08, 0.07, 0.05, 0.03, 0.01, 0.01};

static float *make_logits(int n, double rest, int32_t ids[10])
{
    float *l = malloc((size_t)n * sizeof *l);
    for (int i = 0; i < 10; i++) ids[i] = (int32_t)((i * 7919L + 13) % n);
    double other = n > 10 ? rest / (n - 10) : 0;
    for (int i = 0; i < n; i++) l[i] = other > 0 ? (float)log(other) : -INFINITY;
    for (int i = 0; i < 10; i++) l[ids[i]] = (float)log(P10[i] * (1 - rest));
    return l;
}

/* Draws NS tokens; checks that only the tokens with want[i] > 0 appear and
 * at their expected frequency within 5 standard errors. */
static void check_freqs(sampling_params p, const float *logits, int n, const int32_t *ids,
                        const double *want, int nw, const char *what)
{
    sampler *s;
    CHECK(sampler_new(&p, n, &s) == DSV4_OK);
    int *hits = calloc((size_t)n, sizeof *hits);
    for (int k = 0; k < NS; k++) {
        int32_t t;
        CHECK(sampler_sample(s, logits, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK);
        hits[t]++;
    }
    int inside = 0;
    for (int i = 0; i < nw; i++) {
        double f = (double)hits[ids[i]] / NS, q = want[i];
        double se = sqrt(q * (1 - q) / NS);
        if (q == 0) CHECKF(hits[ids[i]] == 0, "%s: token %d drawn %d times, want never", what, i, hits[ids[i]]);
        else CHECKF(fabs(f - q) <= 5 * se + 1e-9, "%s: token %d freq %.4f want %.4f (se %.4f)", what, i, f, q, se);
        inside += hits[ids[i]];
    }
    double covered = 0;
    for (int i = 0; i < nw; i++) covered += want[i];
    if (covered > 0.999999) CHECKF(inside == NS, "%s: %d draws outside the kept set", what, NS - inside);
    free(hits);
    sampler_free(s);
}

static void test_top_p(void)
{
    int32_t ids[10];
    int n = 32768;
    float *l = make_logits(n, 0.001, ids);
    sampling_params p = sampling_default_params();
    p.top_p = 0.7f; /* cumulative 0.2997, 0.4995, 0.6494, 0.7493: 4 tokens */
    p.seed = 1;
    double m = (0.3 + 0.2 + 0.15 + 0.1);
    double want[10] = {0.3 / m, 0.2 / m, 0.15 / m, 0.1 / m, 0, 0, 0, 0, 0, 0};
    check_freqs(p, l, n, ids, want, 10, "top_p=0.7");
    free(l);
}

typedef struct {
    float l;
    int id;
} lid;

static int by_logit_desc(const void *a, const void *b)
{
    const lid *x = a, *y = b;
    if (x->l != y->l) return x->l > y->l ? -1 : 1;
    return x->id - y->id;
}

/* A flat distribution: the nucleus is a large share of the vocabulary, so
 * the selection cannot rely on a few dominant tokens. Every draw must be
 * inside the nucleus computed by a full sort here. */
static void test_top_p_flat(void)
{
    int n = 50000;
    float *l = malloc((size_t)n * sizeof *l);
    lid *s = malloc((size_t)n * sizeof *s);
    uint64_t x = 777;
    for (int i = 0; i < n; i++) {
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        l[i] = (float)((double)(x >> 11) * 0x1.0p-53 * 4 - 2);
        s[i] = (lid){l[i], i};
    }
    qsort(s, (size_t)n, sizeof *s, by_logit_desc);
    double z = 0, cum = 0;
    for (int i = 0; i < n; i++) z += exp((double)s[i].l - s[0].l);
    char *in = calloc((size_t)n, 1);
    int size = 0;
    for (int i = 0; i < n && cum < 0.5 * z; i++) {
        cum += exp((double)s[i].l - s[0].l);
        in[s[i].id] = 1;
        size++;
    }
    sampling_params p = sampling_default_params();
    p.top_p = 0.5f;
    p.seed = 9;
    sampler *sm;
    CHECK(sampler_new(&p, n, &sm) == DSV4_OK);
    int outside = 0;
    for (int k = 0; k < 400; k++) {
        int32_t t;
        CHECK(sampler_sample(sm, l, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK);
        outside += !in[t];
    }
    /* Float rounding may move the boundary by a token or so; allow none of
     * 400 draws outside a nucleus of ~20000 tokens. */
    CHECKF(outside == 0, "%d of 400 draws outside the nucleus of %d tokens", outside, size);
    sampler_free(sm);
    free(in);
    free(s);
    free(l);
}

static void test_top_k_then_top_p(void)
{
    int32_t ids[10];
    int n = 1000;
    float *l = make_logits(n, 0.0, ids);
    sampling_params p = sampling_default_params();
    p.top_k = 3; /* 0.3, 0.2, 0.15 -> renormalized over 0.65 */
    p.seed = 2;
    double m = 0.65;
    double want[10] = {0.3 / m, 0.2 / m, 0.15 / m, 0, 0, 0, 0, 0, 0, 0};
    check_freqs(p, l, n, ids, want, 10, "top_k=3");
    /* top-p over the top-k's own mass: 0.3/0.65 = 0.46 < 0.5 <= 0.77. */
    p.top_p = 0.5f;
    double m2 = 0.5;
    double want2[10] = {0.3 / m2, 0.2 / m2, 0, 0, 0, 0, 0, 0, 0, 0};
    check_freqs(p, l, n, ids, want2, 10, "top_k=3 top_p=0.5");
    free(l);
}

static void test_min_p(void)
{
    int32_t ids[10];
    int n = 4096;
    float *l = make_logits(n, 0.0, ids);
    sampling_params p = sampling_default_params();
    p.min_p = 0.3f; /* keep p >= 0.09: 0.3, 0.2, 0.15, 0.1 */
    p.seed = 3;
    double m = 0.75;
    double want[10] = {0.3 / m, 0.2 / m, 0.15 / m, 0.1 / m, 0, 0, 0, 0, 0, 0};
    check_freqs(p, l, n, ids, want, 10, "min_p=0.3");
    /* min-p after top-p: top_p 0.85 keeps 6 tokens, min_p 0.3 then keeps 4. */
    p.top_p = 0.85f;
    p.min_p = 0.3f;
    check_freqs(p, l, n, ids, want, 10, "top_p=0.9 min_p=0.25");
    free(l);
}

static void test_temperature(void)
{
    int32_t ids[10];
    int n = 64;
    float *l = make_logits(n, 0.0, ids);
    sampling_params p = sampling_default_params();
    p.seed = 4;
    double want[10], z = 0;
    check_freqs(p, l, n, ids, P10, 10, "T=1");
    p.temperature = 0.5f; /* p^(1/T) = p^2, renormalized */
    for (int i = 0; i < 10; i++) z += P10[i] * P10[i];
    for (int i = 0; i < 10; i++) want[i] = P10[i] * P10[i] / z;
    check_freqs(p, l, n, ids, want, 10, "T=0.5");
    p.temperature = 2.0f; /* p^0.5 */
    z = 0;
    for (int i = 0; i < 10; i++) z += sqrt(P10[i]);
    for (int i = 0; i < 10; i++) want[i] = sqrt(P10[i]) / z;
    check_freqs(p, l, n, ids, want, 10, "T=2");
    free(l);
}

static void test_greedy_ties(void)
{
    float l[6] = {1, 5, 2, 5, -INFINITY, 5};
    sampling_params p = sampling_default_params();
    p.temperature = 0;
    sampler *s;
    CHECK(sampler_new(&p, 6, &s) == DSV4_OK);
    int32_t t = -1;
    for (int k = 0; k < 10; k++) {
        CHECK(sampler_sample(s, l, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK);
        CHECK(t == 1);
    }
    sampler_free(s);
    /* A repetition penalty on 1 and 3 moves greedy to 5. */
    p.repetition_penalty = 1.5f;
    CHECK(sampler_new(&p, 6, &s) == DSV4_OK);
    int32_t prev[3] = {1, 3, 1};
    CHECK(sampler_sample(s, l, prev, 3, &t, NULL, NULL, 0) == DSV4_OK);
    CHECK(t == 5);
    sampler_free(s);
}

/* argmax_f32 against the loop it replaces, on rows full of ties, signed
 * zeros, infinities and NaNs (index 0 included), every length 1..300 and
 * the vocabulary's. */
static int argmax_loop(const float *p, int64_t n)
{
    int best = 0;
    for (int64_t i = 1; i < n; i++)
        if (p[i] > p[best]) best = (int)i;
    return best;
}

static void test_argmax_exact(void)
{
    static const float vals[] = {0.0f, -0.0f, 1.0f, -1.0f, 2.5f, INFINITY, -INFINITY, NAN, 1e-45f, -3.4e38f};
    int V = 129280;
    float *p = malloc((size_t)V * sizeof *p);
    uint32_t x = 7;
    int bad = 0, cases = 0;
    for (int n = 1; n <= 300; n++)
        for (int rep = 0; rep < 20; rep++, cases++) {
            int nv = 2 + rep % 9; /* few distinct values: many ties */
            for (int i = 0; i < n; i++) {
                x = x * 1664525u + 1013904223u;
                p[i] = vals[(x >> 16) % (unsigned)nv];
            }
            if (argmax_f32(p, n) != argmax_loop(p, n)) bad++;
        }
    for (int i = 0; i < V; i++) p[i] = (float)((i * 2654435761u) % 1000u) * 0.001f - 0.5f;
    p[77777] = 0.75f;
    p[129279] = 0.75f;
    CHECK(argmax_f32(p, V) == 77777 && argmax_loop(p, V) == 77777);
    CHECKF(!bad, "%d of %d rows differ from the loop", bad, cases);
    free(p);
}

static void test_penalties(void)
{
    float l[6] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, -2.0f};
    int32_t counts[6] = {0};
    int32_t prev[5] = {0, 1, 0, 3, 0};
    sampling_params p = sampling_default_params();
    p.repetition_penalty = 2.0f;
    sampling_apply_penalties(&p, l, prev, 5, counts);
    CHECK_NEAR(l[0], 1.0, 1e-6);  /* positive: divided */
    CHECK_NEAR(l[1], -2.0, 1e-6); /* negative: multiplied */
    CHECK_NEAR(l[2], 0.5, 0);     /* not seen: untouched */
    CHECK_NEAR(l[3], 1.5, 1e-6);
    CHECK_NEAR(l[4], 0.0, 0);
    CHECK_NEAR(l[5], -2.0, 0);
    for (int i = 0; i < 6; i++) CHECK(counts[i] == 0);

    float m[6] = {2.0f, -1.0f, 0.5f, 3.0f, 0.0f, -2.0f};
    p = sampling_default_params();
    p.frequency_penalty = 0.5f;
    p.presence_penalty = 0.25f;
    sampling_apply_penalties(&p, m, prev, 5, counts);
    CHECK_NEAR(m[0], 2.0 - 3 * 0.5 - 0.25, 1e-6); /* seen 3 times */
    CHECK_NEAR(m[1], -1.0 - 0.5 - 0.25, 1e-6);
    CHECK_NEAR(m[2], 0.5, 0);
    CHECK_NEAR(m[3], 3.0 - 0.5 - 0.25, 1e-6);
    CHECK_NEAR(m[4], 0.0, 0);
    for (int i = 0; i < 6; i++) CHECK(counts[i] == 0);
}

static void run_seq(uint64_t seed, int32_t *out, int k, const float *l, int n)
{
    sampling_params p = sampling_default_params();
    p.seed = seed;
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    sampler *s;
    CHECK(sampler_new(&p, n, &s) == DSV4_OK);
    for (int i = 0; i < k; i++) CHECK(sampler_sample(s, l, NULL, 0, &out[i], NULL, NULL, 0) == DSV4_OK);
    sampler_free(s);
}

static void test_seed_determinism(void)
{
    int32_t ids[10];
    int n = 5000;
    float *l = make_logits(n, 0.2, ids);
    int32_t a[500], b[500], c[500];
    run_seq(42, a, 500, l, n);
    run_seq(42, b, 500, l, n);
    run_seq(43, c, 500, l, n);
    CHECK(!memcmp(a, b, sizeof a));
    int diff = 0;
    for (int i = 0; i < 500; i++) diff += a[i] != c[i];
    CHECKF(diff > 100, "seeds 42 and 43 differ in only %d of 500 draws", diff);
    /* Reseeding restarts the sequence. */
    sampling_params p = sampling_default_params();
    p.temperature = 0.9f;
    p.top_p = 0.95f;
    sampler *s;
    CHECK(sampler_new(&p, n, &s) == DSV4_OK);
    int32_t t;
    for (int i = 0; i < 7; i++) CHECK(sampler_sample(s, l, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK);
    sampler_reseed(s, 42);
    for (int i = 0; i < 500; i++) {
        CHECK(sampler_sample(s, l, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK);
        CHECK(t == a[i]);
    }
    sampler_free(s);
    free(l);
}

static void test_logprobs(void)
{
    float l[5] = {1.0f, 3.0f, 3.0f, -1.0f, 0.0f};
    double lse = log(exp(1.0) + 2 * exp(3.0) + exp(-1.0) + exp(0.0));
    sampling_params p = sampling_default_params();
    p.temperature = 0;
    p.presence_penalty = 10; /* penalties must not change reported logprobs */
    sampler *s;
    CHECK(sampler_new(&p, 5, &s) == DSV4_OK);
    int32_t prev[1] = {1};
    int32_t t;
    float lp;
    sampling_logprob top[7];
    CHECK(sampler_sample(s, l, prev, 1, &t, &lp, top, 7) == DSV4_OK);
    CHECK(t == 2); /* 1 was penalized */
    CHECK_NEAR(lp, 3.0 - lse, 1e-5);
    int order[5] = {1, 2, 0, 4, 3};
    for (int i = 0; i < 5; i++) {
        CHECKF(top[i].token == order[i], "top[%d] = %d", i, top[i].token);
        CHECK_NEAR(top[i].logprob, l[order[i]] - lse, 1e-5);
    }
    sampler_free(s);
}

static void test_large_vocab_speed(void)
{
    int n = 129280;
    float *l = malloc((size_t)n * sizeof *l);
    uint64_t x = 12345;
    for (int i = 0; i < n; i++) { /* roughly normal logits, scale 3 */
        double u = 0;
        for (int k = 0; k < 4; k++) {
            x ^= x << 13; x ^= x >> 7; x ^= x << 17;
            u += (double)(x >> 11) * 0x1.0p-53;
        }
        l[i] = (float)((u - 2) * 3 * 1.7);
    }
    sampling_params p = sampling_default_params();
    p.temperature = 0.8f;
    p.top_k = 40;
    p.top_p = 0.95f;
    sampler *s;
    CHECK(sampler_new(&p, n, &s) == DSV4_OK);
    /* The drawn tokens must be among the 40 highest logits. */
    float *sorted = malloc((size_t)n * sizeof *sorted);
    memcpy(sorted, l, (size_t)n * sizeof *l);
    float kth = -INFINITY;
    for (int r = 0; r < 40; r++) { /* 40th largest by repeated max (test only) */
        int bi = 0;
        for (int i = 1; i < n; i++) if (sorted[i] > sorted[bi]) bi = i;
        kth = sorted[bi];
        sorted[bi] = -INFINITY;
    }
    int32_t prev[256];
    int np = 0;
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    int iters = 300;
    for (int k = 0; k < iters; k++) {
        int32_t t;
        sampling_logprob top[5];
        CHECK(sampler_sample(s, l, prev, np, &t, NULL, top, 5) == DSV4_OK);
        CHECK(l[t] >= kth);
        if (np < 256) prev[np++] = t;
    }
    clock_gettime(CLOCK_MONOTONIC, &t1);
    double ms = ((t1.tv_sec - t0.tv_sec) * 1e3 + (t1.tv_nsec - t0.tv_nsec) / 1e6) / iters;
    printf("# sampling: %.3f ms per token at vocab %d (top_k 40, top_p 0.95, 5 logprobs)\n", ms, n);
    CHECKF(ms < 20, "%.2f ms per token", ms);
    sampler_free(s);
    free(sorted);
    free(l);
}

static void test_stop_strings(void)
{
    const char *stops[] = {"</answer>", "STOP", "", NULL};
    size_t cut, hold;
    /* Streamed in pieces: "...</ans" then "wer> more". */
    const char *full = "The result is 4</answer> more";
    size_t l1 = strlen("The result is 4</ans");
    CHECK(sampling_stop_check(full, l1, 0, stops, 4, &cut, &hold) == -1);
    CHECK(hold == strlen("</ans"));
    CHECK(sampling_stop_check(full, strlen(full), l1, stops, 4, &cut, &hold) == 0);
    CHECK(cut == strlen("The result is 4"));
    /* Earliest start wins; a tie goes to the first listed. */
    const char *t2 = "xxSTOP</answer>";
    CHECK(sampling_stop_check(t2, strlen(t2), 0, stops, 4, &cut, &hold) == 1 && cut == 2);
    const char *ab[] = {"ab", "abc"};
    CHECK(sampling_stop_check("zabc", 4, 0, ab, 2, &cut, &hold) == 0 && cut == 1);
    /* Nothing that could start a stop string: no hold. */
    CHECK(sampling_stop_check("hello", 5, 0, stops, 4, &cut, &hold) == -1 && hold == 0 && cut == 5);
    CHECK(sampling_stop_check("ST", 2, 0, stops, 4, &cut, &hold) == -1 && hold == 2);
    CHECK(sampling_stop_check("", 0, 0, stops, 4, &cut, &hold) == -1 && hold == 0);
    /* A match fully inside the already-checked text is not reported again
     * by a later call (the caller stopped at the first report). */
    const char *t3 = "aSTOPb";
    CHECK(sampling_stop_check(t3, 6, 6, stops, 4, &cut, &hold) == -1);
    CHECK(sampling_stop_check(t3, 6, 4, stops, 4, &cut, &hold) == 1 && cut == 1);

    int32_t ids[2] = {1, 129279};
    CHECK(sampling_is_stop_token(ids, 2, 129279) && !sampling_is_stop_token(ids, 2, 0));
}

/* sampler_distribution is the distribution sampler_sample draws from, for
 * every truncation, temperature and penalty (speculative decoding's
 * rejection sampling compares exactly these). */
static void test_distribution_matches_sampling(void)
{
    int32_t ids[10];
    int n = 4096;
    float *l = make_logits(n, 0.05, ids);
    int32_t prev[3] = {ids[0], ids[0], ids[3]};
    sampling_params ps[6];
    for (int k = 0; k < 6; k++) ps[k] = sampling_default_params();
    ps[0].top_p = 0.7f;
    ps[1].top_k = 5; ps[1].top_p = 0.9f;
    ps[2].min_p = 0.2f; ps[2].temperature = 0.7f;
    ps[3].temperature = 1.3f;
    ps[4].repetition_penalty = 1.5f; ps[4].presence_penalty = 0.3f; ps[4].frequency_penalty = 0.2f; ps[4].top_k = 8;
    ps[5].temperature = 0; ps[5].repetition_penalty = 3.0f;
    float *d = malloc((size_t)n * sizeof *d);
    for (int k = 0; k < 6; k++) {
        sampler *s;
        ps[k].seed = 100 + (uint64_t)k;
        CHECK(sampler_new(&ps[k], n, &s) == DSV4_OK);
        CHECK(sampler_distribution(s, l, prev, 3, d) == DSV4_OK);
        double tot = 0, top = 0;
        for (int i = 0; i < n; i++) tot += d[i];
        for (int i = 0; i < 10; i++) top += d[ids[i]];
        CHECKF(fabs(tot - 1) < 1e-4, "params %d: distribution sums to %g", k, tot);
        int *hits = calloc((size_t)n, sizeof *hits), rest = 0;
        for (int j = 0; j < NS; j++) {
            int32_t t;
            CHECK(sampler_sample(s, l, prev, 3, &t, NULL, NULL, 0) == DSV4_OK);
            hits[t]++;
        }
        for (int i = 0; i < 10; i++) {
            double q = d[ids[i]], f = (double)hits[ids[i]] / NS, se = sqrt(q * (1 - q) / NS);
            CHECKF(fabs(f - q) <= 5 * se + 1e-9, "params %d: token %d freq %.4f, distribution %.4f", k, i, f, q);
            rest += hits[ids[i]];
        }
        double q = 1 - top, f = (double)(NS - rest) / NS, se = sqrt(q * (1 - q) / NS);
        CHECKF(fabs(f - q) <= 5 * se + 1e-6, "params %d: other tokens freq %.4f, distribution %.4f", k, f, q);
        if (k == 5) CHECK(d[ids[1]] == 1.0f); /* greedy after the repetition penalty on ids[0] */
        free(hits);
        sampler_free(s);
    }
    free(d);
    free(l);
}

static void test_bad_input(void)
{
    sampler *s = NULL;
    sampling_params p = sampling_default_params();
    p.top_p = 0;
    CHECK(sampler_new(&p, 10, &s) == DSV4_ERR_ARG && !s);
    CHECK(strstr(dsv4_last_error(), "top_p") != NULL);
    p = sampling_default_params();
    p.temperature = -1;
    CHECK(sampler_new(&p, 10, &s) == DSV4_ERR_ARG);
    p = sampling_default_params();
    p.min_p = 1.5f;
    CHECK(sampler_new(&p, 10, &s) == DSV4_ERR_ARG);
    p = sampling_default_params();
    p.repetition_penalty = 0;
    CHECK(sampler_new(&p, 10, &s) == DSV4_ERR_ARG);
    p = sampling_default_params();
    p.top_k = -2;
    CHECK(sampler_new(&p, 10, &s) == DSV4_ERR_ARG);
    p = sampling_default_params();
    CHECK(sampler_new(&p, 0, &s) == DSV4_ERR_ARG);

    CHECK(sampler_new(&p, 4, &s) == DSV4_OK);
    float nanl[4] = {0, NAN, 1, 2}, infl[4] = {0, INFINITY, 1, 2};
    float ninf[4] = {-INFINITY, -INFINITY, -INFINITY, -INFINITY}, ok[4] = {0, 1, 2, 3};
    int32_t t, bad[2] = {1, 4};
    CHECK(sampler_sample(s, nanl, NULL, 0, &t, NULL, NULL, 0) == DSV4_ERR_ARG);
    CHECK(strstr(dsv4_last_error(), "logit 1") != NULL);
    CHECK(sampler_sample(s, infl, NULL, 0, &t, NULL, NULL, 0) == DSV4_ERR_ARG);
    CHECK(sampler_sample(s, ninf, NULL, 0, &t, NULL, NULL, 0) == DSV4_ERR_ARG);
    CHECK(sampler_sample(s, ok, bad, 2, &t, NULL, NULL, 0) == DSV4_ERR_ARG);
    CHECK(strstr(dsv4_last_error(), "token 4") != NULL);
    CHECK(sampler_sample(s, ok, NULL, 0, &t, NULL, NULL, 0) == DSV4_OK && t >= 0 && t < 4);
    sampler_free(s);
}

int main(void)
{
    RUN(test_top_p);
    RUN(test_top_p_flat);
    RUN(test_top_k_then_top_p);
    RUN(test_min_p);
    RUN(test_temperature);
    RUN(test_greedy_ties);
    RUN(test_argmax_exact);
    RUN(test_penalties);
    RUN(test_seed_determinism);
    RUN(test_logprobs);
    RUN(test_large_vocab_speed);
    RUN(test_stop_strings);
    RUN(test_distribution_matches_sampling);
    RUN(test_bad_input);
    TEST_MAIN_END();
}

/* Speculative decoding (engine/spec.c) changes nothing but speed, with the
 * MTP head and with the DSpark drafter (each on its fixture): greedy output
 * and the final session state (model and drafter) are bit-identical to
 * plain greedy decoding for k = 1, 2, 3 (DSpark: up to its block, 5) over
 * >= 200 tokens, alone and in a cohort of lanes with different k; sampled output follows the model's
 * distribution (chi-square against the exact distribution); a veto or a
 * fault during a verify step leaves every lane as before or poisoned, and a
 * veto takes the samplers' draws back; prompts fed in parts and tokens
 * forced by the caller (spec_prefill, spec_force) change nothing either; a
 * lane on a session another lane fed (kept, or restored from a snapshot)
 * drafts as that lane would have: the same seeded sampled continuation and
 * final state (issue 12). The greedy, veto/fault, prefill and handover cases
 * run in both cache modes. */
#include <stdint.h>

#include "dsv4.h"
#include "engine/spec.h"
#include "model/model.h"
#include "ops/ops.h"
#include "test.h"
#include "test_fault.h"
#include "test_state.h"

#define NGEN 210

static dsv4_model *g_m;
static int V, HS;
/* Floats per row of what the drafter reads from the model: the MTP's final
 * streams (HS), DSpark's target features; the deepest k tested. */
static int ROW, KMAX;

/* The model lane's per-row output the drafter reads, into h. */
static void drafter_input(dsv4_lane *ln, float *h)
{
    if (dsv4_model_has_dspark(g_m)) ln->features = h;
    else ln->hidden = h;
}

static dsv4_session *fresh(void)
{
    dsv4_session *s = NULL;
    return dsv4_session_new(g_m, &s) ? NULL : s;
}

static void prompt_of(int which, int32_t *p, int *n)
{
    *n = 3 + 5 * which;
    for (int i = 0; i < *n; i++) p[i] = (int32_t)((37 * which + 11 * i + 5) % V);
}

static int32_t argmax(const float *v)
{
    int32_t b = 0;
    for (int i = 1; i < V; i++)
        if (v[i] > v[b]) b = i;
    return b;
}

/* Plain greedy: ref[0..n) after the prompt; the session consumed the prompt
 * and ref[0..n-1), keeping every position's streams in h (rows). */
static void greedy_ref(const int32_t *p, int np, int n, int32_t *ref, dsv4_session **out, float **hid)
{
    dsv4_session *s = fresh();
    float *lg = malloc((size_t)V * sizeof *lg), *h = malloc((size_t)(np + n) * ROW * sizeof *h);
    dsv4_lane ln = {.session = s, .tokens = p, .n_tokens = np, .logits_mode = DSV4_LOGITS_LAST, .logits = lg};
    drafter_input(&ln, h);
    CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK);
    for (int i = 0; i < n; i++) {
        ref[i] = argmax(lg);
        if (i + 1 == n) break;
        ln = (dsv4_lane){.session = s, .tokens = &ref[i], .n_tokens = 1, .logits_mode = DSV4_LOGITS_LAST,
                         .logits = lg};
        drafter_input(&ln, h + (size_t)(np + i) * ROW);
        CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK);
    }
    free(lg);
    *out = s;
    *hid = h;
}

/* The reference state: the plain session plus the drafter fed the same rows
 * the spec lane's drafter holds (0 .. mtp_pos-1: real streams and the next
 * tokens for the MTP, real features for DSpark). */
static int same_as_reference(dsv4_session *spec, dsv4_session *ref, const float *h, const int32_t *p, int np,
                             const int32_t *gen)
{
    int64_t mp = dsv4_session_mtp_pos(spec);
    int32_t *t = malloc((size_t)(mp + 1) * sizeof *t);
    for (int64_t i = 0; i < mp; i++) t[i] = i + 1 < np ? p[i + 1] : gen[i + 1 - np];
    dsv4_lane ln = {.session = ref, .tokens = t, .n_tokens = (int)mp, .mtp_in = h};
    int ok = !mp || dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK; /* k = 0: the MTP never ran */
    free(t);
    dsv4_snapshot *a = NULL, *b = NULL;
    ok = ok && !dsv4_session_snapshot(spec, &a) && !dsv4_session_snapshot(ref, &b);
    size_t la = 0, lb = 0;
    const void *da = ok ? dsv4_snapshot_data(a, &la) : NULL, *db = ok ? dsv4_snapshot_data(b, &lb) : NULL;
    ok = ok && la == lb && !memcmp(da, db, la) && dsv4_session_pos(spec) == dsv4_session_pos(ref);
    dsv4_snapshot_free(a);
    dsv4_snapshot_free(b);
    return ok;
}

/* Drafts that are right about half the time (the reference says what is
 * right), so every acceptance length occurs; NULL ref: the MTP's own. */
typedef struct {
    const int32_t *ref;
    uint32_t x;
} oracle_drafts;

static int32_t half_right(void *user, const spec_lane *l, int i, int32_t proposed)
{
    oracle_drafts *o = user;
    (void)proposed;
    o->x = o->x * 1664525u + 1013904223u;
    int32_t right = o->ref[l->n_hist - 1 + i];
    return (o->x >> 16) % 3 ? right : (right + 1) % V;
}

typedef struct {
    dsv4_session *s, *ref;
    spec_lane sl;
    int32_t p[64], gen[NGEN + SPEC_MAX_K + 1], want[NGEN + SPEC_MAX_K + 1];
    float *h;
    int np, n;
    oracle_drafts od;
} run;

static void run_start(run *r, int which, int k, int oracle)
{
    memset(r, 0, sizeof *r);
    prompt_of(which, r->p, &r->np);
    greedy_ref(r->p, r->np, NGEN + SPEC_MAX_K + 1, r->want, &r->ref, &r->h);
    r->s = fresh();
    CHECK(spec_lane_init(&r->sl, r->s, k, NULL) == DSV4_OK);
    if (oracle) {
        r->od = (oracle_drafts){r->want, (uint32_t)(which * 77 + k)};
        r->sl.draft_fn = half_right;
        r->sl.draft_user = &r->od;
    }
    CHECK(spec_feed(&r->sl, r->p, r->np) == DSV4_OK);
    r->gen[r->n++] = r->sl.out[0];
}

static void run_take(run *r)
{
    for (int i = 0; i < r->sl.n_out; i++) r->gen[r->n++] = r->sl.out[i];
}

static void run_check(run *r, const char *what)
{
    CHECKF(!memcmp(r->gen, r->want, (size_t)r->n * sizeof *r->gen), "%s: tokens differ from plain greedy", what);
    /* the plain session consumed want[0..n-1); bring it to the same length */
    dsv4_session_reset(r->ref);
    int32_t all[64 + NGEN + SPEC_MAX_K + 1];
    memcpy(all, r->p, (size_t)r->np * sizeof *all);
    memcpy(all + r->np, r->want, (size_t)(r->n - 1) * sizeof *all);
    float *h = malloc((size_t)(r->np + r->n) * ROW * sizeof *h);
    dsv4_lane ln = {.session = r->ref, .tokens = all, .n_tokens = r->np + r->n - 1};
    if (r->sl.k) drafter_input(&ln, h); /* k = 0: no streams, so the session owes the MTP none either */
    CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK);
    CHECKF(same_as_reference(r->s, r->ref, h, r->p, r->np, r->want), "%s: final state differs from plain greedy", what);
    free(h);
}

static void run_free(run *r)
{
    spec_lane_free(&r->sl);
    dsv4_session_free(r->s);
    dsv4_session_free(r->ref);
    free(r->h);
}

static void test_greedy_identity_alone(void)
{
    for (int k = 1; k <= KMAX; k++)
        for (int oracle = 0; oracle < 2; oracle++) {
            run r;
            run_start(&r, k, k, oracle);
            while (r.n < NGEN) {
                spec_lane *l = &r.sl;
                dsv4_status st = spec_step(g_m, &l, 1, NULL);
                CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
                if (st) break;
                CHECK(r.sl.n_out >= 1 && r.sl.n_out <= k + 1);
                run_take(&r);
            }
            char what[64];
            snprintf(what, sizeof what, "k=%d %s drafts", k, oracle ? "half-right" : dsv4_model_has_dspark(g_m) ? "DSpark" : "MTP");
            run_check(&r, what);
            printf("  %s: %d tokens in %lld steps, %lld of %lld drafts kept\n", what, r.n, r.sl.n_steps, r.sl.n_kept,
                   r.sl.n_drafted);
            if (oracle) CHECK(r.sl.n_kept > r.sl.n_drafted / 4 && r.sl.n_steps < r.n);
            run_free(&r);
        }
}

/* DSpark's confidence cut changes how many drafts are verified, not the
 * output or the state: a threshold above 1 verifies none, one in between
 * some (the fixture's confidences spread around 0.5). */
static void test_confidence_cut(void)
{
    static const float cut[2] = {2.0f, 0.5f};
    for (int c = 0; c < 2; c++) {
        run r;
        run_start(&r, 4, KMAX, 0);
        r.sl.conf_min = cut[c];
        while (r.n < NGEN) {
            spec_lane *l = &r.sl;
            dsv4_status st = spec_step(g_m, &l, 1, NULL);
            CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
            if (st) break;
            run_take(&r);
        }
        char what[64];
        snprintf(what, sizeof what, "confidence cut %.1f", (double)cut[c]);
        run_check(&r, what);
        printf("  %s: %lld drafts verified in %lld steps\n", what, r.sl.n_drafted, r.sl.n_steps);
        CHECK(c ? r.sl.n_drafted > 0 && r.sl.n_drafted < (long long)KMAX * r.sl.n_steps : r.sl.n_drafted == 0);
        run_free(&r);
    }
}

/* DSpark's Markov rounds chained on the backend (lanes that draft plainly
 * greedily) against the host's rounds (a lane whose draft hook keeps the
 * drafter's own draft takes those): the same drafts, confidences and cuts
 * at every step, with the confidence cut in play. */
static int32_t own_draft(void *user, const spec_lane *l, int i, int32_t proposed)
{
    (void)user;
    (void)l;
    (void)i;
    return proposed;
}

static void test_markov_rounds_on_backend(void)
{
    run a, h;
    run_start(&a, 5, KMAX, 0);
    run_start(&h, 5, KMAX, 0);
    h.sl.draft_fn = own_draft;
    a.sl.conf_min = h.sl.conf_min = 0.5f;
    for (int step = 0; a.n < NGEN && h.n < NGEN; step++) {
        spec_lane *la = &a.sl, *lh = &h.sl;
        dsv4_status st = spec_step(g_m, &la, 1, NULL);
        if (!st) st = spec_step(g_m, &lh, 1, NULL);
        CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
        if (st) break;
        int same = a.sl.n_out == h.sl.n_out && !memcmp(a.sl.out, h.sl.out, (size_t)a.sl.n_out * sizeof *a.sl.out) &&
                   a.sl.n_drafted == h.sl.n_drafted && !memcmp(a.sl.drafts, h.sl.drafts, sizeof a.sl.drafts) &&
                   !memcmp(a.sl.conf, h.sl.conf, sizeof a.sl.conf);
        CHECKF(same, "step %d: the backend's Markov rounds differ from the host's", step);
        if (!same) break;
        run_take(&a);
        run_take(&h);
    }
    run_check(&a, "Markov rounds on the backend");
    printf("  Markov rounds on the backend: %lld drafts verified in %lld steps, as the host's\n", a.sl.n_drafted,
           a.sl.n_steps);
    CHECK(a.sl.n_drafted > 0 && a.sl.n_drafted < (long long)KMAX * a.sl.n_steps); /* cuts happened */
    run_free(&a);
    run_free(&h);
}

/* Four lanes with k = 1, 2, 3 (DSpark: 5), 0, their own prompts, one cohort step at a time. */
static void test_greedy_identity_cohort(void)
{
    enum { L = 4 };
    const int ks[L] = {1, 2, KMAX, 0};
    run r[L];
    spec_lane *ls[L];
    for (int i = 0; i < L; i++) {
        run_start(&r[i], 5 + i, ks[i], i != 2);
        ls[i] = &r[i].sl;
    }
    for (;;) { /* the lanes still short of NGEN: the cohort shrinks as they finish */
        spec_lane *act[L];
        int na = 0, who[L];
        for (int i = 0; i < L; i++)
            if (r[i].n < NGEN) { who[na] = i; act[na++] = ls[i]; }
        if (!na) break;
        dsv4_status st = spec_step(g_m, act, na, NULL);
        CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
        if (st) break;
        for (int i = 0; i < na; i++) run_take(&r[who[i]]);
    }
    for (int i = 0; i < L; i++) {
        char what[64];
        snprintf(what, sizeof what, "cohort lane %d (k=%d)", i, ks[i]);
        run_check(&r[i], what);
        run_free(&r[i]);
    }
}

static int veto(void *user, int n, double ms) { (void)n; (void)ms; ++*(int *)user; return 1; }

/* A vetoed verify step leaves every lane (model and MTP state) as it was,
 * and decoding then goes on to the same result; a fault poisons them. */
static void test_veto_and_fault_in_verify(void)
{
    enum { L = 3 };
    run r[L];
    spec_lane *ls[L];
    for (int i = 0; i < L; i++) {
        run_start(&r[i], 9 + i, 1 + i, 1);
        ls[i] = &r[i].sl;
    }
    for (int step = 0; step < 30; step++) {
        if (step % 3 == 0) {
            unsigned char *before[L];
            size_t bl[L];
            for (int i = 0; i < L; i++) before[i] = image(r[i].s, &bl[i]);
            int calls = 0;
            dsv4_gate g = {veto, &calls, 0};
            CHECK(spec_step(g_m, ls, L, &g) == DSV4_ERR_VETO && calls == 1);
            for (int i = 0; i < L; i++) {
                size_t la;
                unsigned char *after = image(r[i].s, &la);
                CHECKF(after && la == bl[i] && !memcmp(after, before[i], la), "veto changed lane %d", i);
                free(after);
                free(before[i]);
            }
        }
        CHECK(spec_step(g_m, ls, L, NULL) == DSV4_OK);
        for (int i = 0; i < L; i++) run_take(&r[i]);
    }
    for (int i = 0; i < L; i++) {
        char what[64];
        snprintf(what, sizeof what, "lane %d after vetoes", i);
        run_check(&r[i], what);
    }
    /* fault: layer 0's hash table corrupted for lane 1's next token (the MTP
     * drafting does not read it; the verify does) */
    int32_t tok = r[1].sl.next;
    int32_t saved = hash_entry_swap(g_m, tok, 99);
    dsv4_status st = spec_step(g_m, ls, L, NULL);
    hash_entry_swap(g_m, tok, saved);
    CHECK(g_m->be->ops->sync(g_m->be) == DSV4_OK);
    CHECKF(st == DSV4_ERR_DEVICE && strstr(dsv4_last_error(), "layer 0"), "fault gave %s", dsv4_last_error());
    for (int i = 0; i < L; i++) CHECK(dsv4_session_poisoned(r[i].s));
    CHECK(spec_step(g_m, ls, L, NULL) == DSV4_ERR_POISONED);
    for (int i = 0; i < L; i++) run_free(&r[i]);
}

/* Sampling: the first two tokens after a prompt, drawn speculatively with
 * k = 2 drafts, follow the model's exact distribution: token 1 from the
 * prompt's logits, token 2 as sum over t1 of p(t1) p(t2 | t1). Chi-square
 * over bins of expected count >= 8 (the rest pooled), and the same test
 * rejects drafts that are always kept (so it can fail). */
static double chi2(const double *expect, const int *got, int n_bins, int runs, int *df)
{
    double x = 0, pool_e = 0;
    int pool_g = 0, bins = 0;
    for (int i = 0; i < n_bins; i++) {
        double e = expect[i] * runs;
        if (e >= 8) { x += (got[i] - e) * (got[i] - e) / e; bins++; }
        else { pool_e += e; pool_g += got[i]; }
    }
    if (pool_e > 0) { x += (pool_g - pool_e) * (pool_g - pool_e) / pool_e; bins++; }
    *df = bins - 1;
    return x;
}

static void sample_pairs(const int32_t *p, int np, const sampling_params *sp, int runs, double force, int *c1, int *c2,
                         long long *kept)
{
    for (int run_i = 0; run_i < runs; run_i++) {
        sampling_params q = *sp;
        q.seed = 1000 + (uint64_t)run_i;
        sampler *smp = NULL;
        CHECK(sampler_new(&q, V, &smp) == DSV4_OK);
        dsv4_session *s = fresh();
        spec_lane l;
        CHECK(spec_lane_init(&l, s, 2, smp) == DSV4_OK);
        l.force_accept = force;
        l.force_rng = (uint64_t)run_i;
        CHECK(spec_feed(&l, p, np) == DSV4_OK);
        c1[l.out[0]]++;
        spec_lane *lp = &l;
        CHECK(spec_step(g_m, &lp, 1, NULL) == DSV4_OK);
        c2[l.out[0]]++;
        *kept += l.n_kept;
        spec_lane_free(&l);
        dsv4_session_free(s);
        sampler_free(smp);
    }
}

static void test_sampling_distribution(void)
{
    int32_t p[4] = {17, 4, 99, 23};
    sampling_params sp = sampling_default_params();
    sp.temperature = 0.8f;
    sp.top_k = 40;
    sampler *smp = NULL;
    CHECK(sampler_new(&sp, V, &smp) == DSV4_OK);
    /* exact: p1 from the prompt, p2 = sum_t1 p1(t1) p(t2 | prompt, t1) */
    double *p1 = calloc((size_t)V, sizeof *p1), *p2 = calloc((size_t)V, sizeof *p2);
    float *lg = malloc((size_t)V * sizeof *lg), *pr = malloc((size_t)V * sizeof *pr);
    dsv4_session *s = fresh();
    CHECK(dsv4_session_eval_last(s, p, 4, lg) == DSV4_OK);
    CHECK(sampler_distribution(smp, lg, NULL, 0, pr) == DSV4_OK);
    for (int t = 0; t < V; t++) p1[t] = pr[t];
    dsv4_snapshot *sn = NULL;
    CHECK(dsv4_session_snapshot(s, &sn) == DSV4_OK);
    for (int32_t t = 0; t < V; t++) {
        if (p1[t] == 0) continue;
        CHECK(dsv4_session_restore(s, sn) == DSV4_OK);
        CHECK(dsv4_session_eval_last(s, &t, 1, lg) == DSV4_OK);
        CHECK(sampler_distribution(smp, lg, &t, 1, pr) == DSV4_OK);
        for (int u = 0; u < V; u++) p2[u] += p1[t] * pr[u];
    }
    enum { RUNS = 3000 };
    int *c1 = calloc((size_t)V, sizeof *c1), *c2 = calloc((size_t)V, sizeof *c2);
    long long kept = 0;
    sample_pairs(p, 4, &sp, RUNS, -1, c1, c2, &kept);
    int df1, df2;
    double x1 = chi2(p1, c1, V, RUNS, &df1), x2 = chi2(p2, c2, V, RUNS, &df2);
    /* about p < 1e-4 for these degrees of freedom */
    double lim1 = df1 + 5 * sqrt(2.0 * df1) + 10, lim2 = df2 + 5 * sqrt(2.0 * df2) + 10;
    printf("  speculative sampling: chi2 token 1 %.1f (df %d), token 2 %.1f (df %d, limit %.1f); %lld drafts kept\n",
           x1, df1, x2, df2, lim2, kept);
    CHECK(df1 >= 5 && df2 >= 5 && x1 < lim1 && x2 < lim2);
    CHECK(kept > 0);
    /* power: keeping every draft skews token 2 toward the MTP's guess */
    int *d1 = calloc((size_t)V, sizeof *d1), *d2 = calloc((size_t)V, sizeof *d2);
    long long k2 = 0;
    sample_pairs(p, 4, &sp, RUNS, 1.0, d1, d2, &k2);
    int dfb;
    double xb = chi2(p2, d2, V, RUNS, &dfb);
    printf("  always keeping drafts: chi2 token 2 %.1f (df %d)\n", xb, dfb);
    CHECK(xb > lim2);
    /* seeded runs are reproducible */
    int *e1 = calloc((size_t)V, sizeof *e1), *e2 = calloc((size_t)V, sizeof *e2);
    long long k3 = 0;
    sample_pairs(p, 4, &sp, 200, -1, e1, e2, &k3);
    int *f1 = calloc((size_t)V, sizeof *f1), *f2 = calloc((size_t)V, sizeof *f2);
    long long k4 = 0;
    sample_pairs(p, 4, &sp, 200, -1, f1, f2, &k4);
    CHECK(!memcmp(e1, f1, (size_t)V * sizeof *e1) && !memcmp(e2, f2, (size_t)V * sizeof *e2) && k3 == k4);
    free(e1); free(e2); free(f1); free(f2); free(d1); free(d2);
    free(c1); free(c2); free(p1); free(p2); free(lg); free(pr);
    dsv4_snapshot_free(sn);
    dsv4_session_free(s);
    sampler_free(smp);
}

/* spec_prefill of a prompt in parts, spec_feed of its end, then spec_force
 * of tokens the caller chose: the lane is as if all of it (the prompt, the
 * first token drawn, the chosen tokens) had been one prompt: the same
 * greedy continuation and final state (model and MTP). With allow, the
 * token after them is the best allowed one; spec_out_logits gives the rows
 * every output token was chosen from. */
static void test_prefill_and_force(void)
{
    static const int32_t F[3] = {7, 19, 3};
    for (int k = 1; k <= 2; k++) {
        run r;
        memset(&r, 0, sizeof r);
        int32_t p[32], t0;
        int np;
        prompt_of(3, p, &np);
        dsv4_session *s0 = NULL;
        float *h0 = NULL;
        greedy_ref(p, np, 1, &t0, &s0, &h0);
        dsv4_session_free(s0);
        free(h0);
        memcpy(r.p, p, (size_t)np * sizeof *p);
        r.p[np] = t0;
        memcpy(r.p + np + 1, F, sizeof F);
        r.np = np + 4;
        greedy_ref(r.p, r.np, NGEN + SPEC_MAX_K + 1, r.want, &r.ref, &r.h);
        r.s = fresh();
        CHECK(spec_lane_init(&r.sl, r.s, k, NULL) == DSV4_OK);
        CHECK(spec_prefill(&r.sl, p, 5) == DSV4_OK && r.sl.n_out == 0);
        CHECK(spec_feed(&r.sl, p + 5, np - 5) == DSV4_OK && r.sl.n_out == 1 && r.sl.out[0] == t0);
        CHECK(spec_force(&r.sl, F, 3, NULL, 0) == DSV4_OK && r.sl.n_out == 1);
        CHECK(argmax(spec_out_logits(&r.sl, 0)) == r.sl.out[0] && !spec_out_logits(&r.sl, 1));
        r.gen[r.n++] = r.sl.out[0];
        while (r.n < NGEN) {
            spec_lane *l = &r.sl;
            CHECK(spec_step(g_m, &l, 1, NULL) == DSV4_OK);
            for (int i = 0; i < r.sl.n_out; i++) CHECK(argmax(spec_out_logits(&r.sl, i)) == r.sl.out[i]);
            run_take(&r);
        }
        run_check(&r, "prefill, feed and force");
        run_free(&r);
    }
    /* allow: after the prompt and F, the better of two tokens that are not the best */
    int32_t p[32], all[36];
    int np;
    prompt_of(3, p, &np);
    float *lg = malloc((size_t)V * sizeof *lg);
    dsv4_session *ref = fresh(), *s = fresh();
    spec_lane l;
    CHECK(spec_lane_init(&l, s, 1, NULL) == DSV4_OK && spec_feed(&l, p, np) == DSV4_OK);
    memcpy(all, p, (size_t)np * sizeof *p);
    all[np] = l.out[0];
    memcpy(all + np + 1, F, sizeof F);
    CHECK(dsv4_session_eval_last(ref, all, np + 4, lg) == DSV4_OK);
    int32_t best = argmax(lg), b = (best + 1) % V, c = (best + 2) % V;
    int32_t want = lg[c] > lg[b] || (lg[c] == lg[b] && c < b) ? c : b;
    const int32_t allow[2] = {b, c};
    CHECK(spec_force(&l, F, 3, allow, 2) == DSV4_OK && l.n_out == 1);
    CHECKF(l.out[0] == want, "allowed pick %d, want %d (best %d)", l.out[0], want, best);
    CHECK(spec_force(&l, NULL, 0, NULL, 0) == DSV4_OK && l.n_out == 1); /* just the pick: the lane goes on */
    spec_lane_free(&l);
    CHECK(spec_force(&l, NULL, 0, NULL, 0) != DSV4_OK); /* nothing to feed */
    dsv4_session_free(s);
    dsv4_session_free(ref);
    free(lg);
}

/* A seeded sampler of the two sampled-lane tests (temperature 0.9, top-k 50). */
static dsv4_status sampled(uint64_t seed, sampler **smp)
{
    sampling_params sp = sampling_default_params();
    sp.temperature = 0.9f;
    sp.top_k = 50;
    sp.seed = seed;
    return sampler_new(&sp, V, smp);
}

/* A step that did not commit takes the samplers' draws back: a sampled lane
 * whose every step is first vetoed produces the tokens of one never vetoed. */
static void test_veto_keeps_sampling(void)
{
    int32_t p[32], got[2][64];
    int np, n[2] = {0, 0};
    prompt_of(2, p, &np);
    for (int pass = 0; pass < 2; pass++) {
        sampler *smp = NULL;
        dsv4_session *s = fresh();
        spec_lane l;
        CHECK(sampled(7, &smp) == DSV4_OK && spec_lane_init(&l, s, 2, smp) == DSV4_OK);
        CHECK(spec_feed(&l, p, np) == DSV4_OK);
        got[pass][n[pass]++] = l.out[0];
        while (n[pass] < 48) {
            spec_lane *lp = &l;
            int calls = 0;
            dsv4_gate g = {veto, &calls, 0};
            if (pass) CHECK(spec_step(g_m, &lp, 1, &g) == DSV4_ERR_VETO);
            CHECK(spec_step(g_m, &lp, 1, NULL) == DSV4_OK);
            for (int i = 0; i < l.n_out; i++) got[pass][n[pass]++] = l.out[i];
        }
        spec_lane_free(&l);
        dsv4_session_free(s);
        sampler_free(smp);
    }
    CHECK(!memcmp(got[0], got[1], 48 * sizeof got[0][0]));
}

/* Issue 12: the rows the MTP owes are the session's, so a lane on a session
 * another lane fed drafts as that lane would have. A seeded sampled
 * continuation (k = 2) and the final state, one lane throughout against a
 * handover (1: the second lane on the same session; 2: on a fresh session
 * restored from the first one's snapshot): force_t0, the first lane feeds
 * the prompt and draws t0, the second forces t0 (one lane: spec_force of
 * its own t0); else the first lane prefills all but the prompt's last 6
 * tokens and the second feeds them (a cached prefix; one lane: the prompt
 * in one spec_feed). */
enum { SEQ = 40 };

static void sampled_run(int force_t0, int handover, int32_t *out, dsv4_snapshot **final)
{
    int32_t p[32];
    int np, n = 0;
    prompt_of(4, p, &np);
    sampler *smp = NULL;
    dsv4_session *s = fresh();
    spec_lane l;
    CHECK(sampled(11, &smp) == DSV4_OK && spec_lane_init(&l, s, 2, smp) == DSV4_OK);
    CHECK((handover && !force_t0 ? spec_prefill(&l, p, np - 6) : spec_feed(&l, p, np)) == DSV4_OK);
    int32_t t0 = l.out[0];
    if (handover) {
        spec_lane_free(&l);
        if (handover == 2) {
            dsv4_snapshot *sn = NULL;
            dsv4_session *s2 = fresh();
            CHECK(dsv4_session_snapshot(s, &sn) == DSV4_OK && dsv4_session_restore(s2, sn) == DSV4_OK);
            dsv4_snapshot_free(sn);
            dsv4_session_free(s);
            s = s2;
        }
        CHECK(spec_lane_init(&l, s, 2, smp) == DSV4_OK);
        if (!force_t0) CHECK(spec_feed(&l, p + np - 6, 6) == DSV4_OK);
    }
    if (force_t0) CHECK(spec_force(&l, handover ? &t0 : NULL, handover ? 1 : 0, NULL, 0) == DSV4_OK);
    out[n++] = l.out[0];
    while (n < SEQ) {
        spec_lane *lp = &l;
        dsv4_status st = spec_step(g_m, &lp, 1, NULL);
        CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
        if (st) break;
        for (int i = 0; i < l.n_out; i++) out[n++] = l.out[i];
    }
    CHECK(dsv4_session_snapshot(s, final) == DSV4_OK);
    spec_lane_free(&l);
    dsv4_session_free(s);
    sampler_free(smp);
}

static void test_handover_sampled(void)
{
    for (int force_t0 = 0; force_t0 < 2; force_t0++) {
        int32_t want[SEQ + SPEC_MAX_K + 1], got[SEQ + SPEC_MAX_K + 1];
        dsv4_snapshot *a = NULL;
        sampled_run(force_t0, 0, want, &a);
        for (int h = 1; h <= 2; h++) {
            dsv4_snapshot *b = NULL;
            sampled_run(force_t0, h, got, &b);
            size_t la = 0, lb = 0;
            const void *da = a ? dsv4_snapshot_data(a, &la) : NULL, *db = b ? dsv4_snapshot_data(b, &lb) : NULL;
            const char *what = force_t0 ? "t0 forced by the second lane" : "prompt's end fed by the second lane";
            const char *on = h == 2 ? "restored session" : "same session";
            CHECKF(!memcmp(got, want, SEQ * sizeof *got), "%s, %s: sampled tokens differ from one lane's", what, on);
            CHECKF(da && db && la == lb && !memcmp(da, db, la), "%s, %s: final state differs from one lane's", what, on);
            dsv4_snapshot_free(b);
        }
        dsv4_snapshot_free(a);
    }
}

/* Every test on a fixture, named "<drafter>: <test>". */
static void run_on(const char *tag, const char *name, void (*fn)(void))
{
    static char full[128];
    snprintf(full, sizeof full, "%s: %s", tag, name);
    t_run(full, fn);
}
#define RUN_ON(tag, fn) run_on(tag, #fn, fn)

int main(void)
{
    static const char *const fx[2] = {"tests/fixtures/tiny-mtp-f32", "tests/fixtures/tiny-dspark-bf16"};
    static const char *const tag[2][2] = {{"mtp", "mtp official"}, {"dspark", "dspark official"}};
    for (int f = 0; f < 2; f++)
        for (int off = 0; off < 2; off++) {
            /* off: again over packed state (FP8 KV rows and entries, FP4
             * indexer keys): rejected drafts roll the packed rows back by the
             * same replay */
            dsv4_load_options o = {0};
            o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
            o.n_threads = 2;
            if (off) o.cache = DSV4_CACHE_OFFICIAL;
            if (dsv4_model_load(fx[f], &o, &g_m)) {
                printf("FAIL test_spec: load (%s): %s\n", tag[f][off], dsv4_last_error());
                return 1;
            }
            V = dsv4_model_vocab(g_m);
            HS = dsv4_model_hidden_size(g_m);
            ROW = dsv4_model_has_dspark(g_m) ? dsv4_model_feature_size(g_m) : HS;
            KMAX = dsv4_model_has_dspark(g_m) ? g_m->cfg.dspark_block : 3;
            RUN_ON(tag[f][off], test_greedy_identity_alone);
            RUN_ON(tag[f][off], test_greedy_identity_cohort);
            RUN_ON(tag[f][off], test_veto_and_fault_in_verify);
            if (!off) RUN_ON(tag[f][off], test_sampling_distribution);
            RUN_ON(tag[f][off], test_prefill_and_force);
            if (!off) RUN_ON(tag[f][off], test_veto_keeps_sampling);
            RUN_ON(tag[f][off], test_handover_sampled);
            if (!off && dsv4_model_has_dspark(g_m)) RUN_ON(tag[f][off], test_confidence_cut);
            if (dsv4_model_has_dspark(g_m)) RUN_ON(tag[f][off], test_markov_rounds_on_backend);
            dsv4_model_free(g_m);
        }
    TEST_MAIN_END();
}

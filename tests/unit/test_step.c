/* The general step (engine/step.c): a lane's logits, final streams and state
 * are bit-identical whatever else is in the step (1..64 lanes, prefill and
 * decode mixed) and however its tokens are chunked; publishing the first j of
 * T tokens gives exactly the state of feeding only those j; vetoes, refused
 * acceptance and failed allocations change nothing, faults poison the step's
 * lanes — all with multi-token lanes, in both cache modes (the official one
 * stores its rows packed: FP8 KV and entries, FP4 indexer keys). */
#include <stdint.h>

#include "dsv4.h"
#include "model/model.h"
#include "ops/ops.h"
#include "test.h"
#include "test_fault.h"
#include "test_state.h"

#define FX "tests/fixtures/tiny-mixed-f32"      /* window 10, CSA 4, HCA 16 */
#define FX_HCA "tests/fixtures/tiny-hca128-bf16" /* HCA 128, bf16 weights */

static dsv4_model *g_m;
static int V, HS;
static dsv4_cache_mode g_cache; /* of the models load() makes */
static int g_step_rows = 256;   /* of the models load() makes: the long steps below span several forwards */

static dsv4_model *load(const char *dir)
{
    dsv4_load_options o = {0};
    o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
    o.n_threads = 2;
    o.cache = g_cache;
    o.step_rows = g_step_rows;
    dsv4_model *m = NULL;
    if (dsv4_model_load(dir, &o, &m)) { printf("load %s: %s\n", dir, dsv4_last_error()); return NULL; }
    return m;
}

static void use(dsv4_model *m)
{
    g_m = m;
    V = dsv4_model_vocab(m);
    HS = dsv4_model_hidden_size(m);
}

/* Deterministic token stream k of a test. */
static int32_t tok_at(int k, int i) { return (int32_t)((31 * k + 7 * i + (i * i) % 13 + 3) % V); }

static dsv4_session *fresh(void)
{
    dsv4_session *s = NULL;
    if (dsv4_session_new(g_m, &s)) return NULL;
    return s;
}

/* One lane feeding tokens, with every row's logits and streams. */
static dsv4_status feed(dsv4_session *s, const int32_t *t, int n, float *logits, float *hidden)
{
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .logits_mode = logits ? DSV4_LOGITS_ALL : DSV4_LOGITS_NONE,
                    .logits = logits, .hidden = hidden};
    return dsv4_step(g_m, &ln, 1, NULL);
}

/* Chunks of 1, 7, 512 and all at once give the same logits, final streams
 * and state, token for token. */
static void chunking(const char *dir, int N)
{
    use(load(dir));
    if (!g_m) { CHECK(0); return; }
    int32_t *t = malloc((size_t)N * sizeof *t);
    for (int i = 0; i < N; i++) t[i] = tok_at(1, i);
    float *ref = malloc((size_t)N * V * sizeof *ref), *got = malloc((size_t)N * V * sizeof *got);
    float *href = malloc((size_t)N * HS * sizeof *href), *hgot = malloc((size_t)N * HS * sizeof *hgot);
    dsv4_session *a = fresh(), *b = fresh();
    CHECK(feed(a, t, N, ref, href) == DSV4_OK);
    static const int chunks[] = {1, 7, 512};
    for (int c = 0; c < 3; c++) {
        dsv4_session_reset(b);
        for (int i = 0; i < N; i += chunks[c]) {
            int k = N - i < chunks[c] ? N - i : chunks[c];
            CHECK(feed(b, t + i, k, got + (size_t)i * V, hgot + (size_t)i * HS) == DSV4_OK);
        }
        CHECKF(!memcmp(ref, got, (size_t)N * V * sizeof *ref), "%s: chunk %d changes logits", dir, chunks[c]);
        CHECKF(!memcmp(href, hgot, (size_t)N * HS * sizeof *href), "%s: chunk %d changes the final streams", dir,
               chunks[c]);
        CHECKF(same_state(a, b), "%s: chunk %d changes the state", dir, chunks[c]);
        CHECK(dsv4_session_pos(b) == N);
    }
    dsv4_session_free(a);
    dsv4_session_free(b);
    free(t); free(ref); free(got); free(href); free(hgot);
    dsv4_model_free(g_m);
}

static void test_chunking_invariance(void) { chunking(FX, 700); }
static void test_chunking_invariance_hca128(void) { chunking(FX_HCA, 600); }
static void test_chunking_invariance_official(void)
{
    g_cache = DSV4_CACHE_OFFICIAL;
    chunking(FX, 700);
    chunking(FX_HCA, 600);
    chunking("tests/fixtures/tiny-fp8-official", 400);
    g_cache = DSV4_CACHE_AUTO;
}

/* Steps of L lanes (1..64), mixing prefill chunks and decode tokens at
 * different positions: every lane's logits (last or all rows), streams and
 * state equal the same lane fed alone. */
static void test_lane_count_invariance(void)
{
    static const int widths[] = {1, 4, 8, 9, 16, 33, 64};
    enum { MAXT = 13 };
    dsv4_session *bat[64], *ser[64];
    int32_t tk[64][MAXT];
    float *lg = malloc((size_t)64 * MAXT * V * sizeof *lg), *ref = malloc((size_t)MAXT * V * sizeof *ref);
    float *hd = malloc((size_t)64 * MAXT * HS * sizeof *hd), *href = malloc((size_t)MAXT * HS * sizeof *href);
    for (int w = 0; w < (int)(sizeof widths / sizeof widths[0]); w++) {
        int L = widths[w];
        for (int i = 0; i < L; i++) {
            bat[i] = fresh();
            ser[i] = fresh();
            int32_t pre[40];
            int n = 1 + (i * 7) % 37;
            for (int k = 0; k < n; k++) pre[k] = tok_at(i, k);
            CHECK(feed(bat[i], pre, n, NULL, NULL) == DSV4_OK && feed(ser[i], pre, n, NULL, NULL) == DSV4_OK);
        }
        for (int step = 0; step < 3; step++) {
            dsv4_lane ln[64];
            memset(ln, 0, sizeof ln);
            for (int i = 0; i < L; i++) {
                int T = (i + step) % 4 == 0 ? MAXT : 1 + (i + step) % 3;
                for (int k = 0; k < T; k++) tk[i][k] = tok_at(100 + i, step * 50 + k);
                ln[i] = (dsv4_lane){.session = bat[i], .tokens = tk[i], .n_tokens = T,
                                    .logits_mode = (i + step) % 2 ? DSV4_LOGITS_ALL : DSV4_LOGITS_LAST,
                                    .logits = lg + (size_t)i * MAXT * V,
                                    .hidden = (i % 3) ? hd + (size_t)i * MAXT * HS : NULL};
            }
            CHECKF(dsv4_step(g_m, ln, L, NULL) == DSV4_OK, "%d lanes: %s", L, dsv4_last_error());
            for (int i = 0; i < L; i++) {
                int T = ln[i].n_tokens;
                CHECK(ln[i].n_published == T);
                CHECK(feed(ser[i], tk[i], T, ref, href) == DSV4_OK);
                const float *want = ln[i].logits_mode == DSV4_LOGITS_ALL ? ref : ref + (size_t)(T - 1) * V;
                size_t rows = ln[i].logits_mode == DSV4_LOGITS_ALL ? (size_t)T : 1;
                CHECKF(!memcmp(want, ln[i].logits, rows * V * sizeof *ref), "%d lanes, step %d: lane %d logits differ",
                       L, step, i);
                if (ln[i].hidden)
                    CHECKF(!memcmp(href, ln[i].hidden, (size_t)T * HS * sizeof *href),
                           "%d lanes, step %d: lane %d streams differ", L, step, i);
                CHECKF(same_state(bat[i], ser[i]), "%d lanes, step %d: lane %d state differs", L, step, i);
            }
        }
        for (int i = 0; i < L; i++) { dsv4_session_free(bat[i]); dsv4_session_free(ser[i]); }
    }
    free(lg); free(ref); free(hd); free(href);
}

static int accept_n(void *user, const dsv4_lane *ln) { (void)ln; return *(const int *)user; }

/* Publishing j of T tokens = feeding only those j: same state bytes, same
 * logits for the kept rows, and the same behaviour afterwards. Positions and
 * lengths cross the window (10) and both compressor ratios (4, 16), T up to
 * beyond the window and beyond the HCA ratio. */
static void test_partial_acceptance(void)
{
    static const int pos0s[] = {0, 3, 9, 15, 16, 30, 47};
    static const int Ts[] = {1, 2, 3, 4, 5, 9, 12, 17, 21};
    float *lg = malloc((size_t)32 * V * sizeof *lg), *ref = malloc((size_t)32 * V * sizeof *ref);
    float *a1 = malloc((size_t)8 * V * sizeof *a1), *b1 = malloc((size_t)8 * V * sizeof *b1);
    int cases = 0;
    for (int p = 0; p < 7; p++)
        for (int q = 0; q < 9; q++) {
            int T = Ts[q];
            int32_t pre[64], t[32], after[8];
            for (int i = 0; i < pos0s[p]; i++) pre[i] = tok_at(2, i);
            for (int i = 0; i < T; i++) t[i] = tok_at(3 + q, i);
            for (int i = 0; i < 8; i++) after[i] = tok_at(40, i);
            int js[4] = {0, T / 2, T - 1, T};
            for (int jj = 0; jj < 4; jj++) {
                int j = js[jj];
                dsv4_session *a = fresh(), *b = fresh();
                if (pos0s[p]) CHECK(feed(a, pre, pos0s[p], NULL, NULL) == DSV4_OK && feed(b, pre, pos0s[p], NULL, NULL) == DSV4_OK);
                dsv4_lane ln = {.session = a, .tokens = t, .n_tokens = T, .logits_mode = DSV4_LOGITS_ALL, .logits = lg,
                                .accept = accept_n, .accept_user = &j};
                CHECKF(dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK, "%s", dsv4_last_error());
                CHECK(ln.n_published == j && dsv4_session_pos(a) == pos0s[p] + j);
                if (j) {
                    CHECK(feed(b, t, j, ref, NULL) == DSV4_OK);
                    CHECKF(!memcmp(lg, ref, (size_t)j * V * sizeof *lg), "pos %d T %d j %d: kept rows' logits differ",
                           pos0s[p], T, j);
                }
                CHECKF(same_state(a, b), "pos %d T %d j %d: state differs from feeding only %d", pos0s[p], T, j, j);
                /* and they go on alike (what the images cannot show: dead bytes stay dead) */
                CHECK(feed(a, after, 8, a1, NULL) == DSV4_OK && feed(b, after, 8, b1, NULL) == DSV4_OK);
                CHECKF(!memcmp(a1, b1, (size_t)8 * V * sizeof *a1), "pos %d T %d j %d: later logits differ", pos0s[p],
                       T, j);
                CHECK(same_state(a, b));
                dsv4_session_free(a);
                dsv4_session_free(b);
                cases++;
            }
        }
    CHECK(cases == 7 * 9 * 4);
    free(lg); free(ref); free(a1); free(b1);
}

/* Several lanes with different acceptances in one step, next to lanes that
 * publish everything. */
static void test_partial_acceptance_cohort(void)
{
    enum { L = 6, T = 5 };
    dsv4_session *a[L], *b[L];
    int keep[L] = {0, 1, 5, 3, 2, 4};
    int32_t t[L][T];
    dsv4_lane ln[L];
    memset(ln, 0, sizeof ln);
    for (int i = 0; i < L; i++) {
        a[i] = fresh();
        b[i] = fresh();
        int32_t pre[30];
        int n = 2 + 5 * i;
        for (int k = 0; k < n; k++) pre[k] = tok_at(50 + i, k);
        CHECK(feed(a[i], pre, n, NULL, NULL) == DSV4_OK && feed(b[i], pre, n, NULL, NULL) == DSV4_OK);
        for (int k = 0; k < T; k++) t[i][k] = tok_at(60 + i, k);
        ln[i] = (dsv4_lane){.session = a[i], .tokens = t[i], .n_tokens = T, .accept = i == 2 ? NULL : accept_n,
                            .accept_user = &keep[i]};
    }
    CHECK(dsv4_step(g_m, ln, L, NULL) == DSV4_OK);
    for (int i = 0; i < L; i++) {
        CHECK(ln[i].n_published == keep[i]);
        if (keep[i]) CHECK(feed(b[i], t[i], keep[i], NULL, NULL) == DSV4_OK);
        CHECKF(same_state(a[i], b[i]), "lane %d (kept %d) differs", i, keep[i]);
        dsv4_session_free(a[i]);
        dsv4_session_free(b[i]);
    }
}

static int veto_all(void *user, int n, double ms) { (void)n; (void)ms; ++*(int *)user; return 1; }

/* A cohort of multi-token lanes (prefill chunks longer than the window and
 * than a compressor window, decode tokens, drafts with acceptance) at
 * positions that cross every boundary over the steps. */
typedef struct {
    dsv4_session *s[5];
    int32_t t[5][24];
    dsv4_lane ln[5];
    int keep[5];
} cohort;

static const int cohort_T[5] = {24, 1, 3, 11, 2};

static void cohort_new(cohort *c)
{
    memset(c, 0, sizeof *c);
    for (int i = 0; i < 5; i++) {
        c->s[i] = fresh();
        int32_t pre[20];
        for (int k = 0; k < 3 + 4 * i; k++) pre[k] = tok_at(70 + i, k);
        feed(c->s[i], pre, 3 + 4 * i, NULL, NULL);
    }
}

static void cohort_lanes(cohort *c, int step, float *lg)
{
    for (int i = 0; i < 5; i++) {
        for (int k = 0; k < cohort_T[i]; k++) c->t[i][k] = tok_at(80 + i, 30 * step + k);
        c->keep[i] = (step + i) % (cohort_T[i] + 1);
        c->ln[i] = (dsv4_lane){.session = c->s[i], .tokens = c->t[i], .n_tokens = cohort_T[i],
                               .logits_mode = DSV4_LOGITS_ALL, .logits = lg + (size_t)i * 24 * V,
                               .accept = i >= 2 ? accept_n : NULL, .accept_user = &c->keep[i]};
    }
}

static void cohort_free(cohort *c)
{
    for (int i = 0; i < 5; i++) dsv4_session_free(c->s[i]);
}

static void test_veto_changes_nothing_multi(void)
{
    cohort c, ref;
    cohort_new(&c);
    cohort_new(&ref);
    float *lg = malloc((size_t)5 * 24 * V * sizeof *lg);
    for (int step = 0; step < 10; step++) {
        unsigned char *before[5];
        size_t bl[5];
        for (int i = 0; i < 5; i++) before[i] = image(c.s[i], &bl[i]);
        int calls = 0;
        dsv4_gate g = {veto_all, &calls, 0};
        cohort_lanes(&c, step, lg);
        CHECK(dsv4_step(g_m, c.ln, 5, &g) == DSV4_ERR_VETO);
        CHECK(calls == 1);
        /* an acceptance callback that returns nonsense is refused the same way */
        int bad = cohort_T[3] + 1;
        c.ln[3].accept_user = &bad;
        CHECK(dsv4_step(g_m, c.ln, 5, NULL) == DSV4_ERR_ARG);
        CHECK(strstr(dsv4_last_error(), "lane 3") != NULL);
        for (int i = 0; i < 5; i++) {
            CHECKF(same_image(c.s[i], before[i], bl[i]), "step %d: a refused step changed lane %d", step, i);
            CHECK(!dsv4_session_poisoned(c.s[i]) && c.ln[i].n_published == 0);
            free(before[i]);
        }
        /* then a committed step, moving every boundary */
        cohort_lanes(&c, step, lg);
        cohort_lanes(&ref, step, lg);
        CHECK(dsv4_step(g_m, c.ln, 5, NULL) == DSV4_OK);
        CHECK(dsv4_step(g_m, ref.ln, 5, NULL) == DSV4_OK);
    }
    for (int i = 0; i < 5; i++) CHECKF(same_state(c.s[i], ref.s[i]), "refused steps left a trace in lane %d", i);
    cohort_free(&c);
    cohort_free(&ref);
    free(lg);
}

static void test_alloc_failure_changes_nothing_multi(void)
{
    cohort c;
    cohort_new(&c);
    float *lg = malloc((size_t)5 * 24 * V * sizeof *lg);
    int failed = 0, nth;
    for (nth = 1; nth < 200; nth++) {
        unsigned char *before[5];
        size_t bl[5];
        for (int i = 0; i < 5; i++) before[i] = image(c.s[i], &bl[i]);
        cohort_lanes(&c, nth, lg);
        backend_inject_alloc_failure(g_m->be, nth);
        dsv4_status st = dsv4_step(g_m, c.ln, 5, NULL);
        backend_inject_alloc_failure(g_m->be, 0);
        if (st != DSV4_OK) {
            failed++;
            CHECKF(st == DSV4_ERR_NOMEM, "alloc failure %d gave %s", nth, dsv4_last_error());
            for (int i = 0; i < 5; i++) {
                CHECK(!dsv4_session_poisoned(c.s[i]));
                CHECKF(same_image(c.s[i], before[i], bl[i]), "failed alloc %d changed lane %d", nth, i);
            }
        }
        for (int i = 0; i < 5; i++) free(before[i]);
        if (st == DSV4_OK) break; /* fewer allocations than nth: every one was tried */
    }
    CHECK(failed >= 3 && nth < 200);
    cohort_free(&c);
    free(lg);
}

static void test_fault_poisons_all_lanes_multi(void)
{
    cohort c;
    cohort_new(&c);
    float *lg = malloc((size_t)5 * 24 * V * sizeof *lg);
    cohort_lanes(&c, 0, lg);
    /* corrupt layer 0's hash table for a token only lane 3 feeds (its 6th) */
    int32_t tok = c.t[3][5];
    for (int i = 0; i < 5; i++)
        for (int k = 0; k < cohort_T[i]; k++)
            if (!(i == 3 && k == 5) && c.t[i][k] == tok) c.t[i][k] = (tok + 1 + (c.t[i][k] == tok + 1)) % V;
    int32_t saved = hash_entry_swap(g_m, tok, 99);
    dsv4_status st = dsv4_step(g_m, c.ln, 5, NULL);
    hash_entry_swap(g_m, tok, saved);
    CHECK(g_m->be->ops->sync(g_m->be) == DSV4_OK);
    CHECK(st == DSV4_ERR_DEVICE);
    CHECKF(strstr(dsv4_last_error(), "lane 3") && strstr(dsv4_last_error(), "layer 0"),
           "message does not name lane and layer: %s", dsv4_last_error());
    for (int i = 0; i < 5; i++) CHECK(dsv4_session_poisoned(c.s[i]) && c.ln[i].n_published == 0);
    CHECK(dsv4_step(g_m, c.ln, 5, NULL) == DSV4_ERR_POISONED);
    cohort_free(&c);
    free(lg);
}

/* A lane spanning several forwards (over 256 rows) next to small lanes. */
static void test_long_lane_with_decodes(void)
{
    enum { N = 600 };
    int32_t *t = malloc(N * sizeof *t), d[3] = {5, 6, 7};
    for (int i = 0; i < N; i++) t[i] = tok_at(90, i);
    dsv4_session *a = fresh(), *b = fresh(), *c = fresh(), *e = fresh();
    CHECK(feed(c, t, 40, NULL, NULL) == DSV4_OK && feed(e, t, 40, NULL, NULL) == DSV4_OK);
    float *lg = malloc((size_t)(N + 3) * V * sizeof *lg), *ref = malloc((size_t)N * V * sizeof *ref);
    dsv4_lane ln[2] = {{.session = c, .tokens = d, .n_tokens = 3, .logits_mode = DSV4_LOGITS_LAST, .logits = lg},
                       {.session = a, .tokens = t, .n_tokens = N, .logits_mode = DSV4_LOGITS_ALL, .logits = lg + V}};
    CHECK(dsv4_step(g_m, ln, 2, NULL) == DSV4_OK);
    CHECK(feed(b, t, N, ref, NULL) == DSV4_OK);
    CHECK(!memcmp(lg + V, ref, (size_t)N * V * sizeof *ref));
    CHECK(feed(e, d, 3, ref, NULL) == DSV4_OK);
    CHECK(!memcmp(lg, ref + 2 * V, (size_t)V * sizeof *ref));
    CHECK(same_state(a, b) && same_state(c, e));
    dsv4_session_free(a); dsv4_session_free(b); dsv4_session_free(c); dsv4_session_free(e);
    free(t); free(lg); free(ref);
}

/* The rows of one forward bound memory and nothing else: a 300-token step
 * in forwards of 1 row, 97 rows and the default (one forward) gives the
 * same logits and state; a negative bound is refused at load. */
static void test_step_rows_bound(void)
{
    enum { N = 300 };
    static const int bounds[] = {1, 97, 0};
    int32_t t[N];
    float *lg[3];
    unsigned char *img[3];
    size_t len[3];
    dsv4_model *keep = g_m;
    for (int i = 0; i < N; i++) t[i] = tok_at(5, i);
    for (int k = 0; k < 3; k++) {
        g_step_rows = bounds[k];
        use(load(FX));
        lg[k] = malloc((size_t)N * V * sizeof *lg[k]);
        img[k] = NULL;
        dsv4_session *s = g_m ? fresh() : NULL;
        CHECK(s && lg[k] && feed(s, t, N, lg[k], NULL) == DSV4_OK);
        if (s) img[k] = image(s, &len[k]);
        CHECK(img[k] != NULL);
        dsv4_session_free(s);
        dsv4_model_free(g_m);
    }
    for (int k = 0; k < 2; k++) {
        CHECKF(lg[k] && lg[2] && !memcmp(lg[k], lg[2], (size_t)N * V * sizeof *lg[k]),
               "forwards of %d rows change the logits", bounds[k]);
        CHECKF(img[k] && img[2] && len[k] == len[2] && !memcmp(img[k], img[2], len[k]),
               "forwards of %d rows change the state", bounds[k]);
    }
    for (int k = 0; k < 3; k++) { free(lg[k]); free(img[k]); }
    g_step_rows = -1;
    dsv4_model *bad = load(FX);
    CHECK(bad == NULL && strstr(dsv4_last_error(), "step_rows"));
    dsv4_model_free(bad);
    g_step_rows = 256;
    use(keep);
}

static void test_bad_lanes_refused(void)
{
    dsv4_session *a = fresh();
    int32_t t[2] = {1, 2};
    dsv4_lane ln = {.session = a, .tokens = t, .n_tokens = 0};
    CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_ERR_ARG);
    ln.n_tokens = 2;
    ln.logits_mode = DSV4_LOGITS_ALL;
    CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_ERR_ARG && strstr(dsv4_last_error(), "buffer"));
    ln.logits_mode = (dsv4_logits_mode)7;
    CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_ERR_ARG);
    CHECK(dsv4_step(g_m, &ln, 0, NULL) == DSV4_ERR_ARG);
    CHECK(dsv4_session_pos(a) == 0);
    dsv4_session_free(a);
}

/* The transaction tests over the loaded model (both cache modes). */
static void run_transactions(void)
{
    RUN(test_lane_count_invariance);
    RUN(test_partial_acceptance);
    RUN(test_partial_acceptance_cohort);
    RUN(test_veto_changes_nothing_multi);
    RUN(test_alloc_failure_changes_nothing_multi);
    RUN(test_fault_poisons_all_lanes_multi);
    RUN(test_long_lane_with_decodes);
}

int main(void)
{
    RUN(test_chunking_invariance);
    RUN(test_chunking_invariance_hca128);
    use(load(FX));
    if (!g_m) { printf("FAIL test_step: cannot load %s\n", FX); return 1; }
    run_transactions();
    RUN(test_bad_lanes_refused);
    RUN(test_step_rows_bound);
    dsv4_model_free(g_m);
    /* the same transactions over packed state */
    RUN(test_chunking_invariance_official);
    g_cache = DSV4_CACHE_OFFICIAL;
    use(load(FX));
    if (!g_m) { printf("FAIL test_step: cannot load %s in the official cache mode\n", FX); return 1; }
    CHECK(g_m->cache_official && g_m->layout.kv.kind == ROW_FP8 && g_m->layout.idx.kind == ROW_FP4);
    run_transactions();
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

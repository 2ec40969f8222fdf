/* Transactions over several sessions (decode_batch on engine/step.c): batched steps are
 * bit-identical to serial decoding, vetoes and early failures change nothing,
 * faults poison every lane of the step, snapshots restore exactly. */
#include <stdint.h>

#include "ops/ops.h"
#include "dsv4.h"
#include "model/model.h"
#include "test.h"
#include "test_state.h"

#define FX "tests/fixtures/tiny-mixed-f32"
#define FX_BF16 "tests/fixtures/tiny-hca128-bf16"
#define NL 4
#define NL_WIDE 6 /* > 4 rows: the CPU matmul converts each bf16 row once */

static dsv4_model *g_m;
static int V;

static dsv4_model *load(const char *dir)
{
    dsv4_load_options o = {0};
    o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
    o.n_threads = 2;
    dsv4_model *m = NULL;
    if (dsv4_model_load(dir, &o, &m)) { printf("load: %s\n", dsv4_last_error()); return NULL; }
    return m;
}

static int argmax(const float *v) { int b = 0; for (int i = 1; i < V; i++) if (v[i] > v[b]) b = i; return b; }

/* Sessions with different prompts; prefill all. */
static void prefill_n(dsv4_session **s, int32_t *next, int n)
{
    static const int len[NL_WIDE] = {1, 9, 23, 42, 130, 5};
    float *lg = malloc((size_t)V * sizeof *lg);
    for (int i = 0; i < n; i++) {
        int32_t tok[160];
        for (int k = 0; k < len[i]; k++) tok[k] = (int32_t)((7 * k + 31 * i + 3) % V);
        CHECK(dsv4_session_new(g_m, &s[i]) == DSV4_OK);
        CHECK(dsv4_session_eval_last(s[i], tok, len[i], lg) == DSV4_OK);
        next[i] = argmax(lg);
    }
    free(lg);
}

static void prefill4(dsv4_session **s, int32_t *next) { prefill_n(s, next, NL); }

static void batch_matches_serial(int NLANES)
{
    dsv4_session *bat[NL_WIDE], *ser[NL_WIDE];
    int32_t nb[NL_WIDE], ns[NL_WIDE];
    prefill_n(bat, nb, NLANES);
    prefill_n(ser, ns, NLANES);
    float *lb = malloc((size_t)NLANES * V * sizeof *lb), *ls = malloc((size_t)V * sizeof *ls);
    int steps = 120, mismatches = 0;
    for (int step = 0; step < steps && !mismatches; step++) {
        /* lanes join and leave: the active set changes with the step */
        int act[NL_WIDE], na = 0;
        for (int i = 0; i < NLANES; i++)
            if (step < 20 || (step + i) % 5 != 0) act[na++] = i;
        dsv4_session *ss[NL_WIDE];
        int32_t tk[NL_WIDE];
        for (int k = 0; k < na; k++) { ss[k] = bat[act[k]]; tk[k] = nb[act[k]]; }
        dsv4_status st = dsv4_decode_batch(g_m, ss, tk, na, lb, NULL);
        CHECKF(st == DSV4_OK, "step %d: %s", step, dsv4_last_error());
        if (st) break;
        for (int k = 0; k < na; k++) {
            int i = act[k];
            CHECK(dsv4_session_eval_last(ser[i], &ns[i], 1, ls) == DSV4_OK);
            if (memcmp(ls, lb + (size_t)k * V, (size_t)V * sizeof *ls)) {
                mismatches++;
                CHECKF(0, "step %d lane %d: batched logits differ from serial", step, i);
            }
            nb[i] = argmax(lb + (size_t)k * V);
            ns[i] = argmax(ls);
        }
        if (step % 10 == 9)
            for (int i = 0; i < NLANES; i++)
                CHECKF(same_state(bat[i], ser[i]), "step %d: session %d state differs from serial", step, i);
    }
    for (int i = 0; i < NLANES; i++) {
        CHECK(dsv4_session_pos(bat[i]) == dsv4_session_pos(ser[i]));
        CHECK(dsv4_session_pos(bat[i]) >= 100);
        CHECKF(same_state(bat[i], ser[i]), "final state of session %d differs", i);
        dsv4_session_free(bat[i]);
        dsv4_session_free(ser[i]);
    }
    free(lb);
    free(ls);
}

static void test_batch_matches_serial(void) { batch_matches_serial(NL); }
static void test_batch_matches_serial_wide(void) { batch_matches_serial(NL_WIDE); }

static int veto_all(void *user, int n, double ms) { (void)n; (void)ms; ++*(int *)user; return 1; }

/* Run `steps` more batched steps on s (all lanes) and return final images. */
static void advance(dsv4_session **s, int32_t *next, int steps)
{
    float *lb = malloc((size_t)NL * V * sizeof *lb);
    for (int k = 0; k < steps; k++) {
        CHECK(dsv4_decode_batch(g_m, s, next, NL, lb, NULL) == DSV4_OK);
        for (int i = 0; i < NL; i++) next[i] = argmax(lb + (size_t)i * V);
    }
    free(lb);
}

static void test_veto_changes_nothing(void)
{
    dsv4_session *s[NL], *ref[NL];
    int32_t n1[NL], n2[NL];
    prefill4(s, n1);
    prefill4(ref, n2);
    float *lb = malloc((size_t)NL * V * sizeof *lb);
    /* veto at every step of a stretch that crosses window and compressor
     * boundaries; each time every state must be exactly as before */
    for (int k = 0; k < 12; k++) {
        unsigned char *before[NL];
        size_t blen[NL];
        for (int i = 0; i < NL; i++) before[i] = image(s[i], &blen[i]);
        int calls = 0;
        dsv4_gate g = {veto_all, &calls, 0};
        dsv4_status st = dsv4_decode_batch(g_m, s, n1, NL, lb, &g);
        CHECK(st == DSV4_ERR_VETO);
        CHECK(calls == 1);
        for (int i = 0; i < NL; i++) {
            size_t l = 0;
            unsigned char *after = image(s[i], &l);
            CHECKF(after && l == blen[i] && !memcmp(after, before[i], l), "veto changed session %d", i);
            CHECK(!dsv4_session_poisoned(s[i]));
            free(after);
            free(before[i]);
        }
        advance(s, n1, 1); /* then a committed step, to move the boundaries */
        advance(ref, n2, 1);
    }
    /* the deadline gate vetoes a step that took longer than allowed */
    dsv4_gate dl = {NULL, NULL, 1e-9};
    CHECK(dsv4_decode_batch(g_m, s, n1, NL, lb, &dl) == DSV4_ERR_VETO);
    CHECK(strstr(dsv4_last_error(), "deadline") != NULL);
    /* vetoed steps left no trace: same as never having tried */
    advance(s, n1, 5);
    advance(ref, n2, 5);
    for (int i = 0; i < NL; i++) {
        CHECK(same_state(s[i], ref[i]));
        dsv4_session_free(s[i]);
        dsv4_session_free(ref[i]);
    }
    free(lb);
}

static void test_fault_poisons_all_lanes(void)
{
    dsv4_session *s[NL];
    int32_t nx[NL];
    prefill4(s, nx);
    /* corrupt layer 0's hash table (backend memory) for lane 2's token */
    int32_t *tab = (int32_t *)g_m->layers[0].tid2eid;
    int K = g_m->cfg.n_active, tok = nx[2];
    for (int i = 0; i < NL; i++) if (i != 2 && nx[i] == tok) nx[i] = (tok + 1) % V;
    for (int i = 0; i < NL; i++) if (i != 2 && nx[i] == tok) nx[i] = (tok + 2) % V;
    int32_t saved, bad = 99;
    dsv4_backend *be = g_m->be;
    be->ops->download(be, &saved, tab + tok * K, sizeof saved);
    be->ops->upload(be, tab + tok * K, &bad, sizeof bad);
    float *lb = malloc((size_t)NL * V * sizeof *lb);
    dsv4_status st = dsv4_decode_batch(g_m, s, nx, NL, lb, NULL);
    be->ops->upload(be, tab + tok * K, &saved, sizeof saved);
    CHECK(be->ops->sync(be) == DSV4_OK);
    CHECK(st == DSV4_ERR_DEVICE);
    CHECKF(strstr(dsv4_last_error(), "lane 2") && strstr(dsv4_last_error(), "layer 0"),
           "message does not name lane and layer: %s", dsv4_last_error());
    for (int i = 0; i < NL; i++) CHECK(dsv4_session_poisoned(s[i]));
    /* a poisoned session refuses every use */
    int32_t t = 1;
    CHECK(dsv4_session_eval(s[0], &t, 1, NULL) == DSV4_ERR_POISONED);
    CHECK(dsv4_decode_batch(g_m, s, nx, 1, lb, NULL) == DSV4_ERR_POISONED);
    dsv4_snapshot *sn = NULL;
    CHECK(dsv4_session_snapshot(s[1], &sn) == DSV4_ERR_POISONED);
    /* reset recovers and then matches a fresh session */
    dsv4_session *fresh = NULL;
    CHECK(dsv4_session_new(g_m, &fresh) == DSV4_OK);
    dsv4_session_reset(s[0]);
    CHECK(!dsv4_session_poisoned(s[0]));
    int32_t p[5] = {5, 6, 7, 8, 9};
    float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
    CHECK(dsv4_session_eval_last(s[0], p, 5, a) == DSV4_OK);
    CHECK(dsv4_session_eval_last(fresh, p, 5, b) == DSV4_OK);
    CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
    CHECK(same_state(s[0], fresh));
    /* restore recovers a poisoned session from a snapshot */
    CHECK(dsv4_session_snapshot(fresh, &sn) == DSV4_OK);
    CHECK(dsv4_session_restore(s[1], sn) == DSV4_OK);
    CHECK(!dsv4_session_poisoned(s[1]));
    CHECK(same_state(s[1], fresh));
    CHECK(dsv4_session_eval_last(s[1], p, 3, a) == DSV4_OK);
    CHECK(dsv4_session_eval_last(fresh, p, 3, b) == DSV4_OK);
    CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
    dsv4_snapshot_free(sn);
    dsv4_session_free(fresh);
    for (int i = 0; i < NL; i++) dsv4_session_free(s[i]);
    free(lb);
    free(a);
    free(b);
}

static void test_alloc_failure_changes_nothing(void)
{
    dsv4_session *s[NL];
    int32_t nx[NL];
    prefill4(s, nx);
    float *lb = malloc((size_t)NL * V * sizeof *lb);
    for (int nth = 1; nth <= 3; nth++) {
        unsigned char *before[NL];
        size_t bl[NL];
        for (int i = 0; i < NL; i++) before[i] = image(s[i], &bl[i]);
        backend_inject_alloc_failure(g_m->be, nth);
        dsv4_status st = dsv4_decode_batch(g_m, s, nx, NL, lb, NULL);
        backend_inject_alloc_failure(g_m->be, 0);
        if (st == DSV4_OK) { /* fewer allocations than nth this step */
            for (int i = 0; i < NL; i++) { free(before[i]); nx[i] = argmax(lb + (size_t)i * V); }
            continue;
        }
        CHECKF(st == DSV4_ERR_NOMEM, "alloc failure %d gave %s", nth, dsv4_last_error());
        for (int i = 0; i < NL; i++) {
            size_t l;
            unsigned char *after = image(s[i], &l);
            CHECK(!dsv4_session_poisoned(s[i]));
            CHECKF(after && l == bl[i] && !memcmp(after, before[i], l), "failed alloc %d changed session %d", nth, i);
            free(after);
            free(before[i]);
        }
    }
    /* a prefill that fails in one session leaves the others untouched */
    size_t l0, l1;
    unsigned char *other = image(s[1], &l0);
    int32_t bad[3] = {1, 2, 100000};
    CHECK(dsv4_session_eval(s[0], bad, 3, NULL) == DSV4_ERR_ARG);
    CHECK(!dsv4_session_poisoned(s[0]));
    backend_inject_alloc_failure(g_m->be, 1);
    int32_t ok[3] = {1, 2, 3};
    CHECK(dsv4_session_eval(s[0], ok, 3, NULL) == DSV4_ERR_NOMEM);
    backend_inject_alloc_failure(g_m->be, 0);
    unsigned char *after = image(s[1], &l1);
    CHECK(l0 == l1 && !memcmp(other, after, l0));
    free(other);
    free(after);
    for (int i = 0; i < NL; i++) dsv4_session_free(s[i]);
    free(lb);
}

static void test_bad_batches_refused(void)
{
    dsv4_session *a = NULL, *b = NULL;
    CHECK(dsv4_session_new(g_m, &a) == DSV4_OK);
    CHECK(dsv4_session_new(g_m, &b) == DSV4_OK);
    dsv4_session *twice[2] = {a, a}, *two[2] = {a, b};
    int32_t t[2] = {1, 2}, bad[2] = {1, -5};
    CHECK(dsv4_decode_batch(g_m, twice, t, 2, NULL, NULL) == DSV4_ERR_ARG);
    CHECK(strstr(dsv4_last_error(), "same session") != NULL);
    CHECK(dsv4_decode_batch(g_m, two, bad, 2, NULL, NULL) == DSV4_ERR_ARG);
    CHECK(dsv4_decode_batch(g_m, two, t, 0, NULL, NULL) == DSV4_ERR_ARG);
    CHECK(dsv4_session_pos(a) == 0 && dsv4_session_pos(b) == 0);
    dsv4_session_free(a);
    dsv4_session_free(b);
}

/* The thread count never changes a bit (each output is one thread's fixed-order dot). */
static void test_thread_count_invariance(void)
{
    if (strcmp(g_m->be->name, "cpu")) return;
    dsv4_load_options o = {0};
    o.device = "cpu";
    o.n_threads = 1;
    dsv4_model *m1 = NULL;
    CHECK(dsv4_model_load(FX, &o, &m1) == DSV4_OK);
    if (!m1) return;
    int32_t tok[40];
    for (int i = 0; i < 40; i++) tok[i] = (int32_t)((13 * i + 5) % V);
    float *a = malloc((size_t)40 * V * sizeof *a), *b = malloc((size_t)40 * V * sizeof *b);
    dsv4_session *s1 = NULL, *s2 = NULL;
    CHECK(dsv4_session_new(m1, &s1) == DSV4_OK && dsv4_session_new(g_m, &s2) == DSV4_OK);
    CHECK(dsv4_session_eval(s1, tok, 40, a) == DSV4_OK);
    CHECK(dsv4_session_eval(s2, tok, 40, b) == DSV4_OK);
    CHECK(!memcmp(a, b, (size_t)40 * V * sizeof *a));
    dsv4_session_free(s1);
    dsv4_session_free(s2);
    dsv4_model_free(m1);
    free(a);
    free(b);
}

int main(void)
{
    g_m = load(FX_BF16);
    if (!g_m) { printf("FAIL test_txn: cannot load %s\n", FX_BF16); return 1; }
    V = dsv4_model_vocab(g_m);
    RUN(test_batch_matches_serial_wide);
    dsv4_model_free(g_m);
    g_m = load(FX);
    if (!g_m) { printf("FAIL test_txn: cannot load %s\n", FX); return 1; }
    V = dsv4_model_vocab(g_m);
    RUN(test_batch_matches_serial);
    RUN(test_veto_changes_nothing);
    RUN(test_fault_poisons_all_lanes);
    RUN(test_alloc_failure_changes_nothing);
    RUN(test_bad_batches_refused);
    RUN(test_thread_count_invariance);
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

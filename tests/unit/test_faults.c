/* Allocation-failure loops in the style of SQLite's malloc tests: for model
 * load, session create, prefill, decode_batch, snapshot and restore, the
 * N-th allocation fails, for N = 1, 2, ... until the operation succeeds.
 * (The tokenizer's load and encode get the same loop.)
 * Every failure must return an error with a message, leak nothing (the
 * count of live allocations is back where it was; ASan's leak check runs
 * too) and leave no partial state: no half-made object, sessions exactly
 * as they were (snapshot images compared) or, where the contract allows,
 * poisoned. The success at the end must give the results of a run that
 * never failed.
 *
 * The library's malloc family is wrapped at link time (-Wl,--wrap=...,
 * see the Makefile), and cJSON allocates through the same functions. */
#include <cjson/cJSON.h>
#include <stdint.h>

#include "dsv4.h"
#include "test.h"
#include "test_state.h"
#include "text/tokenizer.h"

#define FX "tests/fixtures/tiny-mixed-f32"

void *__real_malloc(size_t n);
void *__real_calloc(size_t n, size_t k);
void *__real_realloc(void *p, size_t n);
void __real_free(void *p);

static long g_count;   /* allocations since arming */
static long g_fail_at; /* 0: none fails */
static long g_live;    /* allocations not yet freed */

static int fails(void)
{
    return g_fail_at && __atomic_add_fetch(&g_count, 1, __ATOMIC_SEQ_CST) == g_fail_at;
}

static void *counted(void *p)
{
    if (p) __atomic_add_fetch(&g_live, 1, __ATOMIC_SEQ_CST);
    return p;
}

void *__wrap_malloc(size_t n) { return fails() ? NULL : counted(__real_malloc(n)); }
void *__wrap_calloc(size_t n, size_t k) { return fails() ? NULL : counted(__real_calloc(n, k)); }
void *__wrap_realloc(void *p, size_t n)
{
    if (fails()) return NULL;
    void *q = __real_realloc(p, n);
    return p ? q : counted(q);
}
void __wrap_free(void *p)
{
    if (p) __atomic_sub_fetch(&g_live, 1, __ATOMIC_SEQ_CST);
    __real_free(p);
}
char *__wrap_strdup(const char *s)
{
    size_t n = strlen(s) + 1;
    char *d = __wrap_malloc(n);
    if (d) memcpy(d, s, n);
    return d;
}

static void arm(long n)
{
    g_count = 0;
    g_fail_at = n;
}

static void disarm(void) { g_fail_at = 0; }

#define MAX_N 100000
static dsv4_model *g_m;
static int V;

static dsv4_model *load(void)
{
    dsv4_load_options o = {.device = "cpu", .n_threads = 2};
    dsv4_model *m = NULL;
    return dsv4_model_load(FX, &o, &m) ? NULL : m;
}

/* A failed call must say why and return an error status. */
static int failed_cleanly(dsv4_status st, long n, const char *op)
{
    if (st && dsv4_last_error()[0]) return 1;
    CHECKF(0, "%s, allocation %ld failed: status %s without a message", op, n, dsv4_status_name(st));
    return 0;
}

static void report(const char *op, long n) { printf("  %s: succeeded at N=%ld (%ld allocations failed in turn)\n", op, n, n - 1); }

static void test_model_load(void)
{
    long n;
    for (n = 1; n < MAX_N; n++) {
        long live = g_live;
        dsv4_load_options o = {.device = "cpu", .n_threads = 2};
        dsv4_model *m = (dsv4_model *)1;
        arm(n);
        dsv4_status st = dsv4_model_load(FX, &o, &m);
        disarm();
        if (!st) { dsv4_model_free(m); break; }
        failed_cleanly(st, n, "model load");
        CHECKF(m == NULL, "model load, allocation %ld: *out not NULL after a failure", n);
        CHECKF(g_live == live, "model load, allocation %ld failed: %ld allocations leaked", n, g_live - live);
        if (t_failed_now) return;
    }
    CHECK(n < MAX_N);
    report("model load", n);
}

static void test_session_new(void)
{
    long n;
    for (n = 1; n < MAX_N; n++) {
        long live = g_live;
        dsv4_session *s = (dsv4_session *)1;
        arm(n);
        dsv4_status st = dsv4_session_new(g_m, &s);
        disarm();
        if (!st) { dsv4_session_free(s); break; }
        failed_cleanly(st, n, "session create");
        CHECKF(s == NULL, "session create, allocation %ld: *out not NULL after a failure", n);
        CHECKF(g_live == live, "session create, allocation %ld failed: %ld allocations leaked", n, g_live - live);
        if (t_failed_now) return;
    }
    CHECK(n < MAX_N);
    report("session create", n);
}

/* The prompt: long enough to cross window and compressor boundaries. */
#define NP 70
static int32_t g_prompt[NP];

/* prefill: from a session that already holds 5 tokens, NP more with all
 * logits; compared with a session that never saw a failure */
static void test_prefill(void)
{
    dsv4_session *ref = NULL, *s = NULL;
    float *want = malloc((size_t)NP * V * sizeof *want), *got = malloc((size_t)NP * V * sizeof *got);
    CHECK(!dsv4_session_new(g_m, &ref) && !dsv4_session_eval(ref, g_prompt, 5, NULL));
    CHECK(!dsv4_session_eval(ref, g_prompt + 5, NP - 5, want));
    long n;
    int poisoned = 0;
    for (n = 1; n < MAX_N && !t_failed_now; n++) {
        /* a failed step may keep grown capacity in the session: leaks are
         * counted once the session is gone */
        long live = g_live;
        CHECK(!dsv4_session_new(g_m, &s) && !dsv4_session_eval(s, g_prompt, 5, NULL));
        size_t blen = 0;
        unsigned char *before = image(s, &blen);
        arm(n);
        dsv4_status st = dsv4_session_eval(s, g_prompt + 5, NP - 5, got);
        disarm();
        if (!st) {
            CHECKF(!memcmp(got, want, (size_t)(NP - 5) * V * sizeof *got), "prefill after %ld failures: logits differ", n - 1);
            free(before);
            dsv4_session_free(s);
            break;
        }
        failed_cleanly(st, n, "prefill");
        if (dsv4_session_poisoned(s)) { /* allowed: state was partly written; it then refuses use */
            poisoned++;
            CHECKF(dsv4_session_eval(s, g_prompt, 1, NULL) == DSV4_ERR_POISONED, "prefill, allocation %ld: "
                   "a poisoned session accepted a token", n);
        }
        else CHECKF(same_image(s, before, blen) && dsv4_session_pos(s) == 5, "prefill, allocation %ld: session changed", n);
        free(before);
        dsv4_session_free(s);
        CHECKF(g_live == live, "prefill, allocation %ld failed: %ld allocations leaked", n, g_live - live);
    }
    CHECK(n < MAX_N);
    report("prefill", n);
    if (poisoned) printf("  prefill: %d failures poisoned the session (state partly written)\n", poisoned);
    dsv4_session_free(ref);
    free(want);
    free(got);
}

#define NL 3
/* decode_batch: NL lanes at different positions (one closes a CSA window) */
static void test_decode_batch(void)
{
    dsv4_session *s[NL], *ref[NL];
    dsv4_snapshot *start[NL];
    static const int len[NL] = {3, 11, 40};
    int32_t tok[NL] = {7, 8, 9};
    float *want = malloc((size_t)NL * V * sizeof *want), *got = malloc((size_t)NL * V * sizeof *got);
    for (int i = 0; i < NL; i++) {
        CHECK(!dsv4_session_new(g_m, &s[i]) && !dsv4_session_eval(s[i], g_prompt, len[i], NULL));
        CHECK(!dsv4_session_new(g_m, &ref[i]) && !dsv4_session_eval(ref[i], g_prompt, len[i], NULL));
        CHECK(!dsv4_session_snapshot(s[i], &start[i]));
    }
    CHECK(!dsv4_decode_batch(g_m, ref, tok, NL, want, NULL));
    for (int i = 0; i < NL; i++) dsv4_session_free(s[i]);
    long n;
    for (n = 1; n < MAX_N && !t_failed_now; n++) {
        long live = g_live; /* leaks are counted once the sessions are gone */
        for (int i = 0; i < NL; i++) CHECK(!dsv4_session_new(g_m, &s[i]) && !dsv4_session_restore(s[i], start[i]));
        arm(n);
        dsv4_status st = dsv4_decode_batch(g_m, s, tok, NL, got, NULL);
        disarm();
        if (st) {
            failed_cleanly(st, n, "decode_batch");
            for (int i = 0; i < NL; i++) {
                size_t l;
                const void *d = dsv4_snapshot_data(start[i], &l);
                CHECKF(!dsv4_session_poisoned(s[i]) && same_image(s[i], d, l),
                       "decode_batch, allocation %ld failed: lane %d changed or poisoned", n, i);
            }
        } else {
            CHECKF(!memcmp(got, want, (size_t)NL * V * sizeof *got), "decode_batch after %ld failures: logits differ", n - 1);
        }
        for (int i = 0; i < NL; i++) dsv4_session_free(s[i]);
        CHECKF(g_live == live, "decode_batch, allocation %ld failed: %ld allocations leaked", n, g_live - live);
        if (!st) break;
    }
    CHECK(n < MAX_N);
    report("decode_batch", n);
    for (int i = 0; i < NL; i++) {
        dsv4_snapshot_free(start[i]);
        dsv4_session_free(ref[i]);
    }
    free(want);
    free(got);
}

/* snapshot, then restore into a fresh session: the restored session
 * continues exactly like the original */
static void test_snapshot_restore(void)
{
    dsv4_session *s = NULL, *r = NULL;
    CHECK(!dsv4_session_new(g_m, &s) && !dsv4_session_eval(s, g_prompt, NP, NULL));
    size_t blen = 0;
    unsigned char *before = image(s, &blen);
    dsv4_snapshot *sn = NULL;
    long n;
    for (n = 1; n < MAX_N && !t_failed_now; n++) {
        long live = g_live;
        sn = (dsv4_snapshot *)1;
        arm(n);
        dsv4_status st = dsv4_session_snapshot(s, &sn);
        disarm();
        if (!st) break;
        failed_cleanly(st, n, "snapshot");
        CHECKF(sn == NULL, "snapshot, allocation %ld: *out not NULL after a failure", n);
        CHECKF(g_live == live, "snapshot, allocation %ld failed: %ld allocations leaked", n, g_live - live);
        CHECKF(!dsv4_session_poisoned(s) && same_image(s, before, blen), "snapshot, allocation %ld: session changed", n);
    }
    CHECK(n < MAX_N && sn);
    report("snapshot", n);
    for (n = 1; n < MAX_N && !t_failed_now; n++) {
        long live = g_live;
        CHECK(!dsv4_session_new(g_m, &r));
        size_t flen = 0;
        unsigned char *fresh = image(r, &flen);
        arm(n);
        dsv4_status st = dsv4_session_restore(r, sn);
        disarm();
        if (!st) { free(fresh); break; }
        failed_cleanly(st, n, "restore");
        CHECKF(dsv4_session_poisoned(r) || same_image(r, fresh, flen), "restore, allocation %ld: half-restored", n);
        free(fresh);
        dsv4_session_free(r);
        r = NULL;
        CHECKF(g_live == live, "restore, allocation %ld failed: %ld allocations leaked", n, g_live - live);
    }
    CHECK(n < MAX_N && r);
    report("restore", n);
    if (r) {
        CHECK(same_image(r, before, blen));
        float *a = malloc((size_t)V * sizeof *a), *b = malloc((size_t)V * sizeof *b);
        int32_t t = 5;
        CHECK(!dsv4_session_eval(s, &t, 1, a) && !dsv4_session_eval(r, &t, 1, b));
        CHECK(!memcmp(a, b, (size_t)V * sizeof *a));
        free(a);
        free(b);
    }
    dsv4_snapshot_free(sn);
    dsv4_session_free(r);
    dsv4_session_free(s);
    free(before);
}

static void test_tokenizer(void)
{
    long n;
    tok_t *t = NULL;
    for (n = 1; n < MAX_N && !t_failed_now; n++) {
        long live = g_live;
        t = (tok_t *)1;
        arm(n);
        dsv4_status st = tok_load("tests/fixtures/tiny-chat", &t);
        disarm();
        if (!st) break;
        failed_cleanly(st, n, "tokenizer load");
        CHECKF(t == NULL, "tokenizer load, allocation %ld: *out not NULL after a failure", n);
        CHECKF(g_live == live, "tokenizer load, allocation %ld failed: %ld allocations leaked", n, g_live - live);
    }
    CHECK(n < MAX_N && t);
    report("tokenizer load", n);
    static const char text[] = "Hello world! 12345 <\xEF\xBD\x9CUser\xEF\xBD\x9C> \xE4\xB8\xAD\xE6\x96\x87";
    int32_t *want = NULL, *ids = NULL;
    size_t nw = 0, k = 0;
    CHECK(t && !tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &want, &nw));
    for (n = 1; t && n < MAX_N && !t_failed_now; n++) {
        long live = g_live;
        arm(n);
        dsv4_status st = tok_encode(t, text, strlen(text), TOK_PARSE_SPECIAL, &ids, &k);
        disarm();
        if (!st) break;
        failed_cleanly(st, n, "encode");
        CHECKF(ids == NULL && g_live == live, "encode, allocation %ld failed: output or leak", n);
    }
    CHECK(ids && k == nw && !memcmp(ids, want, k * sizeof *ids));
    report("encode", n);
    free(ids);
    free(want);
    tok_free(t);
}

int main(void)
{
    cJSON_InitHooks(&(cJSON_Hooks){__wrap_malloc, __wrap_free});
    RUN(test_model_load);
    if (!(g_m = load())) { printf("FAIL test_faults: cannot load %s: %s\n", FX, dsv4_last_error()); return 1; }
    V = dsv4_model_vocab(g_m);
    for (int i = 0; i < NP; i++) g_prompt[i] = (int32_t)((11 * i + 3) % V);
    RUN(test_session_new);
    RUN(test_prefill);
    RUN(test_decode_batch);
    RUN(test_snapshot_restore);
    dsv4_model_free(g_m);
    RUN(test_tokenizer);
    TEST_MAIN_END();
}

/* The DSpark drafter (docs/DSPARK.md) against the composed transformers
 * oracle (tools/oracle/dspark.py): the Markov-corrected logits of every row
 * of the block after every prefix within 1e-3, and the confidences; its
 * context rows (and the features they read) are bit-identical however they
 * are chunked, also past one forward's rows, part of the snapshot, and
 * rolled back exactly on a partial publication; bad checkpoints and
 * configs give one-line errors. */
#include <stdint.h>
#include <sys/stat.h>

#include "dsv4.h"
#include "engine/forward.h"
#include "engine/session.h"
#include "model/model.h"
#include "test.h"
#include "test_tmpdir.h"

#define FX "tests/fixtures/tiny-dspark-bf16"

static dsv4_model *g_m;
static int V, F, B, N;
static int32_t g_tok[256];

static int read_tokens(const char *path)
{
    char *t = test_read_file(path, NULL);
    if (!t) return 0;
    int n = 0;
    for (char *p = t; *p && n < 256;) {
        g_tok[n++] = (int32_t)strtol(p, &p, 10);
        while (*p == ',' || *p == '\n') p++;
    }
    free(t);
    return n;
}

static dsv4_session *fresh(void)
{
    dsv4_session *s = NULL;
    return dsv4_session_new(g_m, &s) ? NULL : s;
}

/* The model over t[0..n) with every row's features. */
static float *model_features(dsv4_session *s, const int32_t *t, int n)
{
    float *f = malloc((size_t)n * F * sizeof *f);
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .features = f};
    if (dsv4_step(g_m, &ln, 1, NULL)) { free(f); return NULL; }
    return f;
}

/* n context rows at the session's drafter position. */
static dsv4_status context_rows(dsv4_session *s, const float *f, const int32_t *t, int n)
{
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .mtp_in = f};
    return dsv4_step(g_m, &ln, 1, NULL);
}

/* The block after the session's context rows, its first token `first`, the
 * Markov head conditioned on prev[0..B): logits [B][V] and conf [B]. */
static dsv4_status draft_block(dsv4_session *s, int32_t first, const int32_t *prev, float *logits, float *conf)
{
    fwd_scratch *sc = NULL;
    dsv4_status st = forward_scratch_new(g_m, B, B, FWD_BLOCK, &sc);
    if (st) return st;
    int32_t ids[64];
    int rows[64];
    for (int i = 0; i < B; i++) {
        ids[i] = i ? g_m->cfg.dspark_noise : first;
        rows[i] = i;
    }
    float *bias = malloc((size_t)B * V * sizeof *bias);
    fwd_lane ln = {.s = s, .pos0 = dsv4_session_mtp_pos(s), .T = B, .out_rows = B, .logits = logits};
    st = forward_dspark_block(g_m, sc, &ln, 1, ids, B);
    if (!st) st = forward_dspark_markov(g_m, sc, prev, rows, B, bias, conf);
    for (int i = 0; !st && i < B * V; i++) logits[i] += bias[i];
    free(bias);
    forward_scratch_free(g_m, sc);
    return st;
}

static void test_loads_drafter(void)
{
    CHECK(dsv4_model_has_dspark(g_m) && !dsv4_model_has_mtp(g_m));
    CHECK(g_m->n_draft == 3 && B == 5 && g_m->cfg.dspark_n_targets == 2 && g_m->cfg.dspark_rank == 16);
    CHECK(F == 2 * g_m->cfg.dim && g_m->n_unknown == 0 && g_m->n_mtp_tensors == 0);
}

static void test_dspark_matches_oracle(void)
{
    size_t len = 0, clen = 0;
    float *ref = (float *)test_read_file(FX "/dspark_logits.f32", &len);
    float *cref = (float *)test_read_file(FX "/dspark_conf.f32", &clen);
    size_t rows = (size_t)(N - 1) * B;
    CHECKF(ref && len == rows * V * sizeof(float) && cref && clen == rows * sizeof(float),
           "dspark_logits.f32 has %zu bytes, dspark_conf.f32 %zu", len, clen);
    if (!ref || !cref || len != rows * V * sizeof(float) || clen != rows * sizeof(float)) {
        free(ref);
        free(cref);
        return;
    }
    dsv4_session *s = fresh();
    float *f = model_features(s, g_tok, N);
    float *lg = malloc((size_t)B * V * sizeof *lg), conf[64];
    double worst = 0, cworst = 0, scale = 0;
    for (int P = 1; P < N && f; P++) {
        CHECK(context_rows(s, f + (size_t)(P - 1) * F, g_tok + P - 1, 1) == DSV4_OK);
        int32_t prev[64];
        for (int i = 0; i < B; i++) prev[i] = g_tok[(P + i) % N];
        dsv4_status st = draft_block(s, g_tok[P], prev, lg, conf);
        CHECKF(st == DSV4_OK, "block after %d: %s", P, dsv4_last_error());
        if (st) break;
        const float *r = ref + (size_t)(P - 1) * B * V;
        for (int i = 0; i < B * V; i++) {
            double d = fabs((double)lg[i] - r[i]);
            if (d > worst) worst = d;
            if (fabs(r[i]) > scale) scale = fabs(r[i]);
        }
        for (int i = 0; i < B; i++) {
            double d = fabs((double)conf[i] - cref[(size_t)(P - 1) * B + i]);
            if (d > cworst) cworst = d;
        }
    }
    printf("  %s: DSpark row logits max |diff| %.2e over %d blocks x %d rows x %d (max |logit| %.2f); "
           "confidence max |diff| %.2e\n", FX, worst, N - 1, B, V, scale, cworst);
    CHECK(f && worst <= 1e-3 && cworst <= 1e-4 && scale > 0.5);
    CHECK(dsv4_session_mtp_pos(s) == N - 1);
    dsv4_session_free(s);
    free(f); free(lg); free(ref); free(cref);
}

static unsigned char *image(dsv4_session *s, size_t *len)
{
    dsv4_snapshot *sn = NULL;
    if (dsv4_session_snapshot(s, &sn)) return NULL;
    const void *d = dsv4_snapshot_data(sn, len);
    unsigned char *c = malloc(*len);
    memcpy(c, d, *len);
    dsv4_snapshot_free(sn);
    return c;
}

/* Context rows fed 1 / 7 / all at once give the same state; a lane that
 * publishes j of its rows (acceptance callback) equals one fed only j; a
 * snapshot restores the rings (the next block is the same). */
static int keep_j(void *user, const dsv4_lane *ln) { (void)ln; return *(int *)user; }

static void test_context_chunking_rollback_snapshot(void)
{
    dsv4_session *a = fresh(), *b = fresh();
    float *f = model_features(a, g_tok, N), *f2 = model_features(b, g_tok, N);
    CHECK(f && f2 && !memcmp(f, f2, (size_t)N * F * sizeof *f));
    CHECK(context_rows(a, f, g_tok, N) == DSV4_OK);
    size_t la, lb;
    unsigned char *ia = image(a, &la);
    static const int chunks[] = {1, 7};
    for (int c = 0; c < 2; c++) {
        dsv4_session_reset(b);
        free(model_features(b, g_tok, N));
        for (int i = 0; i < N; i += chunks[c]) {
            int k = N - i < chunks[c] ? N - i : chunks[c];
            CHECK(context_rows(b, f + (size_t)i * F, g_tok + i, k) == DSV4_OK);
        }
        unsigned char *ib = image(b, &lb);
        CHECKF(ia && ib && la == lb && !memcmp(ia, ib, la), "context rows in chunks of %d change the state", chunks[c]);
        free(ib);
    }
    /* partial publication: 6 rows fed, 2 kept == 2 fed (the ring wraps: window 10) */
    for (int j = 0; j <= 6; j += 2) {
        dsv4_session_reset(a);
        dsv4_session_reset(b);
        free(model_features(a, g_tok, N));
        free(model_features(b, g_tok, N));
        CHECK(context_rows(a, f, g_tok, 17) == DSV4_OK && context_rows(b, f, g_tok, 17 + j) == DSV4_OK);
        dsv4_lane ln = {.session = a, .tokens = g_tok + 17, .n_tokens = 6, .mtp_in = f + (size_t)17 * F,
                        .accept = keep_j, .accept_user = &j};
        CHECK(dsv4_step(g_m, &ln, 1, NULL) == DSV4_OK && ln.n_published == j);
        unsigned char *x = image(a, &la), *y = image(b, &lb);
        CHECKF(x && y && la == lb && !memcmp(x, y, la), "keeping %d of 6 context rows differs from feeding %d", j, j);
        free(x);
        free(y);
    }
    /* snapshot: restore, then the same block */
    dsv4_session_reset(a);
    free(model_features(a, g_tok, N));
    CHECK(context_rows(a, f, g_tok, 20) == DSV4_OK);
    dsv4_snapshot *mid = NULL;
    CHECK(dsv4_session_snapshot(a, &mid) == DSV4_OK);
    int32_t prev[64];
    for (int i = 0; i < B; i++) prev[i] = g_tok[20 + i];
    float *l1 = malloc((size_t)B * V * sizeof *l1), *l2 = malloc((size_t)B * V * sizeof *l2), c1[64], c2[64];
    CHECK(draft_block(a, g_tok[20], prev, l1, c1) == DSV4_OK);
    CHECK(context_rows(a, f + (size_t)20 * F, g_tok + 20, 12) == DSV4_OK);
    CHECK(dsv4_session_restore(a, mid) == DSV4_OK && dsv4_session_mtp_pos(a) == 20);
    CHECK(draft_block(a, g_tok[20], prev, l2, c2) == DSV4_OK);
    CHECK(!memcmp(l1, l2, (size_t)B * V * sizeof *l1) && !memcmp(c1, c2, (size_t)B * sizeof *c1));
    dsv4_snapshot_free(mid);
    free(l1); free(l2); free(ia); free(f); free(f2);
    dsv4_session_free(a);
    dsv4_session_free(b);
}

/* A step longer than one forward (main loads with 256 rows) returns the same
 * features and writes the same context rows as short steps. */
static void test_long_steps(void)
{
    enum { n = 300 };
    int32_t t[n];
    for (int i = 0; i < n; i++) t[i] = (int32_t)((i * 37 + 11) % V);
    dsv4_session *a = fresh(), *b = fresh();
    float *fa = model_features(a, t, n), *fb = malloc((size_t)n * F * sizeof *fb);
    for (int i = 0; i < n; i += 100) {
        float *f = model_features(b, t + i, 100);
        if (f) memcpy(fb + (size_t)i * F, f, (size_t)100 * F * sizeof *f);
        CHECK(f != NULL);
        free(f);
    }
    CHECK(fa && !memcmp(fa, fb, (size_t)n * F * sizeof *fa));
    CHECK(fa && context_rows(a, fa, t, n) == DSV4_OK);
    for (int i = 0; i < n; i += 100) CHECK(context_rows(b, fb + (size_t)i * F, t + i, 100) == DSV4_OK);
    size_t la, lb;
    unsigned char *x = image(a, &la), *y = image(b, &lb);
    CHECK(x && y && la == lb && !memcmp(x, y, la) && dsv4_session_mtp_pos(a) == n);
    free(x); free(y); free(fa); free(fb);
    dsv4_session_free(a);
    dsv4_session_free(b);
}

/* A copy of the fixture with config.json replaced (or one tensor's name
 * changed in place): loading it must fail with one line naming the cause. */
static int copy_file(const char *from, const char *to, const char *find, const char *repl)
{
    size_t len;
    char *t = test_read_file(from, &len);
    if (!t) return -1;
    if (find) {
        char *p = memmem(t, len, find, strlen(find));
        if (!p || strlen(repl) != strlen(find)) { free(t); return -1; }
        memcpy(p, repl, strlen(repl));
    }
    FILE *f = fopen(to, "wb");
    int bad = !f || fwrite(t, 1, len, f) != len;
    if (f) bad |= fclose(f) != 0;
    free(t);
    return bad ? -1 : 0;
}

static void expect_load_error(const char *cfg_find, const char *cfg_repl, const char *st_find, const char *st_repl,
                              const char *want)
{
    char dir[512], p[600];
    snprintf(dir, sizeof dir, "%s", tmp_path("bad"));
    mkdir(dir, 0700);
    snprintf(p, sizeof p, "%s/config.json", dir);
    CHECK(copy_file(FX "/config.json", p, cfg_find, cfg_repl) == 0);
    snprintf(p, sizeof p, "%s/model.safetensors", dir);
    CHECK(copy_file(FX "/model.safetensors", p, st_find, st_repl) == 0);
    dsv4_load_options o = {0};
    o.device = "cpu";
    o.n_threads = 1;
    dsv4_model *m = NULL;
    dsv4_status st = dsv4_model_load(dir, &o, &m);
    const char *e = dsv4_last_error();
    CHECKF(st != DSV4_OK && strstr(e, want) && !strchr(e, '\n'), "want '%s', got: %s", want, st ? e : "loaded");
    dsv4_model_free(m);
}

static void test_bad_input(void)
{
    expect_load_error("\"dspark_markov_rank\": 16", "\"dspark_markov_rank\": 17", NULL, NULL,
                      "markov_w1.weight' has shape [285, 16], config expects [285, 17]");
    expect_load_error("\"dspark_noise_token_id\": 283", "\"dspark_noise_token_id\": 999", NULL, NULL,
                      "dspark_noise_token_id: expected an integer in [0, 284]");
    expect_load_error("\"dspark_markov_head_type\": \"vanilla\"", "\"dspark_markov_head_type\": \"gated__\"", NULL,
                      NULL, "dspark_markov_head_type");
    expect_load_error("\"dspark_window_size\": 10", "\"dspark_window_size\": 12", NULL, NULL, "dspark_window_size: 12");
    expect_load_error("\"dspark_block_size\": 5", "\"dspark_blocc_size\": 5", NULL, NULL,
                      "a DSpark key without dspark_block_size");
    expect_load_error(NULL, NULL, "mtp.2.confidence_head.proj.weight", "mtp.2.confidence_head.proj.weighx",
                      "missing tensor 'mtp.2.confidence_head.proj.weight'");
    expect_load_error(NULL, NULL, "mtp.0.main_proj.weight", "mtp.0.main_proj.weighx",
                      "missing tensor 'mtp.0.main_proj.weight'");
    expect_load_error(NULL, NULL, "mtp.0.attn_norm.weight", "mtp.0.attn_norm.weighx",
                      "the drafter's first stage is missing");
}

int main(void)
{
    dsv4_load_options o = {0};
    o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
    o.n_threads = 2;
    o.step_rows = 256; /* test_long_steps: 300 rows in two forwards */
    if (dsv4_model_load(FX, &o, &g_m)) { printf("FAIL test_dspark: load: %s\n", dsv4_last_error()); return 1; }
    V = dsv4_model_vocab(g_m);
    F = dsv4_model_feature_size(g_m);
    B = g_m->cfg.dspark_block;
    N = read_tokens(FX "/tokens.txt");
    if (N < 30) { printf("FAIL test_dspark: tokens.txt\n"); return 1; }
    RUN(test_loads_drafter);
    RUN(test_dspark_matches_oracle);
    RUN(test_context_chunking_rollback_snapshot);
    RUN(test_long_steps);
    if (test_tmpdir_make("/tmp/dsv4_dspark_") == 0) {
        RUN(test_bad_input);
        test_tmpdir_remove();
    }
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

/* The server's scheduler: a fault in one lane of a cohort step fails only
 * that lane's request, with plain decoding (tiny-chat) and with speculative
 * decoding (tiny-mtp-f32, --spec mtp:2). Two requests decode together;
 * request A's first sampled token has its layer-0 hash-routing row
 * corrupted (an expert id out of range, which the step detects as a device
 * fault after the run, poisoning the whole cohort). A must fail; B must
 * finish with exactly the text it produces when it runs alone (B is chosen
 * so that alone, on the corrupted model, it never feeds that token). */
#include <stdint.h>

#include "engine/session.h"
#include "model/model.h"
#include "serve/scheduler.h"
#include "test.h"
#include "text/tokenizer.h"

#define N_OUT 24

static dsv4_model *g_m;
static gen_model g_gm;
static int g_spec;

/* Runs the jobs on a fresh scheduler (all submitted before any is admitted
 * would be a race; they are submitted back to back, and B's longer output
 * keeps it decoding when A's first decode step comes). */
static void run_jobs(job **jobs, int n)
{
    static metrics met;
    cache *c = NULL;
    sched *s = NULL;
    metrics_init(&met);
    CHECK(cache_open(g_m, 64u << 20, NULL, &met, &c) == DSV4_OK);
    sched_config cfg = {g_m, &g_gm, 4, 16, 8, -1, -1, c, &met, g_spec};
    CHECK(sched_start(&cfg, &s) == DSV4_OK);
    for (int i = 0; i < n; i++) CHECK(sched_submit(s, jobs[i]) == 0);
    for (int i = 0; i < n; i++)
        while (!jobs[i]->done) job_wait(jobs[i], jobs[i]->n_out, 0, 1000);
    sched_stop(s);
    sched_free(s);
    cache_close(c);
    metrics_destroy(&met);
}

static job *greedy_job(const int32_t *prompt, int n, int max_tokens)
{
    sampling_params sp = sampling_default_params();
    sp.temperature = 0;
    return job_new(prompt, n, &sp, max_tokens, 0, 0, NULL, 0, NULL, 0);
}

/* Greedy first token after prompt, as the scheduler samples it. */
static int32_t first_token(const int32_t *prompt, int n)
{
    dsv4_session *s = NULL;
    int V = dsv4_model_vocab(g_m);
    float *lg = malloc((size_t)V * sizeof *lg);
    CHECK(dsv4_session_new(g_m, &s) == DSV4_OK && lg);
    CHECK(dsv4_session_eval_last(s, prompt, n, lg) == DSV4_OK);
    for (int k = 0; k < g_gm.n_masked; k++) lg[g_gm.masked[k]] = -INFINITY;
    int32_t best = 0;
    for (int v = 1; v < V; v++) if (lg[v] > lg[best]) best = v;
    free(lg);
    dsv4_session_free(s);
    return best;
}

static void fault_fails_only_its_lane(const char *what)
{
    static const int32_t pa[] = {3, 17, 42, 99, 7, 120, 64};
    int32_t pb[12];
    int32_t x = first_token(pa, 7);
    /* corrupt x's hash row in layer 0 (CPU backend: host memory) */
    int32_t *tab = (int32_t *)g_m->layers[0].tid2eid;
    int K = g_m->cfg.n_active;
    int32_t saved = tab[x * K];
    tab[x * K] = 99;
    /* B: a prompt without x whose run alone never feeds x (its drafts
     * included: it would fail) */
    job *alone = NULL;
    for (int seed = 1; seed < 40 && !alone; seed++) {
        int ok = 1;
        for (int i = 0; i < 12; i++) ok &= (pb[i] = (int32_t)((seed * 31 + i * 53) % 250 + 5)) != x;
        if (!ok) continue;
        alone = greedy_job(pb, 12, N_OUT);
        run_jobs(&alone, 1);
        if (alone->end == GEN_END_ERROR || alone->end == GEN_END_EOS || alone->n_sampled != N_OUT) {
            job_put(alone);
            alone = NULL;
        }
    }
    CHECKF(alone, "%s: no prompt for B avoids token %d", what, x);
    if (alone) {
        job *jobs[2] = {greedy_job(pb, 12, N_OUT), greedy_job(pa, 7, N_OUT)};
        run_jobs(jobs, 2);
        CHECKF(jobs[1]->end == GEN_END_ERROR && jobs[1]->error_status == 500, "%s: A ended %d (status %d)", what,
               jobs[1]->end, jobs[1]->error_status);
        CHECKF(strstr(jobs[1]->error, "layer 0") != NULL, "%s: A's error does not name the layer: %s", what,
               jobs[1]->error);
        CHECKF(jobs[0]->end == alone->end && jobs[0]->n_out == alone->n_out &&
               !memcmp(jobs[0]->out, alone->out, alone->n_out),
               "%s: B differs from B alone (end %d vs %d, %zu vs %zu bytes)", what, jobs[0]->end, alone->end,
               jobs[0]->n_out, alone->n_out);
        job_put(jobs[0]);
        job_put(jobs[1]);
        job_put(alone);
    }
    tab[x * K] = saved;
}

/* The model and generation facts of a fixture; -1 when it cannot load. */
static int setup(const char *fx, tok_t **tok, int32_t **masked)
{
    dsv4_load_options o = {0};
    o.n_threads = 1;
    o.device = "cpu";
    char path[256];
    snprintf(path, sizeof path, "%s/tokenizer.json", fx);
    int n_masked = 0;
    int bad = dsv4_model_load(fx, &o, &g_m) || tok_load(path, tok) ||
              gen_masked_ids(*tok, dsv4_model_vocab(g_m), masked, &n_masked);
    CHECKF(!bad, "%s: %s", fx, dsv4_last_error());
    if (bad) return -1;
    g_gm = (gen_model){*tok, dsv4_model_vocab(g_m), *masked, n_masked};
    return 0;
}

static void test_fault_fails_only_its_lane(void)
{
    static const struct { const char *fx; int spec; } cases[] = {{"tests/fixtures/tiny-chat", 0},
                                                                  {"tests/fixtures/tiny-mtp-f32", 2}};
    for (int c = 0; c < 2; c++) {
        tok_t *tok = NULL;
        int32_t *masked = NULL;
        if (!setup(cases[c].fx, &tok, &masked)) {
            g_spec = cases[c].spec;
            fault_fails_only_its_lane(cases[c].fx);
        }
        free(masked);
        tok_free(tok);
        dsv4_model_free(g_m);
        g_m = NULL;
    }
}

int main(void)
{
    RUN(test_fault_fails_only_its_lane);
    TEST_MAIN_END();
}

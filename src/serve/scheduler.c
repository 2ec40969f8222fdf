#include "serve/scheduler.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/clock.h"
#include "base/error.h"
#include "serve/force.h"
#include "serve/sched_internal.h"

double sched_now(void) { return clock_s(); }

/* ---- jobs ---- */

job *job_new(const int32_t *prompt, int n_prompt, const sampling_params *sp, int max_tokens, int logprobs,
             int top_logprobs, const int32_t *stop_ids, int n_stop_ids, char *const *stops, int n_stops)
{
    job *j = calloc(1, sizeof *j);
    if (!j) return NULL;
    pthread_mutex_init(&j->mu, NULL);
    pthread_cond_init(&j->cv, NULL);
    j->refs = 1;
    j->sp = *sp;
    j->max_tokens = max_tokens;
    j->logprobs = logprobs;
    j->top_logprobs = top_logprobs;
    j->prompt = malloc((size_t)n_prompt * sizeof *prompt);
    j->stop_ids = malloc(((size_t)n_stop_ids + 1) * sizeof *stop_ids);
    j->stops = calloc((size_t)n_stops + 1, sizeof *stops);
    j->cap_out = 256;
    j->out = malloc(j->cap_out);
    int ok = j->prompt && j->stop_ids && j->stops && j->out;
    for (int i = 0; ok && i < n_stops; i++, j->n_stops++) ok = (j->stops[i] = strdup(stops[i])) != NULL;
    if (!ok) { job_put(j); return NULL; }
    memcpy(j->prompt, prompt, (size_t)n_prompt * sizeof *prompt);
    j->n_prompt = n_prompt;
    if (n_stop_ids) memcpy(j->stop_ids, stop_ids, (size_t)n_stop_ids * sizeof *stop_ids);
    j->n_stop_ids = n_stop_ids;
    j->out[0] = 0;
    j->force_after = -1;
    j->t_submit = sched_now();
    return j;
}

void job_put(job *j)
{
    if (!j || __atomic_sub_fetch(&j->refs, 1, __ATOMIC_ACQ_REL)) return;
    for (int i = 0; i < j->n_stops; i++) free(j->stops[i]);
    free(j->stops);
    free(j->stop_ids);
    free(j->force);
    free(j->force_off);
    free(j->allow);
    free(j->allow_logit);
    free(j->wait_mask);
    free(j->wait_stops);
    free(j->prompt);
    free(j->out);
    free(j->lp);
    pthread_mutex_destroy(&j->mu);
    pthread_cond_destroy(&j->cv);
    free(j);
}

void job_cancel(job *j) { __atomic_store_n(&j->cancelled, 1, __ATOMIC_RELEASE); }

int job_cancelled(const job *j) { return __atomic_load_n(&j->cancelled, __ATOMIC_ACQUIRE); }

int job_wait(job *j, size_t n_out, int n_lp, int ms)
{
    struct timespec dl;
    clock_gettime(CLOCK_REALTIME, &dl);
    dl.tv_sec += ms / 1000;
    dl.tv_nsec += (long)(ms % 1000) * 1000000L;
    if (dl.tv_nsec >= 1000000000L) { dl.tv_sec++; dl.tv_nsec -= 1000000000L; }
    pthread_mutex_lock(&j->mu);
    int news;
    while (!(news = j->done || j->n_out > n_out || j->n_lp > n_lp))
        if (pthread_cond_timedwait(&j->cv, &j->mu, &dl) == ETIMEDOUT) break;
    news = j->done || j->n_out > n_out || j->n_lp > n_lp;
    pthread_mutex_unlock(&j->mu);
    return news;
}

int sched_submit(sched *s, job *j)
{
    pthread_mutex_lock(&s->mu);
    if (s->stop || s->n_queued >= s->cfg.max_queue) {
        pthread_mutex_unlock(&s->mu);
        return -1;
    }
    __atomic_add_fetch(&j->refs, 1, __ATOMIC_ACQ_REL);
    j->next = NULL;
    if (s->queue_tail) s->queue_tail->next = j;
    else s->queue = j;
    s->queue_tail = j;
    s->n_queued++;
    metrics_set(s->cfg.met, MET_QUEUE_DEPTH, s->n_queued);
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    return 0;
}

/* ---- publishing to the client side ---- */

/* Copies what the generation made visible since the last call; n_new
 * tokens were produced since, and lp (NULL: none) is the logprob entry of
 * the one that was sampled. */
void sched_publish(sched *s, job *j, int n_new, const gen_token *lp)
{
    gen_req *g = &j->g;
    pthread_mutex_lock(&j->mu);
    j->n_sampled += n_new;
    if (n_new) metrics_add(s->cfg.met, MET_GENERATED_TOKENS, (uint64_t)n_new);
    if (lp && j->logprobs) {
        if (j->n_lp == j->cap_lp) {
            int cap = j->cap_lp ? 2 * j->cap_lp : 32;
            gen_token *n = realloc(j->lp, (size_t)cap * sizeof *n);
            if (n) { j->lp = n; j->cap_lp = cap; }
        }
        if (j->n_lp < j->cap_lp) j->lp[j->n_lp++] = *lp;
    }
    if (g->visible > j->n_out) {
        size_t need = g->visible + 1;
        if (need > j->cap_out) {
            char *n = realloc(j->out, need * 2);
            if (n) { j->out = n; j->cap_out = need * 2; }
        }
        if (need <= j->cap_out) {
            memcpy(j->out + j->n_out, g->text + j->n_out, g->visible - j->n_out);
            j->n_out = g->visible;
            j->out[j->n_out] = 0;
        }
    }
    if (g->end) { /* done is set by retire(), once the state is stored */
        j->end = g->end;
        j->stop_index = g->stop_index;
    }
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

void sched_fail(job *j, int status, const char *msg)
{
    pthread_mutex_lock(&j->mu);
    snprintf(j->error, sizeof j->error, "%s", msg);
    j->error_status = status;
    j->end = GEN_END_ERROR;
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
}

/* The job leaves its lane: the session goes back to the cache (and is
 * stored, with a kv folder) before the client hears that the job is done,
 * so an answer a client has received survives a crash. */
static void retire(sched *s, int i, int state_ok)
{
    job *j = s->active[i];
    if (j->sl) cache_release(s->cfg.cache, j->sl, state_ok);
    j->sl = NULL;
    pthread_mutex_lock(&j->mu);
    j->done = 1;
    pthread_cond_broadcast(&j->cv);
    pthread_mutex_unlock(&j->mu);
    if (j->end == GEN_END_CANCEL) metrics_add(s->cfg.met, MET_CANCELLED, 1);
    spec_retire(j);
    gen_free(&j->g);
    s->active[i] = s->active[--s->n_active];
    metrics_set(s->cfg.met, MET_ACTIVE, s->n_active);
    job_put(j);
}

/* ---- the rounds ---- */

static void admit(sched *s, job *j)
{
    gen_params p = {j->sp, j->max_tokens, j->stop_ids, j->n_stop_ids, (const char *const *)j->stops, j->n_stops,
                    j->logprobs ? j->top_logprobs : 0, NULL};
    if (gen_init(&j->g, s->cfg.gm, &p)) {
        sched_fail(j, 400, dsv4_last_error());
        return;
    }
    int reused;
    if (cache_acquire(s->cfg.cache, j->prompt, j->n_prompt, &j->sl, &reused)) {
        sched_fail(j, 503, dsv4_last_error());
        return;
    }
    j->cursor = reused;
    if (s->cfg.spec_k && spec_admit(s, j)) return;
    j->t_last = sched_now();
    if (j->g.end) sched_publish(s, j, 0, NULL); /* max_tokens 0: nothing to run */
    metrics_add(s->cfg.met, MET_PROMPT_TOKENS, (uint64_t)j->n_prompt);
    pthread_mutex_lock(&j->mu);
    j->n_cached = reused;
    j->admitted = 1;
    pthread_mutex_unlock(&j->mu);
}

/* Turn boundaries past `from`: after an end-of-sentence token (the end of
 * an assistant turn), and the position of the last assistant token (the
 * state just before the generation prompt). Returns the first one, or n. */
static int next_boundary(const sched *s, const job *j, int from)
{
    int last_asst = -1;
    for (int p = j->n_prompt - 1; p >= 0 && s->cfg.assistant_id >= 0; p--)
        if (j->prompt[p] == s->cfg.assistant_id) { last_asst = p; break; }
    for (int b = from + 1; b < j->n_prompt; b++)
        if ((s->cfg.eos_id >= 0 && j->prompt[b - 1] == s->cfg.eos_id) || b == last_asst) return b;
    return j->n_prompt;
}

static int is_boundary(const sched *s, const job *j, int b)
{
    return b > 0 && b < j->n_prompt && next_boundary(s, j, b - 1) == b;
}

void sched_tpot(sched *s, job *j, int n_tokens, double now)
{
    for (int i = 0; i < n_tokens; i++) metrics_tpot(s->cfg.met, (now - j->t_last) / n_tokens);
    j->t_last = now;
}

void sched_mask_stops(const job *j, float *logits)
{
    for (int i = 0; i < j->n_stop_ids; i++) logits[j->stop_ids[i]] = -INFINITY;
}

/* The job's next tokens, from logits (the row after everything its session
 * holds): the tokens the forced opening determines, or else one sampled
 * (among those it allows, or never a stop token while it is still to come)
 * and what the opening then determines. They wait in ids[n_fed..n_ids) for
 * the next step to feed them. Returns 0, or -1 when the job failed. */
static int advance(sched *s, job *j, float *logits)
{
    gen_token t;
    int n_allow, sampled = 0, n = force_take(j, &n_allow);
    if (!n && !j->g.end) {
        if (n_allow) force_allow_only(j, logits, s->vocab, n_allow);
        else if (force_waiting(j)) sched_mask_stops(j, logits);
        int before = j->g.n_ids;
        gen_step(&j->g, logits, &t);
        if (j->g.end == GEN_END_ERROR) { sched_fail(j, 500, dsv4_last_error()); return -1; }
        sampled = j->g.n_ids > before;
        n = 1 + force_take(j, &n_allow);
    }
    sched_publish(s, j, n, sampled ? &t : NULL);
    return 0;
}

/* One prefill chunk of the oldest job that still has prompt to read. */
static void prefill_round(sched *s)
{
    for (int i = 0; i < s->n_active; i++) {
        job *j = s->active[i];
        if (j->end || !j->sl || j->cursor >= j->n_prompt) continue;
        int end = next_boundary(s, j, j->cursor);
        if (end - j->cursor > s->cfg.prefill_chunk) end = j->cursor + s->cfg.prefill_chunk;
        int n = end - j->cursor, last = end == j->n_prompt;
        const int32_t *t = j->prompt + j->cursor;
        if (s->cfg.spec_k) {
            if (spec_prefill_chunk(s, j, t, n, last)) return;
        } else if (dsv4_session_eval_last(j->sl->s, t, n, last ? s->logits : NULL) || cache_held_add(j->sl, t, n)) {
            sched_fail(j, 500, dsv4_last_error());
            return;
        } else if (last && advance(s, j, s->logits)) {
            return;
        }
        j->cursor = end;
        if (is_boundary(s, j, end)) cache_mark(s->cfg.cache, j->sl); /* a missing mark only costs reuse */
        if (last) {
            double now = sched_now();
            metrics_ttft(s->cfg.met, now - j->t_submit);
            j->t_last = now;
        }
        return;
    }
}

int sched_gate_fn(void *user, int n_lanes, double elapsed_ms)
{
    (void)n_lanes;
    (void)elapsed_ms;
    const sched_gate *g = user;
    for (int i = 0; i < g->n; i++)
        if (job_cancelled(g->jobs[i])) return 1;
    return 0;
}

int sched_rebuild(job *j)
{
    cache_slot *sl = j->sl;
    dsv4_session_reset(sl->s);
    if (sl->n_held && dsv4_session_eval(sl->s, sl->held, sl->n_held, NULL)) {
        sched_fail(j, 500, dsv4_last_error());
        return -1;
    }
    return 0;
}

/* A cohort step failed: each lane's session is rebuilt and stepped alone,
 * so only a lane that fails by itself fails its request, and the others get
 * exactly the logits the cohort step would have given them (their rows of
 * s->logits). stepped[i] says which lanes advanced; a lane whose client
 * left meanwhile (veto) just does not advance. */
static void isolate(sched *s, job **lanes, dsv4_lane *ln, int n, int *stepped)
{
    for (int i = 0; i < n; i++) {
        if (sched_rebuild(lanes[i])) continue;
        sched_gate gc = {&lanes[i], 1};
        dsv4_gate gate = {sched_gate_fn, &gc, 0};
        dsv4_status st = dsv4_step(s->cfg.model, &ln[i], 1, &gate);
        if (st == DSV4_ERR_VETO) continue;
        if (st) { sched_fail(lanes[i], 500, dsv4_last_error()); continue; }
        stepped[i] = 1;
        metrics_add(s->cfg.met, MET_STEPS, 1);
        metrics_batch(s->cfg.met, 1);
    }
}

/* One step over every job that has tokens to feed: its last sampled token,
 * or a forced opening (several tokens, one lane all the same). */
static void decode_round(sched *s)
{
    job *lanes[DSV4_MAX_LANES];
    dsv4_lane ln[DSV4_MAX_LANES];
    int n = 0;
    size_t V = (size_t)s->vocab;
    for (int i = 0; i < s->n_active; i++) {
        job *j = s->active[i];
        if (j->end || !j->sl || j->cursor < j->n_prompt) continue;
        int feed = j->g.n_ids - j->g.n_fed;
        if (dsv4_session_pos(j->sl->s) + feed > s->max_pos) {
            gen_finish(&j->g, GEN_END_CONTEXT);
            sched_publish(s, j, 0, NULL);
            continue;
        }
        lanes[n] = j;
        ln[n] = (dsv4_lane){.session = j->sl->s, .tokens = j->g.ids + j->g.n_fed, .n_tokens = feed,
                            .logits_mode = DSV4_LOGITS_LAST, .logits = s->logits + (size_t)n * V};
        n++;
    }
    if (!n) return;
    sched_gate gc = {lanes, n};
    dsv4_gate gate = {sched_gate_fn, &gc, 0}; /* logits are always checked for finiteness */
    dsv4_status st = dsv4_step(s->cfg.model, ln, n, &gate);
    if (st == DSV4_ERR_VETO) {
        metrics_add(s->cfg.met, MET_VETOES, 1); /* the cancelled lanes leave; the rest go again */
        return;
    }
    int stepped[DSV4_MAX_LANES];
    for (int i = 0; i < n; i++) stepped[i] = !st;
    if (st) {
        if (n == 1) { sched_fail(lanes[0], 500, dsv4_last_error()); return; }
        isolate(s, lanes, ln, n, stepped);
    } else {
        metrics_add(s->cfg.met, MET_STEPS, 1);
        metrics_batch(s->cfg.met, n);
    }
    double now = sched_now();
    for (int i = 0; i < n; i++) {
        job *j = lanes[i];
        if (!stepped[i]) continue;
        if (cache_held_add(j->sl, ln[i].tokens, ln[i].n_tokens)) {
            sched_fail(j, 500, "out of memory");
            continue;
        }
        j->g.n_fed += ln[i].n_tokens;
        int before = j->n_sampled;
        if (!advance(s, j, s->logits + (size_t)i * V)) sched_tpot(s, j, j->n_sampled - before, now);
    }
}

static void *run(void *arg)
{
    sched *s = arg;
    for (;;) {
        pthread_mutex_lock(&s->mu);
        while (!s->stop && !s->n_active && !s->queue) pthread_cond_wait(&s->cv, &s->mu);
        int stop = s->stop;
        job *fresh[DSV4_MAX_LANES];
        int n_fresh = 0;
        while (!stop && s->queue && s->n_active < s->cfg.max_lanes) {
            job *j = s->queue;
            s->queue = j->next;
            if (!s->queue) s->queue_tail = NULL;
            s->n_queued--;
            s->active[s->n_active++] = fresh[n_fresh++] = j;
        }
        metrics_set(s->cfg.met, MET_QUEUE_DEPTH, s->n_queued);
        metrics_set(s->cfg.met, MET_ACTIVE, s->n_active);
        pthread_mutex_unlock(&s->mu);
        if (stop) break;
        for (int i = 0; i < n_fresh; i++) admit(s, fresh[i]);
        /* Cancelled lanes end before the step (and if a client leaves
         * during it, the gate vetoes it and they end here next round). */
        for (int i = 0; i < s->n_active; i++) {
            job *j = s->active[i];
            if (!j->end && job_cancelled(j)) {
                gen_finish(&j->g, GEN_END_CANCEL);
                sched_publish(s, j, 0, NULL);
            }
        }
        prefill_round(s);
        if (s->cfg.spec_k) spec_round(s);
        else decode_round(s);
        for (int i = s->n_active - 1; i >= 0; i--) {
            job *j = s->active[i];
            if (j->end) retire(s, i, j->end != GEN_END_ERROR);
        }
    }
    /* Shutting down: everything left ends as cancelled. */
    for (int i = s->n_active - 1; i >= 0; i--) {
        job *j = s->active[i];
        if (!j->end) {
            gen_finish(&j->g, GEN_END_CANCEL);
            sched_publish(s, j, 0, NULL);
        }
        retire(s, i, 1);
    }
    return NULL;
}

dsv4_status sched_start(const sched_config *cfg, sched **out)
{
    *out = NULL;
    sched *s = calloc(1, sizeof *s);
    if (!s) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    s->cfg = *cfg;
    int most = s->cfg.spec_k ? DSV4_MAX_LANES / 2 : DSV4_MAX_LANES; /* a spec lane is two lanes of a step */
    if (s->cfg.max_lanes < 1 || s->cfg.max_lanes > most) s->cfg.max_lanes = most;
    if (s->cfg.prefill_chunk < 1) s->cfg.prefill_chunk = 256;
    s->vocab = dsv4_model_vocab(cfg->model);
    s->max_pos = dsv4_model_max_positions(cfg->model);
    s->logits = malloc((size_t)DSV4_MAX_LANES * (size_t)s->vocab * sizeof *s->logits);
    if (!s->logits) { free(s); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's logits"); }
    pthread_mutex_init(&s->mu, NULL);
    pthread_cond_init(&s->cv, NULL);
    if (pthread_create(&s->thread, NULL, run, s)) {
        free(s->logits);
        free(s);
        return dsv4_fail(DSV4_ERR_NOMEM, "cannot start the scheduler thread");
    }
    *out = s;
    return DSV4_OK;
}

void sched_stop(sched *s)
{
    if (!s) return;
    pthread_mutex_lock(&s->mu);
    int running = !s->stop;
    s->stop = 1;
    pthread_cond_signal(&s->cv);
    pthread_mutex_unlock(&s->mu);
    if (running) pthread_join(s->thread, NULL);
    pthread_mutex_lock(&s->mu);
    job *q = s->queue;
    s->queue = s->queue_tail = NULL;
    s->n_queued = 0;
    pthread_mutex_unlock(&s->mu);
    for (job *j = q, *n; j; j = n) {
        n = j->next;
        pthread_mutex_lock(&j->mu);
        j->end = GEN_END_CANCEL;
        j->done = 1;
        pthread_cond_broadcast(&j->cv);
        pthread_mutex_unlock(&j->mu);
        job_put(j);
    }
}

void sched_free(sched *s)
{
    if (!s) return;
    sched_stop(s);
    pthread_mutex_destroy(&s->mu);
    pthread_cond_destroy(&s->cv);
    free(s->logits);
    free(s);
}

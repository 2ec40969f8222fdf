/* The scheduler's --spec path: every job's session is fed by its spec lane
 * (engine/spec.h), which samples with the job's own sampler, so a job's
 * output is the lane's: greedy, exactly plain greedy decoding's; sampled,
 * the same distribution. The session's held tokens (cache.h) follow what
 * the lane made it consume: the prompt, then everything the lane produced
 * or was given but its unconsumed token (job.lane_next). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "serve/force.h"
#include "serve/sched_internal.h"

/* What the lane may not produce and where a step's output ends: while the
 * forced opening waits for the end of the reasoning, never a stop token,
 * and the output ends at the reasoning's end (the opening follows it). */
static void lane_limits(sched *s, job *j)
{
    spec_lane *l = &j->lane;
    int wait = force_waiting(j);
    l->mask = wait ? j->wait_mask : s->cfg.gm->masked;
    l->n_mask = wait ? j->n_wait_mask : s->cfg.gm->n_masked;
    l->stop_ids = wait ? j->wait_stops : j->stop_ids;
    l->n_stop = wait ? j->n_wait_stops : j->n_stop_ids;
}

int spec_admit(sched *s, job *j)
{
    j->lane_next = -1;
    if (spec_lane_init(&j->lane, j->sl->s, s->cfg.spec_k, j->g.smp)) {
        sched_fail(j, 500, dsv4_last_error());
        return -1;
    }
    if (j->n_force) {
        const gen_model *gm = s->cfg.gm;
        j->wait_mask = malloc(((size_t)gm->n_masked + (size_t)j->n_stop_ids + 1) * sizeof *j->wait_mask);
        j->wait_stops = malloc(((size_t)j->n_stop_ids + 1) * sizeof *j->wait_stops);
        if (!j->wait_mask || !j->wait_stops) {
            sched_fail(j, 503, "out of memory");
            return -1;
        }
        memcpy(j->wait_mask, gm->masked, (size_t)gm->n_masked * sizeof *j->wait_mask);
        memcpy(j->wait_mask + gm->n_masked, j->stop_ids, (size_t)j->n_stop_ids * sizeof *j->wait_mask);
        j->n_wait_mask = gm->n_masked + j->n_stop_ids;
        memcpy(j->wait_stops, j->stop_ids, (size_t)j->n_stop_ids * sizeof *j->wait_stops);
        j->n_wait_stops = j->n_stop_ids;
        if (j->force_after >= 0) j->wait_stops[j->n_wait_stops++] = j->force_after;
    }
    lane_limits(s, j);
    return 0;
}

void spec_retire(job *j) { spec_lane_free(&j->lane); }

/* Output token i of the lane's last call joins the reply, with the logprob
 * entry plain decoding gives it (the same logits row, masked alike: a row
 * is the same whatever else the step held). */
static int take_out(sched *s, job *j, int i)
{
    gen_req *g = &j->g;
    gen_token t;
    if (j->logprobs) {
        memcpy(s->logits, spec_out_logits(&j->lane, i), (size_t)s->vocab * sizeof *s->logits);
        if (force_waiting(j)) sched_mask_stops(j, s->logits);
        gen_score(g, s->logits, j->lane.out[i], &t);
    }
    int before = g->n_ids;
    gen_take(g, j->lane.out[i]);
    if (g->end == GEN_END_ERROR) {
        sched_fail(j, 500, dsv4_last_error());
        return -1;
    }
    sched_publish(s, j, 1, j->logprobs && g->n_ids > before ? &t : NULL);
    return 0;
}

/* The session consumed the lane's unconsumed token and t[0..n). */
static int held_add(job *j, const int32_t *t, int n)
{
    if (j->lane_next >= 0 && cache_held_add(j->sl, &j->lane_next, 1)) return -1;
    return n ? (int)cache_held_add(j->sl, t, n) : 0;
}

/* The lane's new tokens join the reply; then, while the forced opening has
 * tokens the lane has not fed or leaves the model a choice, the lane feeds
 * them (a step of its own) and picks the next token. */
static int take_lane(sched *s, job *j)
{
    spec_lane *l = &j->lane;
    gen_req *g = &j->g;
    for (int i = 0; i < l->n_out && !g->end; i++)
        if (take_out(s, j, i)) return -1;
    for (;;) {
        int n_allow, n = force_take(j, &n_allow);
        if (n) sched_publish(s, j, n, NULL);
        if (g->end || (!n && !n_allow)) break;
        lane_limits(s, j);
        const int32_t *fed = g->ids + g->n_ids - n;
        if (spec_force(l, fed, n, n_allow ? j->allow : NULL, n_allow) || held_add(j, fed, n)) {
            sched_fail(j, 500, dsv4_last_error());
            return -1;
        }
        j->lane_next = l->out[0];
        if (take_out(s, j, 0)) return -1;
    }
    lane_limits(s, j);
    return 0;
}

int spec_prefill_chunk(sched *s, job *j, const int32_t *t, int n, int last)
{
    /* a forced opening due at once comes before anything is sampled */
    int sample = last && !(j->n_force && j->force_after < 0);
    if ((sample ? spec_feed(&j->lane, t, n) : spec_prefill(&j->lane, t, n)) || cache_held_add(j->sl, t, n)) {
        sched_fail(j, 500, dsv4_last_error());
        return -1;
    }
    if (!last) return 0;
    j->lane_next = sample ? j->lane.out[0] : -1;
    return take_lane(s, j);
}

/* The lanes' results after a step that committed. */
static void step_done(sched *s, job *j, double now)
{
    spec_lane *l = &j->lane;
    if (held_add(j, l->out, l->n_out - 1)) {
        sched_fail(j, 500, "out of memory");
        return;
    }
    j->lane_next = l->out[l->n_out - 1];
    metrics_add(s->cfg.met, MET_SPEC_DRAFTED, (uint64_t)(l->n_drafted - j->lane_drafted));
    metrics_add(s->cfg.met, MET_SPEC_ACCEPTED, (uint64_t)(l->n_kept - j->lane_kept));
    j->lane_drafted = l->n_drafted;
    j->lane_kept = l->n_kept;
    int before = j->n_sampled;
    if (!take_lane(s, j)) sched_tpot(s, j, j->n_sampled - before, now);
}

void spec_round(sched *s)
{
    job *jobs[DSV4_MAX_LANES / 2];
    spec_lane *lanes[DSV4_MAX_LANES / 2];
    int n = 0;
    for (int i = 0; i < s->n_active && n < DSV4_MAX_LANES / 2; i++) {
        job *j = s->active[i];
        if (j->end || !j->sl || j->cursor < j->n_prompt) continue;
        int64_t room = s->max_pos - dsv4_session_pos(j->sl->s);
        if (room < 1) {
            gen_finish(&j->g, GEN_END_CONTEXT);
            sched_publish(s, j, 0, NULL);
            continue;
        }
        int left = j->g.max_tokens - j->g.n_ids; /* >= 1 while it runs */
        j->lane.budget = room < left ? (int)room : left;
        jobs[n] = j;
        lanes[n++] = &j->lane;
    }
    if (!n) return;
    sched_gate gc = {jobs, n};
    dsv4_gate gate = {sched_gate_fn, &gc, 0};
    dsv4_status st = spec_step(s->cfg.model, lanes, n, &gate);
    if (st == DSV4_ERR_VETO) { /* nothing moved, not even a sampler: the rest go again */
        metrics_add(s->cfg.met, MET_VETOES, 1);
        return;
    }
    if (st && n == 1) { sched_fail(jobs[0], 500, dsv4_last_error()); return; }
    int stepped[DSV4_MAX_LANES / 2];
    for (int i = 0; i < n; i++) {
        stepped[i] = !st;
        if (!st) continue;
        /* the cohort failed: each lane rebuilt and stepped alone (scheduler.c's isolate) */
        if (sched_rebuild(jobs[i])) continue;
        sched_gate one = {&jobs[i], 1};
        dsv4_gate g1 = {sched_gate_fn, &one, 0};
        dsv4_status st1 = spec_step(s->cfg.model, &lanes[i], 1, &g1);
        if (st1 && st1 != DSV4_ERR_VETO) sched_fail(jobs[i], 500, dsv4_last_error());
        if ((stepped[i] = !st1)) {
            metrics_add(s->cfg.met, MET_STEPS, 1);
            metrics_batch(s->cfg.met, 1);
        }
    }
    if (!st) {
        metrics_add(s->cfg.met, MET_STEPS, 1);
        metrics_batch(s->cfg.met, n);
    }
    double now = sched_now();
    for (int i = 0; i < n; i++)
        if (stepped[i]) step_done(s, jobs[i], now);
}

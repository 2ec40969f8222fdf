/* One decode step for several sessions as a transaction:
 *   plan     (pure) which ring slot, compressor slot and entry each lane writes;
 *            which lanes close a CSA window (their series-A rows get replaced)
 *   prepare  everything fallible that touches no live state: capacity,
 *            an undo copy of the series-A rows that the step will replace
 *   run      the forward step over all lanes (one weight read for all)
 *   validate device faults (named by lane and layer), non-finite logits (lane, position)
 *   gate     the deadline and the caller's callback may veto
 *   publish  pos += 1 per lane: stores that cannot fail
 *
 * A single-token step writes only dead state (the ring slot of the position
 * that just left the window, the open-window row of a finished window, the
 * entry past the published count) plus the series-A rows, which the undo copy
 * restores. So a veto, a failure before the run or an op that ran out of
 * memory leaves every lane exactly as it was; a fault detected after the run
 * poisons every lane of the step, because a faulting kernel may have written
 * anything. */
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "base/error.h"
#include "engine/forward.h"

static double now_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return 1e3 * (double)ts.tv_sec + 1e-6 * (double)ts.tv_nsec;
}

/* Saved series-A rows of one compressor (rows × width floats, u then g). */
typedef struct {
    float *dst_u, *dst_g;
    void *saved;
    size_t bytes; /* of each of u and g */
} undo_rec;

typedef struct {
    undo_rec *r;
    int n, cap;
} undo_log;

static dsv4_status undo_save(dsv4_backend *b, undo_log *u, dsv4_comp_state *cs, int ratio, int width)
{
    if (u->n == u->cap) {
        int cap = u->cap ? 2 * u->cap : 16;
        undo_rec *g = realloc(u->r, (size_t)cap * sizeof *g);
        if (!g) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's undo log");
        u->r = g;
        u->cap = cap;
    }
    undo_rec *r = &u->r[u->n];
    r->bytes = (size_t)ratio * (size_t)width * sizeof(float);
    if (!(r->saved = b->ops->alloc(b, 2 * r->bytes)))
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's undo log");
    r->dst_u = cs->prev_u;
    r->dst_g = cs->prev_g;
    b->ops->copy(b, r->saved, cs->prev_u, r->bytes);
    b->ops->copy(b, (char *)r->saved + r->bytes, cs->prev_g, r->bytes);
    u->n++;
    return DSV4_OK;
}

static void undo_apply(dsv4_backend *b, undo_log *u)
{
    for (int i = 0; i < u->n; i++) {
        b->ops->copy(b, u->r[i].dst_u, u->r[i].saved, u->r[i].bytes);
        b->ops->copy(b, u->r[i].dst_g, (char *)u->r[i].saved + u->r[i].bytes, u->r[i].bytes);
    }
}

static void undo_free(dsv4_backend *b, undo_log *u)
{
    for (int i = 0; i < u->n; i++) b->ops->free(b, u->r[i].saved);
    free(u->r);
}

/* The plan of a one-token step at position pos, per layer (pure: position
 * and config only). It writes the ring row of position pos - window (already
 * outside the window), the open-window row pos % ratio (it held a closed
 * window's row), and, when pos closes window w = pos / ratio, entry w (past
 * the published count, becoming visible with the new pos) — all dead state.
 * The one live overwrite: closing a CSA window replaces the series-A rows,
 * which the undo log saves first. */
static int replaces_series_a(const dsv4_config *c, int l, int64_t pos)
{
    int r = config_ratio(c, l);
    return c->attn_kind[l] == ATTN_CSA && pos % r == r - 1;
}

static dsv4_status check_lanes(dsv4_model *m, dsv4_session *const *ss, const int32_t *tok, int n)
{
    if (!m || !ss || !tok || n < 1 || n > DSV4_MAX_LANES)
        return dsv4_fail(DSV4_ERR_ARG, "decode_batch: need 1..%d lanes, got %d", DSV4_MAX_LANES, n);
    for (int i = 0; i < n; i++) {
        if (!ss[i] || ss[i]->m != m) return dsv4_fail(DSV4_ERR_ARG, "decode_batch: lane %d has no session of this model", i);
        if (ss[i]->poisoned)
            return dsv4_fail(DSV4_ERR_POISONED, "decode_batch: lane %d: session is poisoned; reset or restore it", i);
        if (ss[i]->pos >= m->cfg.max_pos)
            return dsv4_fail(DSV4_ERR_ARG, "decode_batch: lane %d: the session holds %lld tokens, the whole context "
                             "(max_position_embeddings)", i, (long long)ss[i]->pos);
        if (tok[i] < 0 || tok[i] >= m->cfg.vocab)
            return dsv4_fail(DSV4_ERR_ARG, "decode_batch: lane %d: token id %d is outside the vocabulary (0..%d)", i,
                             tok[i], m->cfg.vocab - 1);
        for (int j = 0; j < i; j++)
            if (ss[j] == ss[i]) return dsv4_fail(DSV4_ERR_ARG, "decode_batch: lanes %d and %d are the same session", j, i);
    }
    return DSV4_OK;
}

dsv4_status dsv4_decode_batch(dsv4_model *m, dsv4_session *const *sessions, const int32_t *tokens, int n_lanes,
                              float *logits, const dsv4_gate *gate)
{
    dsv4_status st = check_lanes(m, sessions, tokens, n_lanes);
    if (st) return st;
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    double t0 = now_ms();

    /* plan + prepare: capacity for one more entry, undo copies of the
     * series-A rows of every CSA compressor whose window this token closes */
    undo_log undo = {0};
    fwd_lane lanes[DSV4_MAX_LANES];
    fwd_scratch *sc = NULL;
    st = forward_scratch_new(m, n_lanes, n_lanes, &sc);
    for (int i = 0; i < n_lanes && !st; i++) {
        dsv4_session *s = sessions[i];
        lanes[i] = (fwd_lane){s, 1, i};
        st = session_reserve(s, s->pos + 1);
        for (int l = 0; l < c->n_layers && !st; l++) {
            if (!replaces_series_a(c, l, s->pos)) continue;
            int r = config_ratio(c, l);
            st = undo_save(b, &undo, &s->L[l].comp, r, c->head_dim);
            if (!st) st = undo_save(b, &undo, &s->L[l].idx, r, c->idx_head_dim);
        }
    }
    if (!st) st = b->ops->sync(b);
    if (st) { /* nothing live was touched */
        backend_clear_error(b);
        undo_free(b, &undo);
        forward_scratch_free(m, sc);
        return st;
    }

    /* run + validate */
    st = forward_step(m, sc, lanes, n_lanes, tokens, n_lanes, logits, 0);
    forward_scratch_free(m, sc);
    if (st == DSV4_ERR_NOMEM) {
        /* An op that could not allocate did not run, and the ops after it
         * wrote only what every step writes: dead state and the series-A
         * rows, which the undo log restores. So, as for a veto, the lanes
         * stay as they were. */
        undo_apply(b, &undo);
        dsv4_status rb = b->ops->sync(b); /* sets no message when it succeeds */
        undo_free(b, &undo);
        if (!rb) return dsv4_fail(st, "%s; no lane advanced", dsv4_last_error());
        backend_clear_error(b);
        for (int i = 0; i < n_lanes; i++) sessions[i]->poisoned = 1;
        return dsv4_fail_prefix(rb, "step failed, all its lanes poisoned: ");
    }
    if (st) {
        for (int i = 0; i < n_lanes; i++) sessions[i]->poisoned = 1;
        undo_free(b, &undo);
        return dsv4_fail_prefix(st, "step failed, all its lanes poisoned: ");
    }

    /* gate */
    double elapsed = now_ms() - t0;
    const char *veto = NULL;
    if (gate && gate->deadline_ms > 0 && elapsed > gate->deadline_ms) veto = "step deadline passed";
    else if (gate && gate->fn && gate->fn(gate->user, n_lanes, elapsed)) veto = "gate vetoed the step";
    if (veto) {
        undo_apply(b, &undo);
        st = b->ops->sync(b);
        if (st) { /* could not roll back: the lanes are unreliable */
            backend_clear_error(b);
            for (int i = 0; i < n_lanes; i++) sessions[i]->poisoned = 1;
        } else {
            st = dsv4_fail(DSV4_ERR_VETO, "%s after %.1f ms; no lane advanced", veto, elapsed);
        }
        undo_free(b, &undo);
        return st;
    }

    /* publish */
    for (int i = 0; i < n_lanes; i++) sessions[i]->pos++;
    undo_free(b, &undo);
    return DSV4_OK;
}

int dsv4_session_poisoned(const dsv4_session *s) { return s->poisoned; }

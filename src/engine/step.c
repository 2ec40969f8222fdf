/* The general step: any set of lanes (distinct sessions), each feeding
 * T >= 1 tokens, as one transaction:
 *   plan     (pure: positions and config) the live state the step overwrites
 *   prepare  everything fallible that touches no live state: capacity,
 *            scratch, an undo copy of that live state, the rows' log of lanes
 *            that may publish fewer tokens than they fed
 *   run      the forward over all rows of all lanes (one weight read for all;
 *            steps over the model's step_rows rows run as several forwards
 *            in order: the result is the same for every split, the bound
 *            only limits activation memory)
 *   validate device faults (named by lane and layer), non-finite logits
 *            (named by lane and position: the forward checks every row it
 *            returns)
 *   gate     the deadline and the caller's callback may veto: undo, no lane moves
 *   accept   each lane's callback says how many tokens to publish; a lane that
 *            keeps j < T gets its undo copy back and its first j rows replayed
 *   publish  pos += j per lane, and the MTP's owed rows (session.h, host
 *            memory reserved in prepare): stores that cannot fail
 *
 * What a step at pos0 of T tokens overwrites (spec §6.1, §6.4):
 *   ring slot p % window for each fed position p: it held position
 *     p − window, live iff p − window > pos0 − window (so p > pos0) and >= 0
 *     (a DSpark stage keeps one row more live: p >= pos0)
 *   open compressor row p % ratio: it held a row of the open window of pos0
 *     iff it is one of its pos0 % ratio rows, which happens once the step
 *     crosses into the next window
 *   series-A rows (CSA): replaced at each window the step closes
 *   entries: only at indices >= pos0 / ratio, past the published count: dead
 * Only live bytes are copied, so a one-token step copies just the series-A
 * rows of the CSA layers whose window it closes.
 *
 * A drafter lane (dsv4_lane.mtp_in) is the same over the session's drafter
 * layers at mtp_pos (the MTP layer, or the DSpark stages' context rings),
 * run by the drafter's forward after the model's lanes (so a DSpark context
 * lane may read the features a model lane of the same step returns).
 *
 * Publishing j < T tokens restores the undo copy and replays the state writes
 * of the first j rows from the log (forward_replay): the same ops on the same
 * rows as feeding only those tokens, whatever T was. A fault detected after
 * the run, or while rolling back, poisons every lane of the step: a faulting
 * kernel may have written anything. An op that ran out of memory is the
 * exception: it did not run, and the ops after it wrote only what the plan
 * undo-copies or dead state, so the step rolls back as for a veto. */
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "base/error.h"
#include "base/size.h"
#include "engine/forward.h"

/* A live region the step overwrites, and where its undo copy sits. */
typedef struct {
    void *dst;
    size_t bytes, off; /* off: in the undo block */
} region;

typedef struct {
    region *r;
    int n, cap;
    size_t bytes;
} region_list;

static int region_add(region_list *l, void *dst, size_t bytes)
{
    if (!bytes) return 1;
    if (l->n == l->cap) {
        int cap = l->cap ? 2 * l->cap : 64;
        region *g = realloc(l->r, (size_t)cap * sizeof *g);
        if (!g) return 0;
        l->r = g;
        l->cap = cap;
    }
    l->r[l->n++] = (region){dst, bytes, l->bytes};
    l->bytes += (bytes + 255) & ~(size_t)255;
    return 1;
}

/* Live compressor state that T tokens at pos0 overwrite: the open rows
 * [0, n) of the window of pos0 that the next window's rows land on, and the
 * series-A rows when a window closes while they are live (pos0 >= ratio). */
static int plan_comp(region_list *l, dsv4_comp_state *cs, int64_t pos0, int T, int ratio, int width, int overlap)
{
    size_t f = sizeof(float), cw = (size_t)width * (overlap ? 2 : 1);
    int64_t next = (pos0 / ratio + 1) * ratio, n = pos0 + T - next;
    if (n > pos0 % ratio) n = pos0 % ratio;
    int ok = 1;
    if (n > 0) {
        ok = region_add(l, cs->open_u, (size_t)n * cw * f) && region_add(l, cs->open_g, (size_t)n * cw * f);
    }
    if (ok && overlap && pos0 >= ratio && pos0 + T >= next)
        ok = region_add(l, cs->prev_u, (size_t)ratio * (size_t)width * f) &&
             region_add(l, cs->prev_g, (size_t)ratio * (size_t)width * f);
    return ok;
}

/* A lane's state: the main layers at pos, or the drafter's layers at mtp_pos. */
static int64_t lane_pos(const dsv4_lane *l) { return l->mtp_in ? l->session->mtp_pos : l->session->pos; }
static int lane_l0(const dsv4_model *m, const dsv4_lane *l) { return l->mtp_in ? m->cfg.n_layers : 0; }
static int lane_l1(const dsv4_model *m, const dsv4_lane *l) { return m->cfg.n_layers + (l->mtp_in ? m->n_draft : 0); }

/* The plan of one lane (pure: its position, T and the config). */
static int plan_lane(region_list *l, const dsv4_model *m, const dsv4_lane *ln)
{
    const dsv4_config *c = &m->cfg;
    dsv4_session *s = ln->session;
    int T = ln->n_tokens;
    int64_t pos0 = lane_pos(ln), W = c->window, end = pos0 + T;
    size_t row = (size_t)m->layout.kv.bytes;
    for (int k = lane_l0(m, ln); k < lane_l1(m, ln); k++) {
        dsv4_layer_state *ls = &s->L[k];
        /* ring: positions [first, end) overwrite live slots (position p
         * overwrites p - W, live among the last session_ring_live rows);
         * consecutive positions are consecutive slots, wrapping at most once */
        int64_t first = pos0 + W - session_ring_live(m, k);
        if (end - W > first) first = end - W;
        if (W > first) first = W;
        if (first < end) {
            int64_t s0 = first % W, n = end - first, n1 = n < W - s0 ? n : W - s0;
            if (!region_add(l, ls->ring + s0 * row, (size_t)n1 * row) ||
                !region_add(l, ls->ring, (size_t)(n - n1) * row))
                return 0;
        }
        int kind = config_kind(c, k), r = config_ratio(c, k);
        if (kind != ATTN_SWA && !plan_comp(l, &ls->comp, pos0, T, r, c->head_dim, kind == ATTN_CSA)) return 0;
        if (kind == ATTN_CSA && !plan_comp(l, &ls->idx, pos0, T, r, c->idx_head_dim, 1)) return 0;
    }
    return 1;
}

/* Everything one step owns besides the sessions. */
typedef struct {
    region_list undo;
    int first[DSV4_MAX_LANES + 1]; /* lane i's regions: undo.r[first[i] .. first[i+1]) */
    void *block;                    /* undo copies */
    void *logs;                     /* the logged lanes' logs, lane by lane */
    fwd_log log[DSV4_MAX_LANES];    /* base NULL: lane not logged */
    fwd_scratch *sc;
    int32_t *tok;                   /* one forward's token ids */
} step_ctx;

static void ctx_free(dsv4_model *m, step_ctx *x)
{
    free(x->undo.r);
    m->be->ops->free(m->be, x->block);
    m->be->ops->free(m->be, x->logs);
    forward_scratch_free(m, x->sc);
    free(x->tok);
}

static void undo_lanes(dsv4_backend *b, step_ctx *x, int i0, int i1)
{
    for (int k = x->first[i0]; k < x->first[i1]; k++)
        b->ops->copy(b, x->undo.r[k].dst, (char *)x->block + x->undo.r[k].off, x->undo.r[k].bytes);
}

static dsv4_status check_lanes(dsv4_model *m, const dsv4_lane *ln, int n)
{
    if (!m || !ln || n < 1 || n > DSV4_MAX_LANES)
        return dsv4_fail(DSV4_ERR_ARG, "step: need 1..%d lanes, got %d", DSV4_MAX_LANES, n);
    for (int i = 0; i < n; i++) {
        const dsv4_lane *l = &ln[i];
        dsv4_session *s = l->session;
        if (!s || s->m != m) return dsv4_fail(DSV4_ERR_ARG, "step: lane %d has no session of this model", i);
        if (s->poisoned)
            return dsv4_fail(DSV4_ERR_POISONED, "lane %d: session is poisoned by an earlier failed step; reset or restore it", i);
        if (l->mtp_in && !m->n_draft)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "lane %d: this checkpoint has no MTP head (mtp.0.*) or DSpark drafter", i);
        if (l->mtp_in && m->has_dspark && (l->logits_mode != DSV4_LOGITS_NONE || l->hidden))
            return dsv4_fail(DSV4_ERR_ARG, "step: lane %d: DSpark context rows have no logits or streams", i);
        if (l->features && (l->mtp_in || !m->has_dspark))
            return dsv4_fail(DSV4_ERR_ARG, "step: lane %d: features are a model lane's, with a DSpark drafter", i);
        if (l->n_tokens < 1 || !l->tokens) return dsv4_fail(DSV4_ERR_ARG, "step: lane %d has no tokens", i);
        if (lane_pos(l) >= m->cfg.max_pos)
            return dsv4_fail(DSV4_ERR_ARG, "lane %d: the session holds %lld %s, the whole context "
                             "(max_position_embeddings)", i, (long long)lane_pos(l), l->mtp_in ? "mtp rows" : "tokens");
        if (l->n_tokens > m->cfg.max_pos - lane_pos(l))
            return dsv4_fail(DSV4_ERR_ARG, "lane %d: %d tokens at %sposition %lld pass the context of %d positions "
                             "(max_position_embeddings)", i, l->n_tokens, l->mtp_in ? "mtp " : "",
                             (long long)lane_pos(l), m->cfg.max_pos);
        if (l->logits_mode < DSV4_LOGITS_NONE || l->logits_mode > DSV4_LOGITS_ALL)
            return dsv4_fail(DSV4_ERR_ARG, "step: lane %d: logits mode %d is not one of none/last/all", i, (int)l->logits_mode);
        if (l->logits_mode != DSV4_LOGITS_NONE && !l->logits)
            return dsv4_fail(DSV4_ERR_ARG, "step: lane %d asks for logits but gives no buffer", i);
        for (int t = 0; t < l->n_tokens; t++)
            if (l->tokens[t] < 0 || l->tokens[t] >= m->cfg.vocab)
                return dsv4_fail(DSV4_ERR_ARG, "lane %d: token id %d at input position %d is outside the vocabulary (0..%d)",
                                 i, l->tokens[t], t, m->cfg.vocab - 1);
        for (int j = 0; j < i; j++) /* a session's model state and MTP state are disjoint */
            if (ln[j].session == s && !ln[j].mtp_in == !l->mtp_in)
                return dsv4_fail(DSV4_ERR_ARG, "step: lanes %d and %d are the same session", j, i);
    }
    return DSV4_OK;
}

static size_t pow2_at_least(size_t bytes)
{
    size_t p = 4096;
    while (p < bytes) p *= 2;
    return p;
}

/* plan + prepare; on failure nothing live was touched. */
static dsv4_status prepare(dsv4_model *m, dsv4_lane *ln, int n, step_ctx *x)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    int64_t total = 0, outs = 0;
    int any_mtp = 0;
    for (int i = 0; i < n; i++) {
        dsv4_session *s = ln[i].session;
        dsv4_status st = ln[i].mtp_in ? DSV4_OK : session_reserve(s, s->pos + ln[i].n_tokens);
        if (!st && !ln[i].mtp_in && ln[i].hidden && m->has_mtp) /* publish may add all its rows */
            st = session_owed_reserve(s, s->n_owed + ln[i].n_tokens);
        if (st) return st;
        x->first[i] = x->undo.n;
        if (!plan_lane(&x->undo, m, &ln[i])) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's plan");
        total += ln[i].n_tokens;
        outs += ln[i].logits_mode == DSV4_LOGITS_ALL ? ln[i].n_tokens : ln[i].logits_mode == DSV4_LOGITS_LAST;
        any_mtp |= ln[i].mtp_in != NULL;
    }
    x->first[n] = x->undo.n;
    size_t logs = 0, log_off[DSV4_MAX_LANES];
    for (int i = 0; i < n; i++) {
        log_off[i] = logs;
        if (ln[i].accept)
            logs += size_mul(forward_log_floats(c, lane_l0(m, &ln[i]), lane_l1(m, &ln[i]), ln[i].n_tokens), sizeof(float));
    }
    /* Two blocks, each of a power of two: steps of similar shape then reuse
     * one size, which the CUDA allocator's cache keeps at one address. The
     * forward's ops write the logs, so the graphs that replay it are keyed by
     * the logs' addresses: those depend on the lanes' T alone, not on how
     * much live state the position makes the undo copy hold. */
    if (x->undo.bytes && !(x->block = b->ops->alloc(b, pow2_at_least(x->undo.bytes))))
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's undo copy (%zu bytes)", x->undo.bytes);
    if (logs && !(x->logs = b->ops->alloc(b, pow2_at_least(logs))))
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the step's row logs (%zu bytes)", logs);
    for (int i = 0; i < n; i++)
        if (ln[i].accept)
            x->log[i] = (fwd_log){(float *)((char *)x->logs + log_off[i]), ln[i].n_tokens, lane_l0(m, &ln[i]),
                                  lane_l1(m, &ln[i])};
    int rows = total < m->step_rows ? (int)total : m->step_rows, out_rows = outs < rows ? (int)outs : rows;
    dsv4_status st = forward_scratch_new(m, rows, out_rows, any_mtp ? FWD_DRAFTER : FWD_MAIN, &x->sc);
    if (st) return st;
    if (!(x->tok = malloc((size_t)rows * sizeof *x->tok))) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    for (int k = 0; k < x->undo.n; k++)
        b->ops->copy(b, (char *)x->block + x->undo.r[k].off, x->undo.r[k].dst, x->undo.r[k].bytes);
    st = b->ops->sync(b);
    if (st) backend_clear_error(b);
    return st;
}

/* The forwards of the step: the model's lanes, then the drafter's; rows
 * packed lane by lane, at most the model's step_rows per forward; a lane longer than
 * what is left continues in the next one. */
static dsv4_status run_kind(dsv4_model *m, dsv4_lane *ln, int n, step_ctx *x, int mtp)
{
    const dsv4_config *c = &m->cfg;
    size_t hcD = (size_t)c->hc_mult * (size_t)c->dim, V = (size_t)c->vocab;
    size_t F = (size_t)c->dspark_n_targets * (size_t)c->dim;
    int done[DSV4_MAX_LANES] = {0};
    for (int k = 0; k < n; k++)
        if ((ln[k].mtp_in != NULL) != mtp) done[k] = ln[k].n_tokens; /* the other kind's */
    for (int i = 0; i < n;) {
        while (i < n && done[i] == ln[i].n_tokens) i++;
        if (i == n) break;
        fwd_lane fl[DSV4_MAX_LANES];
        int nf = 0, rows = 0, lane_of[DSV4_MAX_LANES];
        for (int k = i; k < n && rows < m->step_rows; k++) {
            dsv4_lane *l = &ln[k];
            if (done[k] == l->n_tokens) continue;
            int T = l->n_tokens - done[k] < m->step_rows - rows ? l->n_tokens - done[k] : m->step_rows - rows;
            int last = done[k] + T == l->n_tokens;
            fwd_lane *f = &fl[nf];
            *f = (fwd_lane){.s = l->session, .id = k, .pos0 = lane_pos(l) + done[k], .T = T, .row0 = rows,
                            .t0 = done[k]};
            if (mtp) f->x_in = l->mtp_in + (size_t)done[k] * (m->has_dspark ? F : hcD);
            if (l->features) f->feat = l->features + (size_t)done[k] * F;
            if (l->logits_mode == DSV4_LOGITS_ALL) {
                f->out_rows = T;
                f->logits = l->logits + (size_t)done[k] * V;
            } else if (l->logits_mode == DSV4_LOGITS_LAST && last) {
                f->out_rows = 1;
                f->logits = l->logits;
            }
            if (l->hidden) f->hidden = l->hidden + (size_t)done[k] * hcD;
            if (x->log[k].base) f->log = &x->log[k];
            memcpy(x->tok + rows, l->tokens + done[k], (size_t)T * sizeof *x->tok);
            lane_of[nf++] = k;
            rows += T;
        }
        dsv4_status st = mtp ? forward_mtp(m, x->sc, fl, nf, x->tok, rows) : forward_step(m, x->sc, fl, nf, x->tok, rows);
        if (st) return st;
        for (int k = 0; k < nf; k++) done[lane_of[k]] += fl[k].T;
    }
    return DSV4_OK;
}

static dsv4_status run(dsv4_model *m, dsv4_lane *ln, int n, step_ctx *x)
{
    dsv4_status st = run_kind(m, ln, n, x, 0);
    return st ? st : run_kind(m, ln, n, x, 1);
}

/* The MTP's owed rows after the positions are published (session.h): the
 * rows an MTP lane consumed leave, then a model lane's published rows come.
 * Cannot fail: prepare reserved the room. */
static void publish_owed(dsv4_model *m, dsv4_lane *ln, int n)
{
    size_t HS = (size_t)m->cfg.hc_mult * (size_t)m->cfg.dim;
    for (int i = 0; i < n; i++) {
        dsv4_session *s = ln[i].session;
        int64_t d = ln[i].n_published < s->n_owed ? ln[i].n_published : s->n_owed;
        if (!ln[i].mtp_in || !d) continue;
        s->n_owed -= d;
        memmove(s->owed_h, s->owed_h + (size_t)d * HS, (size_t)s->n_owed * HS * sizeof *s->owed_h);
        memmove(s->owed_tok, s->owed_tok + d, (size_t)s->n_owed * sizeof *s->owed_tok);
    }
    for (int i = 0; i < n; i++) {
        dsv4_session *s = ln[i].session;
        int j = ln[i].n_published;
        if (ln[i].mtp_in || !j) continue;
        if (!ln[i].hidden) {
            s->n_owed = 0;
            continue;
        }
        if (s->pos - j - s->n_owed != s->mtp_pos) s->n_owed = 0; /* not complete: start over from these rows */
        memcpy(s->owed_h + (size_t)s->n_owed * HS, ln[i].hidden, (size_t)j * HS * sizeof *s->owed_h);
        memcpy(s->owed_tok + s->n_owed, ln[i].tokens, (size_t)j * sizeof *s->owed_tok);
        s->n_owed += j;
    }
}

static void poison(dsv4_lane *ln, int n)
{
    for (int i = 0; i < n; i++) ln[i].session->poisoned = 1;
}

/* Put every lane back as it was before the step (veto, refused acceptance). */
static dsv4_status roll_back_all(dsv4_model *m, dsv4_lane *ln, int n, step_ctx *x, dsv4_status why)
{
    dsv4_backend *b = m->be;
    undo_lanes(b, x, 0, n);
    dsv4_status st = b->ops->sync(b);
    if (st) { /* could not roll back: the lanes are unreliable */
        backend_clear_error(b);
        poison(ln, n);
        return dsv4_fail_prefix(st, "rollback failed, all lanes of the step poisoned: ");
    }
    return why;
}

dsv4_status dsv4_step(dsv4_model *m, dsv4_lane *ln, int n, const dsv4_gate *gate)
{
    dsv4_status st = check_lanes(m, ln, n);
    if (st) return st;
    dsv4_backend *b = m->be;
    double t0 = (1e3 * clock_s());
    for (int i = 0; i < n; i++) ln[i].n_published = 0;

    step_ctx x;
    memset(&x, 0, sizeof x);
    if ((st = prepare(m, ln, n, &x))) {
        ctx_free(m, &x);
        return st;
    }

    /* run + validate */
    st = run(m, ln, n, &x);
    if (st == DSV4_ERR_NOMEM) { /* nothing live is lost: see the top */
        st = roll_back_all(m, ln, n, &x, dsv4_fail(st, "%s; no lane advanced", dsv4_last_error()));
        ctx_free(m, &x);
        return st;
    }
    if (st) {
        poison(ln, n);
        ctx_free(m, &x);
        return dsv4_fail_prefix(st, "step failed, all its lanes poisoned: ");
    }

    /* gate */
    double elapsed = (1e3 * clock_s()) - t0;
    const char *veto = NULL;
    if (gate && gate->deadline_ms > 0 && elapsed > gate->deadline_ms) veto = "step deadline passed";
    else if (gate && gate->fn && gate->fn(gate->user, n, elapsed)) veto = "gate vetoed the step";
    if (veto) {
        st = roll_back_all(m, ln, n, &x, dsv4_fail(DSV4_ERR_VETO, "%s after %.1f ms; no lane advanced", veto, elapsed));
        ctx_free(m, &x);
        return st;
    }

    /* accept: how much of each lane to publish */
    int keep[DSV4_MAX_LANES];
    for (int i = 0; i < n; i++) {
        keep[i] = ln[i].n_tokens;
        if (!ln[i].accept) continue;
        keep[i] = ln[i].accept(ln[i].accept_user, &ln[i]);
        if (keep[i] < 0 || keep[i] > ln[i].n_tokens) {
            st = roll_back_all(m, ln, n, &x,
                               dsv4_fail(DSV4_ERR_ARG, "lane %d: accepted %d of %d tokens; no lane advanced", i,
                                         keep[i], ln[i].n_tokens));
            ctx_free(m, &x);
            return st;
        }
    }
    int rolled = 0;
    for (int i = 0; i < n; i++) {
        if (keep[i] == ln[i].n_tokens) continue;
        undo_lanes(b, &x, i, i + 1);
        if (keep[i]) forward_replay(m, ln[i].session, lane_pos(&ln[i]), &x.log[i], keep[i]);
        rolled = 1;
    }
    if (rolled && (st = b->ops->sync(b))) {
        backend_clear_error(b);
        poison(ln, n);
        ctx_free(m, &x);
        return dsv4_fail_prefix(st, "rolling back rejected tokens failed, all lanes of the step poisoned: ");
    }

    /* publish */
    for (int i = 0; i < n; i++) {
        if (ln[i].mtp_in) ln[i].session->mtp_pos += keep[i];
        else ln[i].session->pos += keep[i];
        ln[i].n_published = keep[i];
    }
    if (m->has_mtp) publish_owed(m, ln, n);
    ctx_free(m, &x);
    return DSV4_OK;
}

/* ---- the fixed-shape wrappers ---- */

/* One lane of the general step, so a prompt of any length is
 * one transaction: an error before the run leaves the session as it was. */
static dsv4_status eval(dsv4_session *s, const int32_t *tokens, int n, float *logits, dsv4_logits_mode mode)
{
    if (!s) return dsv4_fail(DSV4_ERR_ARG, "eval: no session");
    if (n <= 0 || !tokens) return dsv4_fail(DSV4_ERR_ARG, "eval: no tokens");
    dsv4_lane ln = {.session = s, .tokens = tokens, .n_tokens = n, .logits_mode = logits ? mode : DSV4_LOGITS_NONE,
                    .logits = logits};
    return dsv4_step(s->m, &ln, 1, NULL);
}

dsv4_status dsv4_session_eval(dsv4_session *s, const int32_t *tokens, int n, float *logits)
{
    return eval(s, tokens, n, logits, DSV4_LOGITS_ALL);
}

dsv4_status dsv4_session_eval_last(dsv4_session *s, const int32_t *tokens, int n, float *logits)
{
    return eval(s, tokens, n, logits, DSV4_LOGITS_LAST);
}

dsv4_status dsv4_decode_batch(dsv4_model *m, dsv4_session *const *sessions, const int32_t *tokens, int n_lanes,
                              float *logits, const dsv4_gate *gate)
{
    if (!sessions || !tokens || n_lanes < 1 || n_lanes > DSV4_MAX_LANES)
        return dsv4_fail(DSV4_ERR_ARG, "decode_batch: need 1..%d lanes, got %d", DSV4_MAX_LANES, n_lanes);
    dsv4_lane ln[DSV4_MAX_LANES];
    memset(ln, 0, (size_t)n_lanes * sizeof *ln);
    size_t V = m ? (size_t)m->cfg.vocab : 0;
    for (int i = 0; i < n_lanes; i++) {
        ln[i].session = sessions[i];
        ln[i].tokens = tokens + i;
        ln[i].n_tokens = 1;
        ln[i].logits_mode = logits ? DSV4_LOGITS_LAST : DSV4_LOGITS_NONE;
        ln[i].logits = logits ? logits + (size_t)i * V : NULL;
    }
    return dsv4_step(m, ln, n_lanes, gate);
}

int dsv4_model_hidden_size(const dsv4_model *m) { return m->cfg.hc_mult * m->cfg.dim; }
int dsv4_model_has_mtp(const dsv4_model *m) { return m->has_mtp; }
int dsv4_model_has_dspark(const dsv4_model *m) { return m->has_dspark; }
int dsv4_model_dspark_block(const dsv4_model *m) { return m->has_dspark ? m->cfg.dspark_block : 0; }
int dsv4_model_feature_size(const dsv4_model *m) { return m->has_dspark ? m->cfg.dspark_n_targets * m->cfg.dim : 0; }
int64_t dsv4_session_mtp_pos(const dsv4_session *s) { return s->mtp_pos; }

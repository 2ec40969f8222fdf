/* Speculative decoding with the MTP head or the DSpark drafter: drafting,
 * verification in one step, acceptance (see engine/spec.h for the protocol). */
#include "engine/spec.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/argmax.h"
#include "base/clock.h"
#include "base/error.h"
#include "engine/forward.h"
#include "engine/session.h"

static int grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 1;
    int c = *cap ? *cap : 16;
    while (c < need) c *= 2;
    void *g = realloc(*p, (size_t)c * elem);
    if (!g) return 0;
    *p = g;
    *cap = c;
    return 1;
}

static int pend_reserve(spec_lane *l, int n)
{
    if (n <= l->cap_pend) return 1;
    int cap = l->cap_pend;
    if (!grow((void **)&l->pend_tok, &cap, n, sizeof *l->pend_tok)) return 0;
    float *h = realloc(l->pend_h, (size_t)cap * (size_t)l->HS * sizeof *h);
    if (!h) return 0;
    l->pend_h = h;
    l->cap_pend = cap;
    return 1;
}

/* The MTP's owed rows (session.h) copied out of the session, as the MTP
 * lane's input (the step may move the session's buffers): row i's token is
 * the one at position i+1, the last one's `after` (the token after pos-1). */
static int pend_load(spec_lane *l, int32_t after)
{
    dsv4_session *s = l->s;
    int n = (int)s->n_owed;
    if (!pend_reserve(l, n)) return 0;
    if (n) {
        memcpy(l->pend_h, s->owed_h, (size_t)n * l->HS * sizeof *l->pend_h);
        memcpy(l->pend_tok, s->owed_tok + 1, (size_t)(n - 1) * sizeof *l->pend_tok);
        l->pend_tok[n - 1] = after;
    }
    l->n_pend = n;
    return 1;
}

dsv4_status spec_lane_init(spec_lane *l, dsv4_session *s, int k, sampler *smp)
{
    memset(l, 0, sizeof *l);
    if (!s) return dsv4_fail(DSV4_ERR_ARG, "spec: no session");
    if (k < 0 || k > SPEC_MAX_K) return dsv4_fail(DSV4_ERR_ARG, "spec: %d drafts per step (0..%d)", k, SPEC_MAX_K);
    if (k && !s->m->n_draft)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "spec: this checkpoint has no MTP head (mtp.0.*) or DSpark drafter "
                         "to draft with");
    if (s->m->has_dspark && k > s->m->cfg.dspark_block)
        return dsv4_fail(DSV4_ERR_ARG, "spec: %d drafts per step, the DSpark block drafts at most %d", k,
                         s->m->cfg.dspark_block);
    l->s = s;
    l->k = k;
    l->smp = smp;
    l->force_accept = -1;
    l->force_rng = 0x9e3779b97f4a7c15ull;
    l->V = dsv4_model_vocab(s->m);
    l->HS = dsv4_model_hidden_size(s->m);
    size_t V = (size_t)l->V, HS = (size_t)l->HS, K = (size_t)k;
    l->q = malloc((K + 1) * V * sizeof *l->q);
    l->vlog = malloc((K + 1) * V * sizeof *l->vlog);
    l->vhid = malloc((K + 1) * HS * sizeof *l->vhid);
    l->dlog = malloc(V * sizeof *l->dlog);
    l->row = malloc(V * sizeof *l->row);
    l->p = malloc(V * sizeof *l->p);
    l->chain = malloc((K + 1) * HS * sizeof *l->chain);
    /* + 1: never an allocation of 0 bytes (no DSpark drafter) */
    l->vfeat = malloc((K + 1) * ((size_t)dsv4_model_feature_size(s->m) + 1) * sizeof *l->vfeat);
    if (!l->q || !l->vlog || !l->vhid || !l->dlog || !l->row || !l->p || !l->chain || !l->vfeat) {
        spec_lane_free(l);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a speculative lane");
    }
    return DSV4_OK;
}

void spec_lane_free(spec_lane *l)
{
    free(l->pend_h);
    free(l->pend_tok);
    free(l->hist);
    free(l->q);
    free(l->vlog);
    free(l->vhid);
    free(l->dlog);
    free(l->dhid);
    free(l->row);
    free(l->p);
    free(l->chain);
    free(l->vfeat);
    memset(l, 0, sizeof *l);
}

static int greedy(const spec_lane *l)
{
    return !l->smp || sampler_params(l->smp)->temperature == 0;
}

/* The distribution of the token after hist + extra[0..n_extra), from one row
 * of logits, into probs (masked ids get nothing); greedy lanes also get its
 * single top id in *top (found once here, not again by each use). */
static dsv4_status dist(spec_lane *l, const float *logits, const int32_t *extra, int n_extra, float *probs,
                        int32_t *top)
{
    const float *row = logits; /* a masked copy only where there is a mask */
    if (l->n_mask) {
        memcpy(l->row, logits, (size_t)l->V * sizeof *l->row);
        for (int i = 0; i < l->n_mask; i++) l->row[l->mask[i]] = -INFINITY;
        row = l->row;
    }
    if (l->smp) {
        if (!grow((void **)&l->hist, &l->cap_hist, l->n_hist + n_extra + 1, sizeof *l->hist))
            return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        if (n_extra) memcpy(l->hist + l->n_hist, extra, (size_t)n_extra * sizeof *extra);
        dsv4_status st = sampler_distribution(l->smp, row, l->hist, l->n_hist + n_extra, probs);
        if (!st && greedy(l)) *top = argmax_f32(probs, l->V);
        return st;
    }
    /* no sampler: plain argmax (lowest id on ties), as sampler_sample at temperature 0 */
    memset(probs, 0, (size_t)l->V * sizeof *probs);
    *top = argmax_f32(row, l->V);
    probs[*top] = 1;
    return DSV4_OK;
}

/* A token from a distribution (dist's probs and top): greedy lanes take its top. */
static int32_t pick(spec_lane *l, const float *probs, int32_t top)
{
    return greedy(l) ? top : sampler_draw(l->smp, probs, l->V);
}

static double force_unit(spec_lane *l)
{
    uint64_t z = (l->force_rng += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return (double)((z ^ (z >> 31)) >> 11) * 0x1.0p-53;
}

static int is_stop(const spec_lane *l, int32_t t)
{
    for (int i = 0; i < l->n_stop; i++)
        if (l->stop_ids[i] == t) return 1;
    return 0;
}

static dsv4_status emit(spec_lane *l, const int32_t *t, int n)
{
    if (!grow((void **)&l->hist, &l->cap_hist, l->n_hist + n + 1, sizeof *l->hist))
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    memcpy(l->hist + l->n_hist, t, (size_t)n * sizeof *t);
    l->n_hist += n;
    memcpy(l->out, t, (size_t)n * sizeof *t);
    l->n_out = n;
    l->next = t[n - 1];
    l->has_next = 1;
    return DSV4_OK;
}

/* DSpark: t[0..n) at the session's position with their context rows in
 * the same steps (drafting lanes only); the last row's logits go to dlog. */
static dsv4_status feed_dspark(spec_lane *l, const int32_t *t, int n)
{
    dsv4_model *m = l->s->m;
    size_t F = (size_t)dsv4_model_feature_size(m);
    for (int done = 0; done < n;) {
        int T = n - done < m->step_rows ? n - done : m->step_rows; /* one forward a step */
        float *f = l->k ? malloc((size_t)T * F * sizeof *f) : NULL;
        if (l->k && !f) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        dsv4_lane ln[2] = {{.session = l->s, .tokens = t + done, .n_tokens = T, .logits_mode = DSV4_LOGITS_LAST,
                            .logits = l->dlog, .features = f},
                           {.session = l->s, .tokens = t + done, .n_tokens = T, .mtp_in = f}};
        dsv4_status st = dsv4_step(m, ln, l->k ? 2 : 1, NULL);
        free(f);
        if (st) return st;
        done += T;
    }
    l->has_next = 0;
    l->n_out = 0;
    return DSV4_OK;
}

/* Feeds t[0..n) at the session's position, the MTP's owed rows with the
 * first chunk; the last row's logits go to dlog. */
static dsv4_status feed(spec_lane *l, const int32_t *t, int n)
{
    dsv4_model *m = l->s->m;
    if (m->has_dspark) return feed_dspark(l, t, n);
    /* in chunks: each chunk's streams are what the MTP needs next (the step
     * keeps them in the session, with drafts only); the rows the MTP owes go
     * to it with the next chunk's step */
    for (int done = 0; done < n;) {
        int T = n - done < m->step_rows ? n - done : m->step_rows; /* one forward a step */
        float *h = l->k ? malloc((size_t)T * l->HS * sizeof *h) : NULL;
        if (l->k && (!h || !pend_load(l, t[done]))) {
            free(h);
            return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        }
        dsv4_lane ln[2] = {{.session = l->s, .tokens = t + done, .n_tokens = T, .logits_mode = DSV4_LOGITS_LAST,
                            .logits = l->dlog, .hidden = h}};
        int nl = 1;
        if (l->k && l->n_pend)
            ln[nl++] = (dsv4_lane){.session = l->s, .tokens = l->pend_tok, .n_tokens = l->n_pend, .mtp_in = l->pend_h};
        dsv4_status st = dsv4_step(m, ln, nl, NULL);
        free(h);
        if (st) return st;
        done += T;
    }
    l->has_next = 0;
    l->n_out = 0;
    return DSV4_OK;
}

/* The token after what was fed, from dlog (among allow[0..n_allow) only,
 * when n_allow > 0): out[0]. */
static dsv4_status sample_first(spec_lane *l, const int32_t *allow, int n_allow)
{
    if (n_allow) { /* everything else to -inf; l->p keeps the allowed logits meanwhile */
        for (int i = 0; i < n_allow; i++) l->p[i] = l->dlog[allow[i]];
        for (int i = 0; i < l->V; i++) l->dlog[i] = -INFINITY;
        for (int i = 0; i < n_allow; i++) l->dlog[allow[i]] = l->p[i];
    }
    int32_t top = 0;
    dsv4_status st = dist(l, l->dlog, NULL, 0, l->p, &top);
    if (st) return st;
    int32_t first = pick(l, l->p, top);
    l->out_logits = l->dlog;
    return emit(l, &first, 1);
}

dsv4_status spec_prefill(spec_lane *l, const int32_t *t, int n)
{
    if (n < 1 || !t) return dsv4_fail(DSV4_ERR_ARG, "spec: empty prompt");
    l->n_hist = 0; /* the penalties count what is generated from here on */
    return feed(l, t, n);
}

dsv4_status spec_feed(spec_lane *l, const int32_t *t, int n)
{
    dsv4_status st = spec_prefill(l, t, n);
    return st ? st : sample_first(l, NULL, 0);
}

dsv4_status spec_force(spec_lane *l, const int32_t *t, int n, const int32_t *allow, int n_allow)
{
    int first = l->has_next, total = first + n;
    if (n < 0 || (n && !t) || total < 1 || n_allow < 0 || n_allow > l->V)
        return dsv4_fail(DSV4_ERR_ARG, "spec: nothing to force");
    int32_t *all = malloc((size_t)total * sizeof *all);
    if (!all || !grow((void **)&l->hist, &l->cap_hist, l->n_hist + n + 1, sizeof *l->hist)) {
        free(all);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    }
    if (first) all[0] = l->next;
    if (n) memcpy(all + first, t, (size_t)n * sizeof *t);
    dsv4_status st = feed(l, all, total);
    free(all);
    if (st) return st;
    if (n) memcpy(l->hist + l->n_hist, t, (size_t)n * sizeof *t); /* produced, as far as the penalties go */
    l->n_hist += n;
    return sample_first(l, allow, n_allow);
}

const float *spec_out_logits(const spec_lane *l, int i)
{
    return i >= 0 && i < l->n_out ? l->out_logits + (size_t)i * (size_t)l->V : NULL;
}

/* Draft i of every lane that drafts that deep: one MTP step over the rows
 * the MTP owes plus the i-1 chained drafts, publishing nothing. */
static int keep_none(void *user, const dsv4_lane *ln) { (void)user; (void)ln; return 0; }

static dsv4_status draft_round(dsv4_model *m, spec_lane *const *L, const int *k, int n, int i)
{
    dsv4_lane ln[DSV4_MAX_LANES];
    int32_t *tok[DSV4_MAX_LANES] = {0};
    float *in[DSV4_MAX_LANES] = {0};
    int nl = 0, who[DSV4_MAX_LANES];
    dsv4_status st = DSV4_OK;
    for (int a = 0; a < n && !st; a++) {
        spec_lane *l = L[a];
        if (k[a] < i) continue;
        int rows = l->n_pend + i - 1;
        size_t HS = (size_t)l->HS;
        tok[nl] = malloc((size_t)rows * sizeof **tok);
        in[nl] = malloc((size_t)rows * HS * sizeof **in);
        float *dh = realloc(l->dhid, (size_t)rows * HS * sizeof *dh);
        if (dh) l->dhid = dh;
        if (!tok[nl] || !in[nl] || !dh) { st = dsv4_fail(DSV4_ERR_NOMEM, "out of memory for drafts"); nl++; break; }
        memcpy(tok[nl], l->pend_tok, (size_t)l->n_pend * sizeof **tok);
        memcpy(tok[nl] + l->n_pend, l->drafts, (size_t)(i - 1) * sizeof **tok);
        memcpy(in[nl], l->pend_h, (size_t)l->n_pend * HS * sizeof **in);
        memcpy(in[nl] + (size_t)l->n_pend * HS, l->chain, (size_t)(i - 1) * HS * sizeof **in);
        ln[nl] = (dsv4_lane){.session = l->s, .tokens = tok[nl], .n_tokens = rows, .logits_mode = DSV4_LOGITS_LAST,
                             .logits = l->dlog + 0, .hidden = l->dhid, .accept = keep_none, .mtp_in = in[nl]};
        who[nl++] = a;
    }
    /* each lane's logits row lands in its own dlog; run them in one step */
    if (!st) st = dsv4_step(m, ln, nl, NULL);
    for (int j = 0; j < nl && !st; j++) {
        spec_lane *l = L[who[j]];
        size_t HS = (size_t)l->HS;
        memcpy(l->chain + (size_t)(i - 1) * HS, l->dhid + (size_t)(ln[j].n_tokens - 1) * HS, HS * sizeof(float));
        float *q = l->q + (size_t)(i - 1) * l->V;
        int32_t top = 0;
        st = dist(l, l->dlog, l->drafts, i - 1, q, &top);
        if (st) break;
        int32_t d = pick(l, q, top);
        if (l->draft_fn) d = l->draft_fn(l->draft_user, l, i, d);
        l->drafts[i - 1] = d;
    }
    for (int j = 0; j < nl; j++) { free(tok[j]); free(in[j]); }
    return st;
}

/* Whether a lane's drafts are plain argmaxes of its rows (dist's top
 * without penalties or masks, no draft hook): greedy without a sampler, or
 * a sampler at temperature 0 with its penalties off (its distribution is
 * then 1 on argmax_f32 of the row). */
static int plain_greedy(const spec_lane *l)
{
    if (l->n_mask || l->draft_fn) return 0;
    if (!l->smp) return 1;
    const sampling_params *p = sampler_params(l->smp);
    return p->temperature == 0 && p->repetition_penalty == 1 && p->presence_penalty == 0 && p->frequency_penalty == 0;
}

/* The Markov rounds of dspark_draft for lanes that all draft plainly
 * greedily (plain_greedy), chained on the backend (forward_dspark_greedy:
 * one sync for all rounds instead of one a round, no rows of logits to the
 * host): the same drafts, confidences, cuts and failures as the host
 * rounds, which it replays in their order from what the device computed. */
static dsv4_status dspark_rounds_dev(dsv4_model *m, fwd_scratch *sc, spec_lane *const *L, const int *who, int nl,
                                     int *k, int deepest)
{
    size_t n = (size_t)deepest * nl;
    int32_t *drafts = malloc(n * sizeof *drafts), *bad = malloc(n * sizeof *bad), next[DSV4_MAX_LANES];
    float *top = malloc(n * sizeof *top), *conf = malloc(n * sizeof *conf);
    dsv4_status st = drafts && bad && top && conf ? DSV4_OK : dsv4_fail(DSV4_ERR_NOMEM, "out of memory for DSpark drafts");
    for (int j = 0; j < nl; j++) next[j] = L[who[j]]->next;
    if (!st) st = forward_dspark_greedy(m, sc, next, nl, deepest, drafts, top, conf, bad);
    for (int i = 0; i < deepest && !st; i++) {
        /* the host round's order: every row's checks, then the lanes' picks */
        for (int j = 0; j < nl && !st; j++)
            if (k[who[j]] > i) st = forward_markov_row_check(&conf[(size_t)i * nl + j], bad[(size_t)i * nl + j]);
        for (int j = 0; j < nl && !st; j++) {
            spec_lane *l = L[who[j]];
            size_t o = (size_t)i * nl + j;
            if (k[who[j]] <= i) continue;
            l->conf[i] = conf[o];
            if (conf[o] < l->conf_min) { /* not confident: the proposal is the drafts so far */
                k[who[j]] = i;
                continue;
            }
            if (l->smp && !(top[o] < INFINITY)) /* the sampler's own checks of the summed row (never NaN) */
                st = dsv4_fail(DSV4_ERR_ARG, "sampler: logit %d is %g", drafts[o], (double)top[o]);
            else if (l->smp && !(top[o] > -INFINITY))
                st = dsv4_fail(DSV4_ERR_ARG, "sampler: every logit is -inf");
            else
                l->drafts[i] = drafts[o];
        }
    }
    free(drafts);
    free(bad);
    free(top);
    free(conf);
    return st;
}

/* DSpark drafts (docs/DSPARK.md §4.2-4.4) for every lane that drafts: one
 * block forward over all of them (B rows each: next, then the noise token,
 * at the session's position over its context rings), then the Markov head
 * row by row, every lane's row i in one call: draft i+1 is drawn from block
 * row i's logits plus the bias of the token before it (next, then the
 * drafts so far, replacements included); a lane whose confidence falls
 * below its conf_min stops there (k[a] cut). Writes no state. */
static dsv4_status dspark_draft(dsv4_model *m, spec_lane *const *L, int *k, int n)
{
    int B = m->cfg.dspark_block, V = m->cfg.vocab, nl = 0, deepest = 0, who[DSV4_MAX_LANES];
    for (int a = 0; a < n; a++)
        if (k[a] > 0) {
            who[nl++] = a;
            if (k[a] > deepest) deepest = k[a];
        }
    if (!nl) return DSV4_OK;
    fwd_scratch *sc = NULL;
    dsv4_status st = forward_scratch_new(m, nl * B, nl * B, FWD_BLOCK, &sc);
    if (st) return st;
    int32_t *tok = malloc((size_t)nl * B * sizeof *tok);
    float *base = malloc((size_t)nl * B * V * sizeof *base), *bias = malloc((size_t)nl * V * sizeof *bias);
    fwd_lane fl[DSV4_MAX_LANES];
    if (!tok || !base || !bias) st = dsv4_fail(DSV4_ERR_NOMEM, "out of memory for DSpark drafts");
    for (int j = 0; j < nl && !st; j++) {
        spec_lane *l = L[who[j]];
        fl[j] = (fwd_lane){.s = l->s, .id = who[j], .pos0 = l->s->mtp_pos, .T = B, .row0 = j * B, .out_rows = B,
                           .logits = base + (size_t)j * B * V};
        for (int i = 0; i < B; i++) tok[j * B + i] = i ? m->cfg.dspark_noise : l->next;
    }
    if (!st) st = forward_dspark_block(m, sc, fl, nl, tok, nl * B);
    /* lanes that all draft plainly greedily chain the rounds on the device */
    int dev = !st && m->be->ops->pick_sum;
    for (int j = 0; j < nl && dev; j++) dev = plain_greedy(L[who[j]]);
    if (dev) st = dspark_rounds_dev(m, sc, L, who, nl, k, deepest);
    for (int i = 0; i < deepest && !st && !dev; i++) {
        int32_t prev[DSV4_MAX_LANES];
        int row[DSV4_MAX_LANES], of[DSV4_MAX_LANES], nr = 0;
        float conf[DSV4_MAX_LANES];
        for (int j = 0; j < nl; j++) {
            spec_lane *l = L[who[j]];
            if (k[who[j]] <= i) continue;
            prev[nr] = i ? l->drafts[i - 1] : l->next;
            row[nr] = j * B + i;
            of[nr++] = j;
        }
        if (!nr) break; /* every lane's proposal ended */
        st = forward_dspark_markov(m, sc, prev, row, nr, bias, conf);
        for (int r = 0; r < nr && !st; r++) {
            spec_lane *l = L[who[of[r]]];
            float *lg = base + (size_t)row[r] * V, *q = l->q + (size_t)i * V;
            for (int v = 0; v < V; v++) lg[v] += bias[(size_t)r * V + v];
            l->conf[i] = conf[r];
            if (conf[r] < l->conf_min) { /* not confident: the proposal is the drafts so far */
                k[who[of[r]]] = i;
                continue;
            }
            int32_t top = 0;
            if ((st = dist(l, lg, l->drafts, i, q, &top))) break;
            int32_t d = pick(l, q, top);
            if (l->draft_fn) d = l->draft_fn(l->draft_user, l, i + 1, d);
            l->drafts[i] = d;
        }
    }
    free(tok);
    free(base);
    free(bias);
    forward_scratch_free(m, sc);
    return st;
}

/* The verify step's acceptance of one lane: walks its rows, keeps drafts,
 * ends with the correction or the bonus token; the tokens it keeps are next
 * and the kept drafts, as many as it outputs. */
typedef struct {
    spec_lane *l;
    int k;
    int32_t out[SPEC_MAX_K + 1];
    int n_out;
    dsv4_status st;
    double s_accept; /* seconds the acceptance took */
} verdict;

static int accept_walk(verdict *v, const dsv4_lane *ln)
{
    spec_lane *l = v->l;
    size_t V = (size_t)l->V;
    v->n_out = 0;
    for (int r = 0; r <= v->k; r++) {
        int32_t top = 0;
        if ((v->st = dist(l, ln->logits + (size_t)r * V, v->out, v->n_out, l->p, &top))) return -1; /* refuses the step */
        if (r == v->k) { /* every draft kept: the bonus token */
            v->out[v->n_out++] = pick(l, l->p, top);
            break;
        }
        int32_t d = l->drafts[r];
        const float *q = l->q + (size_t)r * V;
        int keep;
        if (l->force_accept >= 0) keep = force_unit(l) < l->force_accept;
        else if (greedy(l)) keep = top == d;
        else keep = sampler_uniform(l->smp) * q[d] < l->p[d]; /* u < p(d)/q(d), q(d) > 0 as d came from q */
        if (keep) {
            v->out[v->n_out++] = d;
            l->n_kept++;
            if (is_stop(l, d)) break;
            continue;
        }
        if (greedy(l)) {
            v->out[v->n_out++] = top;
        } else { /* the residual max(0, p - q), renormalized by the draw */
            double mass = 0;
            for (size_t t = 0; t < V; t++) {
                float x = l->p[t] - q[t];
                l->p[t] = x > 0 ? x : 0;
                mass += l->p[t];
            }
            if (mass <= 0) { /* p == q up to rounding: any draw from p is exact */
                if ((v->st = dist(l, ln->logits + (size_t)r * V, v->out, v->n_out, l->p, &top))) return -1;
            }
            v->out[v->n_out++] = sampler_draw(l->smp, l->p, l->V);
        }
        break;
    }
    return v->n_out;
}

/* The step's accept callback for a lane's model rows: accept_walk, timed. */
static int accept_drafts(void *user, const dsv4_lane *ln)
{
    verdict *v = user;
    double t0 = clock_s();
    int r = accept_walk(v, ln);
    v->s_accept = clock_s() - t0;
    return r;
}

/* A DSpark context lane keeps the rows its model lane kept (the model
 * lane's acceptance ran first: it comes first in the step). */
static int accept_same(void *user, const dsv4_lane *ln)
{
    (void)ln;
    return ((const verdict *)user)->n_out;
}

/* A step that did not commit: every lane's sampler goes back to where it
 * was, so the redrawn drafts are the same and the lane's output does not
 * depend on whether a step beside it was vetoed. */
static dsv4_status undraw(spec_lane *const *L, int n, const sampler_rng *rng, dsv4_status st)
{
    for (int a = 0; a < n; a++)
        if (L[a]->smp) sampler_rng_restore(L[a]->smp, rng[a]);
    return st;
}

dsv4_status spec_step(dsv4_model *m, spec_lane *const *L, int n, const dsv4_gate *gate)
{
    if (!m || !L || n < 1 || 2 * n > DSV4_MAX_LANES)
        return dsv4_fail(DSV4_ERR_ARG, "spec: need 1..%d lanes, got %d", DSV4_MAX_LANES / 2, n);
    int k[DSV4_MAX_LANES / 2], deepest = 0;
    double t0 = clock_s();
    for (int a = 0; a < n; a++) {
        spec_lane *l = L[a];
        if (!l || !l->has_next || l->s->m != m) return dsv4_fail(DSV4_ERR_ARG, "spec: lane %d was not fed a prompt", a);
        if (l->draft_fn && !greedy(l)) return dsv4_fail(DSV4_ERR_ARG, "spec: lane %d: replaced drafts need greedy", a);
        k[a] = l->k;
        if (l->budget > 0 && k[a] > l->budget - 1) k[a] = l->budget - 1;
        if (!m->has_dspark && l->k) { /* the MTP's input: the owed rows, the last one reading next */
            if (!pend_load(l, l->next)) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
            if (!l->n_pend) k[a] = 0; /* none (a session fed without streams): nothing to draft from yet */
        }
        if (k[a] > deepest) deepest = k[a];
    }
    /* until the step commits, the samplers' draws (drafts, acceptance) are taken back on failure */
    sampler_rng rng[DSV4_MAX_LANES / 2];
    for (int a = 0; a < n; a++)
        if (L[a]->smp) rng[a] = sampler_rng_state(L[a]->smp);
    dsv4_status st = DSV4_OK;
    if (m->has_dspark) st = dspark_draft(m, L, k, n);
    for (int i = 1; i <= deepest && !st && !m->has_dspark; i++) st = draft_round(m, L, k, n, i);
    if (st) return undraw(L, n, rng, st);
    double t1 = clock_s();

    /* verify: per lane the model's k+1 rows and the MTP rows it owes */
    dsv4_lane ln[DSV4_MAX_LANES];
    verdict v[DSV4_MAX_LANES / 2];
    int32_t vt[DSV4_MAX_LANES / 2][SPEC_MAX_K + 1];
    int nl = 0;
    for (int a = 0; a < n; a++) {
        spec_lane *l = L[a];
        v[a] = (verdict){.l = l, .k = k[a]};
        vt[a][0] = l->next;
        memcpy(vt[a] + 1, l->drafts, (size_t)k[a] * sizeof(int32_t));
        int ds = m->has_dspark && l->k;
        ln[nl++] = (dsv4_lane){.session = l->s, .tokens = vt[a], .n_tokens = k[a] + 1,
                               .logits_mode = DSV4_LOGITS_ALL, .logits = l->vlog,
                               .hidden = !m->has_dspark && l->k ? l->vhid : NULL,
                               .accept = accept_drafts, .accept_user = &v[a], .features = ds ? l->vfeat : NULL};
        if (ds) /* DSpark's context rows of the same positions, kept as the model lane keeps them */
            ln[nl++] = (dsv4_lane){.session = l->s, .tokens = vt[a], .n_tokens = k[a] + 1, .mtp_in = l->vfeat,
                                   .accept = accept_same, .accept_user = &v[a]};
        else if (l->k && l->n_pend) /* the MTP's rows: positions mtp_pos .. pos-1, real streams and tokens */
            ln[nl++] = (dsv4_lane){.session = l->s, .tokens = l->pend_tok, .n_tokens = l->n_pend,
                                   .mtp_in = l->pend_h};
    }
    st = dsv4_step(m, ln, nl, gate);
    double t2 = clock_s();
    for (int a = 0; a < n; a++)
        if (v[a].st) return undraw(L, n, rng, v[a].st); /* an acceptance that could not compute refused the step */
    if (st) return undraw(L, n, rng, st);
    for (int a = 0; a < n; a++) {
        spec_lane *l = L[a];
        int j = v[a].n_out; /* tokens kept = next + kept drafts = tokens out (the session now
                               owes the MTP rows pos-j .. pos-1: the step kept their streams) */
        l->out_logits = l->vlog;
        l->n_steps++;
        l->n_drafted += k[a];
        l->s_draft += t1 - t0;
        l->s_verify += t2 - t1;
        l->s_accept += v[a].s_accept;
        if ((st = emit(l, v[a].out, j))) return st;
    }
    return DSV4_OK;
}

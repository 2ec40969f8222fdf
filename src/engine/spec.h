/* Speculative decoding with the drafter (the MTP head, spec §5.2, or the
 * DSpark drafter, docs/DSPARK.md) on the general step.
 *
 * A spec lane wraps a session that generates: after its prompt it always
 * holds one sampled token it has not consumed (`next`). Each spec_step, for a
 * cohort of lanes with their own k:
 *   draft    the MTP head proposes k tokens, one MTP step per draft (draft i
 *            re-reads the rows the MTP still owes plus the i−1 drafts chained
 *            through its own streams; each step publishes nothing)
 *   verify   one step: per lane a model lane [next, d1..dk] (k+1 rows, every
 *            row's logits and streams) and an MTP lane for the rows the MTP
 *            owes (real streams, real tokens); the model lane's acceptance
 *            callback keeps next and the accepted drafts, so the session is
 *            exactly as if it had been fed those tokens; the rest is rolled
 *            back by the step (spec §6.4)
 * Greedy: a draft is kept iff it is the argmax of its row, so the output and
 * the model state are those of plain greedy decoding. Sampling: standard
 * speculative rejection sampling (keep d with probability min(1, p(d)/q(d)),
 * else draw from max(0, p − q) normalized; all kept: draw the bonus from the
 * last row), with p and q the sampler's own distributions
 * (sampler_distribution): the output distribution is exactly the model's.
 *
 * The MTP trails the model: row i needs the token after position i. The
 * session keeps the model's streams and tokens of the positions the MTP has
 * not consumed (its owed rows, session.h: one step's worth); each step the
 * lane copies them out, the last row reading `next`, and feeds them to the
 * MTP with the verify step, which replaces them with the kept rows. Being
 * the session's, they survive the lane and go with its snapshots: a new
 * lane on a session an earlier lane fed (or on a restored snapshot of it)
 * drafts exactly as that lane would have. A veto or failure of any step
 * leaves every session (owed rows included) and sampler as it was (the same
 * drafts are drawn again).
 *
 * DSpark (k <= dspark_block): the drafts are one block forward (next, then
 * the noise token, at the session's position, over the context rings) and
 * the Markov head row by row (draft i from block row i−1 and the token
 * before it); q_i are the sampler's distributions of those rows. The drafter
 * never trails: the verify step's model lane returns its rows' target
 * features and a DSpark context lane beside it writes them into the rings,
 * its acceptance keeping exactly the rows the model lane keeps, so the
 * rings hold the accepted positions only (mtp_pos == pos). */
#ifndef DSV4_ENGINE_SPEC_H
#define DSV4_ENGINE_SPEC_H
#include "dsv4.h"
#include "text/sampling.h"

#define SPEC_MAX_K 8

typedef struct spec_lane spec_lane;

/* Tests and benchmarks: replaces draft i (1-based) the MTP proposed; the
 * chained drafts after it read the replacement. Greedy lanes only. */
typedef int32_t (*spec_draft_fn)(void *user, const spec_lane *l, int i, int32_t proposed);

struct spec_lane {
    dsv4_session *s;
    int k;                  /* drafts per step, 0..SPEC_MAX_K (0: plain decoding) */
    sampler *smp;           /* NULL or temperature 0: greedy */
    const int32_t *mask;    /* ids never produced (logits forced to -inf) */
    int n_mask;
    const int32_t *stop_ids; /* a kept stop token ends the step's output (it is not fed) */
    int n_stop;
    int budget;             /* > 0: at most this many tokens out of the next step */
    spec_draft_fn draft_fn; /* NULL: the drafter's drafts */
    void *draft_user;
    double force_accept;    /* benchmarks only (>= 0): keep each draft with this probability, whatever
                               the model says; the output is then not the model's */
    float conf_min;         /* DSpark: the proposal ends before the first draft whose confidence is
                               below this (0: never); decides how many drafts are verified, never
                               which tokens come out */
    /* out of the last spec_feed / spec_step: the new tokens, in order (the
     * last one is `next`, not consumed yet) */
    int32_t out[SPEC_MAX_K + 1];
    int n_out;
    long long n_steps, n_drafted, n_kept; /* statistics */
    double s_draft, s_verify, s_accept; /* statistics: seconds of the committed steps' drafting and verify
                                           calls (the cohort's, which every lane of it counts) and, of the
                                           verify, this lane's acceptance on the host */
    /* private */
    int32_t next;
    int has_next;
    int V, HS;
    float *pend_h;          /* [n_pend][HS]: the session's owed streams, copied for one step */
    int32_t *pend_tok;      /* [n_pend]: the token after each of them (the last: the one fed next) */
    int n_pend, cap_pend;
    int32_t *hist;          /* every token produced (the penalties count them) */
    int n_hist, cap_hist;
    int32_t drafts[SPEC_MAX_K];
    float *q;               /* [k][V]: the distributions the drafts came from */
    float *vlog, *vhid;     /* verify outputs: [k+1][V], [k+1][HS] */
    float *dlog, *dhid;     /* draft outputs: [V], [n_pend + k][HS] */
    float *row, *p;         /* [V] scratch */
    float *chain;           /* [k][HS]: the MTP's own streams fed back as the model's */
    float *vfeat;           /* DSpark: the verify rows' target features [k+1][L·D] */
    float conf[SPEC_MAX_K]; /* DSpark: the confidence head's estimate for each draft of the last step */
    const float *out_logits; /* the rows out[] were chosen from (vlog or dlog) */
    uint64_t force_rng;
};

/* k drafts per step (0..SPEC_MAX_K; DSpark: at most dspark_block); smp may
 * be NULL (greedy). The lane feeds the session from here on. On a session
 * fed by spec lanes with drafts (or restored from its snapshot) it drafts
 * as they would have; on one fed otherwise (plain steps, or a lane with
 * k = 0: neither keeps streams for the MTP) the drafter lacks the rows of
 * that past and takes the rows it gets at its own position (its drafts are
 * then worse, never wrong). */
dsv4_status spec_lane_init(spec_lane *l, dsv4_session *s, int k, sampler *smp);
void spec_lane_free(spec_lane *l);

/* Feeds n >= 1 prompt tokens at the session's position and samples the
 * first token after them: out[0]. After a generation the lane's unconsumed
 * token is dropped (the prompt says what comes next, e.g. a new chat turn);
 * the penalties then count the tokens generated from here on. */
dsv4_status spec_feed(spec_lane *l, const int32_t *t, int n);
/* The same without the sample (n_out = 0): a part of a prompt that goes on
 * (spec_feed or spec_force then give the first token). */
dsv4_status spec_prefill(spec_lane *l, const int32_t *t, int n);
/* Tokens chosen by the caller (e.g. forced markup) as if produced: the
 * session consumes the lane's unconsumed token (if any) and t[0..n), which
 * the penalties count, and the token after them is sampled into out[0],
 * among allow[0..n_allow) only when n_allow > 0 (greedy: the best of them). */
dsv4_status spec_force(spec_lane *l, const int32_t *t, int n, const int32_t *allow, int n_allow);
/* The logits row (vocab floats, as the model gave them; after spec_force
 * with allow, everything else -inf) that out[i] of the last spec_feed,
 * spec_force or spec_step was chosen from; NULL if there is no out[i]. */
const float *spec_out_logits(const spec_lane *l, int i);

/* One speculative step for n lanes of one model (each after spec_feed):
 * out[0..n_out) of each lane are its new tokens (n_out >= 1). */
dsv4_status spec_step(dsv4_model *m, spec_lane *const *lanes, int n, const dsv4_gate *gate);

#endif

/* One forward pass over one or more lanes (sessions). */
#ifndef DSV4_ENGINE_FORWARD_H
#define DSV4_ENGINE_FORWARD_H
#include "engine/session.h"

/* What a partial publication replays (engine/step.c): the per-row state
 * writes of a lane's step, in backend memory. Per layer l0..l1-1 (the main
 * layers, or the MTP layer), in order: the roped kv rows [T][head_dim];
 * CSA/HCA: the main compressor's inputs u, g [T][c·head_dim]; CSA: the
 * indexer compressor's u, g [T][2·idx_head_dim]. */
typedef struct {
    float *base; /* forward_log_floats(cfg, l0, l1, T) floats */
    int T, l0, l1;
} fwd_log;
size_t forward_log_floats(const dsv4_config *c, int l0, int l1, int T);

typedef struct {
    dsv4_session *s;  /* state read at pos0 and written in place */
    int id;           /* its lane number in messages */
    int64_t pos0;     /* position of the lane's first row in this forward */
    int T;            /* rows of this lane in this forward */
    int row0;         /* its first row among the forward's rows */
    int out_rows;     /* logits of its last out_rows rows (0, 1 or T) ... */
    float *logits;    /* ... into this host buffer */
    float *hidden;    /* host or NULL: final residual streams of its T rows */
    const fwd_log *log; /* NULL, or the lane's log; these rows are rows t0.. of it */
    int t0;
    /* drafter lanes: host, the T rows' input: the MTP head's, the main
     * model's streams [T][hc·D]; DSpark context rows, the target features
     * [T][L·D] */
    const float *x_in;
    float *feat;        /* main lanes, host or NULL: the rows' DSpark target features [T][L·D] */
} fwd_lane;

/* What a scratch is for: main-model forwards only, also the drafter's rows
 * (MTP head, DSpark context rows), or DSpark blocks and their Markov head. */
enum { FWD_MAIN, FWD_DRAFTER, FWD_BLOCK };

/* Activation memory for forwards of up to `rows` rows and `out_rows` logits
 * rows (kind FWD_*); allocating it is the last fallible thing before a step
 * writes state. */
typedef struct fwd_scratch fwd_scratch;
dsv4_status forward_scratch_new(dsv4_model *m, int rows, int out_rows, int kind, fwd_scratch **out);
void forward_scratch_free(dsv4_model *m, fwd_scratch *sc);

/* tok: `rows` host token ids, lane by lane. Writes every lane's state in
 * place (ring slots, compressor rows, entries) but publishes nothing: the
 * caller owns the positions. A failure after the first op leaves the lanes'
 * state partly written. */
dsv4_status forward_step(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes, const int32_t *tok,
                         int rows);
/* The same for the drafter's rows over the lanes' drafter state at pos0
 * (their mtp_pos). MTP head (spec §5.2): row t reads x_in[t] and the
 * embedding of tok[t]; logits and hidden are the MTP's. DSpark: row t, the
 * features x_in[t] of position pos0 + t, becomes one context key per stage
 * (docs/DSPARK.md §4.1); no logits, no hidden. */
dsv4_status forward_mtp(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes, const int32_t *tok,
                        int rows);

/* DSpark blocks (docs/DSPARK.md §4.2) on a FWD_BLOCK scratch: each lane has
 * T = dspark_block rows at positions pos0 .. (pos0: its context rows) with
 * ids tok, every one an output row: logits are the base logits (head of the
 * final-normed rows), hidden (optional) the final-normed rows [T][D].
 * Reads the lanes' stage rings, writes no state. */
dsv4_status forward_dspark_block(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes,
                                 const int32_t *tok, int rows);
/* One serial step of the Markov and confidence heads (docs/DSPARK.md §4.3,
 * §4.4) for n rows of the last forward_dspark_block on sc: row[i] (its index
 * among that forward's rows) conditioned on the token before it, prev[i]:
 * bias[i] = markov_w2 · markov_w1[prev[i]] (host, [n][V]; the row's logits
 * are base + bias) and conf[i] = sigmoid(conf · [h_row, markov_w1[prev[i]]]). */
dsv4_status forward_dspark_markov(dsv4_model *m, fwd_scratch *sc, const int32_t *prev, const int *row, int n,
                                  float *bias, float *conf);
/* The Markov rounds of nl lanes that draft greedily, chained on the device
 * (the backend's pick_sum; the caller checked it has one): lane j's round i
 * takes its block row j·B + i of the last forward_dspark_block (nl lanes of
 * B rows) conditioned on its token before (next[j], then its pick of round
 * i − 1), as forward_dspark_markov does, and picks the top id of the row's
 * logits plus bias (the host's sum and argmax). Every lane runs all rounds
 * (a lane's rounds past its own proposal are computed and ignored). Host
 * outputs [rounds][nl]: drafts, top (the picked sums), conf (the logits,
 * for forward_markov_row_check), bad (as that takes it). */
dsv4_status forward_dspark_greedy(dsv4_model *m, fwd_scratch *sc, const int32_t *next, int nl, int rounds,
                                  int32_t *drafts, float *top, float *conf, int32_t *bad);
/* A Markov row's checks (either path, in the host path's order): its
 * confidence logit *conf finite (then through the sigmoid, in place), no
 * non-finite bias (bad: the lowest such token, or -1). */
dsv4_status forward_markov_row_check(float *conf, int32_t bad);

/* Queues the state writes of the first n logged rows of a lane again (ring
 * rows, compressor inputs: the ops the forward ran on them) onto the state
 * of the log's layers at pos0 whose overwritten rows were restored: the
 * result is the state after feeding only those n tokens. Faults surface at
 * the next sync. */
void forward_replay(dsv4_model *m, dsv4_session *s, int64_t pos0, const fwd_log *log, int n);

#endif

/* Per-sequence decode state (spec §6), plain data in the backend's memory.
 *
 * Per layer, rows in the model's layout (m->layout, model/state_layout.c:
 * fp32 with --cache exact, packed FP8 / FP4 with --cache official):
 *   ring      [window] kv rows: K(=V) of the last `window` positions, slot pos % window
 *   comp      CSA/HCA main compressor: open window rows, CSA prev series A
 *             (fp32), entries [pos/ratio] kv rows
 *   idx       CSA only: the indexer's compressor, entries [pos/ratio] idx rows
 * Lifetimes: ring slots are overwritten after the layer's attention of the
 * chunk that supersedes them; open rows live until their window closes;
 * entries are written once at emission (roped at their window position) and
 * never change. Counts are derived from `pos` (entries = pos / ratio, open
 * rows = pos % ratio), so publishing a step is one store of `pos`.
 *
 * With an MTP head the state has one more layer, L[n_layers], at its own
 * position mtp_pos (the MTP rows consumed; row i reads the main model's
 * streams of position i and token i+1, so it trails pos): the window ring of
 * its SWA-only attention (spec §6.1).
 *
 * With a DSpark drafter it has one ring per stage, L[n_layers + s], at
 * mtp_pos (the context rows consumed: every verified position, written from
 * its target-layer features; docs/DSPARK.md §4.1): ring slot j % window holds
 * stage s's context key of position j. The block attends to all `window`
 * of them (the main model's rings keep window - 1 older rows live, the
 * incoming token being the window's last).
 *
 * With an MTP head the session also holds, in host memory, the rows the MTP
 * owes (issue 12): the main model's final streams (hc_mult·dim floats) and
 * the tokens of the last n_owed positions, pos-n_owed .. pos-1. MTP row i
 * reads stream i and token i+1, so the last owed row waits for the token
 * after pos-1 (the caller's: a spec lane's `next`). A step keeps them in
 * step with the state (engine/step.c, publish): an MTP lane's consumed rows
 * leave the front; a model lane that returns its streams (dsv4_lane.hidden)
 * adds its published rows when the owed rows are exactly mtp_pos .. pos-1
 * (complete), else they become its rows alone; a model lane without streams
 * leaves none. So a session fed by spec lanes with drafts is always
 * complete, whichever lane fed it, and its snapshot carries the rows. */
#ifndef DSV4_ENGINE_SESSION_H
#define DSV4_ENGINE_SESSION_H
#include "model/model.h"

typedef struct {
    uint8_t *ring;
    dsv4_comp_state comp, idx;
    int64_t cap;      /* entries capacity (comp and idx alike) */
} dsv4_layer_state;

struct dsv4_session {
    dsv4_model *m;
    int64_t pos;      /* tokens consumed */
    int64_t mtp_pos;  /* drafter rows consumed (MTP rows, DSpark context rows) */
    int poisoned;
    dsv4_layer_state *L; /* n_layers, then the drafter's n_draft layers */
    /* MTP head only: the owed rows (above); [cap_owed][hc_mult·dim] and
     * [cap_owed]. A step may move these buffers (prepare reserves room). */
    float *owed_h;
    int32_t *owed_tok;
    int64_t n_owed, cap_owed;
};

/* Layers of state: the main ones, plus the drafter's (MTP layer, DSpark stages). */
static inline int session_n_layers(const dsv4_session *s) { return s->m->cfg.n_layers + s->m->n_draft; }

/* Ring rows of layer l that stay live before the row at a session's
 * position is written: window - 1, or all window rows for a DSpark stage. */
static inline int session_ring_live(const dsv4_model *m, int l)
{
    return m->cfg.window - (m->has_dspark && l >= m->cfg.n_layers ? 0 : 1);
}

/* Grow entry storage so `n_tokens` total positions fit. Fails with
 * DSV4_ERR_NOMEM leaving the state as it was. */
dsv4_status session_reserve(dsv4_session *s, int64_t n_tokens);
/* Room for n owed rows (MTP head); DSV4_ERR_NOMEM leaves them as they were. */
dsv4_status session_owed_reserve(dsv4_session *s, int64_t n);


/* Benchmarks only: random state as if n tokens had been consumed (the rows
 * stored by the backend's ring_store, so packed rows are well formed). */
dsv4_status session_fill_random(dsv4_session *s, int64_t n);

#endif

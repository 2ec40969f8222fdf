/* One forward step over one or more lanes (sessions). */
#ifndef DSV4_ENGINE_FORWARD_H
#define DSV4_ENGINE_FORWARD_H
#include "engine/session.h"

typedef struct {
    dsv4_session *s; /* state read at s->pos and written in place */
    int T;           /* tokens of this lane in this step */
    int row0;        /* its first row among the step's rows */
} fwd_lane;

/* Activation memory for steps of up to `rows` rows and `out_rows` logits
 * rows; allocating it is the last fallible thing before a step writes state. */
typedef struct fwd_scratch fwd_scratch;
dsv4_status forward_scratch_new(dsv4_model *m, int rows, int out_rows, fwd_scratch **out);
void forward_scratch_free(dsv4_model *m, fwd_scratch *sc);

/* tok: `rows` host token ids, lane by lane. logits (host): NULL, all rows
 * (all_rows) or the last row of each lane. Writes every lane's state in place
 * (ring slots, compressor rows, entries) but does not advance s->pos: the
 * caller publishes. A failure after the first op leaves the lanes' state
 * partly written. */
dsv4_status forward_step(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes, const int32_t *tok,
                         int rows, float *logits, int all_rows);

#endif

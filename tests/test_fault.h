/* Fault injection for the step tests: a hash-routed layer's table entry set
 * to an out-of-range expert makes the next forward that routes that token
 * fail on the device (or the CPU) after state was touched. */
#ifndef DSV4_TEST_FAULT_H
#define DSV4_TEST_FAULT_H
#include <stdint.h>

#include "model/model.h"
#include "ops/ops.h"

/* Sets layer 0's first expert for token tok to v (backend memory) and
 * returns the value it had, to be put back the same way. */
static inline int32_t hash_entry_swap(dsv4_model *m, int32_t tok, int32_t v)
{
    int32_t *tab = (int32_t *)m->layers[0].tid2eid + (int64_t)tok * m->cfg.n_active, old;
    dsv4_backend *be = m->be;
    be->ops->download(be, &old, tab, sizeof old);
    be->ops->upload(be, tab, &v, sizeof v);
    return old;
}
#endif

#include "model/memplan.h"

#include <math.h>

/* Memory left for sessions, 0 when the weights and reserve do not fit. */
static uint64_t room(const memplan *p)
{
    uint64_t used = p->weights + p->reserve;
    return p->device > used ? p->device - used : 0;
}

uint64_t memplan_session_bytes(const memplan *p, int64_t ctx)
{
    return p->fixed + (uint64_t)ceil(p->per_token * (double)(ctx > 0 ? ctx : 0));
}

int64_t memplan_max_context(const memplan *p)
{
    uint64_t r = room(p);
    if (r < p->fixed) return 0;
    if (p->per_token <= 0) return p->max_pos;
    double c = floor((double)(r - p->fixed) / p->per_token);
    int64_t ctx = c >= (double)p->max_pos ? p->max_pos : (int64_t)c;
    while (ctx > 0 && memplan_session_bytes(p, ctx) > r) ctx--; /* ceil() rounding at the edge */
    return ctx;
}

int64_t memplan_sessions(const memplan *p, int64_t ctx)
{
    uint64_t one = memplan_session_bytes(p, ctx);
    return one ? (int64_t)(room(p) / one) : 0;
}

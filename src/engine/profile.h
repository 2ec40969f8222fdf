/* Per-op-family timing of a backend (see profile.c). */
#ifndef DSV4_ENGINE_PROFILE_H
#define DSV4_ENGINE_PROFILE_H
#include "ops/ops.h"

/* A backend that forwards to `inner` and times each op; destroy frees only
 * the wrapper. */
dsv4_backend *profile_wrap(dsv4_backend *inner);
/* Fills up to max (name, seconds, calls) of the families that ran; returns
 * how many. */
int profile_report(const dsv4_backend *b, const char **names, double *seconds, long *calls, int max);
void profile_reset(dsv4_backend *b);

#endif

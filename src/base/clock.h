/* Monotonic wall time in seconds: for timings, deadlines and statistics,
 * never for results. */
#ifndef DSV4_BASE_CLOCK_H
#define DSV4_BASE_CLOCK_H
#include <time.h>

static inline double clock_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif

/* CPU reference backend: internal declarations shared by the files in src/cpu. */
#ifndef DSV4_CPU_CPU_H
#define DSV4_CPU_CPU_H
#include "base/threadpool.h"
#include "ops/ops.h"

typedef struct {
    dsv4_pool *pool;
    float **row;      /* per-thread scratch of row_cap floats (one weight row) */
    int64_t row_cap;  /* the widest weight row of the model */
} cpu_impl;

static inline dsv4_pool *cpu_pool(dsv4_backend *b) { return ((cpu_impl *)b->impl)->pool; }
static inline float *cpu_scratch_row(dsv4_backend *b, int tid) { return ((cpu_impl *)b->impl)->row[tid]; }

/* The one dot product every CPU op uses: 8 independent fp32 accumulators
 * summed in a fixed order, so the result depends only on the data. */
float cpu_dot(const float *a, const float *b, int64_t n);

#endif

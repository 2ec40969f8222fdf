/* A fixed pool of worker threads running parallel-for loops.
 * Work is split into contiguous index ranges; each index is processed by
 * exactly one thread with the same code path whatever the thread count, so
 * results never depend on how many threads run (determinism, batch
 * invariance). */
#ifndef DSV4_BASE_THREADPOOL_H
#define DSV4_BASE_THREADPOOL_H
#include <stdint.h>

typedef struct dsv4_pool dsv4_pool;

/* fn(ctx, begin, end, thread_index) processes indices [begin, end). */
typedef void (*pool_fn)(void *ctx, int64_t begin, int64_t end, int tid);

/* n_threads <= 0: number of online CPUs. Returns NULL on failure. */
dsv4_pool *pool_new(int n_threads);
void pool_free(dsv4_pool *p);
int pool_size(const dsv4_pool *p);
/* Runs fn over [0, n) split into chunks of at least `grain` indices and
 * returns when all are done. Not reentrant: do not call from inside fn. */
void pool_for(dsv4_pool *p, int64_t n, int64_t grain, pool_fn fn, void *ctx);

#endif

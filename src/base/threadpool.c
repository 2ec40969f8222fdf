#include "base/threadpool.h"

#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

struct dsv4_pool {
    int n;                 /* threads including the caller */
    pthread_t *th;
    /* the workers' start arguments, owned by the pool: a worker never frees
     * anything, so no free runs on another thread after pool_new returns
     * (the allocation-failure tests count live allocations) */
    struct worker_arg *args;
    pthread_mutex_t mu;
    pthread_cond_t go, done;
    uint64_t generation;   /* bumped per job; workers wait for a new one */
    int pending;           /* workers still running the current job */
    int quit;
    /* current job */
    pool_fn fn;
    void *ctx;
    int64_t n_items, chunk;
};

typedef struct worker_arg { dsv4_pool *p; int tid; } worker_arg;

static void run_share(dsv4_pool *p, int tid)
{
    int64_t b = (int64_t)tid * p->chunk, e = b + p->chunk;
    if (e > p->n_items) e = p->n_items;
    if (b < e) p->fn(p->ctx, b, e, tid);
}

static void *worker(void *arg)
{
    const worker_arg *wa = arg;
    dsv4_pool *p = wa->p;
    int tid = wa->tid;
    uint64_t seen = 0;
    pthread_mutex_lock(&p->mu);
    for (;;) {
        while (!p->quit && p->generation == seen) pthread_cond_wait(&p->go, &p->mu);
        if (p->quit) break;
        seen = p->generation;
        pthread_mutex_unlock(&p->mu);
        run_share(p, tid);
        pthread_mutex_lock(&p->mu);
        if (--p->pending == 0) pthread_cond_signal(&p->done);
    }
    pthread_mutex_unlock(&p->mu);
    return NULL;
}

dsv4_pool *pool_new(int n_threads)
{
    if (n_threads <= 0) {
        long c = sysconf(_SC_NPROCESSORS_ONLN);
        n_threads = c > 0 ? (int)c : 1;
    }
    dsv4_pool *p = calloc(1, sizeof *p);
    if (!p) return NULL;
    p->n = n_threads;
    pthread_mutex_init(&p->mu, NULL);
    pthread_cond_init(&p->go, NULL);
    pthread_cond_init(&p->done, NULL);
    p->th = calloc((size_t)n_threads, sizeof *p->th);
    p->args = calloc((size_t)n_threads, sizeof *p->args);
    if (!p->th || !p->args) { free(p->th); free(p->args); free(p); return NULL; }
    for (int i = 1; i < n_threads; i++) {
        p->args[i].p = p;
        p->args[i].tid = i;
        if (pthread_create(&p->th[i], NULL, worker, &p->args[i])) {
            p->n = i; /* keep the threads we have */
            break;
        }
    }
    return p;
}

void pool_free(dsv4_pool *p)
{
    if (!p) return;
    pthread_mutex_lock(&p->mu);
    p->quit = 1;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    for (int i = 1; i < p->n; i++) pthread_join(p->th[i], NULL);
    pthread_mutex_destroy(&p->mu);
    pthread_cond_destroy(&p->go);
    pthread_cond_destroy(&p->done);
    free(p->th);
    free(p->args);
    free(p);
}

int pool_size(const dsv4_pool *p) { return p ? p->n : 1; }

void pool_for(dsv4_pool *p, int64_t n, int64_t grain, pool_fn fn, void *ctx)
{
    if (n <= 0) return;
    if (grain < 1) grain = 1;
    int use = p ? p->n : 1;
    if ((n + grain - 1) / grain < use) use = (int)((n + grain - 1) / grain);
    if (use <= 1) { fn(ctx, 0, n, 0); return; }
    pthread_mutex_lock(&p->mu);
    p->fn = fn;
    p->ctx = ctx;
    p->n_items = n;
    p->chunk = (n + use - 1) / use;
    p->pending = p->n - 1;
    p->generation++;
    pthread_cond_broadcast(&p->go);
    pthread_mutex_unlock(&p->mu);
    run_share(p, 0);
    pthread_mutex_lock(&p->mu);
    while (p->pending > 0) pthread_cond_wait(&p->done, &p->mu);
    pthread_mutex_unlock(&p->mu);
}

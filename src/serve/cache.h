/* Prefix reuse: sessions stay resident after their request, and a request
 * whose prompt extends what a resident session holds continues from it.
 *
 * A session's state depends on its exact token prefix (the window and the
 * compressors see every token), so a session can only be continued in
 * place when it holds a prefix of the new prompt. To reuse more when a
 * conversation changes its end (a thinking turn whose reasoning the next
 * rendering drops, an edited last message, a regenerated reply), the
 * scheduler marks turn boundaries while prefilling: a snapshot of the state
 * at that point, restored when a later prompt agrees up to there.
 *
 * Memory: every resident session costs its state (fixed part + per token)
 * and its marks' images; idle sessions are evicted least recently used
 * first while the total exceeds the budget. With a kv folder, each state a
 * released session holds (and each mark) is also written there, and on a
 * miss in memory the longest stored prefix of the prompt is loaded, so
 * conversations survive evictions and restarts.
 *
 * Owned by the scheduler thread: no locking. */
#ifndef DSV4_SERVE_CACHE_H
#define DSV4_SERVE_CACHE_H
#include <stdint.h>

#include "dsv4.h"
#include "serve/metrics.h"

#define CACHE_MAX_MARKS 8

typedef struct {
    int64_t pos;         /* the state after held[0..pos) */
    dsv4_snapshot *snap;
    int saved;           /* written to the kv folder */
} cache_mark_t;

typedef struct {
    dsv4_session *s;
    int32_t *held;       /* exactly the tokens the session has consumed */
    int n_held, cap_held;
    cache_mark_t marks[CACHE_MAX_MARKS]; /* ascending pos */
    int n_marks;
    int busy;            /* lent to a request */
    uint64_t used;       /* LRU clock */
} cache_slot;

typedef struct cache cache;

/* budget: bytes for resident state; kv_dir may be NULL. Scans kv_dir,
 * verifying every file (bad ones are logged and ignored). */
dsv4_status cache_open(dsv4_model *m, uint64_t budget, const char *kv_dir, metrics *met, cache **out);
void cache_close(cache *c);

/* A session holding the longest reusable prefix of prompt[0..n) (n >= 1):
 * *reused tokens (< n) are already in its state. Fails only when no
 * session can be made (out of memory). */
dsv4_status cache_acquire(cache *c, const int32_t *prompt, int n, cache_slot **out, int *reused);
/* The slot's session consumed these tokens. */
dsv4_status cache_held_add(cache_slot *sl, const int32_t *t, int n);
/* Keep a snapshot of the current state as a turn boundary (the oldest
 * mark goes when there are CACHE_MAX_MARKS). */
dsv4_status cache_mark(cache *c, cache_slot *sl);
/* The request is over. ok = 0: the state is unreliable (a failed step)
 * and the session is dropped. Otherwise it stays resident (within the
 * budget) and, with a kv folder, its state and marks are stored. */
void cache_release(cache *c, cache_slot *sl, int ok);

#endif

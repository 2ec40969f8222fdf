/* What the scheduler's files share: scheduler.c (queue, admission, prefill,
 * plain decoding, lifetime) and sched_spec.c (decoding with --spec). Both
 * run on the scheduler thread only. */
#ifndef DSV4_SERVE_SCHED_INTERNAL_H
#define DSV4_SERVE_SCHED_INTERNAL_H
#include "serve/scheduler.h"

struct sched {
    sched_config cfg;
    pthread_t thread;
    pthread_mutex_t mu;     /* guards queue, n_queued, stop */
    pthread_cond_t cv;
    job *queue, *queue_tail;
    int n_queued, stop;
    job *active[DSV4_MAX_LANES];
    int n_active;
    float *logits;          /* DSV4_MAX_LANES rows of vocab */
    int vocab, max_pos;
};

double sched_now(void);
int job_cancelled(const job *j);
/* Copies what the generation made visible since the last call to the
 * client side; n_new tokens were produced since, and lp (NULL: none) is the
 * logprob entry of the one that was sampled. */
void sched_publish(sched *s, job *j, int n_new, const gen_token *lp);
void sched_fail(job *j, int status, const char *msg);
/* While the forced opening is to come the reply may not end. */
void sched_mask_stops(const job *j, float *logits);
/* n_tokens came out of a step that ended at now: the time per output token. */
void sched_tpot(sched *s, job *j, int n_tokens, double now);

/* A step's gate: vetoes the step when one of its jobs was cancelled. */
typedef struct {
    job **jobs;
    int n;
} sched_gate;
int sched_gate_fn(void *user, int n_lanes, double elapsed_ms);
/* After a cohort step failed (which may poison every lane in it): the
 * job's session rebuilt from the tokens it holds. A session is a pure
 * function of them (batching and chunking never change a bit), so stepping
 * it alone then gives exactly what the cohort would have. -1: the job
 * failed. */
int sched_rebuild(job *j);

/* ---- --spec (sched_spec.c): each job's spec lane feeds its session ---- */

/* At admission. -1: the job failed. */
int spec_admit(sched *s, job *j);
/* A prefill chunk; the last one also gives the reply's first tokens. */
int spec_prefill_chunk(sched *s, job *j, const int32_t *t, int n, int last);
/* One speculative step over every job that is decoding. */
void spec_round(sched *s);
void spec_retire(job *j);

#endif

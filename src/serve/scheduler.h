/* The scheduler: one thread that owns the model and every session. It
 * turns queued generation requests (jobs) into steps:
 *   - admission: a job gets a lane when fewer than max_lanes are busy, and a
 *     session from the prefix cache holding as much of its prompt as exists;
 *   - prefill: one chunk of at most prefill_chunk prompt tokens of one job
 *     per round, cut at turn boundaries (where the cache keeps a snapshot),
 *     so decode steps keep coming while long prompts load;
 *   - decode: every job that has tokens to feed (its last sampled token,
 *     or a forced opening: force.h) goes into one transaction (dsv4_step);
 *     its gate vetoes the step when a lane's client went away, and the step
 *     is retried without that lane, so nothing of a cancelled lane is
 *     published and the other lanes advance exactly as they would have.
 *     With spec_k each job instead has a spec lane (engine/spec.h) and the
 *     step is one spec_step over all of them: the MTP head drafts, one
 *     verify step keeps what the model agrees with; greedy output is the
 *     same as without, sampled output follows the same distribution.
 * Batching and chunking do not change a lane's numbers, so a job's output
 * is the same whatever runs next to it. The same fact contains faults: when
 * a cohort step fails (which poisons all its lanes), each lane's session is
 * rebuilt from the tokens it holds and stepped alone, so only a lane that
 * fails by itself fails its request.
 *
 * A job is shared by the scheduler and the HTTP thread that submitted it
 * (reference counted). The scheduler publishes visible text, per-token
 * logprobs and the end under the job's mutex; the HTTP side waits on its
 * condition variable and may set `cancelled` at any time. */
#ifndef DSV4_SERVE_SCHEDULER_H
#define DSV4_SERVE_SCHEDULER_H
#include <pthread.h>

#include "engine/spec.h"
#include "serve/cache.h"
#include "serve/metrics.h"
#include "text/generate.h"

typedef struct job job;
struct job {
    /* input, fixed at submission (owned by the job) */
    int32_t *prompt;
    int n_prompt;
    sampling_params sp;
    int max_tokens;
    int logprobs, top_logprobs;
    int32_t *stop_ids;
    int n_stop_ids;
    char **stops;
    int n_stops;
    /* tool_choice demanding a call: once the reply reaches force_after (a
     * token id: the end of the reasoning), or at once when it is -1, it
     * continues with one of n_force token sequences (alternative a is
     * force[force_off[a] .. force_off[a + 1])): the tokens where the ones
     * still possible agree are taken as if sampled, and where they part the
     * model picks among their next tokens. Until then the reply cannot end
     * (its stop tokens are never sampled). Forced tokens have no logprobs. */
    int32_t *force;
    int *force_off;
    int n_force;
    int32_t force_after;
    /* output, under mu */
    pthread_mutex_t mu;
    pthread_cond_t cv;
    char *out;              /* visible text so far */
    size_t n_out, cap_out;
    gen_token *lp;          /* one per output token, when logprobs */
    int n_lp, cap_lp;
    int n_cached;           /* prompt tokens the cache supplied */
    int n_sampled;          /* output tokens (sampled or forced), stop token included */
    int admitted, done;
    gen_end end;
    int stop_index;
    char error[256];        /* end == GEN_END_ERROR */
    int error_status;       /* HTTP status for it */
    int cancelled;          /* set by the client side (atomic) */
    int refs;               /* atomic */
    double t_submit;
    /* scheduler-private */
    gen_req g;
    cache_slot *sl;
    int cursor;             /* prompt tokens in the session */
    int force_state;        /* FORCE_WAIT, FORCE_ON (since ids[force_at]), FORCE_DONE */
    int force_at;
    int32_t *allow;         /* [n_force]: the next tokens the model may pick among */
    float *allow_logit;     /* [n_force]: scratch */
    /* --spec */
    spec_lane lane;         /* feeds the session and drafts */
    int32_t lane_next;      /* the lane's token its session has not consumed; -1: none */
    long long lane_drafted, lane_kept; /* the lane's counts already in the metrics */
    int32_t *wait_mask, *wait_stops; /* while the forced opening waits: the stop tokens masked, and the
                                        reasoning's end added to the stops (where a step's output ends) */
    int n_wait_mask, n_wait_stops;
    double t_last;
    job *next;
};

typedef struct {
    dsv4_model *model;
    const gen_model *gm;
    int max_lanes;          /* 1..DSV4_MAX_LANES (DSV4_MAX_LANES / 2 with spec_k) */
    int max_queue;
    int prefill_chunk;
    int eos_id;             /* a turn ends after it: snapshot point; -1 none */
    int assistant_id;       /* "<｜Assistant｜>": state before the last one is kept */
    cache *cache;
    metrics *met;
    int spec_k;             /* > 0: speculative decoding, the drafter (MTP head or DSpark) drafting spec_k tokens a step */
} sched_config;

typedef struct sched sched;

dsv4_status sched_start(const sched_config *cfg, sched **out);
/* Stops the thread: running and queued jobs end as cancelled, and later
 * submissions are refused. The scheduler stays valid until sched_free, so
 * HTTP threads still running may call sched_submit. */
void sched_stop(sched *s);
void sched_free(sched *s);

/* A job with one reference (the caller's) and copies of the arrays. */
job *job_new(const int32_t *prompt, int n_prompt, const sampling_params *sp, int max_tokens, int logprobs,
             int top_logprobs, const int32_t *stop_ids, int n_stop_ids, char *const *stops, int n_stops);
/* Queues it (takes its own reference). -1 when the queue is full. */
int sched_submit(sched *s, job *j);
/* Waits (up to ms) until the job has more than n_out bytes or n_lp
 * logprobs, or is done. Returns 1 when there is news, 0 on timeout. */
int job_wait(job *j, size_t n_out, int n_lp, int ms);
void job_cancel(job *j);
void job_put(job *j);

#endif

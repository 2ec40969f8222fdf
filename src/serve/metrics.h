/* Server counters, gauges and histograms, rendered as Prometheus text for
 * GET /metrics. Any thread may update them (one mutex; updates are a few
 * additions per request or step). */
#ifndef DSV4_SERVE_METRICS_H
#define DSV4_SERVE_METRICS_H
#include <pthread.h>
#include <stdint.h>

#include "text/chat_json.h"

#define MET_MAX_BUCKETS 16
#define MET_MAX_CODES 16

typedef struct {
    int n;                          /* finite bucket bounds */
    double le[MET_MAX_BUCKETS];
    uint64_t count[MET_MAX_BUCKETS + 1]; /* per bucket, last = +Inf */
    double sum;
    uint64_t total;
} met_hist;

typedef enum {
    MET_PROMPT_TOKENS, MET_GENERATED_TOKENS, MET_CACHE_HITS, MET_CACHE_MISSES, MET_CACHED_TOKENS,
    MET_DISK_WRITES, MET_DISK_LOADS, MET_DISK_REJECTS, MET_STEPS, MET_CANCELLED, MET_VETOES,
    MET_SPEC_DRAFTED, MET_SPEC_ACCEPTED, MET_N_COUNTERS
} met_counter;

typedef enum { MET_QUEUE_DEPTH, MET_ACTIVE, MET_RESIDENT, MET_N_GAUGES } met_gauge;

typedef struct {
    pthread_mutex_t mu;
    int codes[MET_MAX_CODES];       /* HTTP status -> requests */
    uint64_t by_code[MET_MAX_CODES];
    int n_codes;
    uint64_t counter[MET_N_COUNTERS];
    int64_t gauge[MET_N_GAUGES];
    met_hist batch, ttft, tpot;
} metrics;

void metrics_init(metrics *m);
void metrics_destroy(metrics *m);
void metrics_request(metrics *m, int status);
void metrics_add(metrics *m, met_counter c, uint64_t v);
void metrics_set(metrics *m, met_gauge g, int64_t v);
void metrics_batch(metrics *m, int lanes);
void metrics_ttft(metrics *m, double seconds);
void metrics_tpot(metrics *m, double seconds);
/* The Prometheus text exposition (version 0.0.4). */
void metrics_render(metrics *m, tbuf *out);

#endif

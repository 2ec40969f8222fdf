#include "serve/metrics.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static void hist_init(met_hist *h, const double *le, int n)
{
    memset(h, 0, sizeof *h);
    h->n = n;
    memcpy(h->le, le, (size_t)n * sizeof *le);
}

void metrics_init(metrics *m)
{
    memset(m, 0, sizeof *m);
    pthread_mutex_init(&m->mu, NULL);
    static const double batch[] = {1, 2, 4, 8, 16, 32, 64};
    static const double ttft[] = {0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
    static const double tpot[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5};
    hist_init(&m->batch, batch, 7);
    hist_init(&m->ttft, ttft, 13);
    hist_init(&m->tpot, tpot, 11);
}

void metrics_destroy(metrics *m) { pthread_mutex_destroy(&m->mu); }

void metrics_request(metrics *m, int status)
{
    pthread_mutex_lock(&m->mu);
    int i = 0;
    while (i < m->n_codes && m->codes[i] != status) i++;
    if (i == m->n_codes && i < MET_MAX_CODES) m->codes[m->n_codes++] = status;
    if (i < MET_MAX_CODES) m->by_code[i]++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_add(metrics *m, met_counter c, uint64_t v)
{
    pthread_mutex_lock(&m->mu);
    m->counter[c] += v;
    pthread_mutex_unlock(&m->mu);
}

void metrics_set(metrics *m, met_gauge g, int64_t v)
{
    pthread_mutex_lock(&m->mu);
    m->gauge[g] = v;
    pthread_mutex_unlock(&m->mu);
}

static void observe(metrics *m, met_hist *h, double v)
{
    pthread_mutex_lock(&m->mu);
    int b = 0;
    while (b < h->n && v > h->le[b]) b++;
    h->count[b]++;
    h->sum += v;
    h->total++;
    pthread_mutex_unlock(&m->mu);
}

void metrics_batch(metrics *m, int lanes) { observe(m, &m->batch, lanes); }
void metrics_ttft(metrics *m, double s) { observe(m, &m->ttft, s); }
void metrics_tpot(metrics *m, double s) { observe(m, &m->tpot, s); }

static void line(tbuf *o, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void line(tbuf *o, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (n > 0) tbuf_add(o, buf, (size_t)n < sizeof buf ? (size_t)n : sizeof buf - 1);
}

static void hist(tbuf *o, const char *name, const char *help, const met_hist *h)
{
    line(o, "# HELP %s %s\n# TYPE %s histogram\n", name, help, name);
    uint64_t cum = 0;
    for (int b = 0; b < h->n; b++) {
        cum += h->count[b];
        line(o, "%s_bucket{le=\"%g\"} %llu\n", name, h->le[b], (unsigned long long)cum);
    }
    line(o, "%s_bucket{le=\"+Inf\"} %llu\n%s_sum %.9g\n%s_count %llu\n", name, (unsigned long long)h->total, name,
         h->sum, name, (unsigned long long)h->total);
}

void metrics_render(metrics *m, tbuf *o)
{
    static const struct { const char *name, *help; } counters[MET_N_COUNTERS] = {
        {"dsv4_prompt_tokens_total", "Prompt tokens of admitted generation requests."},
        {"dsv4_generation_tokens_total", "Output tokens (stop tokens and forced tool-call openings included)."},
        {"dsv4_prefix_cache_hits_total", "Requests that continued from resident or stored state."},
        {"dsv4_prefix_cache_misses_total", "Requests that started from an empty session."},
        {"dsv4_prefix_cache_tokens_total", "Prompt tokens not evaluated thanks to the prefix cache."},
        {"dsv4_kv_disk_writes_total", "Session state files written to --kv-dir."},
        {"dsv4_kv_disk_loads_total", "Session state files loaded on a cache hit."},
        {"dsv4_kv_disk_rejects_total", "Session state files that did not verify and were ignored."},
        {"dsv4_steps_total", "Decode steps run (one transaction each)."},
        {"dsv4_requests_cancelled_total", "Generation requests ended by a client disconnect."},
        {"dsv4_step_vetoes_total", "Steps vetoed by the gate because a lane was cancelled."},
        {"dsv4_spec_decode_draft_tokens_total", "Tokens the drafter (MTP head or DSpark) drafted (--spec)."},
        {"dsv4_spec_decode_accepted_tokens_total", "Drafted tokens the model accepted (--spec)."},
    };
    static const struct { const char *name, *help; } gauges[MET_N_GAUGES] = {
        {"dsv4_queue_depth", "Requests waiting for a lane."},
        {"dsv4_active_sessions", "Requests being prefilled or decoded."},
        {"dsv4_resident_sessions", "Sessions held in memory (active and idle)."},
    };
    pthread_mutex_lock(&m->mu);
    line(o, "# HELP dsv4_requests_total HTTP requests answered, by status.\n# TYPE dsv4_requests_total counter\n");
    for (int i = 0; i < m->n_codes; i++)
        line(o, "dsv4_requests_total{status=\"%d\"} %llu\n", m->codes[i], (unsigned long long)m->by_code[i]);
    for (int i = 0; i < MET_N_COUNTERS; i++)
        line(o, "# HELP %s %s\n# TYPE %s counter\n%s %llu\n", counters[i].name, counters[i].help, counters[i].name,
             counters[i].name, (unsigned long long)m->counter[i]);
    for (int i = 0; i < MET_N_GAUGES; i++)
        line(o, "# HELP %s %s\n# TYPE %s gauge\n%s %lld\n", gauges[i].name, gauges[i].help, gauges[i].name,
             gauges[i].name, (long long)m->gauge[i]);
    hist(o, "dsv4_step_batch_size", "Lanes per decode step.", &m->batch);
    hist(o, "dsv4_time_to_first_token_seconds", "From the request's arrival to its first sampled token.", &m->ttft);
    hist(o, "dsv4_time_per_output_token_seconds", "A request's time between steps, per output token the step gave it.", &m->tpot);
    pthread_mutex_unlock(&m->mu);
}

/* dsv4 serve: the pieces the HTTP layer and the API handlers share.
 *
 *   http.c       libmicrohttpd daemon: body limits, /health, API key, logging,
 *                the blocking SSE reader (one thread per connection)
 *   serve_main.c the server's lifetime, and which API answers which path
 *   openai.c     /v1/chat/completions, /v1/completions, /v1/models
 *   anthropic.c  /v1/messages
 *   request.c    request bodies -> api_request (prompt text + settings)
 *   server.c     api_request -> tokens -> a job on the scheduler
 *   scheduler.c  the thread that owns the model; cache.c, kvstore.c its
 *                prefix cache and state files; metrics.c the counters */
#ifndef DSV4_SERVE_SERVER_H
#define DSV4_SERVE_SERVER_H
#include <stddef.h>
#include <stdint.h>

#include "serve/metrics.h"
#include "serve/request.h"
#include "serve/scheduler.h"
#include "text/chat_json.h"
#include "text/dsml_stream.h"
#include "text/tokenizer.h"

typedef struct {
    const char *model_dir;   /* a checkpoint folder, or NULL with synthetic */
    const char *synthetic;   /* "flash" | "pro": random weights of the real dimensions */
    int synth_layers, synth_experts; /* <= 0: the real counts */
    const char *synth_weights; /* "fp8-fp4" (NULL: the same) or "bf16", as for dsv4 bench */
    const char *tokenizer;   /* NULL: model_dir/tokenizer.json (required with synthetic) */
    const char *host;        /* default 127.0.0.1 */
    int port;                /* 0: any free port (printed) */
    const char *api_key;     /* NULL: no key needed */
    const char *model_name;  /* reported by /v1/models; default: the folder's name */
    const char *device;
    int threads;
    int max_sessions;        /* lanes decoded together */
    int max_queue;
    int ctx;                 /* most tokens a request may hold (prompt + output); 0: the model's */
    const char *kv_dir;
    uint64_t cache_bytes;
    int prefill_chunk;
    int spec_k;              /* --spec mtp:K / dspark:K: drafts per step (< 0: the DSpark block's); 0: plain decoding */
    int spec_dspark;         /* 1: --spec dspark (the checkpoint must have a DSpark drafter) */
    dsv4_cache_mode cache;   /* --cache: the cache numerics (and state layout) */
    size_t max_body;         /* bytes */
    int max_prompt_tokens;
    int timeout_s;           /* idle connection timeout (slow clients) */
    int keepalive_ms;        /* a stream with nothing to say for this long gets a keep-alive */
    int max_connections;
    api_limits lim;
} serve_options;

typedef struct server server;
typedef struct http_reply http_reply;
/* Answers a request that passed the HTTP layer's checks (body: the whole
 * request body). */
typedef void (*serve_route_fn)(server *S, http_reply *r, const char *method, const char *url, const char *body,
                               size_t len);
struct server {
    serve_options o;
    serve_route_fn route;    /* serve_main.c's routes */
    char model_name[128];
    dsv4_model *model;
    tok_t *tok;
    gen_model gm;
    int32_t *masked;
    int n_masked;
    int bos_id, eos_ids[2], n_eos;
    int ctx;
    metrics met;
    cache *cache;
    sched *sched;
    uint64_t seq;            /* request ids and default seeds (atomic) */
};

/* Runs until SIGINT/SIGTERM; returns the process exit status. */
int serve_main(const serve_options *o);

/* A started generation: the job and what the handler needs to answer. */
typedef struct {
    job *j;
    int n_prompt;
    uint64_t id;             /* for response ids */
} gen_handle;

/* Tokenizes r->prompt, checks it against the limits and queues a job.
 * Returns 0, or an HTTP status (400, 413, 503) with msg filled. */
int serve_submit(server *S, const api_request *r, gen_handle *h, char *msg, size_t msg_len);
/* Blocks until the job is done. cancelled() (may be NULL) is polled while
 * waiting; when it returns non-zero the job is cancelled. */
void serve_wait(job *j, int (*cancelled)(void *), void *user);

/* ---- replies (http.c) ---- */

typedef struct http_stream http_stream;
/* Produces the next bytes of a streamed body into out. Returns 1 while
 * more will follow, 0 after the last bytes. Called with nothing to send;
 * may block in job_wait; when it times out with nothing to say it writes
 * a keep-alive (an SSE comment or a ping event). */
typedef int (*http_produce_fn)(http_stream *st, tbuf *out);
struct http_stream {
    server *srv;
    job *j;
    http_produce_fn produce;
    void (*destroy)(http_stream *st); /* frees the handler's state (not j) */
    void *state;
};

void http_reply_json(http_reply *r, int status, char *body_owned);
void http_reply_text(http_reply *r, int status, const char *content_type, char *body_owned);
/* The error body in the format of the API the path belongs to. */
void http_reply_error(http_reply *r, int status, const char *type, const char *message);
/* Streams text/event-stream; takes ownership of st (and its job reference). */
void http_reply_stream(http_reply *r, http_stream *st);
/* The connection went away (a non-streaming request may stop waiting). */
int http_client_gone(void *reply);
/* The daemon on S->o.host:*port (0: any free port, written back), handing
 * requests to S->route; NULL after a message. */
void *http_start(server *S, int *port);
void http_stop(void *daemon);

/* Handlers: body is the whole request body. */
void openai_models(server *S, http_reply *r);
void openai_chat(server *S, const char *body, size_t len, http_reply *r);
void openai_completions(server *S, const char *body, size_t len, http_reply *r);
void anthropic_messages(server *S, const char *body, size_t len, http_reply *r);

/* Shared by the handlers (server.c). */
/* What every API's stream state starts with: the queued job, the request
 * (owning its strings) and the reader that splits the reply into reasoning,
 * content and tool calls. */
typedef struct {
    gen_handle h;
    api_request req;
    dsml_stream ds;
} api_stream;
/* What an API adds to the common request path: its plain answer and its
 * stream (state of stream_size bytes beginning with an api_stream). */
typedef struct {
    void (*respond)(server *S, gen_handle *h, api_request *req, http_reply *r);
    size_t stream_size;
    http_produce_fn produce;
    void (*destroy)(http_stream *st);
} api_handler;
/* Parses body as a request of kind, queues it, and answers through ah. */
void serve_request(server *S, api_kind kind, const api_handler *ah, const char *body, size_t len, http_reply *r);
const char *serve_finish_reason(gen_end end, int has_calls);
char *serve_token_text(server *S, int32_t id, size_t *len); /* malloc'd; NULL if undecodable */

#endif

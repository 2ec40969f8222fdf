/* The HTTP side: libmicrohttpd with one thread per connection, so a handler
 * may block while its job runs and a streamed body is produced by blocking
 * reads of the job (the SSE reader below).
 *
 * Limits: the body is refused with 413 past max_body (checked against
 * Content-Length before reading, and while reading); idle connections close
 * after timeout_s (slow clients: a request trickled in byte by byte, a
 * reader that stops reading); at most max_connections at once. The API key
 * is compared in constant time. One log line per request on stderr. */
#include <arpa/inet.h>
#include <microhttpd.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>

#include "base/clock.h"
#include "serve/server.h"

typedef enum { FMT_OPENAI, FMT_ANTHROPIC } err_format;

/* Per request. */
typedef struct {
    tbuf body;
    int status;          /* of the queued response */
    double t0;
    char method[8], url[96];
    err_format fmt;
} conn_ctx;

struct http_reply {
    server *S;
    struct MHD_Connection *c;
    conn_ctx *cx;
    int queued;
};

static void queue(http_reply *r, int status, struct MHD_Response *resp)
{
    if (!resp) return;
    MHD_add_response_header(resp, "Cache-Control", "no-store");
    MHD_queue_response(r->c, (unsigned)status, resp);
    MHD_destroy_response(resp);
    r->cx->status = status;
    r->queued = 1;
}

void http_reply_text(http_reply *r, int status, const char *content_type, char *body)
{
    struct MHD_Response *resp = body ? MHD_create_response_from_buffer(strlen(body), body, MHD_RESPMEM_MUST_FREE)
                                     : MHD_create_response_from_buffer(0, (char *)"", MHD_RESPMEM_PERSISTENT);
    if (!resp) { free(body); return; }
    MHD_add_response_header(resp, "Content-Type", content_type);
    queue(r, status, resp);
}

void http_reply_json(http_reply *r, int status, char *body) { http_reply_text(r, status, "application/json", body); }

void http_reply_error(http_reply *r, int status, const char *type, const char *message)
{
    cJSON *o = cJSON_CreateObject(), *e = cJSON_CreateObject();
    if (!o || !e) { cJSON_Delete(o); cJSON_Delete(e); http_reply_json(r, status, NULL); return; }
    if (r->cx->fmt == FMT_ANTHROPIC) {
        static const struct { int status; const char *type; } k[] = {
            {400, "invalid_request_error"}, {401, "authentication_error"}, {404, "not_found_error"},
            {405, "invalid_request_error"}, {413, "request_too_large"}, {503, "overloaded_error"},
        };
        if (!type) {
            type = "api_error";
            for (size_t i = 0; i < sizeof k / sizeof k[0]; i++)
                if (k[i].status == status) type = k[i].type;
        }
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddStringToObject(e, "type", type);
        cJSON_AddStringToObject(e, "message", message);
    } else {
        if (!type) type = status == 401 ? "authentication_error" : status >= 500 ? "server_error" : "invalid_request_error";
        cJSON_AddStringToObject(e, "message", message);
        cJSON_AddStringToObject(e, "type", type);
        cJSON_AddNullToObject(e, "param");
        cJSON_AddNullToObject(e, "code");
    }
    cJSON_AddItemToObject(o, "error", e);
    char *s = cJSON_PrintUnformatted(o);
    cJSON_Delete(o);
    http_reply_json(r, status, s);
}

/* ---- streaming ---- */

typedef struct {
    http_stream *st;
    tbuf buf;
    size_t off;
    int more;
} sse_reader;

static ssize_t sse_read(void *cls, uint64_t pos, char *out, size_t max)
{
    (void)pos;
    sse_reader *rd = cls;
    while (rd->off == rd->buf.len) {
        if (!rd->more) return MHD_CONTENT_READER_END_OF_STREAM;
        rd->buf.len = 0;
        rd->off = 0;
        rd->more = rd->st->produce(rd->st, &rd->buf);
        if (rd->buf.oom) return MHD_CONTENT_READER_END_WITH_ERROR;
    }
    size_t n = rd->buf.len - rd->off;
    if (n > max) n = max;
    memcpy(out, rd->buf.p + rd->off, n);
    rd->off += n;
    return (ssize_t)n;
}

/* The response is gone: sent, or the client left (then the job is still
 * running and is cancelled here). */
static void sse_free(void *cls)
{
    sse_reader *rd = cls;
    http_stream *st = rd->st;
    if (st->j) {
        job_cancel(st->j);
        job_put(st->j);
    }
    if (st->destroy) st->destroy(st);
    free(st);
    tbuf_free(&rd->buf);
    free(rd);
}

void http_reply_stream(http_reply *r, http_stream *st)
{
    sse_reader *rd = calloc(1, sizeof *rd);
    if (!rd) {
        if (st->j) { job_cancel(st->j); job_put(st->j); }
        if (st->destroy) st->destroy(st);
        free(st);
        http_reply_error(r, 503, NULL, "out of memory");
        return;
    }
    rd->st = st;
    rd->more = 1;
    struct MHD_Response *resp = MHD_create_response_from_callback(MHD_SIZE_UNKNOWN, 4096, sse_read, rd, sse_free);
    if (!resp) { sse_free(rd); return; }
    MHD_add_response_header(resp, "Content-Type", "text/event-stream");
    MHD_add_response_header(resp, "X-Accel-Buffering", "no");
    queue(r, 200, resp);
}

int http_client_gone(void *reply)
{
    http_reply *r = reply;
    const union MHD_ConnectionInfo *ci = MHD_get_connection_info(r->c, MHD_CONNECTION_INFO_CONNECTION_FD);
    if (!ci) return 0;
    char b;
    ssize_t n = recv(ci->connect_fd, &b, 1, MSG_PEEK | MSG_DONTWAIT);
    return n == 0; /* orderly shutdown by the peer */
}

/* ---- routing ---- */

/* Constant-time in the key's contents: every byte of the longer string is
 * looked at whatever matches. */
static int key_ok(const char *given, const char *want)
{
    if (!given) return 0;
    size_t a = strlen(given), b = strlen(want), n = a > b ? a : b;
    unsigned diff = (unsigned)(a ^ b);
    for (size_t i = 0; i < n; i++) diff |= (unsigned char)(i < a ? given[i] : 0) ^ (unsigned char)(i < b ? want[i] : 0);
    return diff == 0;
}

static int authorized(server *S, struct MHD_Connection *c)
{
    if (!S->o.api_key) return 1;
    const char *auth = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Authorization");
    const char *xkey = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "x-api-key");
    int ok = 0;
    if (auth && !strncasecmp(auth, "Bearer ", 7)) ok |= key_ok(auth + 7, S->o.api_key);
    if (xkey) ok |= key_ok(xkey, S->o.api_key);
    return ok;
}

/* What every path shares: /health answers without a key; everything else
 * needs the API key, then goes to the server's routes (S->route). */
static void route(server *S, http_reply *r, const char *method, const char *url)
{
    conn_ctx *cx = r->cx;
    if (!strcmp(url, "/health")) {
        if (strcmp(method, "GET")) { http_reply_error(r, 405, NULL, "use GET"); return; }
        http_reply_json(r, 200, strdup("{\"status\":\"ok\"}"));
        return;
    }
    if (!authorized(S, r->c)) { http_reply_error(r, 401, NULL, "invalid or missing API key"); return; }
    S->route(S, r, method, url, cx->body.p ? cx->body.p : "", cx->body.len);
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
                                  const char *version, const char *upload, size_t *upload_size, void **con_cls)
{
    (void)version;
    server *S = cls;
    conn_ctx *cx = *con_cls;
    http_reply r = {S, c, cx, 0};
    if (!cx) {
        if (!(cx = calloc(1, sizeof *cx))) return MHD_NO;
        *con_cls = cx;
        r.cx = cx;
        cx->t0 = clock_s();
        snprintf(cx->method, sizeof cx->method, "%s", method);
        snprintf(cx->url, sizeof cx->url, "%s", url);
        cx->fmt = !strncmp(url, "/v1/messages", 12) ? FMT_ANTHROPIC : FMT_OPENAI;
        const char *cl = MHD_lookup_connection_value(c, MHD_HEADER_KIND, "Content-Length");
        if (cl && strtoull(cl, NULL, 10) > S->o.max_body) {
            http_reply_error(&r, 413, NULL, "the request body is larger than this server's limit");
            return MHD_YES;
        }
        return MHD_YES;
    }
    if (cx->status) { *upload_size = 0; return MHD_YES; } /* already answered (413): drain */
    if (*upload_size) {
        if (cx->body.len + *upload_size > S->o.max_body) {
            http_reply_error(&r, 413, NULL, "the request body is larger than this server's limit");
            *upload_size = 0;
            return MHD_YES;
        }
        tbuf_add(&cx->body, upload, *upload_size);
        *upload_size = 0;
        if (cx->body.oom) return MHD_NO;
        return MHD_YES;
    }
    route(S, &r, method, url);
    if (!r.queued) http_reply_error(&r, 500, NULL, "no response");
    return MHD_YES;
}

static void on_completed(void *cls, struct MHD_Connection *c, void **con_cls, enum MHD_RequestTerminationCode why)
{
    (void)c;
    server *S = cls;
    conn_ctx *cx = *con_cls;
    if (!cx) return;
    int status = cx->status ? cx->status : 499; /* nothing was sent */
    metrics_request(&S->met, status);
    fprintf(stderr, "dsv4 serve: %s %s %d %.1f ms%s\n", cx->method, cx->url, status, 1e3 * (clock_s() - cx->t0),
            why == MHD_REQUEST_TERMINATED_COMPLETED_OK ? "" : " (connection closed early)");
    tbuf_free(&cx->body);
    free(cx);
    *con_cls = NULL;
}

void *http_start(server *S, int *port)
{
    struct addrinfo hints = {0}, *ai = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    hints.ai_flags = AI_PASSIVE;
    char ps[16];
    snprintf(ps, sizeof ps, "%d", *port);
    int e = getaddrinfo(S->o.host, ps, &hints, &ai);
    if (e) {
        fprintf(stderr, "dsv4 serve: --host %s: %s\n", S->o.host, gai_strerror(e));
        return NULL;
    }
    unsigned flags = MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL;
    if (ai->ai_family == AF_INET6) flags |= MHD_USE_IPv6;
    struct MHD_Daemon *d = MHD_start_daemon(
        flags, (uint16_t)*port, NULL, NULL, on_request, S, MHD_OPTION_SOCK_ADDR, ai->ai_addr,
        MHD_OPTION_NOTIFY_COMPLETED, on_completed, S, MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)S->o.timeout_s,
        MHD_OPTION_CONNECTION_LIMIT, (unsigned)S->o.max_connections, MHD_OPTION_END);
    freeaddrinfo(ai);
    if (!d) {
        fprintf(stderr, "dsv4 serve: cannot listen on %s:%d (in use, or not an address of this machine)\n",
                S->o.host, *port);
        return NULL;
    }
    const union MHD_DaemonInfo *di = MHD_get_daemon_info(d, MHD_DAEMON_INFO_BIND_PORT);
    if (di) *port = di->port;
    return d;
}

void http_stop(void *d)
{
    if (d) MHD_stop_daemon(d);
}

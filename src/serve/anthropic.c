/* Anthropic's Messages API: content blocks (thinking, text, tool_use),
 * stop reasons, and the streamed event sequence message_start,
 * content_block_start / _delta / _stop per block, message_delta,
 * message_stop (ping events keep a quiet stream alive). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "serve/server.h"
#include "text/dsml_stream.h"

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static const char *stop_reason(gen_end end, int has_calls)
{
    if (has_calls && (end == GEN_END_EOS || end == GEN_END_STOP)) return "tool_use";
    if (end == GEN_END_LENGTH || end == GEN_END_CONTEXT) return "max_tokens";
    return end == GEN_END_STOP ? "stop_sequence" : "end_turn";
}

static cJSON *usage(int n_prompt, int n_cached, int n_out)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "input_tokens", n_prompt - n_cached);
    cJSON_AddNumberToObject(u, "cache_read_input_tokens", n_cached);
    cJSON_AddNumberToObject(u, "cache_creation_input_tokens", 0);
    cJSON_AddNumberToObject(u, "output_tokens", n_out);
    return u;
}

static void tool_id(char *buf, size_t n, uint64_t id, int i)
{
    snprintf(buf, n, "toolu_%llu_%d", (unsigned long long)id, i);
}

/* The arguments object of a call (the parser made it JSON object text). */
static cJSON *input_of(const dsml_parsed_call *c)
{
    cJSON *in = cJSON_Parse(c->arguments);
    if (!cJSON_IsObject(in)) {
        cJSON_Delete(in);
        in = cJSON_CreateObject();
    }
    return in;
}

static cJSON *message(server *S, const gen_handle *h, const api_request *req)
{
    cJSON *o = cJSON_CreateObject();
    char id[48];
    snprintf(id, sizeof id, "msg_%llu", (unsigned long long)h->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "type", "message");
    cJSON_AddStringToObject(o, "role", "assistant");
    cJSON_AddStringToObject(o, "model", req->model[0] ? req->model : S->model_name);
    return o;
}

typedef struct {
    char *text;
    size_t len;
    int done, n_sampled, n_cached, error_status, stop_index;
    gen_end end;
    char error[256];
} snap_t;

static void take(job *j, snap_t *v)
{
    pthread_mutex_lock(&j->mu);
    /* a copy of n_out bytes, not strndup: the text may hold NUL bytes (a
     * byte-level model can emit one), and the parser reads all v->len */
    v->text = malloc(j->n_out + 1);
    if (v->text) {
        memcpy(v->text, j->out, j->n_out);
        v->text[j->n_out] = '\0';
    }
    v->len = v->text ? j->n_out : 0;
    v->done = j->done;
    v->end = j->end;
    v->n_sampled = j->n_sampled;
    v->n_cached = j->n_cached;
    v->error_status = j->error_status;
    v->stop_index = j->stop_index;
    memcpy(v->error, j->error, sizeof v->error);
    pthread_mutex_unlock(&j->mu);
}

static void stop_fields(cJSON *o, const job *j, const snap_t *v, int has_calls)
{
    const char *why = stop_reason(v->end, has_calls);
    cJSON_AddStringToObject(o, "stop_reason", why);
    if (!strcmp(why, "stop_sequence") && v->stop_index >= 0 && v->stop_index < j->n_stops)
        cJSON_AddStringToObject(o, "stop_sequence", j->stops[v->stop_index]);
    else
        cJSON_AddNullToObject(o, "stop_sequence");
}

/* ---- non-streaming ---- */

static void respond(server *S, gen_handle *h, api_request *req, http_reply *r)
{
    serve_wait(h->j, http_client_gone, r);
    snap_t v;
    take(h->j, &v);
    if (!v.text || v.end == GEN_END_ERROR || v.end == GEN_END_CANCEL) {
        http_reply_error(r, v.error_status ? v.error_status : 500, NULL,
                         v.error[0] ? v.error : !v.text ? "out of memory" : "cancelled");
        free(v.text);
        job_put(h->j);
        return;
    }
    dsml_stream ds;
    dsml_delta d;
    dsml_stream_init(&ds, req->thinking);
    if (dsml_stream_update(&ds, v.text, v.len, 1, &d)) {
        dsml_stream_free(&ds);
        free(v.text);
        job_put(h->j);
        http_reply_error(r, 503, NULL, "out of memory");
        return;
    }
    cJSON *o = message(S, h, req), *content = cJSON_AddArrayToObject(o, "content");
    if (req->thinking) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "thinking");
        cJSON_AddStringToObject(b, "thinking", ds.m.reasoning);
        cJSON_AddStringToObject(b, "signature", "");
        cJSON_AddItemToArray(content, b);
    }
    if (ds.m.content[0] || !ds.m.n_calls) {
        cJSON *b = cJSON_CreateObject();
        cJSON_AddStringToObject(b, "type", "text");
        cJSON_AddStringToObject(b, "text", ds.m.content);
        cJSON_AddItemToArray(content, b);
    }
    for (int i = 0; i < ds.m.n_calls; i++) {
        cJSON *b = cJSON_CreateObject();
        char id[48];
        tool_id(id, sizeof id, h->id, i);
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", id);
        cJSON_AddStringToObject(b, "name", ds.m.calls[i].name);
        cJSON_AddItemToObject(b, "input", input_of(&ds.m.calls[i]));
        cJSON_AddItemToArray(content, b);
    }
    stop_fields(o, h->j, &v, ds.m.n_calls > 0);
    cJSON_AddItemToObject(o, "usage", usage(h->n_prompt, v.n_cached, v.n_sampled));
    dsml_stream_free(&ds);
    free(v.text);
    job_put(h->j);
    char *s = print(o);
    if (!s) { http_reply_error(r, 503, NULL, "out of memory"); return; }
    http_reply_json(r, 200, s);
}

/* ---- streaming ---- */

typedef enum { BLK_NONE, BLK_THINKING, BLK_TEXT, BLK_TOOL } blk;

typedef struct {
    api_stream a; /* first: serve_request fills it */
    size_t seen;
    int started, finished;
    blk open;   /* the block being streamed */
    int index;  /* its index; the next block's when none is open */
} an_stream;

static void event(tbuf *out, const char *type, cJSON *o)
{
    char *s = print(o);
    if (!s) { out->oom = 1; return; }
    tbuf_puts(out, "event: ");
    tbuf_puts(out, type);
    tbuf_puts(out, "\ndata: ");
    tbuf_puts(out, s);
    tbuf_puts(out, "\n\n");
    free(s);
}

static void block_stop(an_stream *as, tbuf *out)
{
    if (as->open == BLK_NONE) return;
    cJSON *o = cJSON_CreateObject();
    if (as->open == BLK_THINKING) { /* clients expect a signature before the stop */
        cJSON_AddStringToObject(o, "type", "content_block_delta");
        cJSON_AddNumberToObject(o, "index", as->index);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", "signature_delta");
        cJSON_AddStringToObject(d, "signature", "");
        event(out, "content_block_delta", o);
        o = cJSON_CreateObject();
    }
    cJSON_AddStringToObject(o, "type", "content_block_stop");
    cJSON_AddNumberToObject(o, "index", as->index);
    event(out, "content_block_stop", o);
    as->open = BLK_NONE;
    as->index++;
}

static void block_text(an_stream *as, tbuf *out, blk kind, const char *s, size_t n)
{
    if (!n) return;
    const char *name = kind == BLK_THINKING ? "thinking" : "text";
    if (as->open != kind) {
        block_stop(as, out);
        cJSON *o = cJSON_CreateObject(), *b;
        cJSON_AddStringToObject(o, "type", "content_block_start");
        cJSON_AddNumberToObject(o, "index", as->index);
        b = cJSON_AddObjectToObject(o, "content_block");
        cJSON_AddStringToObject(b, "type", name);
        cJSON_AddStringToObject(b, name, "");
        if (kind == BLK_THINKING) cJSON_AddStringToObject(b, "signature", "");
        event(out, "content_block_start", o);
        as->open = kind;
    }
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "type", "content_block_delta");
    cJSON_AddNumberToObject(o, "index", as->index);
    cJSON *d = cJSON_AddObjectToObject(o, "delta");
    cJSON_AddStringToObject(d, "type", kind == BLK_THINKING ? "thinking_delta" : "text_delta");
    char *t = strndup(s, n);
    cJSON_AddStringToObject(d, name, t ? t : "");
    free(t);
    event(out, "content_block_delta", o);
}

/* A tool_use block opens with the call's name and gets its input as
 * input_json_delta pieces while the arguments grow. */
static void block_tool(an_stream *as, tbuf *out, const dsml_call_delta *c)
{
    if (c->name) {
        block_stop(as, out);
        char id[48];
        tool_id(id, sizeof id, as->a.h.id, c->index);
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "content_block_start");
        cJSON_AddNumberToObject(o, "index", as->index);
        cJSON *b = cJSON_AddObjectToObject(o, "content_block");
        cJSON_AddStringToObject(b, "type", "tool_use");
        cJSON_AddStringToObject(b, "id", id);
        cJSON_AddStringToObject(b, "name", c->name);
        cJSON_AddItemToObject(b, "input", cJSON_CreateObject());
        event(out, "content_block_start", o);
        as->open = BLK_TOOL;
    }
    if (c->n_arguments) {
        cJSON *o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "content_block_delta");
        cJSON_AddNumberToObject(o, "index", as->index);
        cJSON *d = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(d, "type", "input_json_delta");
        char *t = strndup(c->arguments, c->n_arguments);
        cJSON_AddStringToObject(d, "partial_json", t ? t : "");
        free(t);
        event(out, "content_block_delta", o);
    }
    if (c->complete) block_stop(as, out);
}

static int an_produce(http_stream *st, tbuf *out)
{
    an_stream *as = st->state;
    server *S = st->srv;
    if (as->finished) return 0;
    if (!as->started) {
        cJSON *o = cJSON_CreateObject(), *m = message(S, &as->a.h, &as->a.req);
        cJSON_AddStringToObject(o, "type", "message_start");
        cJSON_AddArrayToObject(m, "content");
        cJSON_AddNullToObject(m, "stop_reason");
        cJSON_AddNullToObject(m, "stop_sequence");
        cJSON_AddItemToObject(m, "usage", usage(as->a.h.n_prompt, 0, 0));
        cJSON_AddItemToObject(o, "message", m);
        event(out, "message_start", o);
        as->started = 1;
        return 1;
    }
    if (!job_wait(st->j, as->seen, 1 << 30, S->o.keepalive_ms)) {
        tbuf_puts(out, "event: ping\ndata: {\"type\": \"ping\"}\n\n");
        return 1;
    }
    snap_t v;
    take(st->j, &v);
    if (!v.text) { out->oom = 1; return 0; }
    as->seen = v.len;
    if (v.end == GEN_END_ERROR) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(o, "type", "error");
        cJSON_AddStringToObject(e, "type", v.error_status < 500 ? "invalid_request_error" : "api_error");
        cJSON_AddStringToObject(e, "message", v.error);
        event(out, "error", o);
        as->finished = 1;
        free(v.text);
        return 0;
    }
    dsml_delta d;
    if (dsml_stream_update(&as->a.ds, v.text, v.len, v.done, &d)) { free(v.text); out->oom = 1; return 0; }
    block_text(as, out, BLK_THINKING, d.reasoning, d.n_reasoning);
    block_text(as, out, BLK_TEXT, d.content, d.n_content);
    for (int i = 0; i < d.n_calls; i++) block_tool(as, out, &d.calls[i]);
    if (v.done) {
        block_stop(as, out);
        cJSON *o = cJSON_CreateObject(), *dl = cJSON_AddObjectToObject(o, "delta");
        cJSON_AddStringToObject(o, "type", "message_delta");
        stop_fields(dl, st->j, &v, as->a.ds.m.n_calls > 0);
        cJSON_AddItemToObject(o, "usage", usage(as->a.h.n_prompt, v.n_cached, v.n_sampled));
        event(out, "message_delta", o);
        o = cJSON_CreateObject();
        cJSON_AddStringToObject(o, "type", "message_stop");
        event(out, "message_stop", o);
        as->finished = 1;
    }
    free(v.text);
    return !as->finished;
}

static void an_destroy(http_stream *st)
{
    an_stream *as = st->state;
    dsml_stream_free(&as->a.ds);
    api_request_free(&as->a.req);
    free(as);
}

static const api_handler anthropic_handler = {respond, sizeof(an_stream), an_produce, an_destroy};

void anthropic_messages(server *S, const char *body, size_t len, http_reply *r)
{
    serve_request(S, API_MESSAGES, &anthropic_handler, body, len, r);
}

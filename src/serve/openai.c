/* OpenAI's API: chat completions (reasoning_content, tool_calls, logprobs,
 * streamed chunks), completions, models. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/server.h"
#include "text/dsml_stream.h"

/* What a handler reads of its job once (under the job's mutex). */
typedef struct {
    char *text;
    size_t len;
    gen_token *lp;
    int n_lp;
    int done, n_sampled, n_cached, error_status;
    gen_end end;
    char error[256];
} job_view;

static void view(job *j, job_view *v)
{
    memset(v, 0, sizeof *v);
    pthread_mutex_lock(&j->mu);
    v->text = malloc(j->n_out + 1);
    if (v->text) {
        memcpy(v->text, j->out, j->n_out + 1);
        v->len = j->n_out;
    }
    if (j->n_lp && (v->lp = malloc((size_t)j->n_lp * sizeof *v->lp))) {
        memcpy(v->lp, j->lp, (size_t)j->n_lp * sizeof *v->lp);
        v->n_lp = j->n_lp;
    }
    v->done = j->done;
    v->end = j->end;
    v->n_sampled = j->n_sampled;
    v->n_cached = j->n_cached;
    v->error_status = j->error_status;
    memcpy(v->error, j->error, sizeof v->error);
    pthread_mutex_unlock(&j->mu);
}

static void view_free(job_view *v)
{
    free(v->text);
    free(v->lp);
}

static char *print(cJSON *o)
{
    char *s = o ? cJSON_PrintUnformatted(o) : NULL;
    cJSON_Delete(o);
    return s;
}

static cJSON *usage(int n_prompt, const job_view *v)
{
    cJSON *u = cJSON_CreateObject();
    cJSON_AddNumberToObject(u, "prompt_tokens", n_prompt);
    cJSON_AddNumberToObject(u, "completion_tokens", v->n_sampled);
    cJSON_AddNumberToObject(u, "total_tokens", n_prompt + v->n_sampled);
    cJSON *d = cJSON_AddObjectToObject(u, "prompt_tokens_details");
    if (d) cJSON_AddNumberToObject(d, "cached_tokens", v->n_cached);
    return u;
}

static double finite_lp(float lp) { return isfinite(lp) ? lp : -9999.0; }

/* {"token","logprob","bytes"} of one id. The bytes are those of its text
 * as decoded alone (a token holding part of a UTF-8 character decodes to
 * U+FFFD, as the tokenizer's decoder does). */
static cJSON *lp_entry(server *S, int32_t id, float lp)
{
    cJSON *e = cJSON_CreateObject();
    size_t len = 0;
    char *t = serve_token_text(S, id, &len);
    cJSON_AddStringToObject(e, "token", t ? t : "");
    cJSON_AddNumberToObject(e, "logprob", finite_lp(lp));
    cJSON *b = cJSON_AddArrayToObject(e, "bytes");
    for (size_t i = 0; t && b && i < len; i++) cJSON_AddItemToArray(b, cJSON_CreateNumber((unsigned char)t[i]));
    free(t);
    return e;
}

static cJSON *chat_logprobs(server *S, const gen_token *lp, int n)
{
    cJSON *o = cJSON_CreateObject(), *arr = cJSON_AddArrayToObject(o, "content");
    for (int i = 0; arr && i < n; i++) {
        cJSON *e = lp_entry(S, lp[i].id, lp[i].logprob);
        cJSON *top = cJSON_AddArrayToObject(e, "top_logprobs");
        for (int k = 0; top && k < lp[i].n_top; k++)
            cJSON_AddItemToArray(top, lp_entry(S, lp[i].top[k].token, lp[i].top[k].logprob));
        cJSON_AddItemToArray(arr, e);
    }
    return o;
}

static cJSON *completion_logprobs(server *S, const gen_token *lp, int n, size_t *offset)
{
    cJSON *o = cJSON_CreateObject();
    cJSON *toks = cJSON_AddArrayToObject(o, "tokens"), *lps = cJSON_AddArrayToObject(o, "token_logprobs");
    cJSON *tops = cJSON_AddArrayToObject(o, "top_logprobs"), *offs = cJSON_AddArrayToObject(o, "text_offset");
    for (int i = 0; i < n; i++) {
        size_t len = 0;
        char *t = serve_token_text(S, lp[i].id, &len);
        cJSON_AddItemToArray(toks, cJSON_CreateString(t ? t : ""));
        cJSON_AddItemToArray(lps, cJSON_CreateNumber(finite_lp(lp[i].logprob)));
        cJSON_AddItemToArray(offs, cJSON_CreateNumber((double)*offset));
        *offset += len;
        free(t);
        cJSON *top = cJSON_CreateObject();
        for (int k = 0; k < lp[i].n_top; k++) {
            char *a = serve_token_text(S, lp[i].top[k].token, &len);
            if (a && !cJSON_GetObjectItemCaseSensitive(top, a))
                cJSON_AddNumberToObject(top, a, finite_lp(lp[i].top[k].logprob));
            free(a);
        }
        cJSON_AddItemToArray(tops, top);
    }
    return o;
}

static cJSON *tool_call(uint64_t id, int index, const dsml_parsed_call *c, int stream)
{
    cJSON *t = cJSON_CreateObject();
    char cid[48];
    snprintf(cid, sizeof cid, "call_%llu_%d", (unsigned long long)id, index);
    if (stream) cJSON_AddNumberToObject(t, "index", index);
    cJSON_AddStringToObject(t, "id", cid);
    cJSON_AddStringToObject(t, "type", "function");
    cJSON *f = cJSON_AddObjectToObject(t, "function");
    cJSON_AddStringToObject(f, "name", c->name);
    cJSON_AddStringToObject(f, "arguments", stream ? "" : c->arguments);
    return t;
}

static cJSON *envelope(server *S, const gen_handle *h, const char *object, const char *model)
{
    cJSON *o = cJSON_CreateObject();
    char id[48];
    snprintf(id, sizeof id, "%s-%llu", !strcmp(object, "text_completion") ? "cmpl" : "chatcmpl",
             (unsigned long long)h->id);
    cJSON_AddStringToObject(o, "id", id);
    cJSON_AddStringToObject(o, "object", object);
    cJSON_AddNumberToObject(o, "created", (double)time(NULL));
    cJSON_AddStringToObject(o, "model", model && model[0] ? model : S->model_name);
    return o;
}

void openai_models(server *S, http_reply *r)
{
    cJSON *o = cJSON_CreateObject();
    cJSON_AddStringToObject(o, "object", "list");
    cJSON *arr = cJSON_AddArrayToObject(o, "data");
    cJSON *m = cJSON_CreateObject();
    cJSON_AddStringToObject(m, "id", S->model_name);
    cJSON_AddStringToObject(m, "object", "model");
    cJSON_AddNumberToObject(m, "created", 0);
    cJSON_AddStringToObject(m, "owned_by", "dsv4");
    cJSON_AddNumberToObject(m, "context_length", S->ctx);
    cJSON_AddItemToArray(arr, m);
    http_reply_json(r, 200, print(o));
}

/* ---- streaming ---- */

typedef struct {
    api_stream a; /* first: serve_request fills it */
    size_t seen;        /* bytes of the job's text taken */
    int seen_lp, sent_lp;
    int started, finished;
    size_t text_offset; /* completions logprobs */
} oa_stream;

static void sse_data(tbuf *out, cJSON *o)
{
    char *s = print(o);
    if (!s) { out->oom = 1; return; }
    tbuf_puts(out, "data: ");
    tbuf_puts(out, s);
    tbuf_puts(out, "\n\n");
    free(s);
}

static cJSON *chunk(server *S, oa_stream *os, cJSON *delta, const char *finish, cJSON *logprobs)
{
    int chat = os->a.req.kind == API_CHAT;
    cJSON *o = envelope(S, &os->a.h, chat ? "chat.completion.chunk" : "text_completion", os->a.req.model);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    if (chat) cJSON_AddItemToObject(c, "delta", delta);
    else {
        cJSON *t = cJSON_GetObjectItemCaseSensitive(delta, "content");
        cJSON_AddStringToObject(c, "text", cJSON_IsString(t) ? t->valuestring : "");
        cJSON_Delete(delta);
    }
    if (logprobs) cJSON_AddItemToObject(c, "logprobs", logprobs);
    else cJSON_AddNullToObject(c, "logprobs");
    if (finish) cJSON_AddStringToObject(c, "finish_reason", finish);
    else cJSON_AddNullToObject(c, "finish_reason");
    cJSON_AddItemToArray(choices, c);
    return o;
}

static cJSON *text_delta(const char *key, const char *s, size_t n)
{
    cJSON *d = cJSON_CreateObject();
    char *t = strndup(s, n);
    cJSON_AddStringToObject(d, key, t ? t : "");
    free(t);
    return d;
}

/* The logprobs not yet sent, for a chunk that carries text. */
static cJSON *pending_lp(server *S, oa_stream *os, const job_view *v)
{
    if (!os->a.req.logprobs || os->sent_lp >= v->n_lp) return NULL;
    cJSON *o = os->a.req.kind == API_CHAT
                   ? chat_logprobs(S, v->lp + os->sent_lp, v->n_lp - os->sent_lp)
                   : completion_logprobs(S, v->lp + os->sent_lp, v->n_lp - os->sent_lp, &os->text_offset);
    os->sent_lp = v->n_lp;
    return o;
}

static int oa_produce(http_stream *st, tbuf *out)
{
    oa_stream *os = st->state;
    server *S = st->srv;
    if (os->finished) return 0;
    if (!job_wait(st->j, os->seen, os->seen_lp, S->o.keepalive_ms)) {
        tbuf_puts(out, ": keep-alive\n\n");
        return 1;
    }
    job_view v;
    view(st->j, &v);
    if (!v.text) { view_free(&v); out->oom = 1; return 0; }
    os->seen = v.len;
    os->seen_lp = v.n_lp;
    int chat = os->a.req.kind == API_CHAT;
    if (v.end == GEN_END_ERROR) {
        cJSON *o = cJSON_CreateObject(), *e = cJSON_AddObjectToObject(o, "error");
        cJSON_AddStringToObject(e, "message", v.error);
        cJSON_AddStringToObject(e, "type", v.error_status < 500 ? "invalid_request_error" : "server_error");
        sse_data(out, o);
        tbuf_puts(out, "data: [DONE]\n\n");
        os->finished = 1;
        view_free(&v);
        return 0;
    }
    if (chat && !os->started) {
        cJSON *d = cJSON_CreateObject();
        cJSON_AddStringToObject(d, "role", "assistant");
        cJSON_AddStringToObject(d, "content", "");
        sse_data(out, chunk(S, os, d, NULL, NULL));
        os->started = 1;
    }
    dsml_delta d = {0};
    if (chat) {
        if (dsml_stream_update(&os->a.ds, v.text, v.len, v.done, &d)) { view_free(&v); out->oom = 1; return 0; }
    } else {
        d.content = v.text + os->a.ds.n_content;
        d.n_content = v.len - os->a.ds.n_content;
        os->a.ds.n_content = v.len;
    }
    if (d.n_reasoning) sse_data(out, chunk(S, os, text_delta("reasoning_content", d.reasoning, d.n_reasoning), NULL, NULL));
    if (d.n_content)
        sse_data(out, chunk(S, os, text_delta("content", d.content, d.n_content), NULL, pending_lp(S, os, &v)));
    for (int i = 0; i < d.n_calls; i++) {
        /* A call's name as soon as its invoke header is complete, then its
         * arguments as they grow (a complete parameter at a time). */
        const dsml_call_delta *cd = &d.calls[i];
        cJSON *dl, *arr, *t, *f;
        if (cd->name) {
            dsml_parsed_call named = {(char *)cd->name, (char *)""};
            dl = cJSON_CreateObject();
            arr = cJSON_AddArrayToObject(dl, "tool_calls");
            cJSON_AddItemToArray(arr, tool_call(os->a.h.id, cd->index, &named, 1));
            sse_data(out, chunk(S, os, dl, NULL, NULL));
        }
        if (!cd->n_arguments) continue;
        dl = cJSON_CreateObject();
        arr = cJSON_AddArrayToObject(dl, "tool_calls");
        t = cJSON_CreateObject();
        cJSON_AddNumberToObject(t, "index", cd->index);
        f = cJSON_AddObjectToObject(t, "function");
        char *args = strndup(cd->arguments, cd->n_arguments);
        cJSON_AddStringToObject(f, "arguments", args ? args : "");
        free(args);
        cJSON_AddItemToArray(arr, t);
        sse_data(out, chunk(S, os, dl, NULL, NULL));
    }
    if (v.done) {
        const char *fin = serve_finish_reason(v.end, os->a.ds.m.n_calls > 0);
        sse_data(out, chunk(S, os, cJSON_CreateObject(), fin, pending_lp(S, os, &v)));
        if (os->a.req.include_usage) {
            cJSON *o = envelope(S, &os->a.h, chat ? "chat.completion.chunk" : "text_completion", os->a.req.model);
            cJSON_AddArrayToObject(o, "choices");
            cJSON_AddItemToObject(o, "usage", usage(os->a.h.n_prompt, &v));
            sse_data(out, o);
        }
        tbuf_puts(out, "data: [DONE]\n\n");
        os->finished = 1;
    }
    view_free(&v);
    return !os->finished;
}

static void oa_destroy(http_stream *st)
{
    oa_stream *os = st->state;
    dsml_stream_free(&os->a.ds);
    api_request_free(&os->a.req);
    free(os);
}

/* ---- the handlers ---- */

static void respond(server *S, gen_handle *h, api_request *req, http_reply *r)
{
    serve_wait(h->j, http_client_gone, r);
    job_view v;
    view(h->j, &v);
    job_put(h->j);
    if (!v.text) { view_free(&v); http_reply_error(r, 503, NULL, "out of memory"); return; }
    if (v.end == GEN_END_ERROR || v.end == GEN_END_CANCEL) {
        http_reply_error(r, v.error_status ? v.error_status : 500, NULL, v.error[0] ? v.error : "cancelled");
        view_free(&v);
        return;
    }
    int chat = req->kind == API_CHAT;
    cJSON *o = envelope(S, h, chat ? "chat.completion" : "text_completion", req->model);
    cJSON *choices = cJSON_AddArrayToObject(o, "choices"), *c = cJSON_CreateObject();
    cJSON_AddNumberToObject(c, "index", 0);
    int n_calls = 0;
    if (chat) {
        dsml_stream ds;
        dsml_delta d;
        dsml_stream_init(&ds, req->thinking);
        if (dsml_stream_update(&ds, v.text, v.len, 1, &d)) {
            dsml_stream_free(&ds);
            cJSON_Delete(o);
            cJSON_Delete(c);
            view_free(&v);
            http_reply_error(r, 503, NULL, "out of memory");
            return;
        }
        n_calls = ds.m.n_calls;
        cJSON *m = cJSON_AddObjectToObject(c, "message");
        cJSON_AddStringToObject(m, "role", "assistant");
        if (n_calls && !ds.m.content[0]) cJSON_AddNullToObject(m, "content");
        else cJSON_AddStringToObject(m, "content", ds.m.content);
        if (req->thinking) cJSON_AddStringToObject(m, "reasoning_content", ds.m.reasoning);
        if (n_calls) {
            cJSON *arr = cJSON_AddArrayToObject(m, "tool_calls");
            for (int i = 0; i < n_calls; i++) cJSON_AddItemToArray(arr, tool_call(h->id, i, &ds.m.calls[i], 0));
        }
        dsml_stream_free(&ds);
        if (req->logprobs) cJSON_AddItemToObject(c, "logprobs", chat_logprobs(S, v.lp, v.n_lp));
        else cJSON_AddNullToObject(c, "logprobs");
    } else {
        size_t off = 0;
        cJSON_AddStringToObject(c, "text", v.text);
        if (req->logprobs) cJSON_AddItemToObject(c, "logprobs", completion_logprobs(S, v.lp, v.n_lp, &off));
        else cJSON_AddNullToObject(c, "logprobs");
    }
    cJSON_AddStringToObject(c, "finish_reason", serve_finish_reason(v.end, n_calls > 0));
    cJSON_AddItemToArray(choices, c);
    cJSON_AddItemToObject(o, "usage", usage(h->n_prompt, &v));
    view_free(&v);
    char *s = print(o);
    if (!s) { http_reply_error(r, 503, NULL, "out of memory"); return; }
    http_reply_json(r, 200, s);
}

static const api_handler openai_handler = {respond, sizeof(oa_stream), oa_produce, oa_destroy};

static void handle(server *S, api_kind kind, const char *body, size_t len, http_reply *r)
{
    serve_request(S, kind, &openai_handler, body, len, r);
}

void openai_chat(server *S, const char *body, size_t len, http_reply *r) { handle(S, API_CHAT, body, len, r); }

void openai_completions(server *S, const char *body, size_t len, http_reply *r)
{
    handle(S, API_COMPLETIONS, body, len, r);
}

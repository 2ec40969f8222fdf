#include "serve/server.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "serve/force.h"
#include "text/chat.h"

const char *serve_finish_reason(gen_end end, int has_calls)
{
    if (has_calls && (end == GEN_END_EOS || end == GEN_END_STOP)) return "tool_calls";
    return end == GEN_END_LENGTH || end == GEN_END_CONTEXT ? "length" : "stop";
}

char *serve_token_text(server *S, int32_t id, size_t *len)
{
    char *t = NULL;
    if (tok_decode(S->tok, &id, 1, 0, &t, len)) return NULL;
    return t;
}

/* tool_choice demands a call: the job's reply continues with the opening
 * of a call of one of the tools (r->force), at its start or in thinking
 * mode right after </think>. */
static int force_call(server *S, const api_request *r, job *j, char *msg, size_t msg_len)
{
    int32_t after = r->thinking ? tok_token_id(S->tok, CHAT_TOK_THINK_END) : -1;
    if (r->thinking && after < 0) {
        snprintf(msg, msg_len, "tool_choice: the tokenizer has no %s token to end the reasoning at", CHAT_TOK_THINK_END);
        return 400;
    }
    int32_t **alts = calloc((size_t)r->n_force, sizeof *alts);
    int *lens = calloc((size_t)r->n_force, sizeof *lens), status = 0;
    if (!alts || !lens) status = 503;
    for (int a = 0; !status && a < r->n_force; a++) {
        size_t n = 0;
        if (tok_encode(S->tok, r->force[a], strlen(r->force[a]), TOK_PARSE_SPECIAL, &alts[a], &n)) {
            snprintf(msg, msg_len, "tool_choice: %s", dsv4_last_error());
            status = 400;
        }
        lens[a] = (int)n;
    }
    if (!status && job_force(j, alts, lens, r->n_force, after)) status = 503;
    if (status == 503) snprintf(msg, msg_len, "out of memory");
    for (int a = 0; alts && a < r->n_force; a++) free(alts[a]);
    free(alts);
    free(lens);
    return status;
}

int serve_submit(server *S, const api_request *r, gen_handle *h, char *msg, size_t msg_len)
{
    memset(h, 0, sizeof *h);
    int32_t *ids = NULL;
    size_t n = 0;
    if (tok_encode(S->tok, r->prompt, strlen(r->prompt), TOK_PARSE_SPECIAL, &ids, &n)) {
        snprintf(msg, msg_len, "prompt: %s", dsv4_last_error());
        return 400;
    }
    if (r->add_bos && S->bos_id >= 0) {
        int32_t *g = realloc(ids, (n + 1) * sizeof *g);
        if (!g) { free(ids); snprintf(msg, msg_len, "out of memory"); return 503; }
        ids = g;
        memmove(ids + 1, ids, n * sizeof *ids);
        ids[0] = S->bos_id;
        n++;
    }
    int status = 0;
    if (n == 0) {
        snprintf(msg, msg_len, "the prompt is empty");
        status = 400;
    } else if ((long long)n > S->o.max_prompt_tokens) {
        snprintf(msg, msg_len, "the prompt has %zu tokens, more than this server's limit %d", n,
                 S->o.max_prompt_tokens);
        status = 413;
    } else if ((long long)n >= S->ctx) {
        snprintf(msg, msg_len, "the prompt has %zu tokens; the context holds %d", n, S->ctx);
        status = 400;
    }
    if (status) { free(ids); return status; }
    /* Stop strings that are one special token stop on its id instead. */
    int32_t stop_ids[2 + 64];
    int n_stop_ids = 0;
    for (int i = 0; i < S->n_eos && !r->ignore_eos; i++) stop_ids[n_stop_ids++] = S->eos_ids[i];
    char *texts[64];
    int n_texts = 0;
    for (int i = 0; i < r->n_stops && i < 64; i++) {
        int32_t id = tok_token_id(S->tok, r->stops[i]);
        if (id >= 0 && tok_is_special(S->tok, id)) stop_ids[n_stop_ids++] = id;
        else texts[n_texts++] = r->stops[i];
    }
    sampling_params sp = r->sp;
    h->id = __atomic_add_fetch(&S->seq, 1, __ATOMIC_RELAXED);
    if (!r->seed_given) sp.seed = (uint64_t)time(NULL) * 0x9e3779b97f4a7c15ull ^ h->id;
    /* The output may fill what the context has left. */
    int room = S->ctx - (int)n;
    int max_tokens = r->max_tokens < room ? r->max_tokens : room;
    job *j = job_new(ids, (int)n, &sp, max_tokens, r->logprobs, r->top_logprobs, stop_ids, n_stop_ids, texts,
                     n_texts);
    free(ids);
    if (!j) { snprintf(msg, msg_len, "out of memory"); return 503; }
    if (r->force && (status = force_call(S, r, j, msg, msg_len))) {
        job_put(j);
        return status;
    }
    if (sched_submit(S->sched, j)) {
        job_put(j);
        snprintf(msg, msg_len, "the server is overloaded (%d requests queued)", S->o.max_queue);
        return 503;
    }
    h->j = j;
    h->n_prompt = (int)n;
    return 0;
}

void serve_wait(job *j, int (*cancelled)(void *), void *user)
{
    while (!job_wait(j, (size_t)-1, 1 << 30, 200)) {
        if (cancelled && cancelled(user)) job_cancel(j);
    }
}

void serve_request(server *S, api_kind kind, const api_handler *ah, const char *body, size_t len, http_reply *r)
{
    api_request req;
    api_error e;
    if (api_parse(kind, body, len, &S->o.lim, &req, &e)) {
        http_reply_error(r, e.status, NULL, e.message);
        return;
    }
    gen_handle h;
    char msg[256];
    int status = serve_submit(S, &req, &h, msg, sizeof msg);
    if (status) {
        api_request_free(&req);
        http_reply_error(r, status, NULL, msg);
        return;
    }
    if (!req.stream) {
        ah->respond(S, &h, &req, r);
        api_request_free(&req);
        return;
    }
    http_stream *st = calloc(1, sizeof *st);
    api_stream *as = calloc(1, ah->stream_size);
    if (!st || !as) {
        free(st);
        free(as);
        job_cancel(h.j);
        job_put(h.j);
        api_request_free(&req);
        http_reply_error(r, 503, NULL, "out of memory");
        return;
    }
    as->h = h;
    as->req = req; /* owns its strings now */
    dsml_stream_init(&as->ds, req.thinking);
    *st = (http_stream){S, h.j, ah->produce, ah->destroy, as};
    http_reply_stream(r, st);
}

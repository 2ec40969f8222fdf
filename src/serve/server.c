#include "serve/server.h"

#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "model/config.h"
#include "serve/force.h"
#include "text/chat.h"

void *http_start(server *S, int *port);
void http_stop(void *daemon);

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

/* ---- lifetime ---- */

/* The model facts the server needs: from config.json for a checkpoint;
 * for a synthetic model (no config file) from the model, with BOS/EOS the
 * tokenizer's DeepSeek special tokens. */
typedef struct {
    int vocab, max_pos, bos_id, eos_id;
} model_facts;

static int load_tokenizer(server *S)
{
    const serve_options *o = &S->o;
    char path[4096];
    if (!o->tokenizer) {
        snprintf(path, sizeof path, "%s/tokenizer.json", o->model_dir);
        if (access(path, R_OK)) {
            fprintf(stderr, "dsv4 serve: %s has no tokenizer.json (pass --tokenizer PATH)\n", o->model_dir);
            return -1;
        }
    }
    if (tok_load(o->tokenizer ? o->tokenizer : o->model_dir, &S->tok)) {
        fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
        return -1;
    }
    return 0;
}

static int load(server *S)
{
    const serve_options *o = &S->o;
    model_facts f;
    dsv4_load_options lo = {0};
    lo.n_threads = o->threads;
    lo.device = o->device;
    lo.cache = o->cache;
    if (o->synthetic) {
        if (!o->tokenizer) {
            fprintf(stderr, "dsv4 serve: --synthetic needs --tokenizer PATH\n");
            return -1;
        }
        if (load_tokenizer(S)) return -1;
        /* with the drafter --spec names (an MTP head otherwise) */
        if (dsv4_model_synthetic(o->synthetic, o->synth_layers, o->synth_experts, o->synth_weights,
                                 o->spec_dspark ? "dspark" : NULL, &lo, &S->model)) {
            fprintf(stderr, "dsv4 serve: synthetic model: %s\n", dsv4_last_error());
            return -1;
        }
        f = (model_facts){dsv4_model_vocab(S->model), dsv4_model_max_positions(S->model),
                          tok_token_id(S->tok, CHAT_TOK_BOS), tok_token_id(S->tok, CHAT_TOK_EOS)};
    } else {
        dsv4_config cfg;
        if (config_load(o->model_dir, &cfg)) {
            fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
            return -1;
        }
        f = (model_facts){cfg.vocab, cfg.max_pos, cfg.bos_id, cfg.eos_id};
        if (load_tokenizer(S)) return -1;
    }
    if (tok_n_ids(S->tok) > f.vocab) {
        fprintf(stderr, "dsv4 serve: the tokenizer has %d ids but the model's vocabulary only %d\n",
                tok_n_ids(S->tok), f.vocab);
        return -1;
    }
    if (gen_masked_ids(S->tok, f.vocab, &S->masked, &S->n_masked)) {
        fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
        return -1;
    }
    S->gm = (gen_model){S->tok, f.vocab, S->masked, S->n_masked};
    S->bos_id = f.bos_id >= 0 && f.bos_id < f.vocab ? f.bos_id : -1;
    int32_t eos = tok_token_id(S->tok, CHAT_TOK_EOS);
    if (eos >= 0) S->eos_ids[S->n_eos++] = eos;
    if (f.eos_id >= 0 && f.eos_id < f.vocab && f.eos_id != eos) S->eos_ids[S->n_eos++] = f.eos_id;
    S->ctx = o->ctx > 0 && o->ctx < f.max_pos ? o->ctx : f.max_pos;
    if (!S->model && dsv4_model_load(o->model_dir, &lo, &S->model)) {
        fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
        return -1;
    }
    if (o->spec_k && !(o->spec_dspark ? dsv4_model_has_dspark(S->model) : dsv4_model_has_mtp(S->model))) {
        fprintf(stderr, "dsv4 serve: --spec: %s has no %s to draft with\n", o->model_dir ? o->model_dir : "this model",
                o->spec_dspark ? "DSpark drafter (mtp.0..2 with the dspark_* keys)" : "MTP head (mtp.0.*)");
        return -1;
    }
    if (o->spec_dspark && o->spec_k > dsv4_model_dspark_block(S->model)) {
        fprintf(stderr, "dsv4 serve: --spec dspark:%d: the DSpark block drafts at most %d\n", o->spec_k,
                dsv4_model_dspark_block(S->model));
        return -1;
    }
    if (dsv4_model_vocab(S->model) != f.vocab) {
        fprintf(stderr, "dsv4 serve: %s: vocabulary changed while loading\n", o->model_dir);
        return -1;
    }
    return 0;
}

int serve_main(const serve_options *opt)
{
    server *S = calloc(1, sizeof *S);
    if (!S) { fprintf(stderr, "dsv4 serve: out of memory\n"); return 1; }
    S->o = *opt;
    char synth[64];
    snprintf(synth, sizeof synth, "synthetic-%s", opt->synthetic ? opt->synthetic : "");
    const char *slash = opt->model_dir ? strrchr(opt->model_dir, '/') : NULL;
    const char *base = opt->synthetic ? synth : slash && slash[1] ? slash + 1 : opt->model_dir;
    snprintf(S->model_name, sizeof S->model_name, "%s", opt->model_name ? opt->model_name : base);
    metrics_init(&S->met);
    int rc = 1;
    void *daemon = NULL;
    sigset_t set;
    sigemptyset(&set);
    sigaddset(&set, SIGINT);
    sigaddset(&set, SIGTERM);
    /* Every thread started from here on leaves these to sigwait below. */
    pthread_sigmask(SIG_BLOCK, &set, NULL);
    signal(SIGPIPE, SIG_IGN);
    if (load(S)) goto done;
    if (opt->kv_dir && mkdir(opt->kv_dir, 0700) && errno != EEXIST) {
        fprintf(stderr, "dsv4 serve: --kv-dir %s: %s\n", opt->kv_dir, strerror(errno));
        goto done;
    }
    if (cache_open(S->model, opt->cache_bytes, opt->kv_dir, &S->met, &S->cache)) {
        fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
        goto done;
    }
    int spec_k = opt->spec_k < 0 ? dsv4_model_dspark_block(S->model) : opt->spec_k;
    sched_config sc = {S->model, &S->gm, opt->max_sessions, opt->max_queue, opt->prefill_chunk,
                       S->n_eos ? S->eos_ids[0] : -1, tok_token_id(S->tok, CHAT_TOK_ASSISTANT), S->cache, &S->met,
                       spec_k};
    if (sched_start(&sc, &S->sched)) {
        fprintf(stderr, "dsv4 serve: %s\n", dsv4_last_error());
        goto done;
    }
    int port = opt->port;
    if (!(daemon = http_start(S, &port))) goto done;
    char spec[32] = "";
    if (spec_k) snprintf(spec, sizeof spec, ", speculative %s:%d", opt->spec_dspark ? "dspark" : "mtp", spec_k);
    fprintf(stderr, "dsv4 serve: %s on http://%s:%d (%d lanes, context %d%s)\n", S->model_name, opt->host, port,
            opt->max_sessions, S->ctx, spec);
    int sig;
    sigwait(&set, &sig);
    fprintf(stderr, "dsv4 serve: %s, shutting down\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    rc = 0;
done:
    sched_stop(S->sched); /* waiting clients see their jobs end; new ones get 503 */
    http_stop(daemon);
    sched_free(S->sched);
    cache_close(S->cache);
    dsv4_model_free(S->model);
    tok_free(S->tok);
    free(S->masked);
    metrics_destroy(&S->met);
    free(S);
    return rc;
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

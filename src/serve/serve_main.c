/* dsv4 serve's lifetime: the model and tokenizer loaded, the prefix cache
 * and the scheduler started, the HTTP daemon with the server's routes, then
 * until SIGINT/SIGTERM; and the routes themselves (which API answers which
 * path). Above the API handlers and the HTTP layer, so that neither calls
 * the other. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "model/config.h"
#include "serve/server.h"
#include "text/chat.h"

/* The server's endpoints past /health and the API key (http.c checks
 * those): the metrics, the model list and the three APIs. */
static void routes(server *S, http_reply *r, const char *method, const char *url, const char *body, size_t len)
{
    int get = !strcmp(method, "GET"), post = !strcmp(method, "POST");
    if (!strcmp(url, "/metrics")) {
        if (!get) { http_reply_error(r, 405, NULL, "use GET"); return; }
        tbuf b = {0};
        metrics_render(&S->met, &b);
        http_reply_text(r, 200, "text/plain; version=0.0.4", tbuf_take(&b));
        return;
    }
    if (!strcmp(url, "/v1/models")) {
        if (!get) { http_reply_error(r, 405, NULL, "use GET"); return; }
        openai_models(S, r);
        return;
    }
    static const struct { const char *url; void (*fn)(server *, const char *, size_t, http_reply *); } posts[] = {
        {"/v1/chat/completions", openai_chat},
        {"/v1/completions", openai_completions},
        {"/v1/messages", anthropic_messages},
    };
    for (size_t i = 0; i < sizeof posts / sizeof posts[0]; i++) {
        if (strcmp(url, posts[i].url)) continue;
        if (!post) { http_reply_error(r, 405, NULL, "use POST"); return; }
        posts[i].fn(S, body, len, r);
        return;
    }
    http_reply_error(r, 404, NULL, "no such endpoint");
}

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
    S->route = routes;
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

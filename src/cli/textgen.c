/* Text generation shared by `dsv4 generate -p` and `dsv4 chat`. */
#include "cli/textgen.h"

#include <cjson/cJSON.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "base/size.h"
#include "cli/commands.h"
#include "io/fileio.h"
#include "model/config_gguf.h"

#define SPECIAL_OPEN "<\xEF\xBD\x9C"  /* "<｜" */
#define SPECIAL_CLOSE "\xEF\xBD\x9C>" /* "｜>" */

void textgen_args_init(textgen_args *a)
{
    memset(a, 0, sizeof *a);
    a->sp = sampling_default_params();
}

void textgen_args_free(textgen_args *a)
{
    free(a->stops);
    free(a->stop_ids);
    a->stops = NULL;
    a->stop_ids = NULL;
}

static int push(void *arr, int *n, size_t size, const void *item)
{
    void **p = arr;
    char *g = realloc(*p, (size_t)(*n + 1) * size);
    if (!g) { fprintf(stderr, "dsv4: out of memory\n"); return -1; }
    memcpy(g + (size_t)*n * size, item, size);
    *p = g;
    (*n)++;
    return 0;
}

int textgen_option(const char *cmd, textgen_args *a, int c, const char *arg)
{
    double d;
    long long i;
    sampling_params *p = &a->sp;
    switch (c) {
    /* float ranges: the sampler's own checks (top-p > 0, repetition > 0)
     * come on top; the bounds keep every value a finite float */
    case TG_TEMP: if (cli_real(cmd, "--temperature", arg, 0, 100, &d)) return -1; p->temperature = (float)d; return 1;
    case TG_TOPK: if (cli_int(cmd, "--top-k", arg, 0, INT_MAX, &i)) return -1; p->top_k = (int)i; return 1;
    case TG_TOPP: if (cli_real(cmd, "--top-p", arg, 0, 1, &d)) return -1; p->top_p = (float)d; return 1;
    case TG_MINP: if (cli_real(cmd, "--min-p", arg, 0, 1, &d)) return -1; p->min_p = (float)d; return 1;
    case TG_REP:
        if (cli_real(cmd, "--repetition-penalty", arg, 0, 100, &d)) return -1;
        p->repetition_penalty = (float)d;
        return 1;
    case TG_PRES:
        if (cli_real(cmd, "--presence-penalty", arg, -100, 100, &d)) return -1;
        p->presence_penalty = (float)d;
        return 1;
    case TG_FREQ:
        if (cli_real(cmd, "--frequency-penalty", arg, -100, 100, &d)) return -1;
        p->frequency_penalty = (float)d;
        return 1;
    case TG_SEED:
        if (cli_int(cmd, "--seed", arg, 0, LLONG_MAX, &i)) return -1;
        p->seed = (uint64_t)i;
        a->seed_given = 1;
        return 1;
    case TG_STOP: return push(&a->stops, &a->n_stops, sizeof *a->stops, &arg) ? -1 : 1;
    case TG_STOP_ID: {
        int id;
        if (cli_int32(cmd, "--stop-id", arg, 0, INT_MAX, &id)) return -1;
        return push(&a->stop_ids, &a->n_stop_ids, sizeof id, &id) ? -1 : 1;
    }
    case TG_IGNORE_EOS: a->ignore_eos = 1; return 1;
    case TG_LOGPROBS: return cli_int32(cmd, "--logprobs", arg, 0, 20, &a->logprobs) ? -1 : 1;
    case TG_TOKENIZER: a->tokenizer = arg; return 1;
    case TG_THREADS: return cli_int32(cmd, "--threads", arg, 0, CLI_MAX_THREADS, &a->threads) ? -1 : 1;
    case TG_DEVICE: a->device = arg; return 1;
    case TG_CACHE: a->cache = arg; return 1;
    case TG_SPEC: return cli_parse_spec(cmd, arg, &a->spec_k, &a->spec_dspark) ? -1 : 1;
    default: return 0;
    }
}

void textgen_usage(FILE *f)
{
    fprintf(f,
            "  --tokenizer PATH     tokenizer.json or a folder holding one (default: DIR/tokenizer.json)\n"
            "  --temperature T      0 = greedy (default 1)\n"
            "  --top-k K --top-p P --min-p P                 truncation (default off)\n"
            "  --repetition-penalty R --presence-penalty P --frequency-penalty F\n"
            "                       penalties over the tokens generated so far (default off)\n"
            "  --seed S             sampling seed: a fixed seed gives the same text (default: random)\n"
            "  --stop STR           stop before this text (repeatable); a special token such as\n"
            "                       '<\xEF\xBD\x9C" "User\xEF\xBD\x9C>' stops on its id\n"
            "  --stop-id ID         stop on this token id (repeatable)\n"
            "  --ignore-eos         do not stop at the end-of-sentence token\n"
            "  --logprobs N         for each token, a JSON line on stderr: {\"index\",\"token\",\"text\",\n"
            "                       \"logprob\",\"top\":[{\"token\",\"text\",\"logprob\"} x N]} (raw-logit\n"
            "                       log-probabilities, before penalties/temperature)\n"
            "  --spec mtp[:K]       speculative decoding: the checkpoint's MTP head drafts K tokens\n"
            "                       (default 1), one step verifies them; same output as without\n"
            "                       (greedy: identical; sampling: the same distribution)\n"
            "  --spec dspark[:K]    the same with the checkpoint's DSpark drafter: one block drafts\n"
            "                       K tokens (default: its block size, dspark_block_size)\n"
            "  --threads N --device cpu|cuda|auto --cache exact|official|auto\n");
}

/* Checks each "<｜...｜>" in a --stop string names a token; returns that
 * token's id when the whole string is one, -1 when it is plain text, -2 on
 * error (printed). */
static int stop_token(const char *cmd, const tok_t *t, const char *s)
{
    int whole = -1;
    for (const char *p = strstr(s, SPECIAL_OPEN); p; p = strstr(p + 1, SPECIAL_OPEN)) {
        const char *q = strstr(p + strlen(SPECIAL_OPEN), SPECIAL_CLOSE);
        if (!q) break;
        size_t n = (size_t)(q - p) + strlen(SPECIAL_CLOSE);
        char *name = strndup(p, n);
        int32_t id = name ? tok_token_id(t, name) : -1;
        if (id < 0) {
            fprintf(stderr, "dsv4 %s: --stop '%s': unknown special token '%s'\n", cmd, s, name ? name : "?");
            free(name);
            return -2;
        }
        free(name);
        if (p == s && !q[strlen(SPECIAL_CLOSE)]) whole = id;
    }
    return whole;
}

static int add_id(textgen *g, int32_t id)
{
    for (int i = 0; i < g->n_stop_ids; i++)
        if (g->stop_ids[i] == id) return 0;
    return push(&g->stop_ids, &g->n_stop_ids, sizeof id, &id);
}

static int setup_stops(textgen *g, const textgen_args *a)
{
    if (!a->ignore_eos) {
        int32_t eos = tok_token_id(g->tok, "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>");
        if (eos >= 0 && add_id(g, eos)) return -1;
    }
    for (int i = 0; i < a->n_stop_ids; i++) {
        if (a->stop_ids[i] >= g->vocab) {
            fprintf(stderr, "dsv4 %s: --stop-id %d is outside the vocabulary (%d ids)\n", g->cmd, a->stop_ids[i],
                    g->vocab);
            return -1;
        }
        if (add_id(g, a->stop_ids[i])) return -1;
    }
    for (int i = 0; i < a->n_stops; i++) {
        const char *s = a->stops[i];
        int32_t *ids;
        size_t n;
        if (tok_encode(g->tok, s, strlen(s), TOK_PARSE_SPECIAL, &ids, &n)) {
            fprintf(stderr, "dsv4 %s: --stop: %s\n", g->cmd, dsv4_last_error());
            return -1;
        }
        free(ids);
        int id = stop_token(g->cmd, g->tok, s);
        if (id == -2) return -1;
        if (id >= 0 ? add_id(g, id) : (s[0] && push(&g->stops, &g->n_stops, sizeof s, &s))) return -1;
    }
    return 0;
}

int textgen_open(textgen *g, const char *cmd, const char *dir, const textgen_args *a)
{
    memset(g, 0, sizeof *g);
    g->cmd = cmd;
    g->logprobs = a->logprobs;
    g->sp = a->sp;
    if (!a->seed_given) g->sp.seed = (uint64_t)time(NULL) ^ ((uint64_t)getpid() << 32);
    dsv4_config cfg;
    int tpl;
    if (config_load_model(dir, &cfg, &tpl)) { cli_report(cmd, NULL); return -1; }
    if (tpl == CHAT_TEMPLATE_OTHER)
        fprintf(stderr, "dsv4 %s: note: %s carries a chat template that is not DeepSeek-V4's; chats are rendered "
                "by the built-in DeepSeek-V4 encoder\n", cmd, dir);
    g->vocab = cfg.vocab;
    g->max_pos = cfg.max_pos;
    g->bos_id = cfg.bos_id; /* the config loaders checked it names a token */
    const char *tp = a->tokenizer ? a->tokenizer : dir; /* a GGUF file carries its tokenizer */
    if (!a->tokenizer && tpl < 0) {
        char *path = io_join(dir, "tokenizer.json");
        int missing = !path || access(path, R_OK);
        free(path);
        if (missing) {
            fprintf(stderr, "dsv4 %s: %s has no tokenizer.json (pass --tokenizer PATH)\n", cmd, dir);
            return -1;
        }
    }
    if (tok_load(tp, &g->tok)) { cli_report(cmd, NULL); return -1; }
    int n_ids = tok_n_ids(g->tok);
    if (n_ids > g->vocab) {
        fprintf(stderr, "dsv4 %s: the tokenizer has %d ids but the model's vocabulary only %d\n", cmd, n_ids,
                g->vocab);
        textgen_close(g);
        return -1;
    }
    if (gen_masked_ids(g->tok, g->vocab, &g->masked, &g->n_masked)) {
        fprintf(stderr, "dsv4 %s: %s\n", cmd, dsv4_last_error());
        textgen_close(g);
        return -1;
    }
    if (!a->ignore_eos && cfg.eos_id >= 0 && add_id(g, cfg.eos_id)) {
        textgen_close(g);
        return -1;
    }
    if (setup_stops(g, a)) { textgen_close(g); return -1; }
    sampler *probe;
    if (sampler_new(&g->sp, g->vocab, &probe)) {
        fprintf(stderr, "dsv4 %s: %s\n", cmd, dsv4_last_error());
        textgen_close(g);
        return -1;
    }
    sampler_free(probe);
    return 0;
}

int textgen_load_model(textgen *g, const char *dir, const textgen_args *a)
{
    g->model = cli_load_model(g->cmd, dir, a->threads, a->device, a->cache);
    if (g->model && dsv4_model_vocab(g->model) != g->vocab) { /* config.json changed under us */
        fprintf(stderr, "dsv4 %s: %s: vocabulary changed while loading\n", g->cmd, dir);
        dsv4_model_free(g->model);
        g->model = NULL;
    }
    return g->model ? 0 : -1;
}

void textgen_close(textgen *g)
{
    dsv4_model_free(g->model);
    tok_free(g->tok);
    free(g->stop_ids);
    free(g->stops);
    free(g->masked);
    memset(g, 0, sizeof *g);
}

size_t textgen_max_text(const textgen *g) { return size_mul((size_t)g->max_pos, tok_max_token_bytes(g->tok)); }

int textgen_encode(const textgen *g, const char *text, size_t len, int32_t **ids, size_t *n)
{
    if (tok_encode(g->tok, text, len, TOK_PARSE_SPECIAL, ids, n)) {
        fprintf(stderr, "dsv4 %s: prompt: %s\n", g->cmd, dsv4_last_error());
        return -1;
    }
    return 0;
}

/* ---- the loop ---- */

static void add_piece(cJSON *o, const textgen *g, int32_t id, float lp)
{
    char *text = NULL;
    size_t len;
    cJSON_AddNumberToObject(o, "token", id);
    if (!tok_decode(g->tok, &id, 1, 0, &text, &len)) cJSON_AddStringToObject(o, "text", text);
    free(text);
    cJSON_AddNumberToObject(o, "logprob", isfinite(lp) ? lp : -1e30);
}

static void print_logprobs(const textgen *g, int index, int32_t id, float lp, const sampling_logprob *top)
{
    cJSON *o = cJSON_CreateObject();
    if (!o) return;
    cJSON_AddNumberToObject(o, "index", index);
    add_piece(o, g, id, lp);
    cJSON *arr = cJSON_AddArrayToObject(o, "top");
    for (int i = 0; arr && i < g->logprobs; i++) {
        cJSON *e = cJSON_CreateObject();
        if (!e) break;
        add_piece(e, g, top[i].token, top[i].logprob);
        cJSON_AddItemToArray(arr, e);
    }
    char *s = cJSON_PrintUnformatted(o);
    if (s) fprintf(stderr, "%s\n", s);
    free(s);
    cJSON_Delete(o);
}

/* A request for one reply with g's stops and limits; gm must outlive it. */
static int begin(const textgen *g, gen_model *gm, gen_req *q, sampler *smp, int max_tokens, int top_logprobs,
                 textgen_result *r)
{
    memset(r, 0, sizeof *r);
    *gm = (gen_model){g->tok, g->vocab, g->masked, g->n_masked};
    gen_params p = {g->sp, max_tokens, g->stop_ids, g->n_stop_ids, g->stops, g->n_stops, top_logprobs, smp};
    if (gen_init(q, gm, &p)) { fprintf(stderr, "dsv4 %s: %s\n", g->cmd, dsv4_last_error()); return -1; }
    return 0;
}

/* Writes the text that became visible since *shown; once writing fails,
 * r->out_failed stays set and nothing more is written. Returns
 * r->out_failed. */
static int show(FILE *out, const gen_req *q, size_t *shown, textgen_result *r)
{
    if (!out || r->out_failed || q->visible <= *shown) return r->out_failed;
    fwrite(q->text + *shown, 1, q->visible - *shown, out);
    r->out_failed = fflush(out) || ferror(out);
    *shown = q->visible;
    return r->out_failed;
}

/* Hands the request's output to r and frees the request. */
static void finish(gen_req *q, FILE *out, size_t *shown, textgen_result *r)
{
    show(out, q, shown, r);
    r->ids = q->ids;
    r->n_ids = q->n_ids;
    r->n_fed = q->n_fed;
    r->text = q->text;
    r->len = q->len;
    r->end = q->end;
    q->ids = NULL;
    q->text = NULL;
    gen_free(q);
}

int textgen_run(const textgen *g, dsv4_session *s, sampler *smp, float *logits, int max_tokens, FILE *out,
                volatile sig_atomic_t *cancel, textgen_result *r)
{
    /* the context ends the run after max_pos - pos + 1 sampled tokens; one
     * more of room lets it end as GEN_END_CONTEXT, which says so */
    int64_t room = (int64_t)g->max_pos - dsv4_session_pos(s) + 2;
    if (max_tokens > room) max_tokens = (int)room;
    gen_model gm;
    gen_req q;
    if (begin(g, &gm, &q, smp, max_tokens, g->logprobs, r)) return -1;
    int rc = 0;
    size_t shown = 0;
    gen_token t;
    if (cancel && *cancel) gen_finish(&q, GEN_END_CANCEL);
    for (int i = 0; !q.end; i++) {
        int more = gen_step(&q, logits, &t);
        if (q.end != GEN_END_ERROR && g->logprobs) print_logprobs(g, i, t.id, t.logprob, t.top);
        if (q.end == GEN_END_ERROR) { fprintf(stderr, "dsv4 %s: %s\n", g->cmd, dsv4_last_error()); rc = -1; }
        if (show(out, &q, &shown, r) || !more) break;
        if (cancel && *cancel) { gen_finish(&q, GEN_END_CANCEL); break; }
        if (dsv4_session_pos(s) >= g->max_pos) { gen_finish(&q, GEN_END_CONTEXT); break; }
        if (dsv4_session_eval_last(s, &q.ids[q.n_ids - 1], 1, logits)) {
            fprintf(stderr, "dsv4 %s: token %d: %s\n", g->cmd, i + 1, dsv4_last_error());
            rc = -1;
            break;
        }
        q.n_fed++;
    }
    finish(&q, out, &shown, r);
    return rc;
}

int textgen_spec_lane(const textgen *g, spec_lane *l, dsv4_session *s, int dspark, int k, sampler *smp)
{
    memset(l, 0, sizeof *l);
    if ((k = cli_spec_k(g->cmd, g->model, dspark, k)) < 0) return -1;
    if (spec_lane_init(l, s, k, smp)) { cli_report(g->cmd, "--spec"); return -1; }
    l->mask = g->masked;
    l->n_mask = g->n_masked;
    l->stop_ids = g->stop_ids;
    l->n_stop = g->n_stop_ids;
    return 0;
}

int textgen_run_spec(const textgen *g, spec_lane *l, int max_tokens, FILE *out, volatile sig_atomic_t *cancel,
                     textgen_result *r)
{
    gen_model gm;
    gen_req q;
    /* the lane samples; the request only takes its tokens (l->smp may be
     * NULL for greedy: gen_init then makes an unused one from g->sp) */
    if (begin(g, &gm, &q, l->smp, max_tokens, 0, r)) return -1;
    int rc = 0;
    size_t shown = 0;
    /* the session consumed every token the lane produced but the last (l->next) */
    while (!q.end) {
        for (int i = 0; i < l->n_out && !q.end; i++) {
            if (cancel && *cancel) { gen_finish(&q, GEN_END_CANCEL); break; }
            gen_take(&q, l->out[i]);
            if (show(out, &q, &shown, r)) break;
        }
        q.n_fed = q.n_ids < l->n_hist - 1 ? q.n_ids : l->n_hist - 1;
        if (q.end == GEN_END_ERROR) { fprintf(stderr, "dsv4 %s: %s\n", g->cmd, dsv4_last_error()); rc = -1; }
        if (q.end || r->out_failed) break;
        if (dsv4_session_pos(l->s) >= g->max_pos) { gen_finish(&q, GEN_END_CONTEXT); break; }
        int room = g->max_pos - (int)dsv4_session_pos(l->s), left = max_tokens - q.n_ids;
        l->budget = room < left ? room : left;
        if (spec_step(g->model, &l, 1, NULL)) {
            fprintf(stderr, "dsv4 %s: token %d: %s\n", g->cmd, q.n_ids + 1, dsv4_last_error());
            rc = -1;
            break;
        }
    }
    finish(&q, out, &shown, r);
    return rc;
}

void textgen_result_free(textgen_result *r)
{
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

/* Text generation shared by `dsv4 generate -p` and `dsv4 chat`. */
#include "cli/textgen.h"

#include <cjson/cJSON.h>
#include <errno.h>
#include <getopt.h>
#include <limits.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "cli/commands.h"
#include "model/config.h"

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

static int num(const char *cmd, const char *name, const char *s, double *v)
{
    char *end;
    errno = 0;
    *v = strtod(s, &end);
    if (end == s || *end || errno || !isfinite(*v)) {
        fprintf(stderr, "dsv4 %s: --%s: '%s' is not a number\n", cmd, name, s);
        return -1;
    }
    return 0;
}

static int integer(const char *cmd, const char *name, const char *s, long long lo, long long hi, long long *v)
{
    char *end;
    errno = 0;
    *v = strtoll(s, &end, 10);
    if (end == s || *end || errno || *v < lo || *v > hi) {
        fprintf(stderr, "dsv4 %s: --%s: '%s' is not an integer in %lld..%lld\n", cmd, name, s, lo, hi);
        return -1;
    }
    return 0;
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
    case TG_TEMP: if (num(cmd, "temperature", arg, &d)) return -1; p->temperature = (float)d; return 1;
    case TG_TOPK: if (integer(cmd, "top-k", arg, 0, INT_MAX, &i)) return -1; p->top_k = (int)i; return 1;
    case TG_TOPP: if (num(cmd, "top-p", arg, &d)) return -1; p->top_p = (float)d; return 1;
    case TG_MINP: if (num(cmd, "min-p", arg, &d)) return -1; p->min_p = (float)d; return 1;
    case TG_REP: if (num(cmd, "repetition-penalty", arg, &d)) return -1; p->repetition_penalty = (float)d; return 1;
    case TG_PRES: if (num(cmd, "presence-penalty", arg, &d)) return -1; p->presence_penalty = (float)d; return 1;
    case TG_FREQ: if (num(cmd, "frequency-penalty", arg, &d)) return -1; p->frequency_penalty = (float)d; return 1;
    case TG_SEED:
        if (integer(cmd, "seed", arg, 0, LLONG_MAX, &i)) return -1;
        p->seed = (uint64_t)i;
        a->seed_given = 1;
        return 1;
    case TG_STOP: return push(&a->stops, &a->n_stops, sizeof *a->stops, &arg) ? -1 : 1;
    case TG_STOP_ID: {
        if (integer(cmd, "stop-id", arg, 0, INT_MAX, &i)) return -1;
        int id = (int)i;
        return push(&a->stop_ids, &a->n_stop_ids, sizeof id, &id) ? -1 : 1;
    }
    case TG_IGNORE_EOS: a->ignore_eos = 1; return 1;
    case TG_LOGPROBS: if (integer(cmd, "logprobs", arg, 0, 20, &i)) return -1; a->logprobs = (int)i; return 1;
    case TG_TOKENIZER: a->tokenizer = arg; return 1;
    case TG_THREADS: if (integer(cmd, "threads", arg, 0, 4096, &i)) return -1; a->threads = (int)i; return 1;
    case TG_DEVICE: a->device = arg; return 1;
    case TG_SPEC: return cli_parse_spec(cmd, arg, &a->spec_k) ? -1 : 1;
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
            "  --threads N --device cpu|cuda|auto\n");
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
    if (config_load(dir, &cfg)) { cli_report(cmd, NULL); return -1; }
    g->vocab = cfg.vocab;
    g->max_pos = cfg.max_pos;
    g->bos_id = cfg.bos_id < cfg.vocab ? cfg.bos_id : -1;
    const char *tp = a->tokenizer ? a->tokenizer : dir;
    if (!a->tokenizer) {
        char path[4096];
        snprintf(path, sizeof path, "%s/tokenizer.json", dir);
        if (access(path, R_OK)) {
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
    for (int32_t id = 0; id < g->vocab; id++) {
        size_t len;
        if ((id >= n_ids || !tok_piece(g->tok, id, &len)) && push(&g->masked, &g->n_masked, sizeof id, &id)) {
            textgen_close(g);
            return -1;
        }
    }
    if (!a->ignore_eos && cfg.eos_id >= 0 && cfg.eos_id < g->vocab && add_id(g, cfg.eos_id)) {
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
    g->model = cli_load_model(g->cmd, dir, a->threads, a->device);
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

static int append(textgen_result *r, size_t *cap, const char *text, size_t len)
{
    if (r->len + len + 1 > *cap) {
        size_t c = (r->len + len + 1) * 2;
        char *b = realloc(r->text, c);
        if (!b) return -1;
        r->text = b;
        *cap = c;
    }
    memcpy(r->text + r->len, text, len);
    r->len += len;
    r->text[r->len] = 0;
    return 0;
}

static void show(FILE *out, const char *text, size_t from, size_t to)
{
    if (!out || to <= from) return;
    fwrite(text + from, 1, to - from, out);
    fflush(out);
}

/* Output state of one generation: the text so far and what is shown. */
typedef struct {
    size_t cap, shown, checked;
    tok_stream ts;
} out_state;

static int out_begin(const textgen *g, out_state *o, textgen_result *r, int max_tokens)
{
    memset(r, 0, sizeof *r);
    memset(o, 0, sizeof *o);
    o->cap = 256;
    tok_stream_init(&o->ts, g->tok, 0);
    r->text = malloc(o->cap);
    r->ids = malloc(((size_t)max_tokens + SPEC_MAX_K + 1) * sizeof *r->ids);
    if (!r->text || !r->ids) { fprintf(stderr, "dsv4 %s: out of memory\n", g->cmd); return -1; }
    r->text[0] = 0;
    return 0;
}

/* One produced token: stop token, text, stop strings. Returns 1 when the
 * generation ends with it (r->end set), -1 on error, 0 to go on. */
static int take(const textgen *g, out_state *o, FILE *out, int32_t id, textgen_result *r)
{
    size_t cut, hold = 0;
    if (sampling_is_stop_token(g->stop_ids, g->n_stop_ids, id)) { r->end = TG_END_EOS; return 1; }
    r->ids[r->n_ids++] = id;
    const char *piece;
    size_t plen;
    if (tok_stream_put(&o->ts, id, &piece, &plen) || append(r, &o->cap, piece, plen)) {
        fprintf(stderr, "dsv4 %s: %s\n", g->cmd, dsv4_last_error());
        return -1;
    }
    if (sampling_stop_check(r->text, r->len, o->checked, g->stops, g->n_stops, &cut, &hold) >= 0) {
        r->len = cut;
        r->text[cut] = 0;
        r->end = TG_END_STOP;
        return 1;
    }
    o->checked = r->len;
    show(out, r->text, o->shown, r->len - hold);
    o->shown = r->len - hold;
    return 0;
}

static void out_end(const textgen *g, out_state *o, FILE *out, int rc, textgen_result *r)
{
    size_t cut, hold;
    if (!rc && r->end != TG_END_STOP) {
        /* A dangling partial UTF-8 character becomes U+FFFD, which cannot
         * start a stop string, so everything left can be shown. */
        const char *piece;
        size_t plen;
        if (!tok_stream_finish(&o->ts, &piece, &plen) && !append(r, &o->cap, piece, plen) &&
            sampling_stop_check(r->text, r->len, o->checked, g->stops, g->n_stops, &cut, &hold) >= 0) {
            r->len = cut;
            r->text[cut] = 0;
            r->end = TG_END_STOP;
        }
    }
    if (r->text) show(out, r->text, o->shown, r->len);
    tok_stream_free(&o->ts);
}

int textgen_run(const textgen *g, dsv4_session *s, sampler *smp, float *logits, int max_tokens, FILE *out,
                volatile sig_atomic_t *cancel, textgen_result *r)
{
    out_state o;
    int rc = 0, top_n = g->logprobs;
    sampling_logprob top[20];
    if (out_begin(g, &o, r, max_tokens)) { rc = -1; goto done; }
    for (int i = 0;; i++) {
        if (cancel && *cancel) { r->end = TG_END_CANCEL; break; }
        if (i == max_tokens) { r->end = TG_END_LENGTH; break; }
        if (i > 0) {
            if (dsv4_session_pos(s) >= g->max_pos) { r->end = TG_END_CONTEXT; break; }
            if (dsv4_session_eval_last(s, &r->ids[i - 1], 1, logits)) {
                fprintf(stderr, "dsv4 %s: token %d: %s\n", g->cmd, i, dsv4_last_error());
                rc = -1;
                break;
            }
            r->n_fed = i;
        }
        for (int k = 0; k < g->n_masked; k++) logits[g->masked[k]] = -INFINITY;
        int32_t id;
        float lp;
        if (sampler_sample(smp, logits, r->ids, r->n_ids, &id, &lp, top_n ? top : NULL, top_n)) {
            fprintf(stderr, "dsv4 %s: sampling: %s\n", g->cmd, dsv4_last_error());
            rc = -1;
            break;
        }
        if (top_n) print_logprobs(g, i, id, lp, top);
        int t = take(g, &o, out, id, r);
        if (t) { rc = t < 0 ? -1 : 0; break; }
    }
done:
    out_end(g, &o, out, rc, r);
    return rc;
}

int textgen_spec_lane(const textgen *g, spec_lane *l, dsv4_session *s, int k, sampler *smp)
{
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
    out_state o;
    int rc = 0, done = 0;
    if (out_begin(g, &o, r, max_tokens)) { rc = -1; goto end; }
    /* the session consumed every token the lane produced but the last (l->next) */
    while (!done) {
        for (int i = 0; i < l->n_out && !done; i++) {
            if (cancel && *cancel) { r->end = TG_END_CANCEL; done = 1; break; }
            if (r->n_ids == max_tokens) { r->end = TG_END_LENGTH; done = 1; break; }
            int t = take(g, &o, out, l->out[i], r);
            if (t) { rc = t < 0 ? -1 : 0; done = 1; }
        }
        r->n_fed = r->n_ids < l->n_hist - 1 ? r->n_ids : l->n_hist - 1;
        if (done) break;
        if (r->n_ids == max_tokens) { r->end = TG_END_LENGTH; break; }
        if (dsv4_session_pos(l->s) >= g->max_pos) { r->end = TG_END_CONTEXT; break; }
        int room = g->max_pos - (int)dsv4_session_pos(l->s), left = max_tokens - r->n_ids;
        l->budget = room < left ? room : left;
        if (spec_step(g->model, &l, 1, NULL)) {
            fprintf(stderr, "dsv4 %s: token %d: %s\n", g->cmd, r->n_ids + 1, dsv4_last_error());
            rc = -1;
            break;
        }
    }
end:
    out_end(g, &o, out, rc, r);
    return rc;
}

void textgen_result_free(textgen_result *r)
{
    free(r->ids);
    free(r->text);
    memset(r, 0, sizeof *r);
}

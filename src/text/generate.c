#include "text/generate.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

dsv4_status gen_masked_ids(const tok_t *tok, int vocab, int32_t **ids, int *n)
{
    *n = 0;
    *ids = malloc((size_t)vocab * sizeof **ids + 1);
    if (!*ids) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    int n_ids = tok_n_ids(tok);
    for (int32_t id = 0; id < vocab; id++) {
        size_t len;
        if (id >= n_ids || !tok_piece(tok, id, &len)) (*ids)[(*n)++] = id;
    }
    return DSV4_OK;
}

void gen_free(gen_req *g)
{
    if (g->own_smp) sampler_free(g->smp);
    tok_stream_free(&g->ts);
    for (int i = 0; i < g->n_stops; i++) free(g->stops[i]);
    free(g->stops);
    free(g->stop_ids);
    free(g->ids);
    free(g->text);
    memset(g, 0, sizeof *g);
}

dsv4_status gen_init(gen_req *g, const gen_model *gm, const gen_params *p)
{
    memset(g, 0, sizeof *g);
    g->gm = gm;
    if (p->max_tokens < 0 || p->top_logprobs < 0 || p->top_logprobs > GEN_MAX_TOP)
        return dsv4_fail(DSV4_ERR_ARG, "generation: max_tokens %d / top_logprobs %d out of range",
                         p->max_tokens, p->top_logprobs);
    g->max_tokens = p->max_tokens;
    g->top_logprobs = p->top_logprobs;
    tok_stream_init(&g->ts, gm->tok, 0);
    if (p->smp) {
        g->smp = p->smp;
    } else {
        dsv4_status st = sampler_new(&p->sp, gm->vocab, &g->smp);
        if (st) { gen_free(g); return st; }
        g->own_smp = 1;
    }
    g->cap = 256;
    g->text = malloc(g->cap);
    g->ids = malloc(((size_t)p->max_tokens + 1) * sizeof *g->ids);
    g->stop_ids = malloc(((size_t)p->n_stop_ids + 1) * sizeof *g->stop_ids);
    g->stops = calloc((size_t)p->n_stops + 1, sizeof *g->stops);
    if (!g->text || !g->ids || !g->stop_ids || !g->stops) goto oom;
    g->text[0] = 0;
    if (p->n_stop_ids) memcpy(g->stop_ids, p->stop_ids, (size_t)p->n_stop_ids * sizeof *g->stop_ids);
    g->n_stop_ids = p->n_stop_ids;
    for (int i = 0; i < p->n_stops; i++) {
        if (!(g->stops[i] = strdup(p->stops[i]))) goto oom;
        g->n_stops++;
    }
    if (!g->max_tokens) gen_finish(g, GEN_END_LENGTH);
    return DSV4_OK;
oom:
    gen_free(g);
    return dsv4_fail(DSV4_ERR_NOMEM, "generation: out of memory");
}

static int append(gen_req *g, const char *s, size_t n)
{
    if (!n) return 0;
    if (g->len + n + 1 > g->cap) {
        size_t c = (g->len + n + 1) * 2;
        char *b = realloc(g->text, c);
        if (!b) return -1;
        g->text = b;
        g->cap = c;
    }
    memcpy(g->text + g->len, s, n);
    g->len += n;
    g->text[g->len] = 0;
    return 0;
}

/* Looks for a stop string ending in the bytes added since the last check;
 * on a match cuts the text there and ends the request. */
static int stop_hit(gen_req *g)
{
    size_t cut;
    int k = sampling_stop_check(g->text, g->len, g->checked, (const char *const *)g->stops, g->n_stops, &cut,
                                &g->hold);
    if (k < 0) {
        g->checked = g->len;
        return 0;
    }
    g->stop_index = k;
    g->len = g->visible = cut;
    g->text[cut] = 0;
    g->hold = 0;
    g->end = GEN_END_STOP;
    return 1;
}

int gen_take(gen_req *g, int32_t id)
{
    if (g->end) return 0;
    if (sampling_is_stop_token(g->stop_ids, g->n_stop_ids, id)) {
        gen_finish(g, GEN_END_EOS);
        return 0;
    }
    g->ids[g->n_ids++] = id;
    const char *piece;
    size_t plen;
    if (tok_stream_put(&g->ts, id, &piece, &plen) || append(g, piece, plen)) {
        g->end = GEN_END_ERROR;
        return 0;
    }
    if (stop_hit(g)) return 0;
    g->visible = g->len - g->hold;
    if (g->n_ids == g->max_tokens) {
        gen_finish(g, GEN_END_LENGTH);
        return 0;
    }
    return 1;
}

int gen_step(gen_req *g, float *logits, gen_token *tok)
{
    if (g->end) return 0;
    const gen_model *gm = g->gm;
    for (int k = 0; k < gm->n_masked; k++) logits[gm->masked[k]] = -INFINITY;
    gen_token t;
    t.n_top = g->top_logprobs;
    if (sampler_sample(g->smp, logits, g->ids, g->n_ids, &t.id, &t.logprob, t.n_top ? t.top : NULL, t.n_top)) {
        dsv4_fail_prefix(DSV4_ERR_ARG, "sampling: ");
        g->end = GEN_END_ERROR;
        return 0;
    }
    if (tok) *tok = t;
    return gen_take(g, t.id);
}

void gen_score(gen_req *g, float *logits, int32_t id, gen_token *tok)
{
    const gen_model *gm = g->gm;
    for (int k = 0; k < gm->n_masked; k++) logits[gm->masked[k]] = -INFINITY;
    tok->id = id;
    tok->n_top = g->top_logprobs;
    sampler_logprobs(g->smp, logits, id, &tok->logprob, tok->n_top ? tok->top : NULL, tok->n_top);
}

void gen_finish(gen_req *g, gen_end why)
{
    if (g->end) return;
    /* A dangling partial UTF-8 character becomes U+FFFD, which cannot
     * start a stop string, so everything left can be shown. */
    const char *piece;
    size_t plen;
    g->end = why;
    if (!tok_stream_finish(&g->ts, &piece, &plen) && !append(g, piece, plen) && stop_hit(g)) return;
    g->visible = g->len;
    g->hold = 0;
}

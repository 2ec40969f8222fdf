/* Session lifecycle: allocation of the per-layer state, reset; evaluation as
 * one-lane steps. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/size.h"
#include "engine/session.h"

static void layer_free(dsv4_backend *b, dsv4_layer_state *ls)
{
    b->ops->free(b, ls->ring);
    dsv4_comp_state *cs[2] = {&ls->comp, &ls->idx};
    for (int i = 0; i < 2; i++) {
        b->ops->free(b, cs[i]->open_u);
        b->ops->free(b, cs[i]->open_g);
        b->ops->free(b, cs[i]->prev_u);
        b->ops->free(b, cs[i]->prev_g);
        b->ops->free(b, cs[i]->entries);
    }
}

static int comp_alloc(dsv4_backend *b, dsv4_comp_state *cs, int ratio, int width, int overlap)
{
    size_t cw = size_mul((size_t)width, overlap ? 2 : 1);
    cs->open_u = b->ops->alloc(b, size_mul3((size_t)ratio, cw, sizeof(float)));
    cs->open_g = b->ops->alloc(b, size_mul3((size_t)ratio, cw, sizeof(float)));
    if (overlap) {
        cs->prev_u = b->ops->alloc(b, size_mul3((size_t)ratio, (size_t)width, sizeof(float)));
        cs->prev_g = b->ops->alloc(b, size_mul3((size_t)ratio, (size_t)width, sizeof(float)));
    }
    return cs->open_u && cs->open_g && (!overlap || (cs->prev_u && cs->prev_g));
}

dsv4_status dsv4_session_new(dsv4_model *m, dsv4_session **out)
{
    *out = NULL;
    if (!m) return dsv4_fail(DSV4_ERR_ARG, "session_new: no model");
    const dsv4_config *c = &m->cfg;
    dsv4_session *s = calloc(1, sizeof *s);
    if (!s || !(s->L = calloc((size_t)c->n_layers + (size_t)m->n_draft, sizeof *s->L))) {
        free(s);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a session");
    }
    s->m = m;
    int ok = 1;
    for (int l = 0; l < session_n_layers(s) && ok; l++) {
        dsv4_layer_state *ls = &s->L[l];
        int kind = config_kind(c, l), ratio = config_ratio(c, l);
        ok = (ls->ring = m->be->ops->alloc(m->be, size_mul((size_t)c->window, (size_t)m->layout.kv.bytes))) != NULL;
        if (ok && kind != ATTN_SWA) ok = comp_alloc(m->be, &ls->comp, ratio, c->head_dim, kind == ATTN_CSA);
        if (ok && kind == ATTN_CSA) ok = comp_alloc(m->be, &ls->idx, ratio, c->idx_head_dim, 1);
    }
    if (!ok) {
        dsv4_session_free(s);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a session");
    }
    *out = s;
    return DSV4_OK;
}

void dsv4_session_free(dsv4_session *s)
{
    if (!s) return;
    if (s->L)
        for (int l = 0; l < session_n_layers(s); l++) layer_free(s->m->be, &s->L[l]);
    free(s->L);
    free(s->owed_h);
    free(s->owed_tok);
    free(s);
}

void dsv4_session_reset(dsv4_session *s)
{
    /* Counts derive from pos, so stale bytes beyond them are never read;
     * zeroing keeps snapshots and byte comparisons of fresh sessions equal. */
    const dsv4_config *c = &s->m->cfg;
    dsv4_backend *b = s->m->be;
    for (int l = 0; l < session_n_layers(s); l++) {
        dsv4_layer_state *ls = &s->L[l];
        int ratio = config_ratio(c, l);
        b->ops->zero(b, ls->ring, (size_t)c->window * (size_t)s->m->layout.kv.bytes);
        dsv4_comp_state *cs[2] = {&ls->comp, &ls->idx};
        int width[2] = {c->head_dim, c->idx_head_dim};
        for (int i = 0; i < 2; i++) {
            if (!cs[i]->open_u) continue;
            size_t cw = (size_t)width[i] * (cs[i]->prev_u ? 2 : 1);
            b->ops->zero(b, cs[i]->open_u, (size_t)ratio * cw * sizeof(float));
            b->ops->zero(b, cs[i]->open_g, (size_t)ratio * cw * sizeof(float));
            if (cs[i]->prev_u) {
                b->ops->zero(b, cs[i]->prev_u, (size_t)ratio * (size_t)width[i] * sizeof(float));
                b->ops->zero(b, cs[i]->prev_g, (size_t)ratio * (size_t)width[i] * sizeof(float));
            }
        }
    }
    s->pos = 0;
    s->mtp_pos = 0;
    s->n_owed = 0;
    s->poisoned = 0;
}

dsv4_status session_owed_reserve(dsv4_session *s, int64_t n)
{
    if (n <= s->cap_owed) return DSV4_OK;
    int64_t cap = s->cap_owed ? s->cap_owed : 16;
    while (cap < n) cap *= 2;
    size_t HS = (size_t)s->m->cfg.hc_mult * (size_t)s->m->cfg.dim;
    int32_t *t = realloc(s->owed_tok, size_mul((size_t)cap, sizeof *t));
    if (t) s->owed_tok = t;
    float *h = t ? realloc(s->owed_h, size_mul3((size_t)cap, HS, sizeof *h)) : NULL;
    if (!h) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for %lld owed MTP rows", (long long)cap);
    s->owed_h = h;
    s->cap_owed = cap;
    return DSV4_OK;
}

int64_t dsv4_session_pos(const dsv4_session *s) { return s->pos; }

/* Replace *p (old entries of `row` bytes) by a copy with room for `cap`;
 * on failure *p is untouched, so the state stays valid. */
static dsv4_status grow(dsv4_backend *b, uint8_t **p, int64_t old, int64_t cap, int row)
{
    uint8_t *e = b->ops->alloc(b, size_mul((size_t)cap, (size_t)row));
    if (!e) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory growing compressed KV to %lld entries", (long long)cap);
    if (*p) b->ops->copy(b, e, *p, (size_t)old * (size_t)row);
    b->ops->free(b, *p);
    *p = e;
    return DSV4_OK;
}

dsv4_status session_reserve(dsv4_session *s, int64_t n_tokens)
{
    const dsv4_config *c = &s->m->cfg;
    if (n_tokens > c->max_pos)
        return dsv4_fail(DSV4_ERR_ARG, "%lld positions pass the context of %d (max_position_embeddings)",
                         (long long)n_tokens, c->max_pos);
    for (int l = 0; l < c->n_layers; l++) { /* the drafter's layers are SWA-only: no entries */
        dsv4_layer_state *ls = &s->L[l];
        int kind = c->attn_kind[l];
        if (kind == ATTN_SWA) continue;
        int64_t need = n_tokens / config_ratio(c, l);
        if (need <= ls->cap) continue;
        int64_t cap = ls->cap ? ls->cap : 16;
        while (cap < need) cap *= 2;
        dsv4_status st = grow(s->m->be, &ls->comp.entries, ls->cap, cap, s->m->layout.kv.bytes);
        if (!st && kind == ATTN_CSA) st = grow(s->m->be, &ls->idx.entries, ls->cap, cap, s->m->layout.idx.bytes);
        if (st) return st;
        ls->cap = cap; /* both arrays now hold cap entries */
    }
    return DSV4_OK;
}

int dsv4_session_poisoned(const dsv4_session *s) { return s->poisoned; }

/* Benchmarks: pretend the session has consumed n tokens, with random state
 * (window ring, open compressor rows, entries), so decode speed at a long
 * context can be measured without running the prefill. A drafter has
 * consumed them too (its rings full, mtp_pos = n, no rows owed), so a
 * DSpark block attends to a full window as it would at that context.
 * Random fp32 rows go through the backend's ring_store (as rows 0.. of a
 * "ring" as long as the array), which packs them in the layout's formats. */
dsv4_status session_fill_random(dsv4_session *s, int64_t n)
{
    const dsv4_config *c = &s->m->cfg;
    dsv4_backend *b = s->m->be;
    const dsv4_state_layout *L = &s->m->layout;
    dsv4_status st = session_reserve(s, n); /* also bounds n by the context */
    if (st) return st;
    size_t most = size_mul((size_t)c->window, (size_t)c->head_dim);
    size_t wide = (size_t)(c->head_dim > c->idx_head_dim ? c->head_dim : c->idx_head_dim);
    for (int l = 0; l < c->n_layers; l++) {
        size_t e = size_mul((size_t)(n / (config_ratio(c, l) ? config_ratio(c, l) : 1)), wide);
        if (c->attn_kind[l] != ATTN_SWA && e > most) most = e;
        size_t open = size_mul3((size_t)config_ratio(c, l), 2, (size_t)c->head_dim);
        if (open > most) most = open;
    }
    float *h = malloc(size_mul(most, sizeof *h)), *d = b->ops->alloc(b, size_mul(most, sizeof *h));
    if (!h || !d) {
        free(h);
        if (d) b->ops->free(b, d);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    }
    uint32_t x = 2463534242u;
    for (size_t i = 0; i < most; i++) { /* xorshift32, values in [-1, 1) */
        x ^= x << 13; x ^= x >> 17; x ^= x << 5;
        h[i] = (float)(x >> 8) / 8388608.0f - 1.0f;
    }
    b->ops->upload(b, d, h, size_mul(most, sizeof *h));
    for (int l = 0; l < session_n_layers(s); l++) {
        dsv4_layer_state *ls = &s->L[l];
        int r = config_ratio(c, l), kind = config_kind(c, l);
        b->ops->ring_store(b, ls->ring, c->window, &L->kv, d, c->window, 0);
        if (kind == ATTN_SWA) continue;
        int64_t ne = n / r;
        size_t cw = (size_t)c->head_dim * (kind == ATTN_CSA ? 2 : 1);
        if (ne) b->ops->ring_store(b, ls->comp.entries, (int)ne, &L->kv, d, (int)ne, 0);
        b->ops->upload(b, ls->comp.open_u, h, (size_t)r * cw * sizeof(float));
        b->ops->upload(b, ls->comp.open_g, h, (size_t)r * cw * sizeof(float));
        if (kind == ATTN_CSA) {
            if (ne) b->ops->ring_store(b, ls->idx.entries, (int)ne, &L->idx, d, (int)ne, 0);
            b->ops->upload(b, ls->comp.prev_u, h, (size_t)r * (size_t)c->head_dim * sizeof(float));
            b->ops->upload(b, ls->comp.prev_g, h, (size_t)r * (size_t)c->head_dim * sizeof(float));
        }
    }
    st = b->ops->sync(b);
    b->ops->free(b, d);
    free(h);
    if (st) {
        backend_clear_error(b);
        return st;
    }
    s->pos = n;
    s->mtp_pos = s->m->n_draft ? n : 0;
    s->n_owed = 0;
    return DSV4_OK;
}

/* Snapshots: the live part of a session's state as one canonical byte image.
 *
 * Image layout (host memory): pos, then per layer, rows as the model's
 * layout stores them (m->layout: fp32, or packed with --cache official)
 *   ring rows of positions max(0,pos-window+1) .. pos-1, oldest first
 *   compressor (CSA/HCA): the pos % ratio open rows (u, then g), the series-A
 *     rows of the last closed window (CSA, once one exists), entries [pos/ratio]
 *   indexer compressor (CSA): the same at the indexer's width
 * then, with a drafter: mtp_pos, and per drafter layer its ring rows: the
 *   MTP's of positions max(0,mtp_pos-window+1) .. mtp_pos-1, a DSpark
 *   stage's of max(0,mtp_pos-window) .. mtp_pos-1 (session_ring_live)
 * then, with an MTP head: n_owed, the owed rows' tokens (int32) and streams
 *   (hc_mult·dim floats each), oldest first (session.h)
 * Dead bytes (ring slots outside the window, rows of closed windows, entry
 * capacity) are not part of it, so two sessions with equal images behave
 * identically, and memcmp of images is the state comparison of the tests. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "engine/session.h"

struct dsv4_snapshot {
    const dsv4_model *m;
    int64_t pos, mtp_pos, n_owed;
    size_t len;
    unsigned char *data;
};

typedef struct {
    dsv4_backend *b;
    unsigned char *img; /* NULL: only measure */
    size_t off;
    int save;           /* 1: backend -> image, 0: image -> backend */
} cursor;

static void region(cursor *c, void *dev, size_t bytes)
{
    if (bytes && c->img) {
        if (c->save) c->b->ops->download(c->b, c->img + c->off, dev, bytes);
        else c->b->ops->upload(c->b, dev, c->img + c->off, bytes);
    }
    c->off += bytes;
}

static void comp_walk(cursor *c, dsv4_comp_state *cs, int64_t pos, int ratio, const dsv4_row_fmt *rf, int overlap)
{
    int width = rf->width;
    size_t f = sizeof(float), cw = (size_t)width * (overlap ? 2 : 1), n_open = (size_t)(pos % ratio);
    region(c, cs->open_u, n_open * cw * f);
    region(c, cs->open_g, n_open * cw * f);
    if (overlap && pos >= ratio) {
        region(c, cs->prev_u, (size_t)ratio * (size_t)width * f);
        region(c, cs->prev_g, (size_t)ratio * (size_t)width * f);
    }
    region(c, cs->entries, (size_t)(pos / ratio) * (size_t)rf->bytes);
}

/* Host memory (the owed rows) to or from the image. */
static void host(cursor *c, void *mem, size_t bytes)
{
    if (bytes && c->img) {
        if (c->save) memcpy(c->img + c->off, mem, bytes);
        else memcpy(mem, c->img + c->off, bytes);
    }
    c->off += bytes;
}

/* Visits every live region in image order; returns the image size. With
 * img == NULL it only measures, and s may then be a stand-in whose layer
 * states are zeroed (no pointer is followed). */
static size_t walk(dsv4_session *s, int64_t pos, int64_t mtp_pos, int64_t n_owed, unsigned char *img, int save)
{
    const dsv4_config *c = &s->m->cfg;
    cursor cu = {s->m->be, img, sizeof pos, save};
    if (img && save) memcpy(img, &pos, sizeof pos);
    const dsv4_state_layout *L = &s->m->layout;
    size_t row = (size_t)L->kv.bytes;
    for (int l = 0; l < session_n_layers(s); l++) {
        dsv4_layer_state *ls = &s->L[l];
        if (l == c->n_layers) { /* the drafter's layers (SWA-only), at their own position */
            if (img && save) memcpy(img + cu.off, &mtp_pos, sizeof mtp_pos);
            cu.off += sizeof mtp_pos;
            pos = mtp_pos;
        }
        int64_t live = session_ring_live(s->m, l), first = pos - live < 0 ? 0 : pos - live;
        for (int64_t p = first; p < pos; p++)
            region(&cu, ls->ring ? ls->ring + (p % c->window) * row : NULL, row);
        int kind = config_kind(c, l), r = config_ratio(c, l);
        if (kind != ATTN_SWA) comp_walk(&cu, &ls->comp, pos, r, &L->kv, kind == ATTN_CSA);
        if (kind == ATTN_CSA) comp_walk(&cu, &ls->idx, pos, r, &L->idx, 1);
    }
    if (s->m->has_mtp) {
        if (img && save) memcpy(img + cu.off, &n_owed, sizeof n_owed);
        cu.off += sizeof n_owed;
        size_t n = (size_t)n_owed, HS = (size_t)c->hc_mult * (size_t)c->dim;
        host(&cu, s->owed_tok, n * sizeof *s->owed_tok);
        host(&cu, s->owed_h, n * HS * sizeof *s->owed_h);
    }
    return cu.off;
}

dsv4_status dsv4_session_snapshot(dsv4_session *s, dsv4_snapshot **out)
{
    *out = NULL;
    if (s->poisoned) return dsv4_fail(DSV4_ERR_POISONED, "snapshot: the session is poisoned");
    dsv4_snapshot *sn = calloc(1, sizeof *sn);
    size_t len = walk(s, s->pos, s->mtp_pos, s->n_owed, NULL, 1);
    if (!sn || !(sn->data = malloc(len))) {
        free(sn);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a %zu-byte snapshot", len);
    }
    sn->m = s->m;
    sn->pos = s->pos;
    sn->mtp_pos = s->mtp_pos;
    sn->n_owed = s->n_owed;
    sn->len = len;
    walk(s, s->pos, s->mtp_pos, s->n_owed, sn->data, 1);
    dsv4_status st = s->m->be->ops->sync(s->m->be);
    if (st) { dsv4_snapshot_free(sn); backend_clear_error(s->m->be); return st; }
    *out = sn;
    return DSV4_OK;
}

dsv4_status dsv4_session_restore(dsv4_session *s, const dsv4_snapshot *sn)
{
    if (!sn || sn->m != s->m) return dsv4_fail(DSV4_ERR_ARG, "restore: snapshot of another model");
    dsv4_status st = session_reserve(s, sn->pos);
    if (!st) st = session_owed_reserve(s, sn->n_owed);
    if (st) return st; /* state untouched: still usable (or still poisoned) as before */
    walk(s, sn->pos, sn->mtp_pos, sn->n_owed, sn->data, 0);
    if ((st = s->m->be->ops->sync(s->m->be))) {
        backend_clear_error(s->m->be);
        s->poisoned = 1;
        return dsv4_fail_prefix(st, "restore failed, session poisoned: ");
    }
    s->pos = sn->pos;
    s->mtp_pos = sn->mtp_pos;
    s->n_owed = sn->n_owed;
    s->poisoned = 0;
    return DSV4_OK;
}

void dsv4_snapshot_free(dsv4_snapshot *sn)
{
    if (!sn) return;
    free(sn->data);
    free(sn);
}

dsv4_status dsv4_snapshot_from_data(const dsv4_model *m, const void *data, size_t len, dsv4_snapshot **out)
{
    *out = NULL;
    int64_t pos;
    if (!data || len < sizeof pos)
        return dsv4_fail(DSV4_ERR_FORMAT, "snapshot image: %zu bytes, shorter than its position field", len);
    memcpy(&pos, data, sizeof pos);
    if (pos < 0 || pos > m->cfg.max_pos)
        return dsv4_fail(DSV4_ERR_FORMAT, "snapshot image: position %lld outside 0..%d", (long long)pos,
                         m->cfg.max_pos);
    /* Measure with a stand-in session: walk reads only the config then. With
     * a drafter, mtp_pos follows the main layers' regions: measuring at
     * mtp_pos 0 puts it at a known offset (the last 8 bytes of the main
     * layers' part); with an MTP head, n_owed follows the drafter's layers,
     * measured the same way at n_owed 0. */
    int n_state = m->cfg.n_layers + m->n_draft;
    dsv4_layer_state *L = calloc((size_t)n_state, sizeof *L);
    if (!L) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    dsv4_session probe = {.m = (dsv4_model *)m, .pos = pos, .L = L};
    int64_t mtp_pos = 0, n_owed = 0;
    size_t want = walk(&probe, pos, 0, 0, NULL, 1);
    if (m->n_draft) {
        size_t at = want - (m->has_mtp ? 2 : 1) * sizeof mtp_pos;
        if (len >= want) memcpy(&mtp_pos, (const unsigned char *)data + at, sizeof mtp_pos);
        if (mtp_pos < 0 || mtp_pos > m->cfg.max_pos) {
            free(L);
            return dsv4_fail(DSV4_ERR_FORMAT, "snapshot image: MTP position %lld outside 0..%d",
                             (long long)mtp_pos, m->cfg.max_pos);
        }
        want = walk(&probe, pos, mtp_pos, 0, NULL, 1);
    }
    if (m->has_mtp) {
        if (len >= want) memcpy(&n_owed, (const unsigned char *)data + want - sizeof n_owed, sizeof n_owed);
        if (n_owed < 0 || n_owed > pos) {
            free(L);
            return dsv4_fail(DSV4_ERR_FORMAT, "snapshot image: %lld owed MTP rows, outside 0..%lld",
                             (long long)n_owed, (long long)pos);
        }
        want = walk(&probe, pos, mtp_pos, n_owed, NULL, 1);
    }
    free(L);
    if (len != want)
        return dsv4_fail(DSV4_ERR_FORMAT, "snapshot image: %zu bytes, but position %lld needs %zu", len,
                         (long long)pos, want);
    dsv4_snapshot *sn = calloc(1, sizeof *sn);
    if (!sn || !(sn->data = malloc(len))) {
        free(sn);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a %zu-byte snapshot", len);
    }
    memcpy(sn->data, data, len);
    sn->m = m;
    sn->pos = pos;
    sn->mtp_pos = mtp_pos;
    sn->n_owed = n_owed;
    sn->len = len;
    *out = sn;
    return DSV4_OK;
}

const void *dsv4_snapshot_data(const dsv4_snapshot *sn, size_t *len)
{
    *len = sn->len;
    return sn->data;
}

int64_t dsv4_snapshot_pos(const dsv4_snapshot *sn) { return sn->pos; }

/* The DeepSeek-V4 forward pass over one step, written once for every backend
 * (spec Appendix A/B). Each layer: hyper-connection pre, attention of the
 * layer's kind, post; then the same around the MoE.
 *
 * A step holds one or more lanes (sessions), each feeding T consecutive
 * tokens; their rows are stacked. Row-local operations (projections, norms,
 * hyper-connections, MoE) run once over all rows, so each weight is read once
 * per step; operations on a session's state (compressors, indexer,
 * attention, ring) run per lane. No op's arithmetic for a row depends on the
 * other rows, which is why a lane's results are the same alone or batched. */
#include <float.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "engine/forward.h"

/* Activations of one step, carved from one backend allocation. */
struct fwd_scratch {
    float *X, *x, *xn, *post, *comb, *qr, *q, *kv, *o, *z, *a, *u, *g, *ui, *gi, *qi, *wi, *y, *logits;
    int32_t *tok, *sel_idx, *sel_n;
    int64_t *pos; /* each row's position (its lane's pos0 + t): the ops that rotate take all lanes' rows at once */
    /* MTP scratch only: the main model's streams as read, and the constants
     * that make hc_post add e_proj·e to every stream (post = 1, comb = I) */
    float *Xin, *ones, *eye;
    /* DSpark context rows: the target features as read [rows][L·D] */
    float *feat;
    /* DSpark block: each lane's keys (its stage ring, then its block rows:
     * [window + T][head_dim] at row0 + lane·window), the Markov rows e
     * [rows][R], the confidence inputs [h, e] [rows][D + R] and logits [rows];
     * the device-side greedy rounds' Markov logits [rows / B][vocab] and
     * picks (ids, their sums, bad ids: [rows] each) */
    float *keys, *me, *mcat, *mconf, *mlog, *mtop;
    int32_t *mpick, *mbad;
    void *block;
    int rows, out_rows, kind;
};
typedef fwd_scratch scratch;

static dsv4_status scratch_alloc(dsv4_backend *b, scratch *sc, const dsv4_model *m, int rows, int out_rows, int kind)
{
    const dsv4_config *c = &m->cfg;
    sc->rows = rows;
    sc->out_rows = out_rows;
    sc->kind = kind;
    int mtp = kind == FWD_DRAFTER && m->has_mtp, ctx = kind == FWD_DRAFTER && m->has_dspark, blk = kind == FWD_BLOCK;
    size_t hc = (size_t)c->hc_mult, D = (size_t)c->dim, H = (size_t)c->n_heads, hd = (size_t)c->head_dim;
    size_t ih = (size_t)c->idx_heads, ihd = (size_t)c->idx_head_dim, k = (size_t)c->idx_topk;
    size_t cw = 2 * (hd > ihd ? hd : ihd), z = (size_t)c->o_groups * (size_t)c->o_lora, R = (size_t)rows;
    size_t W = (size_t)c->window, F = (size_t)c->dspark_n_targets * D, MR = (size_t)c->dspark_rank;
    size_t sel = blk && W + (size_t)c->dspark_block > k ? W + (size_t)c->dspark_block : k; /* block: W + B - 1 keys */
    size_t sizes[] = {hc * D * R, D * R, D * R, hc * R, hc * hc * R, (size_t)c->q_lora * R, H * hd * R, hd * R,
                      H * hd * R, z * R, D * R, cw * R, cw * R, cw * R, cw * R, ih * ihd * R, ih * R, D * R,
                      (size_t)c->vocab * (size_t)out_rows, R, sel * R, R, 2 * R,
                      mtp ? hc * D * R : 0, mtp ? hc * R : 0, mtp ? hc * hc * R : 0,
                      ctx ? F * R : 0, blk ? (W + 1) * hd * R : 0, blk ? MR * R : 0, blk ? (D + MR) * R : 0,
                      blk ? R : 0, blk ? (size_t)c->vocab * ((R + c->dspark_block - 1) / c->dspark_block) : 0,
                      blk ? R : 0, blk ? R : 0, blk ? R : 0};
    void **slots[] = {(void **)&sc->X, (void **)&sc->x, (void **)&sc->xn, (void **)&sc->post, (void **)&sc->comb,
                      (void **)&sc->qr, (void **)&sc->q, (void **)&sc->kv, (void **)&sc->o, (void **)&sc->z,
                      (void **)&sc->a, (void **)&sc->u, (void **)&sc->g, (void **)&sc->ui, (void **)&sc->gi,
                      (void **)&sc->qi, (void **)&sc->wi,
                      (void **)&sc->y, (void **)&sc->logits, (void **)&sc->tok, (void **)&sc->sel_idx,
                      (void **)&sc->sel_n, (void **)&sc->pos, (void **)&sc->Xin, (void **)&sc->ones, (void **)&sc->eye,
                      (void **)&sc->feat, (void **)&sc->keys, (void **)&sc->me,
                      (void **)&sc->mcat, (void **)&sc->mconf, (void **)&sc->mlog, (void **)&sc->mtop,
                      (void **)&sc->mpick, (void **)&sc->mbad};
    size_t n = sizeof sizes / sizeof sizes[0], total = 0;
    for (size_t i = 0; i < n; i++) total += (sizes[i] + 63) & ~(size_t)63; /* 256-byte aligned slots */
    sc->block = b->ops->alloc(b, total * 4);
    if (!sc->block) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the activations of %d rows", rows);
    char *p = sc->block;
    for (size_t i = 0; i < n; i++) {
        *slots[i] = sizes[i] ? (void *)p : NULL;
        p += ((sizes[i] + 63) & ~(size_t)63) * 4;
    }
    if (mtp) {
        float *h = malloc(hc * hc * R * sizeof *h);
        if (!h) { b->ops->free(b, sc->block); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); }
        for (size_t i = 0; i < hc * hc * R; i++) h[i] = i % (hc * hc) % (hc + 1) == 0 ? 1.0f : 0.0f;
        b->ops->upload(b, sc->eye, h, hc * hc * R * sizeof *h);
        for (size_t i = 0; i < hc * R; i++) h[i] = 1.0f;
        b->ops->upload(b, sc->ones, h, hc * R * sizeof *h);
        free(h);
    }
    return DSV4_OK;
}

size_t forward_log_floats(const dsv4_config *c, int l0, int l1, int T)
{
    size_t n = 0;
    for (int l = l0; l < l1; l++) {
        n += (size_t)c->head_dim + 2 * (size_t)(config_comp_width(c, l, 0) + config_comp_width(c, l, 1));
    }
    return n * (size_t)T;
}

/* Layer l's part of a log: pointers to row 0 of each array (NULL: none). */
typedef struct { float *kv, *cu, *cg, *iu, *ig; int cw, iw; } log_layer;

static log_layer log_at(const dsv4_config *c, const fwd_log *log, int l)
{
    log_layer r = {0};
    float *p = log->base;
    for (int i = log->l0; i <= l; i++) {
        r = (log_layer){0};
        r.cw = config_comp_width(c, i, 0);
        r.iw = config_comp_width(c, i, 1);
        r.kv = p;
        p += (size_t)log->T * c->head_dim;
        if (r.cw) { r.cu = p; r.cg = p + (size_t)log->T * r.cw; p += 2 * (size_t)log->T * r.cw; }
        if (r.iw) { r.iu = p; r.ig = p + (size_t)log->T * r.iw; p += 2 * (size_t)log->T * r.iw; }
    }
    return r;
}

/* Layer l's rope frequencies: sliding-window layers the main table,
 * compressed ones the compress table (YaRN-scaled). */
static const float *layer_freq(const dsv4_model *m, int l)
{
    return config_kind(&m->cfg, l) == ATTN_SWA ? m->inv_freq_main : m->inv_freq_compress;
}

/* The compressors' constants of layer l (main, or the indexer's). */
static dsv4_comp_params comp_params(const dsv4_model *m, int l, int indexer)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    const dsv4_comp_w *cw = indexer ? &w->idx_comp : &w->comp;
    return (dsv4_comp_params){config_ratio(c, l), indexer || config_kind(c, l) == ATTN_CSA, c->rope_dim,
                              indexer ? m->layout.idx : m->layout.kv, &cw->ape, &cw->norm, layer_freq(m, l),
                              (float)c->norm_eps};
}

/* y = W · x for a weight the reference keeps in FP8/FP4: under the official
 * numerics its input goes through FP8 1x128 first (act_fp8_round), in the
 * product's own op so that a backend rounds the rows where it prepares them
 * for the product; x itself is left as it is. */
static void fp8_matmul(dsv4_model *m, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy)
{
    if (m->cache_official) m->be->ops->matmul_fp8in(m->be, x, ldx, T, W, y, ldy);
    else m->be->ops->matmul(m->be, x, ldx, T, W, y, ldy);
}

/* The projections of layer l's compressor `pass` (0: the main one, into u
 * and g; 1: the indexer's, into ui and gi, with the indexer's head weights
 * wi) for the step's rows, each once over all rows (a row's sums do not
 * depend on the rows beside it). They read xn only, so they run beside the
 * query chain. */
static void compress_project(dsv4_model *m, int l, int pass, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_backend *b = m->be;
    int D = c->dim, cw = config_comp_width(c, l, pass);
    const dsv4_comp_w *cmp = pass ? &w->idx_comp : &w->comp;
    /* wkv and wgate read the same rows: one pass where the backend can */
    b->ops->matmul_pair(b, sc->xn, D, rows, &cmp->wkv, pass ? sc->ui : sc->u, cw, &cmp->wgate, pass ? sc->gi : sc->g,
                        cw);
    if (pass) b->ops->matmul(b, sc->xn, D, rows, &w->idx_wproj, sc->wi, c->idx_heads);
}

/* One lane's rows into its compressor `pass` of layer l (none: nothing),
 * after compress_project: they read those rows and write the lane's
 * compressor state only. A logged lane keeps copies of the rows those
 * state writes consume. */
static void compress_lane(dsv4_model *m, int l, int pass, const fwd_lane *ln, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    dsv4_layer_state *ls = &ln->s->L[l];
    size_t f = sizeof(float);
    int cw = config_comp_width(c, l, pass);
    if (!cw) return;
    dsv4_comp_params cp = comp_params(m, l, pass);
    const float *u = (pass ? sc->ui : sc->u) + ln->row0 * cw, *g = (pass ? sc->gi : sc->g) + ln->row0 * cw;
    if (ln->log) {
        log_layer lg = log_at(c, ln->log, l);
        op->copy(b, (pass ? lg.iu : lg.cu) + (size_t)ln->t0 * cw, u, (size_t)ln->T * cw * f);
        op->copy(b, (pass ? lg.ig : lg.cg) + (size_t)ln->t0 * cw, g, (size_t)ln->T * cw * f);
    }
    /* official: main entries stored FP8, indexer keys rotated FP4 */
    op->compress(b, u, g, ln->T, ln->pos0, &cp, pass ? &ls->idx : &ls->comp);
}

/* The indexer's queries of a CSA layer, every lane: from qr (the query
 * chain's), each row rotated at its position. */
static void index_queries(dsv4_model *m, int l, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    int ih = c->idx_heads, ihd = c->idx_head_dim;
    fp8_matmul(m, sc->qr, c->q_lora, rows, &m->layers[l].idx_wq_b, sc->qi, (int64_t)ih * ihd);
    b->ops->rope(b, sc->qi, rows, ih, ihd, c->rope_dim, 0, 0, sc->pos, m->inv_freq_compress, 0);
    if (m->cache_official) b->ops->idx_fp4_round(b, sc->qi, rows * ih, ihd); /* the queries as the keys */
}

/* The state-dependent part of attention for one lane, after its
 * compressors: the indexer's selection (CSA), attention over window +
 * compressed keys (its output's rope dims rotated back to the query's
 * frame by the op). The ring update follows (store_lane). */
static void attend_lane(dsv4_model *m, int l, const fwd_lane *ln, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_layer_state *ls = &ln->s->L[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int64_t pos0 = ln->pos0, r0 = ln->row0;
    int T = ln->T, H = c->n_heads, hd = c->head_dim, kind = config_kind(c, l);
    int ratio = config_ratio(c, l);
    const float *kv = sc->kv + r0 * hd;

    int32_t *sel_idx = NULL, *sel_n = NULL;
    if (kind == ATTN_CSA) {
        int ih = c->idx_heads, ihd = c->idx_head_dim;
        /* head weights carry 1/sqrt(heads); scores carry 1/sqrt(head_dim) */
        sel_idx = sc->sel_idx + r0 * c->idx_topk; /* the lane's own rows: lanes may run side by side */
        sel_n = sc->sel_n + r0;
        op->indexer(b, sc->qi + r0 * ih * ihd, sc->wi + r0 * ih, T, pos0, ih, ls->idx.entries, &m->layout.idx,
                    ratio, c->idx_topk, 1.0f / sqrtf((float)ihd), 1.0f / sqrtf((float)ih), sel_idx, sel_n);
    }
    op->attention(b, sc->q + r0 * H * hd, T, pos0, H, hd, c->window, ls->ring, kv, ls->comp.entries,
                  &m->layout.kv, kind == ATTN_HCA ? ratio : 0, sel_idx, sel_n, c->idx_topk, &w->sinks,
                  1.0f / sqrtf((float)hd), c->rope_dim, layer_freq(m, l), sc->o + r0 * H * hd);
}

/* One lane's KV rows of layer l into its window ring (after its
 * attention, which reads the slots they replace), and into its log. */
static void store_lane(dsv4_model *m, int l, const fwd_lane *ln, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    int hd = c->head_dim;
    const float *kv = sc->kv + ln->row0 * hd;
    if (ln->log) b->ops->copy(b, log_at(c, ln->log, l).kv + (size_t)ln->t0 * hd, kv, (size_t)ln->T * hd * sizeof(float));
    b->ops->ring_store(b, ln->s->L[l].ring, c->window, &m->layout.kv, kv, ln->T, ln->pos0);
}

void forward_replay(dsv4_model *m, dsv4_session *s, int64_t pos0, const fwd_log *log, int n)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    for (int l = log->l0; l < log->l1; l++) {
        dsv4_layer_state *ls = &s->L[l];
        log_layer lg = log_at(c, log, l);
        if (lg.cu) {
            dsv4_comp_params cp = comp_params(m, l, 0);
            b->ops->compress(b, lg.cu, lg.cg, n, pos0, &cp, &ls->comp);
        }
        if (lg.iu) {
            dsv4_comp_params ip = comp_params(m, l, 1);
            b->ops->compress(b, lg.iu, lg.ig, n, pos0, &ip, &ls->idx);
        }
        b->ops->ring_store(b, ls->ring, c->window, &m->layout.kv, lg.kv, n, pos0);
    }
}

/* A DSpark block's attention for one lane (docs/DSPARK.md §4.2): its B rows
 * at positions pos0.. (pos0 = the context rows consumed) each see the
 * stage's min(pos0, window) context keys and all B block rows, one softmax
 * with the sink. The attention op's window of 1 gives each row its own key;
 * the others come as a selection from the lane's key buffer (ring slots
 * 0..n_ctx-1, which hold exactly the live context, then the block rows),
 * listed by forward_run (block_selection). The block writes no state. */
static void block_attend_lane(dsv4_model *m, int l, int lane, const fwd_lane *ln, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    const dsv4_row_fmt *kf = &m->layout.kv;
    int64_t r0 = ln->row0, hd = c->head_dim, H = c->n_heads, W = c->window, cap = W + c->dspark_block - 1;
    /* rows in the ring's format (kf.bytes <= hd floats, so the lane's region holds them) */
    uint8_t *keys = (uint8_t *)(sc->keys + (r0 + (int64_t)lane * W) * hd);
    op->copy(b, keys, ln->s->L[l].ring, (size_t)W * (size_t)kf->bytes);
    op->ring_store(b, keys + W * kf->bytes, ln->T, kf, sc->kv + r0 * hd, ln->T, 0);
    op->attention(b, sc->q + r0 * H * hd, ln->T, ln->pos0, (int)H, (int)hd, 1, keys, sc->kv + r0 * hd, keys, kf, 0,
                  sc->sel_idx + r0 * cap, sc->sel_n + r0, (int)cap, &w->sinks, 1.0f / sqrtf((float)hd),
                  c->rope_dim, layer_freq(m, l), sc->o + r0 * H * hd);
}

/* The selection block_attend_lane reads: for row t of each lane, the ring
 * slots 0..n_ctx-1, then the lane's other block rows. 0, or NOMEM. */
static dsv4_status block_selection(dsv4_model *m, const fwd_lane *lanes, int n_lanes, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    int W = c->window, cap = W + c->dspark_block - 1;
    int32_t *idx = malloc((size_t)rows * (size_t)cap * sizeof *idx), *cnt = malloc((size_t)rows * sizeof *cnt);
    if (!idx || !cnt) {
        free(idx);
        free(cnt);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the DSpark key lists");
    }
    for (int i = 0; i < n_lanes; i++) {
        const fwd_lane *ln = &lanes[i];
        int n_ctx = ln->pos0 < W ? (int)ln->pos0 : W;
        for (int t = 0; t < ln->T; t++) {
            int32_t *e = idx + (size_t)(ln->row0 + t) * cap;
            int n = 0;
            for (int j = 0; j < n_ctx; j++) e[n++] = j;
            for (int j = 0; j < ln->T; j++)
                if (j != t) e[n++] = W + j;
            cnt[ln->row0 + t] = n;
        }
    }
    dsv4_backend *b = m->be;
    b->ops->upload(b, sc->sel_idx, idx, (size_t)rows * (size_t)cap * sizeof *idx);
    b->ops->upload(b, sc->sel_n, cnt, (size_t)rows * sizeof *cnt);
    free(idx);
    free(cnt);
    return DSV4_OK;
}

/* block: the lanes are DSpark blocks (block_attend_lane), else each lane
 * attends over its state and writes it (attend_lane). */
static void attention_block(dsv4_model *m, int l, const fwd_lane *lanes, int n_lanes, int rows, scratch *sc,
                            int block)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int D = c->dim, H = c->n_heads, hd = c->head_dim, rd = c->rope_dim;
    float eps = (float)c->norm_eps;
    const float *freq = layer_freq(m, l);

    op->hc_pre(b, sc->X, rows, c->hc_mult, D, &w->hc_attn_fn, &w->hc_attn_base, &w->hc_attn_scale, c->hc_iters,
               (float)c->hc_eps, eps, &w->attn_norm, sc->xn, sc->post, sc->comb);
    /* official numerics: the FP8 projections (wq_a, wkv; wq_b and the
     * indexer's wq_b on qr; wo_b) see their input through FP8 1x128
     * (fp8_matmul), the compressors and the indexer's head weights
     * (fp32/bf16) see xn as is */
    /* independent chains of small, latency-bound launches, each in a
     * concurrent group: the single shared K=V head (reads xn, writes kv);
     * each compressor's projections (read xn, write u and g, or ui, gi and
     * wi); the queries (low-rank, then after its norm the query heads
     * beside the indexer's queries: read xn, write qr, then q and qi).
     * Per-head norms, then rope at each row's position. A lone lane's
     * compressors follow their projections, hidden behind the query chain;
     * with several lanes each lane's run in its lane's group below, beside
     * the other lanes'. */
    int grp = op->concurrent != NULL, par = grp && n_lanes > 1, csa = !block && config_kind(c, l) == ATTN_CSA;
    if (grp) op->concurrent(b, 1);
    fp8_matmul(m, sc->xn, D, rows, &w->wkv, sc->kv, hd);
    /* official numerics: the window KV as the FP8 cache holds it, for this
     * step's attention (the ring stores these values packed: exactly) */
    op->norm_rope(b, sc->kv, rows, 1, hd, rd, &w->kv_norm, eps, sc->pos, freq, m->cache_official ? hd - rd : -1);
    for (int pass = 0; pass < 2 && !block; pass++) {
        if (!config_comp_width(c, l, pass)) continue;
        if (grp) op->concurrent(b, 1);
        compress_project(m, l, pass, rows, sc);
        for (int i = 0; i < n_lanes && !par; i++) compress_lane(m, l, pass, &lanes[i], sc);
    }
    if (grp) op->concurrent(b, 2);
    fp8_matmul(m, sc->xn, D, rows, &w->wq_a, sc->qr, c->q_lora);
    op->rmsnorm(b, sc->qr, rows, c->q_lora, &w->q_norm, eps, sc->qr);
    if (csa) {
        if (grp) op->concurrent(b, 1);
        index_queries(m, l, rows, sc);
        if (grp) op->concurrent(b, 2);
    }
    fp8_matmul(m, sc->qr, c->q_lora, rows, &w->wq_b, sc->q, (int64_t)H * hd);
    op->norm_rope(b, sc->q, rows, H, hd, rd, NULL, eps, sc->pos, freq, -1);
    if (grp) op->concurrent(b, 0);
    /* each lane's chain (compressors, selection, attention) beside the
     * others': it reads the step's rows and writes its own rows and state */
    for (int i = 0; i < n_lanes; i++) {
        if (par) op->concurrent(b, i + 1 < n_lanes ? 1 : 2);
        if (block) {
            block_attend_lane(m, l, i, &lanes[i], sc);
            continue;
        }
        for (int pass = 0; pass < 2 && par; pass++) compress_lane(m, l, pass, &lanes[i], sc);
        attend_lane(m, l, &lanes[i], sc);
    }
    if (par) op->concurrent(b, 0);
    /* each lane's ring store (reads its kv rows, writes its ring and log)
     * beside the output projection, off the layer's critical path */
    int stores = grp && !block;
    for (int i = 0; i < n_lanes && !block; i++) {
        if (stores) op->concurrent(b, 1);
        store_lane(m, l, &lanes[i], sc);
    }
    if (stores) op->concurrent(b, 2);
    /* the grouped low-rank output projection (block-diagonal wo_a, then
     * wo_b) of the heads, already rotated back by the attention op */
    int64_t zw = (int64_t)c->o_groups * c->o_lora;
    op->matmul_grouped(b, sc->o, (int64_t)H * hd, rows, &w->wo_a, c->o_groups, sc->z, zw);
    /* wo_b (FP8 in the reference, its input rounded under the official
     * numerics, as fp8_matmul; wo_a is bf16 there: not before it), and its
     * output into the streams in the same op (a backend adds it where the
     * product stores its rows) */
    dsv4_hc_post hp = {sc->X, c->hc_mult, sc->post, sc->comb};
    op->matmul_post(b, sc->z, zw, rows, &w->wo_b, m->cache_official, sc->a, &hp);
    if (stores) op->concurrent(b, 0);
}

static void ffn_block(dsv4_model *m, int l, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    const dsv4_layer_w *w = &m->layers[l];
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int D = c->dim;
    float eps = (float)c->norm_eps;
    op->hc_pre(b, sc->X, rows, c->hc_mult, D, &w->hc_ffn_fn, &w->hc_ffn_base, &w->hc_ffn_scale, c->hc_iters,
               (float)c->hc_eps, eps, &w->ffn_norm, sc->xn, sc->post, sc->comb);
    dsv4_moe_params mp = {&w->gate, &w->gate_bias, w->tid2eid, w->w1, w->w2, w->w3, &w->sh_w1, &w->sh_w2,
                          &w->sh_w3, c->n_experts, c->n_active, c->moe_inter, c->score_func,
                          (float)c->route_scale, (float)c->swiglu_limit, m->cache_official,
                          {sc->X, c->hc_mult, sc->post, sc->comb}}; /* the output into the streams */
    op->moe(b, sc->xn, sc->tok, rows, D, &mp, sc->y);
}

dsv4_status forward_scratch_new(dsv4_model *m, int rows, int out_rows, int kind, fwd_scratch **out)
{
    *out = NULL;
    scratch *sc = calloc(1, sizeof *sc);
    if (!sc) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    dsv4_status st = scratch_alloc(m->be, sc, m, rows, out_rows, kind);
    if (st) { free(sc); return st; }
    *out = sc;
    return DSV4_OK;
}

void forward_scratch_free(dsv4_model *m, fwd_scratch *sc)
{
    if (!sc) return;
    m->be->ops->free(m->be, sc->block);
    free(sc);
}

/* The first non-finite value of a row of n, or -1: one flag over the row
 * first (a loop without an exit vectorizes: a vocabulary row in about 25 us
 * instead of 100-140, every token), the index only when it is set. */
static int first_nonfinite(const float *row, int n)
{
    int any = 0;
    for (int v = 0; v < n; v++) any |= !(fabsf(row[v]) <= FLT_MAX);
    for (int v = 0; any && v < n; v++)
        if (!isfinite(row[v])) return v;
    return -1;
}

/* The one finiteness policy of every path (eval, batch, speculative): a NaN
 * or infinite logit, from corrupt weights or state, fails the step and names
 * where. A lane's out_rows rows are its last ones. */
static dsv4_status check_finite(const dsv4_config *c, const fwd_lane *lanes, int n_lanes, const char *what)
{
    for (int i = 0; i < n_lanes; i++) {
        const fwd_lane *ln = &lanes[i];
        for (int r = 0; r < ln->out_rows; r++) {
            const float *row = ln->logits + (size_t)r * (size_t)c->vocab;
            int v = first_nonfinite(row, c->vocab);
            if (v >= 0) {
                int64_t pos = ln->pos0 + ln->T - ln->out_rows + r;
                return dsv4_fail(DSV4_ERR_DEVICE, "lane %d, %sposition %lld: non-finite logit (%g) for token %d",
                                 ln->id, what, (long long)pos, (double)row[v], v);
            }
        }
    }
    return DSV4_OK;
}

/* Logits of the lanes' chosen rows: hc head and the final norm on each
 * lane's last out_rows rows into x (stacked), one head matmul over all of
 * them; lanes
 * whose host buffers follow each other get one download. */
typedef struct { const dsv4_mat *fn, *base, *scale, *norm; } head_w;

static void logits_out(dsv4_model *m, const head_w *hw, const fwd_lane *lanes, int n_lanes, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int64_t hcD = (int64_t)c->hc_mult * c->dim, V = c->vocab;
    int n = 0;
    for (int i = 0; i < n_lanes; i++) {
        const fwd_lane *ln = &lanes[i];
        if (!ln->out_rows) continue;
        op->hc_head(b, sc->X + (int64_t)(ln->row0 + ln->T - ln->out_rows) * hcD, ln->out_rows, c->hc_mult, c->dim,
                    hw->fn, hw->base, hw->scale, (float)c->hc_eps, (float)c->norm_eps, hw->norm,
                    sc->x + (int64_t)n * c->dim);
        n += ln->out_rows;
    }
    if (!n) return;
    op->matmul(b, sc->x, c->dim, n, &m->head, sc->logits, V);
    int o = 0;
    for (int i = 0; i < n_lanes;) {
        if (!lanes[i].out_rows) { i++; continue; }
        float *dst = lanes[i].logits;
        int k = lanes[i].out_rows, j = i + 1;
        for (; j < n_lanes && lanes[j].out_rows && lanes[j].logits == dst + (size_t)k * V; j++) k += lanes[j].out_rows;
        op->download(b, dst, sc->logits + (size_t)o * V, (size_t)k * V * sizeof(float));
        o += k;
        i = j;
    }
}

/* MTP input fusion (spec §5.2): X0[t][k] = e_proj·enorm(Embed[tok t]) +
 * h_proj·hnorm(Xmain[t][k]) for every stream k; the sum is hc_post with
 * post = 1 and comb = I (exact: 1·a + X[k] + 0·X[j]...). */
static void mtp_input(dsv4_model *m, const fwd_lane *lanes, int n_lanes, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    const dsv4_mtp_w *w = &m->mtp;
    int D = c->dim, hc = c->hc_mult;
    float eps = (float)c->norm_eps;
    int64_t hcD = (int64_t)hc * D;
    for (int i = 0; i < n_lanes; i++)
        op->upload(b, sc->Xin + (int64_t)lanes[i].row0 * hcD, lanes[i].x_in, (size_t)lanes[i].T * hcD * sizeof(float));
    op->embed(b, &m->embed, sc->tok, rows, 1, sc->x);
    op->rmsnorm(b, sc->x, rows, D, &w->enorm, eps, sc->x);
    fp8_matmul(m, sc->x, D, rows, &w->e_proj, sc->a, D); /* e_proj, h_proj: FP8 in the reference */
    op->rmsnorm(b, sc->Xin, rows * hc, D, &w->hnorm, eps, sc->Xin);
    fp8_matmul(m, sc->Xin, D, rows * hc, &w->h_proj, sc->X, D);
    op->hc_post(b, sc->X, rows, hc, D, sc->a, sc->ones, sc->eye);
}

/* DSpark context rows (docs/DSPARK.md §4.1): row t of a lane, the target
 * features c of position pos0 + t, becomes each stage's context key
 *   kv_s = rope_pos(RMSNorm_kv_norm_s(wkv_s · RMSNorm_main_norm(main_proj · c)))
 * stored in the stage's ring (and the lane's log, for a partial publication). */
static void dspark_context(dsv4_model *m, const fwd_lane *lanes, int n_lanes, int rows, scratch *sc)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    const dsv4_dspark_w *w = &m->dspark;
    int D = c->dim, hd = c->head_dim, rd = c->rope_dim;
    int64_t F = (int64_t)c->dspark_n_targets * D;
    float eps = (float)c->norm_eps;
    for (int i = 0; i < n_lanes; i++)
        op->upload(b, sc->feat + (int64_t)lanes[i].row0 * F, lanes[i].x_in, (size_t)lanes[i].T * (size_t)F * sizeof(float));
    /* official numerics: main_proj and wkv are FP8 (their inputs through act_fp8_round) */
    fp8_matmul(m, sc->feat, F, rows, &w->main_proj, sc->x, D);
    op->rmsnorm(b, sc->x, rows, D, &w->main_norm, eps, sc->xn);
    for (int st = 0; st < m->n_draft; st++) {
        int l = c->n_layers + st;
        const dsv4_layer_w *lw = &m->layers[l];
        b->cur_layer = l;
        fp8_matmul(m, sc->xn, D, rows, &lw->wkv, sc->kv, hd);
        op->norm_rope(b, sc->kv, rows, 1, hd, rd, &lw->kv_norm, eps, sc->pos, m->inv_freq_main, -1);
        for (int i = 0; i < n_lanes; i++) { /* storing a row rounds it as the official FP8 cache does */
            const fwd_lane *ln = &lanes[i];
            const float *kv = sc->kv + (int64_t)ln->row0 * hd;
            if (ln->log) op->copy(b, log_at(c, ln->log, l).kv + (size_t)ln->t0 * hd, kv, (size_t)ln->T * hd * sizeof(float));
            op->ring_store(b, ln->s->L[l].ring, c->window, &m->layout.kv, kv, ln->T, ln->pos0);
        }
    }
}

/* Host staging of the main model's streams after the DSpark target layers,
 * for the lanes that want features: [L][T][hc·D] per lane, lane by lane;
 * after the sync each row's mean over the streams goes to the lane's feat. */
typedef struct { float *buf; size_t off[DSV4_MAX_LANES]; } feat_stage;

static int capture_slot(const dsv4_config *c, int l)
{
    for (int i = 0; i < c->dspark_n_targets; i++)
        if (c->dspark_targets[i] == l) return i;
    return -1;
}

static void capture(dsv4_model *m, int slot, const fwd_lane *lanes, int n_lanes, const scratch *sc, feat_stage *fs)
{
    const dsv4_config *c = &m->cfg;
    int64_t hcD = (int64_t)c->hc_mult * c->dim;
    for (int i = 0; i < n_lanes; i++)
        if (lanes[i].feat)
            m->be->ops->download(m->be, fs->buf + fs->off[i] + (size_t)slot * lanes[i].T * hcD,
                                 sc->X + (int64_t)lanes[i].row0 * hcD, (size_t)lanes[i].T * (size_t)hcD * sizeof(float));
}

/* c[t] = concat over the target layers of (X[t][0] + ... + X[t][hc-1]) / hc,
 * summed in stream order in fp32 (the same bits on every backend). */
static void features_out(const dsv4_config *c, const fwd_lane *lanes, int n_lanes, const feat_stage *fs)
{
    int hc = c->hc_mult, D = c->dim, L = c->dspark_n_targets;
    for (int i = 0; i < n_lanes; i++) {
        const fwd_lane *ln = &lanes[i];
        if (!ln->feat) continue;
        for (int s = 0; s < L; s++)
            for (int t = 0; t < ln->T; t++) {
                const float *X = fs->buf + fs->off[i] + ((size_t)s * ln->T + t) * hc * D;
                float *out = ln->feat + ((size_t)t * L + s) * D;
                for (int d = 0; d < D; d++) {
                    float acc = X[d];
                    for (int k = 1; k < hc; k++) acc += X[(size_t)k * D + d];
                    out[d] = acc / (float)hc;
                }
            }
    }
}

/* The main model (FWD_MAIN: embedding, every layer, hc head, norm), the
 * drafter's rows (FWD_DRAFTER: the MTP head's input fusion, block, own hc
 * head and norm; or DSpark's context rows, no output), or DSpark blocks
 * (FWD_BLOCK: embedding, the stages, own hc head and norm); then the shared
 * output head. */
static dsv4_status forward_run(dsv4_model *m, fwd_scratch *scp, const fwd_lane *lanes, int n_lanes,
                               const int32_t *tok, int rows, int kind)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    int out_rows = 0;
    for (int i = 0; i < n_lanes; i++) out_rows += lanes[i].out_rows;
    if (rows > scp->rows || out_rows > scp->out_rows)
        return dsv4_fail(DSV4_ERR_ARG, "forward: %d rows exceed the scratch for %d", rows, scp->rows);
    if (kind != FWD_MAIN && scp->kind != kind)
        return dsv4_fail(DSV4_ERR_ARG, "forward: a scratch of kind %d for a forward of kind %d", scp->kind, kind);
    scratch sc = *scp;
    dsv4_status st;
    const char *what = kind == FWD_MAIN ? "" : m->has_dspark ? "dspark " : "mtp "; /* in messages */
    feat_stage fs = {0};
    if (kind == FWD_MAIN && m->has_dspark) {
        size_t n = 0;
        for (int i = 0; i < n_lanes; i++) {
            fs.off[i] = n;
            if (lanes[i].feat) n += (size_t)c->dspark_n_targets * lanes[i].T * c->hc_mult * c->dim;
        }
        if (n && !(fs.buf = malloc(n * sizeof *fs.buf)))
            return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the DSpark features of %d rows", rows);
    }
    if (kind == FWD_BLOCK && (st = block_selection(m, lanes, n_lanes, rows, &sc))) return st;
    int64_t *pos = calloc(rows > 0 ? (size_t)rows : 1, sizeof *pos);
    if (!pos) {
        free(fs.buf);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for the positions of %d rows", rows);
    }
    for (int i = 0; i < n_lanes; i++)
        for (int t = 0; t < lanes[i].T; t++) pos[lanes[i].row0 + t] = lanes[i].pos0 + t;
    if (op->step_begin) op->step_begin(b, rows);
    op->upload(b, sc.tok, tok, (size_t)rows * sizeof *tok);
    op->upload(b, sc.pos, pos, (size_t)rows * sizeof *pos);
    free(pos);
    head_w hw = {&m->hc_head_fn, &m->hc_head_base, &m->hc_head_scale, &m->norm};
    const head_w draft_hw = {&m->mtp.hc_head_fn, &m->mtp.hc_head_base, &m->mtp.hc_head_scale, &m->mtp.norm};
    if (kind == FWD_DRAFTER && m->has_dspark) {
        dspark_context(m, lanes, n_lanes, rows, &sc);
    } else if (kind == FWD_DRAFTER) {
        int l = c->n_layers;
        b->cur_layer = l;
        mtp_input(m, lanes, n_lanes, rows, &sc);
        attention_block(m, l, lanes, n_lanes, rows, &sc, 0);
        ffn_block(m, l, rows, &sc);
        hw = draft_hw;
    } else if (kind == FWD_BLOCK) { /* every row's token on every stream, then the stages */
        op->embed(b, &m->embed, sc.tok, rows, c->hc_mult, sc.X);
        for (int l = c->n_layers; l < c->n_layers + m->n_draft; l++) {
            b->cur_layer = l;
            attention_block(m, l, lanes, n_lanes, rows, &sc, 1);
            ffn_block(m, l, rows, &sc);
        }
        hw = draft_hw;
    } else {
        op->embed(b, &m->embed, sc.tok, rows, c->hc_mult, sc.X);
        for (int l = 0; l < c->n_layers; l++) {
            b->cur_layer = l;
            attention_block(m, l, lanes, n_lanes, rows, &sc, 0);
            ffn_block(m, l, rows, &sc);
            int slot = fs.buf ? capture_slot(c, l) : -1;
            if (slot >= 0) capture(m, slot, lanes, n_lanes, &sc, &fs);
        }
    }
    b->cur_layer = -1;
    int64_t hcD = (int64_t)c->hc_mult * c->dim;
    for (int i = 0; i < n_lanes && kind != FWD_BLOCK; i++)
        if (lanes[i].hidden)
            op->download(b, lanes[i].hidden, sc.X + (int64_t)lanes[i].row0 * hcD,
                         (size_t)lanes[i].T * (size_t)hcD * sizeof(float));
    logits_out(m, &hw, lanes, n_lanes, &sc);
    /* a block's hidden: its rows after the final norm (every row is an output row, stacked lane by lane) */
    for (int i = 0; i < n_lanes && kind == FWD_BLOCK; i++)
        if (lanes[i].hidden)
            op->download(b, lanes[i].hidden, sc.x + (int64_t)lanes[i].row0 * c->dim,
                         (size_t)lanes[i].T * (size_t)c->dim * sizeof(float));
    if (op->step_end) op->step_end(b);
    st = op->sync(b);
    if (st) { /* name the lane and layer the fault came from */
        int lane = -1;
        for (int i = 0; i < n_lanes && b->sticky_row >= 0; i++)
            if (b->sticky_row >= lanes[i].row0 && b->sticky_row < lanes[i].row0 + lanes[i].T) lane = i;
        char where[64] = "";
        if (lane >= 0 && b->sticky_layer >= 0)
            snprintf(where, sizeof where, "lane %d, %slayer %d: ", lanes[lane].id, what, b->sticky_layer);
        else if (b->sticky_layer >= 0) snprintf(where, sizeof where, "%slayer %d: ", what, b->sticky_layer);
        st = dsv4_fail(st, "%s%s", where, b->sticky_msg);
        backend_clear_error(b);
    }
    if (!st && fs.buf) features_out(c, lanes, n_lanes, &fs);
    free(fs.buf);
    if (!st) st = check_finite(c, lanes, n_lanes, what);
    return st;
}

dsv4_status forward_step(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes, const int32_t *tok,
                         int rows)
{
    return forward_run(m, sc, lanes, n_lanes, tok, rows, FWD_MAIN);
}

dsv4_status forward_mtp(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes, const int32_t *tok,
                        int rows)
{
    return forward_run(m, sc, lanes, n_lanes, tok, rows, FWD_DRAFTER);
}

dsv4_status forward_dspark_block(dsv4_model *m, fwd_scratch *sc, const fwd_lane *lanes, int n_lanes,
                                 const int32_t *tok, int rows)
{
    for (int i = 0; i < n_lanes; i++)
        if (lanes[i].T != m->cfg.dspark_block || lanes[i].out_rows != lanes[i].T || lanes[i].log)
            return dsv4_fail(DSV4_ERR_ARG, "forward: a DSpark block lane has %d rows (%d wanted), every one an "
                             "output row", lanes[i].T, m->cfg.dspark_block);
    return forward_run(m, sc, lanes, n_lanes, tok, rows, FWD_BLOCK);
}

dsv4_status forward_dspark_markov(dsv4_model *m, fwd_scratch *sc, const int32_t *prev, const int *row, int n,
                                  float *bias, float *conf)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    const dsv4_dspark_w *w = &m->dspark;
    int D = c->dim, R = c->dspark_rank, V = c->vocab;
    if (sc->kind != FWD_BLOCK || n < 1 || n > sc->rows || n > sc->out_rows)
        return dsv4_fail(DSV4_ERR_ARG, "forward: %d Markov rows for a scratch of %d block rows", n, sc->rows);
    for (int i = 0; i < n; i++)
        if (prev[i] < 0 || prev[i] >= V || row[i] < 0 || row[i] >= sc->rows)
            return dsv4_fail(DSV4_ERR_ARG, "forward: Markov row %d (token %d, block row %d) out of range", i, prev[i],
                             row[i]);
    op->upload(b, sc->tok, prev, (size_t)n * sizeof *prev);
    op->embed(b, &w->markov_w1, sc->tok, n, 1, sc->me);
    op->matmul(b, sc->me, R, n, &w->markov_w2, sc->logits, V);
    for (int i = 0; i < n; i++) { /* [h, e]: the block row after the final norm, then its Markov row */
        float *cat = sc->mcat + (size_t)i * (D + R);
        op->copy(b, cat, sc->x + (size_t)row[i] * D, (size_t)D * sizeof(float));
        op->copy(b, cat + D, sc->me + (size_t)i * R, (size_t)R * sizeof(float));
    }
    op->matmul(b, sc->mcat, D + R, n, &w->conf, sc->mconf, 1);
    op->download(b, bias, sc->logits, (size_t)n * V * sizeof(float));
    op->download(b, conf, sc->mconf, (size_t)n * sizeof(float));
    dsv4_status st = op->sync(b);
    if (st) {
        st = dsv4_fail(st, "dspark markov head: %s", b->sticky_msg);
        backend_clear_error(b);
        return st;
    }
    for (int i = 0; i < n; i++)
        if ((st = forward_markov_row_check(&conf[i], first_nonfinite(bias + (size_t)i * V, V)))) return st;
    return DSV4_OK;
}

dsv4_status forward_dspark_greedy(dsv4_model *m, fwd_scratch *sc, const int32_t *next, int nl, int rounds,
                                  int32_t *drafts, float *top, float *conf, int32_t *bad)
{
    const dsv4_config *c = &m->cfg;
    dsv4_backend *b = m->be;
    const dsv4_ops *op = b->ops;
    const dsv4_dspark_w *w = &m->dspark;
    int D = c->dim, R = c->dspark_rank, V = c->vocab, B = c->dspark_block;
    if (sc->kind != FWD_BLOCK || !op->pick_sum || nl < 1 || rounds < 1 || rounds > B || nl * B > sc->rows)
        return dsv4_fail(DSV4_ERR_ARG, "forward: %d greedy Markov rounds of %d lanes for a scratch of %d block rows",
                         rounds, nl, sc->rows);
    for (int j = 0; j < nl; j++)
        if (next[j] < 0 || next[j] >= V)
            return dsv4_fail(DSV4_ERR_ARG, "forward: Markov lane %d's token %d out of range", j, next[j]);
    op->upload(b, sc->tok, next, (size_t)nl * sizeof *next);
    for (int i = 0; i < rounds; i++) {
        /* sc->tok: each lane's token before (embedded here, then overwritten
         * by this round's picks, which the next round embeds) */
        op->embed(b, &w->markov_w1, sc->tok, nl, 1, sc->me);
        op->matmul(b, sc->me, R, nl, &w->markov_w2, sc->mlog, V);
        for (int j = 0; j < nl; j++) { /* [h, e]: block row j·B + i after the final norm, then its Markov row */
            float *cat = sc->mcat + (size_t)j * (D + R);
            op->copy(b, cat, sc->x + (size_t)(j * B + i) * D, (size_t)D * sizeof(float));
            op->copy(b, cat + D, sc->me + (size_t)j * R, (size_t)R * sizeof(float));
        }
        op->matmul(b, sc->mcat, D + R, nl, &w->conf, sc->mconf + (size_t)i * nl, 1);
        op->pick_sum(b, sc->logits + (size_t)i * V, (int64_t)B * V, sc->mlog, V, nl, V, sc->tok,
                     sc->mtop + (size_t)i * nl, sc->mbad + (size_t)i * nl);
        op->copy(b, sc->mpick + (size_t)i * nl, sc->tok, (size_t)nl * sizeof *sc->tok);
    }
    size_t n = (size_t)rounds * nl;
    op->download(b, drafts, sc->mpick, n * sizeof *drafts);
    op->download(b, top, sc->mtop, n * sizeof *top);
    op->download(b, conf, sc->mconf, n * sizeof *conf);
    op->download(b, bad, sc->mbad, n * sizeof *bad);
    dsv4_status st = op->sync(b);
    if (st) {
        st = dsv4_fail(st, "dspark markov head: %s", b->sticky_msg);
        backend_clear_error(b);
    }
    return st;
}

dsv4_status forward_markov_row_check(float *conf, int32_t bad)
{
    if (!isfinite(*conf)) return dsv4_fail(DSV4_ERR_DEVICE, "dspark confidence head: non-finite logit");
    *conf = 1.0f / (1.0f + expf(-*conf));
    if (bad >= 0) return dsv4_fail(DSV4_ERR_DEVICE, "dspark markov head: non-finite bias for token %d", bad);
    return DSV4_OK;
}

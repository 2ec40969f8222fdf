/* dsv4_model_load: config.json + safetensors -> bound weights + backend. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "engine/session.h"
#include "model/model.h"

static int64_t max_row_width(const dsv4_config *c)
{
    int64_t w[] = {(int64_t)c->hc_mult * c->dim, c->dim, c->q_lora, c->moe_inter,
                   (int64_t)c->o_groups * c->o_lora, (int64_t)c->n_heads * c->head_dim / c->o_groups};
    int64_t mx = 1;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) if (w[i] > mx) mx = w[i];
    return mx;
}

/* Everything after the config and the tensor archive are in place. */
static dsv4_status model_finish(dsv4_model *m, const dsv4_load_options *opt, const char *what)
{
    const dsv4_config *c = &m->cfg;
    dsv4_status st;
    if (c->weight_format != WFMT_PLAIN || c->expert_format != WFMT_PLAIN)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: quantization_config (FP8/FP4 weights) is not supported "
                         "yet; use a BF16/F32 checkpoint", what);
    if ((st = weights_bind(m))) return st;
    if (!(m->be = backend_create(opt ? opt->device : NULL, opt ? opt->n_threads : 0, max_row_width(c))))
        return DSV4_ERR_DEVICE;
    if ((st = weights_adopt(m, opt ? opt->progress : NULL, opt ? opt->progress_user : NULL))) return st;
    size_t fbytes = (size_t)c->rope_dim / 2 * sizeof(float);
    float *host = malloc(2 * fbytes);
    m->inv_freq_main = m->be->ops->alloc(m->be, fbytes);
    m->inv_freq_compress = m->be->ops->alloc(m->be, fbytes);
    if (!host || !m->inv_freq_main || !m->inv_freq_compress) {
        free(host);
        return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    }
    rope_inv_freq(&c->rope_main, c->rope_dim, host);
    rope_inv_freq(&c->rope_compress, c->rope_dim, host + c->rope_dim / 2);
    m->be->ops->upload(m->be, m->inv_freq_main, host, fbytes);
    m->be->ops->upload(m->be, m->inv_freq_compress, host + c->rope_dim / 2, fbytes);
    free(host);
    return m->be->ops->sync(m->be);
}

dsv4_status dsv4_model_load(const char *dir, const dsv4_load_options *opt, dsv4_model **out)
{
    *out = NULL;
    dsv4_model *m = calloc(1, sizeof *m);
    if (!m) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    dsv4_status st = config_load(dir, &m->cfg);
    if (!st) st = st_open_dir(dir, &m->st);
    char what[600];
    snprintf(what, sizeof what, "%s/config.json", dir);
    if (!st) st = model_finish(m, opt, what);
    if (st) { dsv4_model_free(m); return st; }
    *out = m;
    return DSV4_OK;
}

dsv4_status dsv4_model_synthetic(const char *preset, int layers, int experts, const dsv4_load_options *opt,
                                 dsv4_model **out)
{
    *out = NULL;
    dsv4_model *m = calloc(1, sizeof *m);
    if (!m) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    size_t len = 0;
    dsv4_status st = model_synthetic_image(preset, layers, experts, &m->cfg, &m->owned_image, &len);
    if (!st) st = st_open_memory(m->owned_image, len, "synthetic checkpoint", &m->st);
    if (!st) st = model_finish(m, opt, "synthetic checkpoint");
    if (st) { dsv4_model_free(m); return st; }
    *out = m;
    return DSV4_OK;
}

void dsv4_model_free(dsv4_model *m)
{
    if (!m) return;
    weights_free(m);
    if (m->be) {
        m->be->ops->free(m->be, m->inv_freq_main);
        m->be->ops->free(m->be, m->inv_freq_compress);
        m->be->ops->destroy(m->be);
    }
    st_close(m->st);
    free(m->owned_image);
    free(m);
}

int dsv4_model_vocab(const dsv4_model *m) { return m->cfg.vocab; }
int dsv4_model_n_layers(const dsv4_model *m) { return m->cfg.n_layers; }
const dsv4_config *dsv4_model_config(const dsv4_model *m) { return &m->cfg; }

int dsv4_model_unknown_count(const dsv4_model *m) { return m->n_unknown; }
const char *dsv4_model_unknown_name(const dsv4_model *m, int i)
{
    return i >= 0 && i < m->n_unknown ? m->unknown[i] : NULL;
}

void dsv4_model_memory(const dsv4_model *m, dsv4_memory_info *out)
{
    const dsv4_config *c = &m->cfg;
    uint64_t fixed = 0;
    double per_tok = 0;
    const double f = sizeof(float);
    for (int l = 0; l < c->n_layers; l++) {
        int kind = c->attn_kind[l], r = config_ratio(c, l);
        fixed += (uint64_t)c->window * (uint64_t)c->head_dim * sizeof(float);
        if (kind == ATTN_SWA) continue;
        int ov = kind == ATTN_CSA;
        /* open rows (u and g) and, with overlap, the previous series-A rows */
        fixed += (uint64_t)r * (uint64_t)c->head_dim * (ov ? 2u : 1u) * 2u * sizeof(float);
        if (ov) fixed += (uint64_t)r * (uint64_t)c->head_dim * 2u * sizeof(float);
        per_tok += c->head_dim * f / r;
        if (ov) {
            fixed += (uint64_t)r * (uint64_t)c->idx_head_dim * 6u * sizeof(float);
            per_tok += c->idx_head_dim * f / r;
        }
    }
    if (m->has_mtp) fixed += (uint64_t)c->window * (uint64_t)c->head_dim * sizeof(float); /* its SWA ring */
    out->fixed_bytes = fixed;
    out->bytes_per_token = per_tok;
    out->weight_bytes = st_mapped_bytes(m->st);
}

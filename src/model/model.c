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
static dsv4_status model_finish(dsv4_model *m, const dsv4_load_options *opt)
{
    const dsv4_config *c = &m->cfg;
    dsv4_status st;
    if ((st = weights_bind(m))) return st;
    if (!(m->be = backend_create(opt ? opt->device : NULL, opt ? opt->n_threads : 0, max_row_width(c))))
        return DSV4_ERR_DEVICE;
    dsv4_cache_mode cm = opt ? opt->cache : DSV4_CACHE_AUTO;
    if (cm != DSV4_CACHE_AUTO && cm != DSV4_CACHE_EXACT && cm != DSV4_CACHE_OFFICIAL)
        return dsv4_fail(DSV4_ERR_ARG, "unknown cache mode %d", (int)cm);
    m->cache_official = cm == DSV4_CACHE_OFFICIAL ||
                        (cm == DSV4_CACHE_AUTO && (c->weight_format != WFMT_PLAIN || c->expert_format != WFMT_PLAIN));
    if (m->cache_official && (c->idx_head_dim & (c->idx_head_dim - 1)))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "the official cache numerics need index_head_dim a power of two "
                         "(Hadamard rotation), not %d; use --cache exact", c->idx_head_dim);
    if (m->cache_official && (!m->be->ops->kv_fp8_round || !m->be->ops->idx_fp4_round))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "the %s backend does not implement the official cache numerics "
                         "(FP8 KV, FP4 indexer); use the exact cache (--cache exact)", m->be->name);
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
    if (!st) st = model_finish(m, opt);
    if (st) { dsv4_model_free(m); return st; }
    *out = m;
    return DSV4_OK;
}

dsv4_status dsv4_model_synthetic(const char *preset, int layers, int experts, const char *weights,
                                 const dsv4_load_options *opt, dsv4_model **out)
{
    *out = NULL;
    dsv4_model *m = calloc(1, sizeof *m);
    if (!m) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    size_t len = 0;
    dsv4_status st = model_synthetic_image(preset, layers, experts, weights, &m->cfg, &m->owned_image, &len);
    if (!st) st = st_open_memory(m->owned_image, len, "synthetic checkpoint", &m->st);
    if (!st) st = model_finish(m, opt);
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
dsv4_cache_mode dsv4_model_cache_mode(const dsv4_model *m)
{
    return m->cache_official ? DSV4_CACHE_OFFICIAL : DSV4_CACHE_EXACT;
}
int dsv4_model_n_layers(const dsv4_model *m) { return m->cfg.n_layers; }
const dsv4_config *dsv4_model_config(const dsv4_model *m) { return &m->cfg; }

int dsv4_model_unknown_count(const dsv4_model *m) { return m->n_unknown; }
const char *dsv4_model_unknown_name(const dsv4_model *m, int i)
{
    return i >= 0 && i < m->n_unknown ? m->unknown[i] : NULL;
}

void dsv4_model_memory(const dsv4_model *m, dsv4_memory_info *out)
{
    double per_tok;
    uint64_t fixed;
    config_state_size(&m->cfg, STATE_FP32, &per_tok, &fixed);
    out->fixed_bytes = fixed;
    out->bytes_per_token = per_tok;
    out->weight_bytes = st_mapped_bytes(m->st);
    out->device_weight_bytes = m->be ? m->be->weight_bytes : 0;
}

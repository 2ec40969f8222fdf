/* dsv4_model_load: config.json + safetensors, or one GGUF file (or split
 * set) -> bound weights + backend; the synthetic models, and freeing. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/config_gguf.h"
#include "model/memplan.h"
#include "model/model.h"

static int64_t max_row_width(const dsv4_config *c)
{
    int64_t w[] = {(int64_t)c->hc_mult * c->dim, c->dim, c->q_lora, c->moe_inter,
                   (int64_t)c->o_groups * c->o_lora, (int64_t)c->n_heads * c->head_dim / c->o_groups};
    int64_t mx = 1;
    for (size_t i = 0; i < sizeof w / sizeof w[0]; i++) if (w[i] > mx) mx = w[i];
    return mx;
}

/* A device backend must hold every bound weight plus one empty session
 * (memplan, with the same reserve `dsv4 info` plans with); refuse before
 * uploading anything when it cannot. */
static dsv4_status check_fits(dsv4_model *m, const char *what)
{
    uint64_t fr, tot;
    if (!m->be->ops->mem_info) return DSV4_OK;
    dsv4_status st = m->be->ops->mem_info(m->be, &fr, &tot);
    if (st) return st;
    dsv4_memory_info mi;
    dsv4_model_memory(m, &mi);
    memplan p = {weights_bytes(m), mi.fixed_bytes, mi.bytes_per_token, fr, MODEL_DEVICE_RESERVE, m->cfg.max_pos};
    if (memplan_sessions(&p, 0) >= 1) return DSV4_OK;
    const double G = (double)(1u << 30);
    return dsv4_fail(DSV4_ERR_NOMEM, "%s: does not fit the %s device: weights %.2f GiB + one session %.3f GiB + "
                     "reserve %.2f GiB > %.2f GiB free (of %.2f GiB)", what, m->be->name, (double)p.weights / G,
                     (double)p.fixed / G, (double)p.reserve / G, (double)fr / G, (double)tot / G);
}

/* Everything after the config and the tensor archive are in place; what
 * names the model in messages. */
static dsv4_status model_finish(dsv4_model *m, const dsv4_load_options *opt, const char *what)
{
    const dsv4_config *c = &m->cfg;
    dsv4_status st;
    int sr = opt ? opt->step_rows : 0;
    if (sr < 0) return dsv4_fail(DSV4_ERR_ARG, "step_rows must be at least 1 (0: the default), not %d", sr);
    m->step_rows = sr ? sr : MODEL_STEP_ROWS;
    if ((st = weights_bind(m))) return st;
    if (!(m->be = backend_create(opt ? opt->device : NULL, opt ? opt->n_threads : 0, max_row_width(c))))
        return DSV4_ERR_DEVICE;
    dsv4_cache_mode cm = opt ? opt->cache : DSV4_CACHE_AUTO;
    if (cm != DSV4_CACHE_AUTO && cm != DSV4_CACHE_EXACT && cm != DSV4_CACHE_OFFICIAL)
        return dsv4_fail(DSV4_ERR_ARG, "unknown cache mode %d", (int)cm);
    m->cache_official = cm == DSV4_CACHE_OFFICIAL ||
                        (cm == DSV4_CACHE_AUTO && (c->weight_format != WFMT_PLAIN || c->expert_format != WFMT_PLAIN));
    m->layout = state_layout(c, m->cache_official);
    if (m->cache_official && (c->idx_head_dim & (c->idx_head_dim - 1)))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "the official cache numerics need index_head_dim a power of two "
                         "(Hadamard rotation), not %d; use --cache exact", c->idx_head_dim);
    if (m->cache_official && (!m->be->ops->idx_fp4_round || !m->be->ops->act_fp8_round ||
                              !m->be->ops->matmul_fp8in))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "the %s backend does not implement the official numerics "
                         "(FP8 KV and activations, FP4 indexer); use --cache exact", m->be->name);
    if ((st = check_fits(m, what))) return st;
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
    dsv4_status st;
    if (model_path_is_gguf(dir)) {
        st = gguf_open(dir, &m->gg);
        if (!st) st = config_from_gguf(m->gg, &m->cfg);
        if (!st) st = model_finish(m, opt, dir);
        if (st) { dsv4_model_free(m); return st; }
        *out = m;
        return DSV4_OK;
    }
    st = config_load(dir, &m->cfg);
    if (!st) st = st_open_dir(dir, &m->st);
    if (!st) st = model_finish(m, opt, dir);
    if (st) { dsv4_model_free(m); return st; }
    *out = m;
    return DSV4_OK;
}

dsv4_status dsv4_model_synthetic(const char *preset, int layers, int experts, const char *weights,
                                 const char *drafter, const dsv4_load_options *opt, dsv4_model **out)
{
    *out = NULL;
    dsv4_model *m = calloc(1, sizeof *m);
    if (!m) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    size_t len = 0;
    int gg = 0;
    dsv4_status st =
        model_synthetic_image(preset, layers, experts, weights, drafter, &m->cfg, &m->owned_image, &len, &gg);
    if (!st && gg) { /* read back like a file: the config from the metadata */
        st = gguf_open_memory(m->owned_image, len, "synthetic checkpoint", &m->gg);
        if (!st) st = config_from_gguf(m->gg, &m->cfg);
    } else if (!st) {
        st = st_open_memory(m->owned_image, len, "synthetic checkpoint", &m->st);
    }
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
    gguf_close(m->gg);
    free(m->owned_image);
    free(m);
}

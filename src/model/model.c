/* The model object's facts for callers: sizes, cache mode, identity,
 * memory (engine/model_load.c builds it). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "model/model.h"

int dsv4_model_vocab(const dsv4_model *m) { return m->cfg.vocab; }
dsv4_cache_mode dsv4_model_cache_mode(const dsv4_model *m)
{
    return m->cache_official ? DSV4_CACHE_OFFICIAL : DSV4_CACHE_EXACT;
}
int dsv4_model_n_layers(const dsv4_model *m) { return m->cfg.n_layers; }

int dsv4_model_max_positions(const dsv4_model *m) { return m->cfg.max_pos; }
const dsv4_config *dsv4_model_config(const dsv4_model *m) { return &m->cfg; }

int dsv4_model_unknown_count(const dsv4_model *m) { return m->n_unknown; }
const char *dsv4_model_unknown_name(const dsv4_model *m, int i)
{
    return i >= 0 && i < m->n_unknown ? m->unknown[i] : NULL;
}

/* FNV-1a, 64 bits: a fingerprint against mix-ups, not an adversary. */
static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

uint64_t dsv4_model_identity(const dsv4_model *m)
{
    const dsv4_config *c = &m->cfg;
    uint64_t h = 0xcbf29ce484222325ull;
    int dims[] = {c->vocab, c->dim, c->n_layers, c->n_heads, c->head_dim, c->rope_dim, c->window,
                  c->ratio_csa, c->ratio_hca, c->idx_heads, c->idx_head_dim, c->idx_topk, c->n_experts,
                  c->n_active, c->hc_mult, c->max_pos, m->cache_official /* the numerics and the row layout */};
    h = fnv(h, dims, sizeof dims);
    h = fnv(h, c->attn_kind, (size_t)c->n_layers * sizeof c->attn_kind[0]);
    for (int i = 0; i < st_count(m->st); i++) {
        const st_tensor *t = st_get(m->st, i);
        h = fnv(h, t->name, strlen(t->name) + 1);
        int dt = (int)t->dtype;
        h = fnv(h, &dt, sizeof dt);
        h = fnv(h, t->shape, (size_t)t->ndim * sizeof t->shape[0]);
        /* The first and last bytes of the data tell two random
         * checkpoints of one shape apart without reading the weights. */
        size_t k = t->nbytes < 64 ? (size_t)t->nbytes : 64;
        h = fnv(h, t->data, k);
        h = fnv(h, (const unsigned char *)t->data + t->nbytes - k, k);
    }
    return h;
}

void dsv4_model_memory(const dsv4_model *m, dsv4_memory_info *out)
{
    double per_tok;
    uint64_t fixed;
    config_state_size(&m->cfg, m->cache_official ? STATE_OFFICIAL : STATE_FP32, &per_tok, &fixed);
    /* the drafter's rings (SWA-only blocks: the MTP head's, or the DSpark stages') */
    fixed += (uint64_t)m->n_draft * (uint64_t)m->cfg.window * (uint64_t)m->layout.kv.bytes;
    out->fixed_bytes = fixed;
    out->bytes_per_token = per_tok;
    tensor_source src = {m->st, m->gg};
    out->weight_bytes = tsrc_mapped_bytes(&src);
    out->device_weight_bytes = m->be ? m->be->weight_bytes : 0;
}

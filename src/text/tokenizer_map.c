#include "text/tokenizer_map.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

uint64_t tok_hash_bytes(const void *p, size_t n)
{
    const unsigned char *s = p;
    uint64_t h = 0x9E3779B97F4A7C15ull ^ n;
    while (n >= 8) {
        uint64_t w;
        memcpy(&w, s, 8);
        h = (h ^ w) * 0xBF58476D1CE4E5B9ull;
        h ^= h >> 31;
        s += 8;
        n -= 8;
    }
    uint64_t w = 0;
    memcpy(&w, s, n);
    h = (h ^ w) * 0x94D049BB133111EBull;
    h ^= h >> 29;
    h *= 0xBF58476D1CE4E5B9ull;
    return h ^ h >> 32;
}

/* Smallest power of two >= 2n, so probes stay short. */
static uint64_t table_size(size_t n)
{
    uint64_t cap = 16;
    while (cap < 2 * (uint64_t)n) cap <<= 1;
    return cap;
}

dsv4_status tok_idmap_build(tok_idmap *m, const char *arena, const uint32_t *off,
                            const uint8_t *present, int32_t n, int32_t *dup_id)
{
    uint64_t cap = table_size((size_t)n);
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for the vocabulary map");
    memset(m->slot, 0xFF, cap * sizeof *m->slot);
    m->mask = cap - 1;
    m->arena = arena;
    m->off = off;
    for (int32_t id = 0; id < n; id++) {
        if (!present[id]) continue;
        const char *s = arena + off[id];
        size_t len = off[id + 1] - off[id];
        uint64_t i = tok_hash_bytes(s, len) & m->mask;
        for (;; i = (i + 1) & m->mask) {
            int32_t o = m->slot[i];
            if (o < 0) { m->slot[i] = id; break; }
            if (off[o + 1] - off[o] == len && !memcmp(arena + off[o], s, len)) {
                *dup_id = id;
                return DSV4_ERR_FORMAT;
            }
        }
    }
    return DSV4_OK;
}

int32_t tok_idmap_get(const tok_idmap *m, const char *s, size_t len)
{
    for (uint64_t i = tok_hash_bytes(s, len) & m->mask;; i = (i + 1) & m->mask) {
        int32_t o = m->slot[i];
        if (o < 0) return -1;
        if (m->off[o + 1] - m->off[o] == len && !memcmp(m->arena + m->off[o], s, len)) return o;
    }
}

void tok_idmap_free(tok_idmap *m)
{
    free(m->slot);
    m->slot = NULL;
}

dsv4_status tok_pairmap_init(tok_pairmap *m, size_t n_expected)
{
    uint64_t cap = table_size(n_expected);
    m->slot = malloc(cap * sizeof *m->slot);
    if (!m->slot) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for the merge map");
    for (uint64_t i = 0; i < cap; i++) m->slot[i].key = UINT64_MAX;
    m->mask = cap - 1;
    return DSV4_OK;
}

void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint64_t i = h >> 20 & m->mask;; i = (i + 1) & m->mask) {
        tok_pairslot *s = &m->slot[i];
        if (s->key == key || s->key == UINT64_MAX) {
            s->key = key;
            s->rank = rank;
            s->merged = merged;
            return;
        }
    }
}

void tok_pairmap_free(tok_pairmap *m)
{
    free(m->slot);
    m->slot = NULL;
}

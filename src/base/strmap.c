#include "base/strmap.h"

#include <stdlib.h>
#include <string.h>

/* FNV-1a: short keys, no adversarial-collision concern worth more code. */
static uint64_t hash_str(const char *s)
{
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

void strmap_free(strmap *m)
{
    free(m->keys);
    free(m->vals);
    memset(m, 0, sizeof *m);
}

/* Slot holding key, or the empty slot where it would go. cap must be > n. */
static size_t find_slot(const strmap *m, const char *key)
{
    size_t mask = m->cap - 1, i = (size_t)hash_str(key) & mask;
    while (m->keys[i] && strcmp(m->keys[i], key) != 0) i = (i + 1) & mask;
    return i;
}

static int grow(strmap *m)
{
    size_t cap = m->cap ? m->cap * 2 : 16;
    if (cap < m->cap) return -1;
    strmap g = {calloc(cap, sizeof *g.keys), malloc(cap * sizeof *g.vals), cap, 0};
    if (!g.keys || !g.vals) {
        strmap_free(&g);
        return -1;
    }
    for (size_t i = 0; i < m->cap; i++) {
        if (!m->keys[i]) continue;
        size_t j = find_slot(&g, m->keys[i]);
        g.keys[j] = m->keys[i];
        g.vals[j] = m->vals[i];
        g.n++;
    }
    strmap_free(m);
    *m = g;
    return 0;
}

int strmap_put(strmap *m, const char *key, int val, int *old)
{
    /* Keep the load factor at or below 1/2 so probes stay short. */
    if ((m->n + 1) * 2 > m->cap && grow(m) != 0) return -1;
    size_t i = find_slot(m, key);
    if (m->keys[i]) {
        if (old) *old = m->vals[i];
        return 1;
    }
    m->keys[i] = key;
    m->vals[i] = val;
    m->n++;
    return 0;
}

int strmap_get(const strmap *m, const char *key)
{
    if (m->cap == 0) return -1;
    size_t i = find_slot(m, key);
    return m->keys[i] ? m->vals[i] : -1;
}

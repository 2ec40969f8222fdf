/* Hash tables for the tokenizer: piece string -> id, and merge pair -> (rank,
 * merged id). Open addressing with linear probing; sizes are fixed at build
 * time (the vocabulary never changes after loading). */
#ifndef DSV4_TEXT_TOKENIZER_MAP_H
#define DSV4_TEXT_TOKENIZER_MAP_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

uint64_t tok_hash_bytes(const void *p, size_t n);

/* Maps the strings of an id-indexed string table back to ids. The table
 * (arena + offsets, id i spanning arena[off[i]..off[i+1])) must outlive the
 * map and stay unchanged. */
typedef struct {
    int32_t *slot; /* id, or -1 for empty */
    uint64_t mask;
    const char *arena;
    const uint32_t *off;
} tok_idmap;

/* Builds the map over ids [0, n) whose present[id] is nonzero. On a repeated
 * string, *dup_id receives the later id and the call fails with
 * DSV4_ERR_FORMAT (message left to the caller). */
dsv4_status tok_idmap_build(tok_idmap *m, const char *arena, const uint32_t *off,
                            const uint8_t *present, int32_t n, int32_t *dup_id);
int32_t tok_idmap_get(const tok_idmap *m, const char *s, size_t len);
void tok_idmap_free(tok_idmap *m);

typedef struct {
    uint64_t key;   /* left << 32 | right; UINT64_MAX = empty */
    uint32_t rank;
    int32_t merged;
} tok_pairslot;

typedef struct {
    tok_pairslot *slot;
    uint64_t mask;
} tok_pairmap;

dsv4_status tok_pairmap_init(tok_pairmap *m, size_t n_expected);
/* Inserts or overwrites (a later duplicate merge wins, as in HF tokenizers). */
void tok_pairmap_put(tok_pairmap *m, int32_t a, int32_t b, uint32_t rank, int32_t merged);
static inline const tok_pairslot *tok_pairmap_get(const tok_pairmap *m, int32_t a, int32_t b)
{
    uint64_t key = (uint64_t)(uint32_t)a << 32 | (uint32_t)b;
    uint64_t h = key * 0x9E3779B97F4A7C15ull;
    for (uint64_t i = h >> 20 & m->mask;; i = (i + 1) & m->mask) {
        const tok_pairslot *s = &m->slot[i];
        if (s->key == key) return s;
        if (s->key == UINT64_MAX) return NULL;
    }
}
void tok_pairmap_free(tok_pairmap *m);

#endif

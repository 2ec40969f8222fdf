#include "text/bpe.h"

#include <stdlib.h>

#include "base/error.h"

/* A merge that was possible when queued; it is re-checked when popped because
 * a neighbouring merge may have consumed one of its symbols since. */
struct bpe_cand {
    uint32_t rank;
    int32_t pos;     /* index of the left symbol */
    int32_t merged;  /* id the pair merges into */
};

static int cand_less(const struct bpe_cand *a, const struct bpe_cand *b)
{
    return a->rank != b->rank ? a->rank < b->rank : a->pos < b->pos;
}

static void heap_push(bpe_scratch *s, struct bpe_cand c)
{
    size_t i = s->heap_n++;
    while (i > 0) {
        size_t p = (i - 1) / 2;
        if (!cand_less(&c, &s->heap[p])) break;
        s->heap[i] = s->heap[p];
        i = p;
    }
    s->heap[i] = c;
}

static struct bpe_cand heap_pop(bpe_scratch *s)
{
    struct bpe_cand top = s->heap[0], last = s->heap[--s->heap_n];
    size_t i = 0, n = s->heap_n;
    for (;;) {
        size_t c = 2 * i + 1;
        if (c >= n) break;
        if (c + 1 < n && cand_less(&s->heap[c + 1], &s->heap[c])) c++;
        if (!cand_less(&s->heap[c], &last)) break;
        s->heap[i] = s->heap[c];
        i = c;
    }
    if (n) s->heap[i] = last;
    return top;
}

static dsv4_status reserve(bpe_scratch *s, size_t n)
{
    if (n <= s->cap) return DSV4_OK;
    size_t cap = s->cap ? s->cap : 64;
    while (cap < n) cap *= 2;
    int32_t *prev = realloc(s->prev, cap * sizeof *prev);
    if (prev) s->prev = prev;
    int32_t *next = realloc(s->next, cap * sizeof *next);
    if (next) s->next = next;
    /* Each merge queues at most two candidates on top of the initial n-1. */
    struct bpe_cand *heap = realloc(s->heap, 3 * cap * sizeof *heap);
    if (heap) s->heap = heap;
    if (!prev || !next || !heap) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for a %zu-byte word", n);
    s->cap = cap;
    return DSV4_OK;
}

dsv4_status bpe_merge(const tok_pairmap *merges, int32_t *ids, size_t *n_io, bpe_scratch *s)
{
    size_t n = *n_io;
    if (n < 2) return DSV4_OK;
    if (n == 2) {
        const tok_pairslot *m = tok_pairmap_get(merges, ids[0], ids[1]);
        if (m) { ids[0] = m->merged; *n_io = 1; }
        return DSV4_OK;
    }
    dsv4_status st = reserve(s, n);
    if (st) return st;
    int32_t *prev = s->prev, *next = s->next;
    s->heap_n = 0;
    for (size_t i = 0; i < n; i++) {
        prev[i] = (int32_t)i - 1;
        next[i] = i + 1 < n ? (int32_t)i + 1 : -1;
        if (i + 1 < n) {
            const tok_pairslot *m = tok_pairmap_get(merges, ids[i], ids[i + 1]);
            if (m) heap_push(s, (struct bpe_cand){m->rank, (int32_t)i, m->merged});
        }
    }
    /* A consumed right symbol is marked by ids[] = -1. */
    while (s->heap_n) {
        struct bpe_cand c = heap_pop(s);
        int32_t l = c.pos, r;
        if (ids[l] < 0 || (r = next[l]) < 0) continue;
        const tok_pairslot *m = tok_pairmap_get(merges, ids[l], ids[r]);
        if (!m || m->merged != c.merged) continue;
        ids[l] = c.merged;
        ids[r] = -1;
        next[l] = next[r];
        if (next[r] >= 0) prev[next[r]] = l;
        if (prev[l] >= 0 && (m = tok_pairmap_get(merges, ids[prev[l]], ids[l])))
            heap_push(s, (struct bpe_cand){m->rank, prev[l], m->merged});
        if (next[l] >= 0 && (m = tok_pairmap_get(merges, ids[l], ids[next[l]])))
            heap_push(s, (struct bpe_cand){m->rank, l, m->merged});
    }
    size_t k = 0;
    for (int32_t i = 0; i >= 0; i = next[i]) ids[k++] = ids[i];
    *n_io = k;
    return DSV4_OK;
}

void bpe_scratch_free(bpe_scratch *s)
{
    free(s->prev);
    free(s->next);
    free(s->heap);
    *s = (bpe_scratch){0};
}

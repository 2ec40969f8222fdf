/* Encoding: added tokens -> Split pre-tokenizers -> byte-level BPE, in the
 * order and with the matching rules of HF tokenizers. Every stage works on
 * spans of the caller's text, so nothing is copied; BPE results of repeated
 * words are cached for the duration of one call. */
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/bpe.h"
#include "text/bytelevel.h"
#include "text/tokenizer_internal.h"

typedef struct {
    uint32_t s, e;
    uint8_t match;
} span;

typedef struct {
    span *v;
    size_t n, cap;
} spans;

/* Word cache entry; the key points into the text being encoded. */
typedef struct {
    const char *key;
    uint32_t len, off, n;
} cache_slot;

enum { CACHE_MIN = 1024, CACHE_MAX = 1 << 20, CACHE_MAX_WORD = 256 };
enum { MATCH_STEPS_MIN = 10000000, MATCH_STEPS_PER_BYTE = 8 };

typedef struct {
    const struct tok *t;
    int flags;
    int32_t *out; /* room for one id per input byte, which always suffices */
    size_t n;
    pcre2_match_data *md;
    pcre2_match_context *mc; /* the match limit, scaled to the text (find_matches) */
    spans stage[TOK_MAX_SPLITS];
    bpe_scratch bpe;
    cache_slot *cache;
    size_t cache_cap, cache_n;
    int32_t *cids;
    size_t cids_n, cids_cap;
} enc;

static dsv4_status spans_add(spans *sp, size_t s, size_t e, int match)
{
    if (sp->n == sp->cap) {
        size_t cap = sp->cap ? 2 * sp->cap : 64;
        span *v = realloc(sp->v, cap * sizeof *v);
        if (!v) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for pre-tokenization");
        sp->v = v;
        sp->cap = cap;
    }
    sp->v[sp->n++] = (span){(uint32_t)s, (uint32_t)e, (uint8_t)match};
    return DSV4_OK;
}

static cache_slot *cache_find(enc *E, const char *s, size_t len, uint64_t h)
{
    for (size_t i = h & (E->cache_cap - 1);; i = (i + 1) & (E->cache_cap - 1)) {
        cache_slot *c = &E->cache[i];
        if (!c->key || (c->len == len && !memcmp(c->key, s, len))) return c;
    }
}

static dsv4_status cache_grow(enc *E)
{
    size_t cap = E->cache_cap ? 2 * E->cache_cap : CACHE_MIN;
    cache_slot *old = E->cache, *nw = calloc(cap, sizeof *nw);
    if (!nw) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for the word cache");
    size_t old_cap = E->cache_cap;
    E->cache = nw;
    E->cache_cap = cap;
    for (size_t i = 0; i < old_cap; i++)
        if (old[i].key) *cache_find(E, old[i].key, old[i].len, tok_hash_bytes(old[i].key, old[i].len)) = old[i];
    free(old);
    return DSV4_OK;
}

/* Remembers ids[0..n) as the tokens of word s; a full cache just stops
 * remembering. */
static dsv4_status cache_put(enc *E, cache_slot *slot, const char *s, size_t len, const int32_t *ids, size_t n)
{
    if (E->cache_n * 2 >= E->cache_cap) {
        if (E->cache_cap >= CACHE_MAX) return DSV4_OK;
        dsv4_status st = cache_grow(E);
        if (st) return st;
        slot = cache_find(E, s, len, tok_hash_bytes(s, len));
    }
    if (E->cids_n + n > E->cids_cap) {
        size_t cap = E->cids_cap ? 2 * E->cids_cap : 4096;
        while (cap < E->cids_n + n) cap *= 2;
        int32_t *v = realloc(E->cids, cap * sizeof *v);
        if (!v) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for the word cache");
        E->cids = v;
        E->cids_cap = cap;
    }
    memcpy(E->cids + E->cids_n, ids, n * sizeof *ids);
    *slot = (cache_slot){s, (uint32_t)len, (uint32_t)E->cids_n, (uint32_t)n};
    E->cids_n += n;
    E->cache_n++;
    return DSV4_OK;
}

/* One pre-tokenized word: byte-level symbols, then merges. */
static dsv4_status encode_word(enc *E, const char *s, size_t len)
{
    const struct tok *t = E->t;
    int32_t *ids = E->out + E->n;
    if (len == 1) {
        ids[0] = t->byte_id[(uint8_t)s[0]];
        E->n++;
        return DSV4_OK;
    }
    cache_slot *slot = NULL;
    if (len <= CACHE_MAX_WORD) {
        if (!E->cache_cap) {
            dsv4_status st = cache_grow(E);
            if (st) return st;
        }
        slot = cache_find(E, s, len, tok_hash_bytes(s, len));
        if (slot->key) {
            memcpy(ids, E->cids + slot->off, slot->n * sizeof *ids);
            E->n += slot->n;
            return DSV4_OK;
        }
    }
    for (size_t i = 0; i < len; i++) ids[i] = t->byte_id[(uint8_t)s[i]];
    size_t n = len;
    dsv4_status st = bpe_merge(&t->merges, ids, &n, &E->bpe);
    if (st) return st;
    E->n += n;
    return slot ? cache_put(E, slot, s, len, ids, n) : DSV4_OK;
}

/* All matches of the regex in s[0..len) as HF's onig-based find_matches
 * reports them: matched spans and the gaps between, covering the text. An
 * empty match right after the previous match is skipped by one character. */
static dsv4_status find_matches(enc *E, const pcre2_code *re, const char *s, size_t len, spans *sp)
{
    size_t from = 0, prev = 0, last_match_end = (size_t)-1;
    sp->n = 0;
    dsv4_status st;
    while (from <= len) {
        /* PCRE2's default limit (10 M backtracking steps) refuses one
         * regex match over a long run ("\s*[\r\n]+" tries the whole run of
         * ~10 M spaces before "\s+" takes it), which HF tokenizes. The
         * pre-tokenizer patterns backtrack a bounded number of steps per
         * subject byte, so a limit linear in what is left keeps every text
         * matchable and still stops a pathological pattern. */
        pcre2_set_match_limit(E->mc, MATCH_STEPS_MIN + MATCH_STEPS_PER_BYTE * (uint32_t)(len - from));
        int rc = pcre2_match(re, (PCRE2_SPTR)s, len, from, PCRE2_NO_UTF_CHECK, E->md, E->mc);
        if (rc == PCRE2_ERROR_NOMATCH) break;
        if (rc < 0) {
            PCRE2_UCHAR msg[160];
            pcre2_get_error_message(rc, msg, sizeof msg);
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "tokenizer: pre-tokenizer regex failed: %s", (const char *)msg);
        }
        PCRE2_SIZE *ov = pcre2_get_ovector_pointer(E->md);
        size_t ms = ov[0], me = ov[1];
        if (ms == me && me == last_match_end) {
            if (from >= len) break;
            uint32_t cp;
            from += (size_t)utf8_seq((const uint8_t *)s + from, len - from, &cp);
            continue;
        }
        from = last_match_end = me;
        if (prev != ms && (st = spans_add(sp, prev, ms, 0))) return st;
        if ((st = spans_add(sp, ms, me, 1))) return st;
        prev = me;
    }
    if (prev != len && (st = spans_add(sp, prev, len, 0))) return st;
    return DSV4_OK;
}

/* Turns matches into pieces per HF SplitDelimiterBehavior; returns the index
 * of the first piece (MergedWithNext fills the array from the back). Pieces
 * to drop keep match = 1. */
static size_t apply_behavior(spans *sp, tok_split_behavior b, int invert)
{
    span *v = sp->v;
    size_t n = sp->n, w = 0;
    int prev = 0;
    if (invert)
        for (size_t i = 0; i < n; i++) v[i].match = !v[i].match;
    switch (b) {
    case SPLIT_REMOVED:
        return 0;
    case SPLIT_ISOLATED:
        for (size_t i = 0; i < n; i++) v[i].match = 0;
        return 0;
    case SPLIT_MERGED_PREV:
    case SPLIT_CONTIGUOUS:
        for (size_t i = 0; i < n; i++) {
            int m = v[i].match;
            int join = b == SPLIT_CONTIGUOUS ? m == prev : (m && !prev);
            if (join && w > 0) v[w - 1].e = v[i].e;
            else v[w++] = (span){v[i].s, v[i].e, 0};
            prev = m;
        }
        sp->n = w;
        return 0;
    case SPLIT_MERGED_NEXT:
        w = n;
        for (size_t i = n; i-- > 0;) {
            int m = v[i].match;
            if (m && !prev && w < n) v[w].s = v[i].s;
            else v[--w] = (span){v[i].s, v[i].e, 0};
            prev = m;
        }
        return w;
    }
    return 0;
}

static dsv4_status split_stage(enc *E, int k, const char *s, size_t len)
{
    if (k == E->t->n_split) return encode_word(E, s, len);
    const tok_split *sp = &E->t->split[k];
    spans *m = &E->stage[k];
    dsv4_status st = find_matches(E, sp->re, s, len, m);
    if (st) return st;
    for (size_t i = apply_behavior(m, sp->behavior, sp->invert); i < m->n; i++) {
        span p = m->v[i];
        if (!p.match && p.e > p.s && (st = split_stage(E, k + 1, s + p.s, p.e - p.s))) return st;
    }
    return DSV4_OK;
}

/* Longest added token starting at s, or -1. */
static int32_t trie_longest(const tok_trie *tr, const uint8_t *s, size_t n, size_t *mlen)
{
    int32_t best = -1;
    uint32_t cur = 0;
    for (size_t i = 0; i < n; i++) {
        uint32_t c = tr->node[cur].child;
        while (c && tr->node[c].byte != s[i]) c = tr->node[c].sibling;
        if (!c) break;
        cur = c;
        if (tr->node[c].id >= 0) { best = tr->node[c].id; *mlen = i + 1; }
    }
    return best;
}

/* Unicode White_Space, which Rust's \s (used for lstrip/rstrip) matches. */
static int is_space(uint32_t c)
{
    return (c >= 9 && c <= 13) || c == ' ' || c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) ||
           c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

/* Start of the character that ends at s[end) (s is valid UTF-8). */
static size_t char_before(const char *s, size_t end)
{
    do end--; while (end > 0 && ((uint8_t)s[end] & 0xC0) == 0x80);
    return end;
}

static int word_char_at(enc *E, const char *s, size_t len, size_t at)
{
    return pcre2_match(E->t->word_char, (PCRE2_SPTR)s, len, at, PCRE2_NO_UTF_CHECK, E->md, NULL) >= 0;
}

/* Applies an added token's single_word/lstrip/rstrip rules to the match
 * s[*start, *stop) as HF does; returns 0 if the match is to be discarded. */
static int adjust_match(enc *E, int32_t id, const char *s, size_t len, size_t gap, size_t *start, size_t *stop)
{
    uint8_t k = E->t->kind[id];
    uint32_t cp;
    if ((k & TOK_ID_SINGLE_WORD) &&
        ((*start > 0 && word_char_at(E, s, len, char_before(s, *start))) || (*stop < len && word_char_at(E, s, len, *stop))))
        return 0;
    if (k & TOK_ID_LSTRIP) {
        size_t b = *start;
        while (b > gap) {
            size_t c = char_before(s, b);
            utf8_seq((const uint8_t *)s + c, len - c, &cp);
            if (!is_space(cp)) break;
            b = c;
        }
        *start = b;
    }
    if (k & TOK_ID_RSTRIP) {
        int n;
        while (*stop < len && (n = utf8_seq((const uint8_t *)s + *stop, len - *stop, &cp)) > 0 && is_space(cp))
            *stop += (size_t)n;
    }
    return 1;
}

/* Cuts the added tokens of one pass out of s (leftmost-longest, like HF's
 * Aho-Corasick) and passes the text between them on. A special token that is
 * not to be parsed stays text, and matching resumes after it as in HF. */
static dsv4_status added_pass(enc *E, int pass, const char *s, size_t len)
{
    const tok_trie *tr = pass == 0 ? &E->t->raw_added : &E->t->norm_added;
    if (pass == 2) return split_stage(E, 0, s, len);
    dsv4_status st;
    size_t pos = 0, gap = 0, ml = 0;
    const uint8_t *u = (const uint8_t *)s;
    while (tr->node && pos < len) {
        if (!tr->first[u[pos]]) { pos++; continue; }
        int32_t id = trie_longest(tr, u + pos, len - pos, &ml);
        if (id < 0) { pos++; continue; }
        size_t start = pos, stop = pos + ml;
        pos = stop;
        if ((E->t->kind[id] & TOK_ID_SPECIAL) && !(E->flags & TOK_PARSE_SPECIAL)) continue;
        if (!adjust_match(E, id, s, len, gap, &start, &stop)) continue;
        if (start > gap && (st = added_pass(E, pass + 1, s + gap, start - gap))) return st;
        E->out[E->n++] = id;
        gap = pos = stop;
    }
    return len > gap ? added_pass(E, pass + 1, s + gap, len - gap) : DSV4_OK;
}

dsv4_status tok_encode(const tok_t *t, const char *text, size_t len, int flags, int32_t **ids, size_t *n)
{
    *ids = NULL;
    *n = 0;
    size_t bad = utf8_invalid_at((const uint8_t *)text, len);
    if (bad < len) return dsv4_fail(DSV4_ERR_ARG, "text is not valid UTF-8 at byte %zu", bad);
    if (len > UINT32_MAX) return dsv4_fail(DSV4_ERR_ARG, "text longer than 4 GiB");
    enc E = {.t = t, .flags = flags};
    E.out = malloc((len ? len : 1) * sizeof *E.out);
    E.md = pcre2_match_data_create(1, NULL);
    E.mc = pcre2_match_context_create(NULL);
    dsv4_status st = !E.out || !E.md || !E.mc ? dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for %zu bytes of text", len)
                                     : added_pass(&E, 0, text, len);
    pcre2_match_data_free(E.md);
    pcre2_match_context_free(E.mc);
    for (int k = 0; k < TOK_MAX_SPLITS; k++) free(E.stage[k].v);
    bpe_scratch_free(&E.bpe);
    free(E.cache);
    free(E.cids);
    if (st) { free(E.out); return st; }
    int32_t *shrunk = realloc(E.out, (E.n ? E.n : 1) * sizeof *shrunk);
    *ids = shrunk ? shrunk : E.out;
    *n = E.n;
    return DSV4_OK;
}

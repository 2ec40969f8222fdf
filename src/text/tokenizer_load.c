/* Loading tokenizer.json: vocabulary, merges, added tokens and the
 * pipeline settings, each checked with a message naming the bad entry. */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/json_parse.h"
#include "text/bytelevel.h"
#include "text/tokenizer_internal.h"

/* Messages quote at most this many bytes of a piece. */
#define QUOTE 40

typedef struct {
    const char *path;
    int32_t n_vocab_entries;
    const cJSON *vocab, *added;
} loader;

static int get_id(const cJSON *v, int32_t *id)
{
    if (!cJSON_IsNumber(v)) return 0;
    double d = v->valuedouble;
    if (!(d >= 0 && d < TOK_MAX_IDS) || d != floor(d)) return 0;
    *id = (int32_t)d;
    return 1;
}

static int valid_utf8(const char *s)
{
    size_t n = strlen(s);
    return utf8_invalid_at((const uint8_t *)s, n) == n;
}

static const cJSON *item(const cJSON *o, const char *key) { return cJSON_GetObjectItemCaseSensitive(o, key); }

/* First pass over vocab and added tokens: validate, find the id range. */
static dsv4_status scan_ids(loader *L, int32_t *n_ids)
{
    const cJSON *it;
    int32_t max = -1;
    cJSON_ArrayForEach(it, L->vocab) {
        int32_t id;
        if (!get_id(it, &id))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab[\"%.40s\"]: id is not an integer in [0, %d)",
                             L->path, it->string, TOK_MAX_IDS);
        if (!valid_utf8(it->string))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab: entry with id %d is not valid UTF-8",
                             L->path, id);
        if (id > max) max = id;
        L->n_vocab_entries++;
    }
    int i = 0;
    cJSON_ArrayForEach(it, L->added) {
        const cJSON *content = item(it, "content");
        int32_t id;
        if (!cJSON_IsObject(it) || !get_id(item(it, "id"), &id))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: added_tokens[%d]: no integer \"id\" in [0, %d)",
                             L->path, i, TOK_MAX_IDS);
        if (!cJSON_IsString(content) || !content->valuestring[0] || !valid_utf8(content->valuestring))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: added_tokens[%d]: \"content\" is not a non-empty UTF-8 string",
                             L->path, i);
        if (id > max) max = id;
        i++;
    }
    if (L->n_vocab_entries == 0) return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab is empty", L->path);
    *n_ids = max + 1;
    return DSV4_OK;
}

/* Fills kind[] and the id -> piece table. */
static dsv4_status build_pieces(loader *L, struct tok *t)
{
    int32_t n = t->n_ids;
    t->kind = calloc((size_t)n, 1);
    t->piece_off = calloc((size_t)n + 1, sizeof *t->piece_off);
    const char **src = calloc((size_t)n, sizeof *src);
    if (!t->kind || !t->piece_off || !src) { free(src); return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", L->path); }
    const cJSON *it;
    cJSON_ArrayForEach(it, L->vocab) {
        int32_t id = (int32_t)it->valuedouble;
        if (t->kind[id]) {
            dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab: id %d is used by both \"%.40s\" and \"%.40s\"",
                      L->path, id, src[id], it->string);
            free(src);
            return DSV4_ERR_FORMAT;
        }
        t->kind[id] = TOK_ID_VOCAB;
        src[id] = it->string;
    }
    int i = 0;
    cJSON_ArrayForEach(it, L->added) {
        int32_t id = (int32_t)item(it, "id")->valuedouble;
        const char *content = item(it, "content")->valuestring;
        if ((t->kind[id] & TOK_ID_ADDED) || (t->kind[id] && strcmp(src[id], content))) {
            dsv4_fail(DSV4_ERR_FORMAT, "%s: added_tokens[%d]: id %d is already \"%.40s\"", L->path, i, id,
                      src[id]);
            free(src);
            return DSV4_ERR_FORMAT;
        }
        t->kind[id] |= TOK_ID_ADDED | (cJSON_IsTrue(item(it, "special")) ? TOK_ID_SPECIAL : 0) |
                       (cJSON_IsTrue(item(it, "lstrip")) ? TOK_ID_LSTRIP : 0) |
                       (cJSON_IsTrue(item(it, "rstrip")) ? TOK_ID_RSTRIP : 0) |
                       (cJSON_IsTrue(item(it, "single_word")) ? TOK_ID_SINGLE_WORD : 0);
        src[id] = content;
        i++;
    }
    size_t total = 0;
    for (int32_t id = 0; id < n; id++) {
        t->piece_off[id] = (uint32_t)total;
        if (src[id]) total += strlen(src[id]);
        if (total > UINT32_MAX / 2) { free(src); return dsv4_fail(DSV4_ERR_FORMAT, "%s: vocabulary too large", L->path); }
    }
    t->piece_off[n] = (uint32_t)total;
    t->piece = malloc(total + 1);
    if (!t->piece) { free(src); return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", L->path); }
    for (int32_t id = 0; id < n; id++)
        if (src[id]) memcpy(t->piece + t->piece_off[id], src[id], t->piece_off[id + 1] - t->piece_off[id]);
    t->piece[total] = 0;
    free(src);
    int32_t dup = -1;
    if (tok_idmap_build(&t->by_piece, t->piece, t->piece_off, t->kind, n, &dup) == DSV4_ERR_FORMAT) {
        /* pieces in the arena are not NUL-terminated: quote by length */
        uint32_t plen = t->piece_off[dup + 1] - t->piece_off[dup];
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: the string of id %d (\"%.*s\") appears twice", L->path, dup,
                         plen < QUOTE ? (int)plen : QUOTE, t->piece + t->piece_off[dup]);
    }
    return t->by_piece.slot ? DSV4_OK : DSV4_ERR_NOMEM;
}

static int32_t vocab_id(const struct tok *t, const char *s, size_t len)
{
    int32_t id = tok_idmap_get(&t->by_piece, s, len);
    return id >= 0 && (t->kind[id] & TOK_ID_VOCAB) ? id : -1;
}

static dsv4_status build_merges(loader *L, struct tok *t, const cJSON *merges)
{
    if (!cJSON_IsArray(merges)) return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.merges: not an array", L->path);
    dsv4_status st = tok_pairmap_init(&t->merges, (size_t)cJSON_GetArraySize(merges));
    if (st) return st;
    char buf[512];
    uint32_t rank = 0;
    const cJSON *it;
    cJSON_ArrayForEach(it, merges) {
        const char *a, *b;
        size_t la, lb;
        if (cJSON_IsString(it)) {
            /* Legacy form "A B": exactly one space, as HF requires. */
            a = it->valuestring;
            const char *sp = strchr(a, ' ');
            if (!sp || strchr(sp + 1, ' '))
                return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.merges[%u]: \"%.40s\" is not \"A B\"", L->path, rank, a);
            la = (size_t)(sp - a);
            b = sp + 1;
            lb = strlen(b);
        } else if (cJSON_IsArray(it) && cJSON_GetArraySize(it) == 2 && cJSON_IsString(it->child) &&
                   cJSON_IsString(it->child->next)) {
            a = it->child->valuestring;
            b = it->child->next->valuestring;
            la = strlen(a);
            lb = strlen(b);
        } else {
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.merges[%u]: not a string pair", L->path, rank);
        }
        /* The merged string; vocabulary strings are short, so the stack
         * buffer nearly always suffices. */
        char *cat = la + lb <= sizeof buf ? buf : malloc(la + lb);
        if (!cat) return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", L->path);
        memcpy(cat, a, la);
        memcpy(cat + la, b, lb);
        int32_t ia = vocab_id(t, a, la), ib = vocab_id(t, b, lb), im = vocab_id(t, cat, la + lb);
        if (ia < 0 || ib < 0 || im < 0) {
            int n = ia < 0 ? (int)la : ib < 0 ? (int)lb : (int)(la + lb);
            dsv4_fail(DSV4_ERR_FORMAT, "%s: model.merges[%u]: \"%.*s\" not in the vocabulary", L->path, rank,
                      n > 60 ? 60 : n, ia < 0 ? a : ib < 0 ? b : cat);
        }
        if (cat != buf) free(cat);
        if (ia < 0 || ib < 0 || im < 0) return DSV4_ERR_FORMAT;
        tok_pairmap_put(&t->merges, ia, ib, rank, im);
        rank++;
    }
    return DSV4_OK;
}

static dsv4_status trie_add(tok_trie *tr, const char *s, int32_t id)
{
    if (!tr->node) {
        tr->cap = 256;
        tr->node = calloc(tr->cap, sizeof *tr->node);
        if (!tr->node) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for added tokens");
        tr->node[0].id = -1;
        tr->n = 1;
    }
    tr->first[(uint8_t)*s] = 1;
    uint32_t cur = 0;
    for (; *s; s++) {
        uint32_t c = tr->node[cur].child;
        while (c && tr->node[c].byte != (uint8_t)*s) c = tr->node[c].sibling;
        if (!c) {
            if (tr->n == tr->cap) {
                tok_trie_node *nn = realloc(tr->node, 2 * tr->cap * sizeof *nn);
                if (!nn) return dsv4_fail(DSV4_ERR_NOMEM, "tokenizer: no memory for added tokens");
                tr->node = nn;
                tr->cap *= 2;
            }
            c = tr->n++;
            tr->node[c] = (tok_trie_node){0, tr->node[cur].child, -1, (uint8_t)*s};
            tr->node[cur].child = c;
        }
        cur = c;
    }
    tr->node[cur].id = id;
    return DSV4_OK;
}

static dsv4_status build_added(loader *L, struct tok *t)
{
    const cJSON *it;
    cJSON_ArrayForEach(it, L->added) {
        int32_t id = (int32_t)item(it, "id")->valuedouble;
        /* HF's default for a missing "normalized" is true. */
        const cJSON *norm = item(it, "normalized");
        int normalized = cJSON_IsBool(norm) ? cJSON_IsTrue(norm) : 1;
        dsv4_status st = trie_add(normalized ? &t->norm_added : &t->raw_added, item(it, "content")->valuestring, id);
        if (st) return st;
        if ((t->kind[id] & TOK_ID_SINGLE_WORD) && !t->word_char) {
            int err;
            PCRE2_SIZE off;
            t->word_char = pcre2_compile((PCRE2_SPTR) "[\\p{Alphabetic}\\p{M}\\p{Nd}\\p{Pc}\\x{200C}\\x{200D}]",
                                         PCRE2_ZERO_TERMINATED, PCRE2_UTF | PCRE2_UCP | PCRE2_ANCHORED, &err, &off, NULL);
            if (!t->word_char) return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", L->path);
        }
    }
    return DSV4_OK;
}

/* HF's ByteLevel decoder: a token whose every character is in the byte-level
 * alphabet becomes those bytes; any other token (e.g. "<｜User｜>") is kept
 * as its UTF-8 text. */
static dsv4_status build_decode(loader *L, struct tok *t)
{
    int32_t n = t->n_ids;
    t->dec_off = malloc(((size_t)n + 1) * sizeof *t->dec_off);
    t->dec = malloc(t->piece_off[n] + 1);
    if (!t->dec || !t->dec_off) return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", L->path);
    uint32_t w = 0;
    for (int32_t id = 0; id < n; id++) {
        t->dec_off[id] = w;
        const uint8_t *p = (const uint8_t *)t->piece + t->piece_off[id];
        size_t len = t->piece_off[id + 1] - t->piece_off[id], i = 0;
        uint32_t start = w;
        while (i < len) {
            uint32_t cp;
            int k = utf8_seq(p + i, len - i, &cp), b = bytelevel_byte(cp);
            if (b < 0) break;
            t->dec[w++] = (char)b;
            i += (size_t)k;
        }
        if (i < len) {
            memcpy(t->dec + start, p, len);
            w = start + (uint32_t)len;
        }
    }
    t->dec_off[n] = w;
    return DSV4_OK;
}

/* A pipeline section must be absent/null (when optional) or of the one
 * type whose effect on ids this tokenizer reproduces. */
static dsv4_status check_section(loader *L, const cJSON *root, const char *key, const char *allowed, int optional)
{
    const cJSON *o = item(root, key);
    if ((!o || cJSON_IsNull(o)) && optional) return DSV4_OK;
    const cJSON *type = item(o, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, allowed)) return DSV4_OK;
    /* An empty normalizer Sequence changes nothing. */
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "Sequence") && !strcmp(key, "normalizer")) {
        const cJSON *list = item(o, "normalizers");
        if (cJSON_IsArray(list) && cJSON_GetArraySize(list) == 0) return DSV4_OK;
    }
    if (!cJSON_IsString(type))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s: missing, or without a \"type\" (expected %s)", L->path, key, allowed);
    return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: type '%.40s' is not supported (only %s)", L->path, key,
                     type->valuestring, allowed);
}

static dsv4_status check_model(loader *L, const cJSON *model)
{
    const cJSON *type = item(model, "type");
    if (cJSON_IsString(type) && strcmp(type->valuestring, "BPE"))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: model.type '%.40s' is not supported (only BPE)", L->path,
                         type->valuestring);
    const cJSON *v;
    if ((v = item(model, "dropout")) && !cJSON_IsNull(v) && !(cJSON_IsNumber(v) && v->valuedouble == 0))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: model.dropout is not supported", L->path);
    static const char *no_strings[] = {"continuing_subword_prefix", "end_of_word_suffix"};
    for (int k = 0; k < 2; k++)
        if ((v = item(model, no_strings[k])) && !cJSON_IsNull(v) && !(cJSON_IsString(v) && !v->valuestring[0]))
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: model.%s is not supported", L->path, no_strings[k]);
    static const char *no_flags[] = {"byte_fallback", "ignore_merges"};
    for (int k = 0; k < 2; k++)
        if (cJSON_IsTrue(item(model, no_flags[k])))
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: model.%s=true is not supported", L->path, no_flags[k]);
    return DSV4_OK;
}

static dsv4_status load_json(loader *L, struct tok *t, const cJSON *root)
{
    dsv4_status st;
    const cJSON *model = item(root, "model");
    if (!cJSON_IsObject(root)) return dsv4_fail(DSV4_ERR_FORMAT, "%s: not a JSON object", L->path);
    if (!cJSON_IsObject(model)) return dsv4_fail(DSV4_ERR_FORMAT, "%s: no \"model\" object", L->path);
    if ((st = check_model(L, model))) return st;
    L->vocab = item(model, "vocab");
    if (!cJSON_IsObject(L->vocab)) return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab: not an object", L->path);
    L->added = item(root, "added_tokens");
    if (L->added && !cJSON_IsNull(L->added) && !cJSON_IsArray(L->added))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: added_tokens: not an array", L->path);
    if ((st = check_section(L, root, "normalizer", "none", 1)) ||
        (st = check_section(L, root, "decoder", "ByteLevel", 0)) ||
        (st = check_section(L, root, "post_processor", "ByteLevel", 1)))
        return st;
    if ((st = scan_ids(L, &t->n_ids)) || (st = build_pieces(L, t))) return st;
    for (int b = 0; b < 256; b++) {
        char s[4];
        int n = utf8_put(bytelevel_char((uint8_t)b), s);
        if ((t->byte_id[b] = vocab_id(t, s, (size_t)n)) < 0)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: model.vocab lacks the byte-level symbol of byte 0x%02x",
                             L->path, b);
    }
    if ((st = build_merges(L, t, item(model, "merges"))) || (st = build_added(L, t)) ||
        (st = tok_pretok_parse(t, item(root, "pre_tokenizer"), L->path)))
        return st;
    return build_decode(L, t);
}

dsv4_status tok_load_json(const char *label, const cJSON *root, tok_t **out)
{
    *out = NULL;
    struct tok *t = calloc(1, sizeof *t);
    if (!t) return dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", label);
    loader L = {.path = label};
    dsv4_status st = load_json(&L, t, root);
    if (st) { tok_free(t); return st; }
    *out = t;
    return DSV4_OK;
}

dsv4_status tok_parse(const char *json, size_t len, const char *label, tok_t **out)
{
    *out = NULL;
    cJSON *root = NULL;
    dsv4_status st = json_parse_all(json, len, label, &root); /* strict: one value, nothing after it */
    if (!st) st = tok_load_json(label, root, out);
    cJSON_Delete(root);
    return st;
}

void tok_free(tok_t *t)
{
    if (!t) return;
    free(t->kind);
    free(t->piece);
    free(t->piece_off);
    free(t->dec);
    free(t->dec_off);
    tok_idmap_free(&t->by_piece);
    tok_pairmap_free(&t->merges);
    free(t->raw_added.node);
    free(t->norm_added.node);
    for (int i = 0; i < t->n_split; i++) pcre2_code_free(t->split[i].re);
    pcre2_code_free(t->word_char);
    free(t);
}

int32_t tok_n_ids(const tok_t *t) { return t->n_ids; }

int32_t tok_token_id(const tok_t *t, const char *piece)
{
    return tok_idmap_get(&t->by_piece, piece, strlen(piece));
}

const char *tok_piece(const tok_t *t, int32_t id, size_t *len)
{
    if (id < 0 || id >= t->n_ids || !t->kind[id]) return NULL;
    if (len) *len = t->piece_off[id + 1] - t->piece_off[id];
    return t->piece + t->piece_off[id];
}

size_t tok_max_token_bytes(const tok_t *t)
{
    /* a piece's byte-level spelling is never shorter than the bytes it decodes to */
    size_t most = 1;
    for (int32_t id = 0; id < t->n_ids; id++)
        if (t->piece_off[id + 1] - t->piece_off[id] > most) most = t->piece_off[id + 1] - t->piece_off[id];
    return most;
}

int tok_is_special(const tok_t *t, int32_t id)
{
    return id >= 0 && id < t->n_ids && (t->kind[id] & TOK_ID_SPECIAL);
}

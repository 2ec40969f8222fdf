/* Parsing of the "pre_tokenizer" section: a Split, a ByteLevel, or a
 * Sequence of them. Each Split becomes a PCRE2 regex run on every piece the
 * previous splits produced; ByteLevel must come last, since the splits before
 * it see the raw text while anything after it would see byte-level symbols. */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tokenizer_internal.h"

/* The regex HF's ByteLevel pre-tokenizer applies when use_regex is true. */
static const char k_gpt2_regex[] =
    "'s|'t|'re|'ve|'m|'ll|'d| ?\\p{L}+| ?\\p{N}+| ?[^\\s\\p{L}\\p{N}]+|\\s+(?!\\S)|\\s+";

/* Oniguruma's \s (which HF uses) is exactly Unicode White_Space; PCRE2's \s
 * with UCP also matches U+180E (via \h). To match HF, \s and \S are spelled
 * out as this set. */
static const char k_white_space[] =
    "\\t-\\r \\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";

/* Rewrites \s and \S of an Oniguruma pattern for PCRE2; NULL if out of
 * memory, or (with *bad set) for \S inside a character class. */
static char *onig_to_pcre2(const char *pat, int *bad)
{
    size_t n = strlen(pat), w = 0;
    char *out = malloc(n * (sizeof k_white_space + 3) + 1);
    int in_class = 0;
    *bad = 0;
    if (!out) return NULL;
    for (size_t i = 0; i < n; i++) {
        char c = pat[i];
        if (c == '\\' && i + 1 < n) {
            char e = pat[++i];
            if (e == 's' || e == 'S') {
                if (in_class && e == 'S') { *bad = 1; free(out); return NULL; }
                w += (size_t)sprintf(out + w, in_class ? "%s" : e == 's' ? "[%s]" : "[^%s]", k_white_space);
            } else {
                out[w++] = c;
                out[w++] = e;
            }
            continue;
        }
        if (c == '[' && !in_class) {
            in_class = 1;
            out[w++] = c;
            /* A ']' right after '[' or '[^' is a literal member. */
            if (i + 1 < n && pat[i + 1] == '^') out[w++] = pat[++i];
            if (i + 1 < n && pat[i + 1] == ']') out[w++] = pat[++i];
            continue;
        }
        if (c == ']' && in_class) in_class = 0;
        out[w++] = c;
    }
    out[w] = 0;
    return out;
}

static dsv4_status add_split(struct tok *t, const char *pat, int literal, tok_split_behavior b,
                             int invert, const char *path, const char *where)
{
    if (t->n_split == TOK_MAX_SPLITS)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: more than %d Split pre-tokenizers",
                         path, where, TOK_MAX_SPLITS);
    int err, bad = 0;
    PCRE2_SIZE erroff;
    uint32_t opt = PCRE2_UTF | (literal ? PCRE2_LITERAL : PCRE2_UCP);
    char *conv = literal ? NULL : onig_to_pcre2(pat, &bad);
    if (!literal && !conv)
        return bad ? dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: \\S inside a character class is not supported", path, where)
                   : dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    pcre2_code *re = pcre2_compile((PCRE2_SPTR)(conv ? conv : pat), PCRE2_ZERO_TERMINATED, opt, &err, &erroff, NULL);
    free(conv);
    if (!re) {
        PCRE2_UCHAR msg[160];
        pcre2_get_error_message(err, msg, sizeof msg);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s: bad regex at offset %zu: %s", path, where,
                         (size_t)erroff, (const char *)msg);
    }
    /* JIT is only a speed-up; without it pcre2_match interprets. */
    pcre2_jit_compile(re, PCRE2_JIT_COMPLETE);
    t->split[t->n_split++] = (tok_split){re, b, invert};
    return DSV4_OK;
}

static int is_true(const cJSON *o, const char *key, int dflt)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    return cJSON_IsBool(v) ? cJSON_IsTrue(v) : dflt;
}

static dsv4_status parse_split(struct tok *t, const cJSON *o, const char *path, const char *where)
{
    static const char *names[] = {"Removed", "Isolated", "MergedWithPrevious", "MergedWithNext",
                                  "Contiguous"};
    const cJSON *pat = cJSON_GetObjectItemCaseSensitive(o, "pattern");
    const cJSON *re = cJSON_GetObjectItemCaseSensitive(pat, "Regex");
    const cJSON *lit = cJSON_GetObjectItemCaseSensitive(pat, "String");
    const cJSON *beh = cJSON_GetObjectItemCaseSensitive(o, "behavior");
    if (!cJSON_IsString(re) && !cJSON_IsString(lit))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s.pattern: expected {\"Regex\": ...} or {\"String\": ...}",
                         path, where);
    if (!cJSON_IsString(beh))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s.behavior: missing", path, where);
    for (int b = 0; b < 5; b++)
        if (!strcmp(beh->valuestring, names[b]))
            return add_split(t, cJSON_IsString(re) ? re->valuestring : lit->valuestring,
                             !cJSON_IsString(re), (tok_split_behavior)b, is_true(o, "invert", 0),
                             path, where);
    return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s.behavior: unknown '%.40s'", path, where,
                     beh->valuestring);
}

static dsv4_status parse_one(struct tok *t, const cJSON *o, int last, int *saw_bytelevel,
                             const char *path, const char *where)
{
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (!cJSON_IsString(type))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %s: no \"type\"", path, where);
    if (!strcmp(type->valuestring, "Split")) {
        if (*saw_bytelevel)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: Split after ByteLevel is not supported",
                             path, where);
        return parse_split(t, o, path, where);
    }
    if (!strcmp(type->valuestring, "ByteLevel")) {
        if (!last)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: ByteLevel must be the last pre-tokenizer",
                             path, where);
        if (is_true(o, "add_prefix_space", 1))
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: add_prefix_space=true is not supported",
                             path, where);
        *saw_bytelevel = 1;
        if (is_true(o, "use_regex", 1)) return add_split(t, k_gpt2_regex, 0, SPLIT_ISOLATED, 0, path, where);
        return DSV4_OK;
    }
    return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: %s: pre-tokenizer type '%.40s' is not supported",
                     path, where, type->valuestring);
}

dsv4_status tok_pretok_parse(struct tok *t, const void *node, const char *path)
{
    const cJSON *o = node;
    int saw_bytelevel = 0;
    dsv4_status st;
    if (!cJSON_IsObject(o))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: pre_tokenizer: missing; only byte-level BPE is supported",
                         path);
    const cJSON *type = cJSON_GetObjectItemCaseSensitive(o, "type");
    if (cJSON_IsString(type) && !strcmp(type->valuestring, "Sequence")) {
        const cJSON *list = cJSON_GetObjectItemCaseSensitive(o, "pretokenizers");
        if (!cJSON_IsArray(list))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: pre_tokenizer.pretokenizers: not an array", path);
        int n = cJSON_GetArraySize(list), i = 0;
        const cJSON *it;
        cJSON_ArrayForEach(it, list) {
            char where[64];
            snprintf(where, sizeof where, "pre_tokenizer.pretokenizers[%d]", i);
            if ((st = parse_one(t, it, i == n - 1, &saw_bytelevel, path, where))) return st;
            i++;
        }
    } else if ((st = parse_one(t, o, 1, &saw_bytelevel, path, "pre_tokenizer"))) {
        return st;
    }
    if (!saw_bytelevel)
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: pre_tokenizer: no ByteLevel step; only byte-level BPE is supported",
                         path);
    return DSV4_OK;
}

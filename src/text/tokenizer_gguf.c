/* The tokenizer of a GGUF model: llama.cpp's converter stores a byte-level
 * BPE tokenizer as tokenizer.ggml.model "gpt2", the token strings by id
 * (tokenizer.ggml.tokens), their types (token_type: 1 normal, 3 control,
 * 4 user-defined, 5 unused, 6 byte), the merges "A B" in rank order and the
 * pre-tokenizer by name (tokenizer.ggml.pre). This rebuilds the equivalent
 * tokenizer.json document and loads it through the one loader, so the ids
 * are those of the tokenizer.json it was converted from:
 *   control tokens       -> added, special, matched on the raw text
 *   user-defined tokens  -> added, not special, normalized (DeepSeek's
 *                           convention; the normalizer is empty, so this only
 *                           orders the matching passes)
 *   added tokens that some merge produces stay in the BPE vocabulary too
 *   unused ids ([PADn] fillers) stay unassigned.
 * The pre-tokenizer is named by the converter's hash of the ids of a fixed
 * text: DeepSeek-V4's tokenizer.json hashes to the entry llama.cpp calls
 * "joyai-llm" (JoyAI-LLM-Flash ships the same tokenizer; real V4 GGUFs carry
 * that name), DeepSeek-V3's (whose tokenizer adds BOS) to "deepseek-v3"; both
 * name the same Split sequence, DeepSeek's. Other names are refused. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "base/strmap.h"
#include "io/gguf.h"
#include "text/tokenizer_internal.h"

/* DeepSeek-V3/V4's pre_tokenizer, as in their tokenizer.json. */
static const char k_deepseek_pretok[] =
    "{\"type\":\"Sequence\",\"pretokenizers\":["
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[\xe4\xb8\x80-\xe9\xbe\xa5\xe3\x81\x80-\xe3\x82\x9f\xe3\x82\xa0-\xe3\x83\xbf]+\"},"
    "\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"[!\\\"#$%&'()*+,\\\\-./:;<=>?@\\\\[\\\\\\\\\\\\]^_`{|}~][A-Za-z]+|"
    "[^\\r\\n\\\\p{L}\\\\p{P}\\\\p{S}]?[\\\\p{L}\\\\p{M}]+| ?[\\\\p{P}\\\\p{S}]+[\\r\\n]*|\\\\s*[\\r\\n]+|\\\\s+(?!\\\\S)|\\\\s+\"},"
    "\"behavior\":\"Isolated\",\"invert\":false},"
    "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,\"use_regex\":false}]}";

enum { TT_NORMAL = 1, TT_CONTROL = 3, TT_USER = 4, TT_UNUSED = 5, TT_BYTE = 6 };

static int str_is(const gguf_str *s, const char *lit)
{
    return s->len == strlen(lit) && !memcmp(s->s, lit, s->len);
}

static const gguf_kv *want_kv(const gguf_file *g, const char *key, uint32_t elem, int array, dsv4_status *st)
{
    const gguf_kv *kv = gguf_find_kv(g, key);
    *st = DSV4_OK;
    if (!kv) {
        *st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF metadata %s: missing (no tokenizer in this file)", gguf_label(g), key);
        return NULL;
    }
    if ((array ? kv->type != GGUF_T_ARRAY : kv->type == GGUF_T_ARRAY) || kv->elem_type != elem) {
        *st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF metadata %s: expected %s%s", gguf_label(g), key,
                        array ? "an array of " : "a ", gguf_type_name(elem));
        return NULL;
    }
    return kv;
}

/* A NUL-terminated copy of a GGUF string (callers reject embedded NULs). */
static char *text_of(const gguf_str *s) { return strndup(s->s, (size_t)s->len); }

static dsv4_status build_doc(const gguf_file *g, cJSON *root)
{
    const char *path = gguf_label(g);
    dsv4_status st;
    const gguf_kv *model = want_kv(g, "tokenizer.ggml.model", GGUF_T_STRING, 0, &st);
    if (!model) return st;
    if (!str_is(&model->strs[0], "gpt2"))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF tokenizer.ggml.model '%.*s' is not supported (byte-level BPE "
                         "\"gpt2\" only)", path, (int)(model->strs[0].len > 40 ? 40 : model->strs[0].len), model->strs[0].s);
    const gguf_kv *pre = want_kv(g, "tokenizer.ggml.pre", GGUF_T_STRING, 0, &st);
    if (!pre) return st;
    if (!str_is(&pre->strs[0], "joyai-llm") && !str_is(&pre->strs[0], "deepseek-v3"))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF tokenizer.ggml.pre '%.*s' is not DeepSeek's pre-tokenizer "
                         "(joyai-llm / deepseek-v3)", path, (int)(pre->strs[0].len > 40 ? 40 : pre->strs[0].len),
                         pre->strs[0].s);
    const gguf_kv *toks = want_kv(g, "tokenizer.ggml.tokens", GGUF_T_STRING, 1, &st);
    if (!toks) return st;
    const gguf_kv *merges = want_kv(g, "tokenizer.ggml.merges", GGUF_T_STRING, 1, &st);
    if (!merges) return st;
    const gguf_kv *types = gguf_find_kv(g, "tokenizer.ggml.token_type");
    if (toks->count == 0 || toks->count > TOK_MAX_IDS)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tokenizer.ggml.tokens: %llu tokens (allowed 1..%d)", path,
                         (unsigned long long)toks->count, TOK_MAX_IDS);
    if (types && (types->type != GGUF_T_ARRAY || types->count != toks->count))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tokenizer.ggml.token_type: expected one integer per token", path);

    /* strings some merge produces: they must be BPE vocabulary entries */
    strmap produced = {0};
    char **cats = calloc((size_t)merges->count + 1, sizeof *cats);
    st = cats ? DSV4_OK : dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    for (uint64_t i = 0; !st && i < merges->count; i++) {
        const gguf_str *m = &merges->strs[i];
        const char *sp = memchr(m->s, ' ', (size_t)m->len);
        if (!sp || memchr(m->s, 0, (size_t)m->len)) {
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tokenizer.ggml.merges[%llu] is not \"A B\"", path,
                           (unsigned long long)i);
            break;
        }
        size_t la = (size_t)(sp - m->s), lb = (size_t)m->len - la - 1;
        if (!(cats[i] = malloc(la + lb + 1))) { st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path); break; }
        memcpy(cats[i], m->s, la);
        memcpy(cats[i] + la, sp + 1, lb);
        cats[i][la + lb] = 0;
        if (strmap_put(&produced, cats[i], 0, NULL) < 0) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    }

    cJSON *mod = cJSON_AddObjectToObject(root, "model");
    cJSON *vocab = mod ? cJSON_AddObjectToObject(mod, "vocab") : NULL;
    cJSON *mlist = mod ? cJSON_AddArrayToObject(mod, "merges") : NULL;
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *dec = cJSON_AddObjectToObject(root, "decoder");
    cJSON *pt = cJSON_Parse(k_deepseek_pretok);
    if (!st && (!mod || !vocab || !mlist || !added || !dec || !pt || !cJSON_AddStringToObject(mod, "type", "BPE") ||
                !cJSON_AddStringToObject(dec, "type", "ByteLevel")))
        st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    if (pt && (st || !cJSON_AddItemToObject(root, "pre_tokenizer", pt))) cJSON_Delete(pt);
    for (uint64_t i = 0; !st && i < merges->count; i++) {
        char *m = text_of(&merges->strs[i]);
        cJSON *it = m ? cJSON_CreateString(m) : NULL;
        free(m);
        if (!it || !cJSON_AddItemToArray(mlist, it)) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
    }
    for (uint64_t id = 0; !st && id < toks->count; id++) {
        int64_t type = TT_NORMAL;
        if (types && !gguf_kv_int(types, id, &type)) {
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tokenizer.ggml.token_type[%llu] is not an integer", path,
                           (unsigned long long)id);
            break;
        }
        const gguf_str *s = &toks->strs[id];
        if (type == TT_UNUSED) continue;
        if (s->len == 0 || memchr(s->s, 0, (size_t)s->len)) {
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tokenizer.ggml.tokens[%llu] is empty or holds a NUL byte", path,
                           (unsigned long long)id);
            break;
        }
        if (type != TT_NORMAL && type != TT_CONTROL && type != TT_USER && type != TT_BYTE) {
            st = dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF tokenizer.ggml.token_type[%llu] = %lld is not supported",
                           path, (unsigned long long)id, (long long)type);
            break;
        }
        char *text = text_of(s);
        if (!text) { st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path); break; }
        int is_added = type == TT_CONTROL || type == TT_USER;
        if ((!is_added || strmap_get(&produced, text) >= 0) &&
            !cJSON_AddItemToObject(vocab, text, cJSON_CreateNumber((double)id)))
            st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
        if (!st && is_added) {
            cJSON *a = cJSON_CreateObject();
            if (!a || !cJSON_AddItemToArray(added, a) || !cJSON_AddNumberToObject(a, "id", (double)id) ||
                !cJSON_AddStringToObject(a, "content", text) ||
                !cJSON_AddBoolToObject(a, "special", type == TT_CONTROL) ||
                !cJSON_AddBoolToObject(a, "normalized", type == TT_USER))
                st = dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", path);
        }
        free(text);
    }
    for (uint64_t i = 0; cats && i < merges->count; i++) free(cats[i]);
    free(cats);
    strmap_free(&produced);
    return st;
}

dsv4_status tok_from_gguf(const gguf_file *g, tok_t **out)
{
    *out = NULL;
    cJSON *root = cJSON_CreateObject();
    dsv4_status st = root ? build_doc(g, root) : dsv4_fail(DSV4_ERR_NOMEM, "%s: no memory", gguf_label(g));
    if (!st) st = tok_load_json(gguf_label(g), root, out);
    cJSON_Delete(root);
    return st;
}

dsv4_status tok_load_gguf(const char *path, tok_t **out)
{
    *out = NULL;
    gguf_file *g;
    dsv4_status st = gguf_open(path, &g);
    if (st) return st;
    st = tok_from_gguf(g, out);
    gguf_close(g);
    return st;
}

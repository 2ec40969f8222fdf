/* The loaded tokenizer, shared by the loader, encoder and decoder. */
#ifndef DSV4_TEXT_TOKENIZER_INTERNAL_H
#define DSV4_TEXT_TOKENIZER_INTERNAL_H
#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>
#include <cjson/cJSON.h>

#include "text/tokenizer.h"
#include "text/tokenizer_map.h"

enum {
    TOK_ID_VOCAB = 1, TOK_ID_ADDED = 2, TOK_ID_SPECIAL = 4,
    /* added-token flags of HF's AddedToken */
    TOK_ID_LSTRIP = 8, TOK_ID_RSTRIP = 16, TOK_ID_SINGLE_WORD = 32,
};

/* HF SplitDelimiterBehavior. */
typedef enum {
    SPLIT_REMOVED, SPLIT_ISOLATED, SPLIT_MERGED_PREV, SPLIT_MERGED_NEXT, SPLIT_CONTIGUOUS,
} tok_split_behavior;

typedef struct {
    pcre2_code *re;
    tok_split_behavior behavior;
    int invert;
} tok_split;

enum { TOK_MAX_SPLITS = 8 };

/* Byte trie of added-token texts for leftmost-longest matching. */
typedef struct {
    uint32_t child, sibling; /* node indices; 0 = none (0 is the root) */
    int32_t id;              /* token ending here, or -1 */
    uint8_t byte;
} tok_trie_node;

typedef struct {
    tok_trie_node *node;
    uint32_t n, cap;
    uint8_t first[256]; /* bytes some token starts with */
} tok_trie;

struct tok {
    int32_t n_ids;
    uint8_t *kind;                /* TOK_ID_* bits per id; 0 = unassigned */
    char *piece; uint32_t *piece_off; /* id -> vocab string / added text */
    char *dec; uint32_t *dec_off;     /* id -> the bytes it decodes to */
    tok_idmap by_piece;
    tok_pairmap merges;
    int32_t byte_id[256];         /* id of the single-byte symbol */
    /* HF matches added tokens in two passes: those with normalized=false on
     * the raw text, then normalized=true ones on what remains. */
    tok_trie raw_added, norm_added;
    /* Rust regex's Unicode \w, for single_word tokens; NULL if none. */
    pcre2_code *word_char;
    tok_split split[TOK_MAX_SPLITS];
    int n_split;
};

/* Ids beyond this are surely a corrupt file; it bounds the per-id tables. */
#define TOK_MAX_IDS (1 << 24)

/* A tokenizer from a parsed tokenizer.json document (label for messages). */
dsv4_status tok_load_json(const char *label, const cJSON *root, tok_t **out);
/* A tokenizer from a GGUF file's tokenizer.ggml.* metadata (tokenizer_gguf.c). */
dsv4_status tok_load_gguf(const char *path, tok_t **out);
struct gguf_file;
dsv4_status tok_from_gguf(const struct gguf_file *g, tok_t **out);

/* Pre-tokenizer: parses the "pre_tokenizer" object into t->split. */
dsv4_status tok_pretok_parse(struct tok *t, const void *cjson_node, const char *path);

#endif

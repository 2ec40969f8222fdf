/* DeepSeek-V4 tokenizer: Hugging Face tokenizer.json files of the byte-level
 * BPE kind, encoded and decoded exactly as the `tokenizers` library does.
 *
 * Encoding: added tokens (special ones only when TOK_PARSE_SPECIAL is given)
 * are cut out of the raw text first; the rest goes through the Split
 * pre-tokenizers (PCRE2 regexes), the byte-level alphabet and BPE merges.
 * Decoding maps ids back to bytes; invalid UTF-8 in the result is replaced by
 * U+FFFD like the reference does. A tok_t is read-only after loading, so
 * several threads may encode/decode with one tok_t at the same time. */
#ifndef DSV4_TEXT_TOKENIZER_H
#define DSV4_TEXT_TOKENIZER_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

typedef struct tok tok_t;

enum {
    /* encode: recognize special added tokens written in the text (the HF
     * default); without it they are tokenized as plain text. Non-special
     * added tokens are always recognized, as in HF. */
    TOK_PARSE_SPECIAL = 1,
    /* decode: leave special tokens out of the text. */
    TOK_SKIP_SPECIAL = 2,
};

/* path: a tokenizer.json file, a directory holding one, or a GGUF model
 * (NAME.gguf: its tokenizer.ggml.* metadata). */
dsv4_status tok_load(const char *path, tok_t **out);
void tok_free(tok_t *t);

/* Number of ids (largest id + 1); ids below it may still be unassigned. */
int32_t tok_n_ids(const tok_t *t);
/* Id of a vocabulary string or added token ("<｜User｜>"), or -1. */
int32_t tok_token_id(const tok_t *t, const char *piece);
/* The vocabulary string / added token text of id, or NULL if unassigned. */
const char *tok_piece(const tok_t *t, int32_t id, size_t *len);
int tok_is_special(const tok_t *t, int32_t id);

/* Text (UTF-8, len bytes, may hold NUL) to ids; *ids is malloc'd (free()).
 * Invalid UTF-8 => DSV4_ERR_ARG naming the byte offset. */
dsv4_status tok_encode(const tok_t *t, const char *text, size_t len, int flags,
                       int32_t **ids, size_t *n);

/* Ids to text; *text is malloc'd and NUL-terminated (free()). An unassigned
 * or out-of-range id => DSV4_ERR_ARG. */
dsv4_status tok_decode(const tok_t *t, const int32_t *ids, size_t n, int flags,
                       char **text, size_t *len);

/* Streaming decode for generation: each put returns the text that became
 * complete, never half a UTF-8 character (the unfinished bytes wait for the
 * next token). The returned text stays valid until the next call. */
typedef struct {
    const tok_t *tok;
    int flags;
    unsigned char pend[4]; /* an incomplete UTF-8 sequence carried over */
    int n_pend;
    char *buf;
    size_t cap;
} tok_stream;

void tok_stream_init(tok_stream *s, const tok_t *t, int flags);
dsv4_status tok_stream_put(tok_stream *s, int32_t id, const char **text, size_t *len);
/* End of the stream: a dangling incomplete sequence becomes one U+FFFD. */
dsv4_status tok_stream_finish(tok_stream *s, const char **text, size_t *len);
void tok_stream_free(tok_stream *s);

#endif

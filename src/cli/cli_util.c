/* Helpers shared by the CLI subcommands. */
#include <ctype.h>
#include <errno.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "dsv4.h"
#include "engine/spec.h"

/* strtoll/strtod accept leading whitespace; a value must be the number
 * alone, so "", " 5" and "5 " are all refused. */
static int bare(const char *s) { return *s && !isspace((unsigned char)*s); }

int cli_int(const char *cmd, const char *opt, const char *s, long long lo, long long hi, long long *out)
{
    char *end;
    errno = 0;
    long long v = bare(s) ? strtoll(s, &end, 10) : 0;
    if (!bare(s) || *end || errno || v < lo || v > hi) {
        fprintf(stderr, "dsv4 %s: %s: '%s' is not an integer in %lld..%lld\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

int cli_int32(const char *cmd, const char *opt, const char *s, int lo, int hi, int *out)
{
    long long v;
    if (cli_int(cmd, opt, s, lo, hi, &v)) return -1;
    *out = (int)v;
    return 0;
}

int cli_real(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out)
{
    char *end;
    double v = bare(s) ? strtod(s, &end) : 0;
    /* errno is not read: strtod's ERANGE on underflow is a tiny but valid
     * value, and overflow gives inf, which isfinite refuses */
    if (!bare(s) || *end || !isfinite(v) || !(v >= lo && v <= hi)) {
        fprintf(stderr, "dsv4 %s: %s: '%s' is not a number in %g..%g\n", cmd, opt, s, lo, hi);
        return -1;
    }
    *out = v;
    return 0;
}

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

char *cli_read_file(const char *cmd, const char *path, size_t max, size_t *len)
{
    if (max > CLI_INPUT_MAX) max = CLI_INPUT_MAX;
    FILE *f = fopen(path, "rb");
    if (!f) { fprintf(stderr, "dsv4 %s: %s: %s\n", cmd, path, strerror(errno)); return NULL; }
    /* read in growing steps up to max + 1 bytes (pipes and devices have no
     * size to ask for): one byte more than max means too long */
    size_t cap = max < 65536 ? max + 1 : 65536, n = 0;
    char *buf = malloc(cap + 1);
    int err = 0, nomem = !buf, big = 0;
    while (buf) {
        errno = 0;
        size_t r = fread(buf + n, 1, cap - n, f);
        n += r;
        if (n > max) { big = 1; break; }
        if (n < cap) { err = ferror(f) ? (errno ? errno : EIO) : 0; break; }
        size_t c = cap > (max + 1) / 2 ? max + 1 : cap * 2;
        char *g = realloc(buf, c + 1);
        if (!g) { nomem = 1; break; }
        buf = g;
        cap = c;
    }
    fclose(f);
    if (nomem || err || big) {
        if (big) fprintf(stderr, "dsv4 %s: %s: larger than %zu bytes, more than this input can use\n", cmd, path, max);
        else fprintf(stderr, "dsv4 %s: %s: %s\n", cmd, path, nomem ? "out of memory" : strerror(err));
        free(buf);
        return NULL;
    }
    buf[n] = 0;
    if (len) *len = n;
    return buf;
}

int cli_no_nul(const char *cmd, const char *what, const char *buf, size_t len)
{
    const char *z = memchr(buf, 0, len);
    if (!z) return 0;
    fprintf(stderr, "dsv4 %s: %s: NUL byte at offset %zu\n", cmd, what, (size_t)(z - buf));
    return -1;
}

int cli_prompt_fits(const char *cmd, const char *what, size_t n, int max_pos)
{
    if (n <= (size_t)max_pos) return 0;
    fprintf(stderr, "dsv4 %s: %s is %zu tokens, longer than the context (%d, config "
            "max_position_embeddings)\n", cmd, what, n, max_pos);
    return -1;
}

int cli_read_line(FILE *f, size_t max, char **line, size_t *len)
{
    size_t cap = 256, n = 0;
    char *b = malloc(cap);
    int ch = EOF;
    while (b && (ch = getc(f)) != EOF && ch != '\n') {
        if (n == max) break; /* one byte more than max: too long */
        if (n + 1 == cap) {
            char *g = realloc(b, cap *= 2);
            if (!g) { free(b); b = NULL; break; }
            b = g;
        }
        b[n++] = (char)ch;
    }
    if (!b || (n == max && ch != EOF && ch != '\n') || ferror(f)) { free(b); return -1; }
    if (ch == EOF && n == 0) { free(b); return 0; }
    if (n && b[n - 1] == '\r') n--;
    b[n] = 0;
    *line = b;
    *len = n;
    return 1;
}

void cli_context_full(const char *cmd, int max_pos)
{
    fprintf(stderr, "dsv4 %s: stopped: the context is full (%d tokens)\n", cmd, max_pos);
}

int cli_output_ok(const char *cmd)
{
    if (!fflush(stdout) && !ferror(stdout)) return 1;
    fprintf(stderr, "dsv4 %s: writing the output failed: %s\n", cmd, errno ? strerror(errno) : "stream error");
    return 0;
}

void cli_report(const char *cmd, const char *what)
{
    fprintf(stderr, "dsv4 %s: %s%s%s\n", cmd, what ? what : "", what ? ": " : "", dsv4_last_error());
}

int cli_parse_spec(const char *cmd, const char *arg, int *k, int *dspark)
{
    static const char *const kinds[2] = {"mtp", "dspark"};
    for (int d = 0; d < (dspark ? 2 : 1); d++) {
        size_t n = strlen(kinds[d]);
        if (strncmp(arg, kinds[d], n) || (arg[n] && arg[n] != ':')) continue;
        if (dspark) *dspark = d;
        if (!arg[n]) { *k = d ? CLI_SPEC_BLOCK : 1; return 0; }
        char *end;
        errno = 0;
        long v = strtol(arg + n + 1, &end, 10);
        if (end != arg + n + 1 && !*end && !errno && v >= 1 && v <= SPEC_MAX_K) { *k = (int)v; return 0; }
    }
    fprintf(stderr, "dsv4 %s: --spec: '%s' is not mtp or mtp:K%s with K in 1..%d\n", cmd, arg,
            dspark ? ", dspark or dspark:K" : "", SPEC_MAX_K);
    return -1;
}

int cli_spec_k(const char *cmd, const dsv4_model *m, int dspark, int k)
{
    int has_dspark = dsv4_model_has_dspark(m), has_mtp = dsv4_model_has_mtp(m);
    if (dspark != has_dspark && (has_dspark || has_mtp)) {
        fprintf(stderr, "dsv4 %s: --spec %s: this checkpoint has %s\n", cmd, dspark ? "dspark" : "mtp",
                has_dspark ? "a DSpark drafter, not an MTP head (--spec dspark)"
                           : "an MTP head, not a DSpark drafter (--spec mtp)");
        return -1;
    }
    return k == CLI_SPEC_BLOCK ? (has_dspark ? dsv4_model_dspark_block(m) : 1) : k;
}

void cli_spec_stats(int dspark, int k, long long steps, long long kept, long long drafted)
{
    fprintf(stderr, "spec %s:%d: %lld verify steps, %lld of %lld drafts kept (%.1f%%)\n", dspark ? "dspark" : "mtp",
            k, steps, kept, drafted, drafted ? 100.0 * (double)kept / (double)drafted : 0.0);
}

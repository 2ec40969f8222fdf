#include "text/chat_json.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void tbuf_add(tbuf *b, const char *s, size_t n)
{
    if (b->oom) return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap ? b->cap : 256;
        while (cap < b->len + n + 1) cap *= 2;
        char *p = realloc(b->p, cap);
        if (!p) { b->oom = 1; return; }
        b->p = p;
        b->cap = cap;
    }
    if (n) memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = 0;
}

void tbuf_puts(tbuf *b, const char *s) { tbuf_add(b, s, strlen(s)); }

void tbuf_free(tbuf *b)
{
    free(b->p);
    memset(b, 0, sizeof *b);
}

char *tbuf_take(tbuf *b)
{
    if (!b->oom && !b->p) tbuf_add(b, "", 0);
    if (b->oom) { tbuf_free(b); return NULL; }
    char *p = b->p;
    memset(b, 0, sizeof *b);
    return p;
}

/* Python's repr(float): the shortest digit string that reads back to the same
 * double, in fixed notation when the decimal exponent is in (-4, 16] and
 * with "e+XX"/"e-XX" otherwise; json.dumps spells the non-finite values
 * Infinity/-Infinity/NaN. */
static void py_float_repr(double x, char out[40])
{
    if (isnan(x)) { strcpy(out, "NaN"); return; }
    if (isinf(x)) { strcpy(out, x > 0 ? "Infinity" : "-Infinity"); return; }
    if (x == 0) { strcpy(out, signbit(x) ? "-0.0" : "0.0"); return; }
    char e[40];
    for (int p = 1; p <= 17; p++) {
        snprintf(e, sizeof e, "%.*e", p - 1, x);
        if (strtod(e, NULL) == x) break;
    }
    /* e is "[-]D[.DDD]e[+-]XX": split into sign, digits and exponent. */
    char digits[24] = {0};
    int nd = 0, neg = 0;
    const char *q = e;
    if (*q == '-') { neg = 1; q++; }
    for (; *q && *q != 'e'; q++)
        if (*q != '.') digits[nd++] = *q;
    int exp10 = atoi(q + 1);
    int decpt = exp10 + 1;
    char *o = out;
    if (neg) *o++ = '-';
    if (decpt > -4 && decpt <= 16) {
        if (decpt <= 0) {
            *o++ = '0'; *o++ = '.';
            for (int i = 0; i < -decpt; i++) *o++ = '0';
            for (int i = 0; i < nd; i++) *o++ = digits[i];
        } else if (decpt >= nd) {
            for (int i = 0; i < nd; i++) *o++ = digits[i];
            for (int i = nd; i < decpt; i++) *o++ = '0';
            *o++ = '.'; *o++ = '0';
        } else {
            for (int i = 0; i < nd; i++) {
                if (i == decpt) *o++ = '.';
                *o++ = digits[i];
            }
        }
        *o = 0;
    } else {
        *o++ = digits[0];
        if (nd > 1) {
            *o++ = '.';
            for (int i = 1; i < nd; i++) *o++ = digits[i];
        }
        sprintf(o, "e%c%02d", exp10 < 0 ? '-' : '+', abs(exp10));
    }
}

static int is_digit(char c) { return c >= '0' && c <= '9'; }

/* Reads one RFC 8259 number at s[i..n); returns its end or 0 if it is not
 * one (Python refuses "01", "1.", ".5", "+1" too). */
static size_t scan_number(const char *s, size_t i, size_t n, int *is_float)
{
    *is_float = 0;
    if (i < n && s[i] == '-') i++;
    if (i >= n || !is_digit(s[i])) return 0;
    if (s[i] == '0') i++;
    else while (i < n && is_digit(s[i])) i++;
    if (i < n && s[i] == '.') {
        *is_float = 1;
        i++;
        if (i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        *is_float = 1;
        i++;
        if (i < n && (s[i] == '+' || s[i] == '-')) i++;
        if (i >= n || !is_digit(s[i])) return 0;
        while (i < n && is_digit(s[i])) i++;
    }
    if (i < n && (is_digit(s[i]) || s[i] == '.' || s[i] == 'e' || s[i] == 'E' ||
                  s[i] == '+' || s[i] == '-'))
        return 0;
    return i;
}

typedef struct {
    char **v;
    size_t n, cap;
} lexemes;

static void lex_free(lexemes *l)
{
    for (size_t i = 0; i < l->n; i++) free(l->v[i]);
    free(l->v);
}

static int lex_push(lexemes *l, const char *s, size_t n, int is_float)
{
    if (l->n == l->cap) {
        size_t cap = l->cap ? l->cap * 2 : 16;
        char **v = realloc(l->v, cap * sizeof *v);
        if (!v) return -1;
        l->v = v;
        l->cap = cap;
    }
    char *t;
    if (is_float) {
        char tmp[64], rep[40];
        if (n >= sizeof tmp) {
            char *big = malloc(n + 1);
            if (!big) return -1;
            memcpy(big, s, n);
            big[n] = 0;
            py_float_repr(strtod(big, NULL), rep);
            free(big);
        } else {
            memcpy(tmp, s, n);
            tmp[n] = 0;
            py_float_repr(strtod(tmp, NULL), rep);
        }
        t = strdup(rep);
    } else if (n == 2 && s[0] == '-' && s[1] == '0') {
        t = strdup("0"); /* Python's int("-0") prints as 0 */
    } else {
        t = malloc(n + 1);
        if (t) { memcpy(t, s, n); t[n] = 0; }
    }
    if (!t) return -1;
    l->v[l->n++] = t;
    return 0;
}

/* Collects the number lexemes in document order and refuses what Python's
 * json.loads refuses but cJSON would take. Returns the offending offset or
 * -1 when all is well; -2 on allocation failure. */
static long prescan(const char *s, size_t n, lexemes *lx)
{
    size_t i = 0;
    while (i < n) {
        unsigned char c = (unsigned char)s[i];
        if (c == '"') {
            for (i++; i < n && s[i] != '"'; i++) {
                if ((unsigned char)s[i] < 0x20) return (long)i;
                if (s[i] == '\\') {
                    if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
                        return (long)i; /* NUL inside a C string: refused */
                    i++;
                }
            }
            if (i >= n) return (long)n;
            i++;
        } else if (c == '-' || is_digit((char)c)) {
            int is_float;
            size_t e = scan_number(s, i, n, &is_float);
            if (!e) return (long)i;
            if (lex_push(lx, s + i, e - i, is_float)) return -2;
            i = e;
        } else if (c < 0x20 && c != ' ' && c != '\t' && c != '\n' && c != '\r') {
            return (long)i;
        } else {
            i++;
        }
    }
    return -1;
}

/* Pre-order walk: cJSON keeps children in document order, so the k-th number
 * node met is the k-th lexeme. */
static int attach_numbers(cJSON *node, lexemes *lx, size_t *k)
{
    for (; node; node = node->next) {
        if (cJSON_IsNumber(node)) {
            if (*k >= lx->n) return -1;
            node->type = cJSON_Raw | (node->type & cJSON_StringIsConst);
            node->valuestring = lx->v[*k];
            lx->v[(*k)++] = NULL;
        }
        if (node->child && attach_numbers(node->child, lx, k)) return -1;
    }
    return 0;
}

dsv4_status chat_json_parse(const char *text, size_t len, const char *what,
                            cJSON **out)
{
    *out = NULL;
    lexemes lx = {0};
    long bad = prescan(text, len, &lx);
    if (bad == -2) { lex_free(&lx); return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", what); }
    if (bad >= 0) {
        lex_free(&lx);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: invalid JSON at byte %ld", what, bad);
    }
    /* cJSON's "nothing after the value" check wants the NUL inside the
     * length, and our text may be a slice: parse a terminated copy. */
    char *copy = malloc(len + 1);
    if (!copy) { lex_free(&lx); return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", what); }
    memcpy(copy, text, len);
    copy[len] = 0;
    const char *end = NULL;
    cJSON *root = cJSON_ParseWithLengthOpts(copy, len + 1, &end, 1);
    long at = end ? (long)(end - copy) : 0L;
    free(copy);
    if (!root) {
        lex_free(&lx);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: invalid JSON at byte %ld", what, at);
    }
    size_t k = 0;
    if (attach_numbers(root, &lx, &k) || k != lx.n) {
        lex_free(&lx);
        cJSON_Delete(root);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: unsupported JSON numbers", what);
    }
    lex_free(&lx);
    *out = root;
    return DSV4_OK;
}

void chat_json_dump_string(const char *s, size_t len, tbuf *out)
{
    tbuf_add(out, "\"", 1);
    size_t run = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char c = (unsigned char)s[i];
        const char *esc = NULL;
        char u[8];
        switch (c) {
        case '"': esc = "\\\""; break;
        case '\\': esc = "\\\\"; break;
        case '\n': esc = "\\n"; break;
        case '\r': esc = "\\r"; break;
        case '\t': esc = "\\t"; break;
        case '\b': esc = "\\b"; break;
        case '\f': esc = "\\f"; break;
        default:
            if (c < 0x20) { snprintf(u, sizeof u, "\\u%04x", c); esc = u; }
        }
        if (esc) {
            tbuf_add(out, s + run, i - run);
            tbuf_puts(out, esc);
            run = i + 1;
        }
    }
    tbuf_add(out, s + run, len - run);
    tbuf_add(out, "\"", 1);
}

static const cJSON *last_with_key(const cJSON *first)
{
    const cJSON *v = first;
    for (const cJSON *c = first->next; c; c = c->next)
        if (!strcmp(c->string, first->string)) v = c;
    return v;
}

static int key_seen_before(const cJSON *obj, const cJSON *item)
{
    for (const cJSON *c = obj->child; c != item; c = c->next)
        if (!strcmp(c->string, item->string)) return 1;
    return 0;
}

void chat_json_dump(const cJSON *node, tbuf *out)
{
    if (cJSON_IsRaw(node)) tbuf_puts(out, node->valuestring);
    else if (cJSON_IsString(node))
        chat_json_dump_string(node->valuestring, strlen(node->valuestring), out);
    else if (cJSON_IsTrue(node)) tbuf_puts(out, "true");
    else if (cJSON_IsFalse(node)) tbuf_puts(out, "false");
    else if (cJSON_IsNull(node)) tbuf_puts(out, "null");
    else if (cJSON_IsArray(node)) {
        tbuf_puts(out, "[");
        for (const cJSON *c = node->child; c; c = c->next) {
            if (c != node->child) tbuf_puts(out, ", ");
            chat_json_dump(c, out);
        }
        tbuf_puts(out, "]");
    } else if (cJSON_IsObject(node)) {
        tbuf_puts(out, "{");
        int first = 1;
        for (const cJSON *c = node->child; c; c = c->next) {
            if (key_seen_before(node, c)) continue;
            if (!first) tbuf_puts(out, ", ");
            first = 0;
            chat_json_dump_string(c->string, strlen(c->string), out);
            tbuf_puts(out, ": ");
            chat_json_dump(last_with_key(c), out);
        }
        tbuf_puts(out, "}");
    }
}

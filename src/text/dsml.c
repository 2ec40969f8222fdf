#include "text/dsml.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define CALLS_OPEN "<" DSML_TOKEN "tool_calls"
#define CALLS_CLOSE "</" DSML_TOKEN "tool_calls>"
#define INVOKE_OPEN "<" DSML_TOKEN "invoke"
#define INVOKE_CLOSE "</" DSML_TOKEN "invoke"
#define PARAM_OPEN "<" DSML_TOKEN "parameter"
#define PARAM_END "/" DSML_TOKEN "parameter"

/* ---- rendering ---------------------------------------------------------- */

static void render_param(tbuf *out, const char *key, const char *is_str,
                         const char *value, size_t vlen)
{
    tbuf_puts(out, PARAM_OPEN " name=\"");
    tbuf_puts(out, key);
    tbuf_puts(out, "\" string=\"");
    tbuf_puts(out, is_str);
    tbuf_puts(out, "\">");
    tbuf_add(out, value, vlen);
    tbuf_puts(out, "<" PARAM_END ">");
}

/* encode_arguments_to_dsml: one parameter per key of the arguments object,
 * strings raw, everything else as Python-formatted JSON. */
static dsv4_status render_arguments(const dsml_call *c, tbuf *out)
{
    if (!c->arguments) { /* json.loads(None) fails; the value is None */
        render_param(out, "arguments", "false", "null", 4);
        return DSV4_OK;
    }
    cJSON *root = NULL;
    if (chat_json_parse(c->arguments, strlen(c->arguments), "arguments", &root)) {
        dsv4_clear_error(); /* not JSON: the reference passes it as one string */
        render_param(out, "arguments", "true", c->arguments, strlen(c->arguments));
        return DSV4_OK;
    }
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dsv4_fail(DSV4_ERR_ARG, "tool call '%s': arguments must be a JSON object",
                         c->name);
    }
    int first = 1;
    for (const cJSON *k = root->child; k; k = k->next) {
        /* A Python dict keeps a repeated key once, at its first place, with
         * its last value. */
        int seen = 0;
        for (const cJSON *p = root->child; p != k; p = p->next)
            if (!strcmp(p->string, k->string)) seen = 1;
        if (seen) continue;
        const cJSON *v = k;
        for (const cJSON *p = k->next; p; p = p->next)
            if (!strcmp(p->string, k->string)) v = p;
        if (!first) tbuf_puts(out, "\n");
        first = 0;
        if (cJSON_IsString(v)) {
            render_param(out, k->string, "true", v->valuestring, strlen(v->valuestring));
        } else {
            tbuf js = {0};
            chat_json_dump(v, &js);
            render_param(out, k->string, "false", js.p ? js.p : "", js.len);
            out->oom |= js.oom;
            tbuf_free(&js);
        }
    }
    cJSON_Delete(root);
    return DSV4_OK;
}

/* The head of an invoke, up to its first parameter. */
static void render_invoke_head(const char *name, tbuf *out)
{
    tbuf_puts(out, INVOKE_OPEN " name=\"");
    tbuf_puts(out, name);
    tbuf_puts(out, "\">\n");
}

dsv4_status dsml_render_calls(const dsml_call *calls, int n, tbuf *out)
{
    tbuf_puts(out, CALLS_OPEN ">\n");
    for (int i = 0; i < n; i++) {
        if (!calls[i].name)
            return dsv4_fail(DSV4_ERR_ARG, "tool call %d has no name", i);
        if (i) tbuf_puts(out, "\n");
        render_invoke_head(calls[i].name, out);
        dsv4_status st = render_arguments(&calls[i], out);
        if (st) return st;
        tbuf_puts(out, "\n" INVOKE_CLOSE ">");
    }
    tbuf_puts(out, "\n" CALLS_CLOSE);
    return out->oom ? dsv4_fail(DSV4_ERR_NOMEM, "dsml: out of memory") : DSV4_OK;
}

void dsml_render_opening(const char *name, tbuf *out)
{
    tbuf_puts(out, DSML_CALLS_START ">\n");
    render_invoke_head(name, out);
}

/* ---- parsing ------------------------------------------------------------ */

typedef struct {
    const char *s;
    size_t n;
    dsml_message *m;
    int nomem;
} parser;

/* Earliest occurrence at or after `from` of either marker (b may be NULL);
 * *which says which one matched (0: a, 1: b). Returns n when neither. */
static size_t find2(const parser *p, size_t from, const char *a, const char *b, int *which)
{
    const char *pa = memmem(p->s + from, p->n - from, a, strlen(a));
    const char *pb = b ? memmem(p->s + from, p->n - from, b, strlen(b)) : NULL;
    if (pa && (!pb || pa <= pb)) { *which = 0; return (size_t)(pa - p->s); }
    if (pb) { *which = 1; return (size_t)(pb - p->s); }
    *which = -1;
    return p->n;
}

/* Is s[from..n) a (possibly empty) prefix of the string `full`? */
static int is_prefix_of(const parser *p, size_t from, const char *full)
{
    size_t r = p->n - from;
    return r <= strlen(full) && !memcmp(p->s + from, full, r);
}

/* Length of the longest proper prefix of `marker` that ends the text at
 * `end`; such bytes may still grow into the marker, so they are held back. */
static size_t partial_tail(const char *s, size_t start, size_t end, const char *marker)
{
    size_t ml = strlen(marker);
    for (size_t k = ml - 1; k > 0; k--)
        if (k <= end - start && !memcmp(s + end - k, marker, k)) return k;
    return 0;
}

static void set_status(parser *p, dsml_status st, size_t at, const char *why)
{
    p->m->status = st;
    p->m->error_at = at;
    p->m->error = why;
}

static char *dup_range(parser *p, size_t a, size_t b)
{
    char *t = malloc(b - a + 1);
    if (!t) { p->nomem = 1; return NULL; }
    memcpy(t, p->s + a, b - a);
    t[b - a] = 0;
    return t;
}

typedef struct {
    size_t name_a, name_b, val_a, val_b;
    int is_str;
} param_span;

/* Builds the arguments JSON as decode_dsml_to_arguments does: string values
 * quoted and escaped, the others copied as they are (after checking they
 * are JSON, which the reference does not). Returns -1 on invalid JSON. */
static int build_arguments(parser *p, const param_span *ps, int np, char **out)
{
    /* A NUL byte cannot travel in C strings or in our JSON: refuse it. */
    for (int i = 0; i < np; i++)
        if (memchr(p->s + ps[i].name_a, 0, ps[i].name_b - ps[i].name_a) ||
            memchr(p->s + ps[i].val_a, 0, ps[i].val_b - ps[i].val_a))
            return -1;
    tbuf b = {0};
    tbuf_puts(&b, "{");
    for (int i = 0; i < np; i++) {
        if (i) tbuf_puts(&b, ", ");
        chat_json_dump_string(p->s + ps[i].name_a, ps[i].name_b - ps[i].name_a, &b);
        tbuf_puts(&b, ": ");
        size_t vl = ps[i].val_b - ps[i].val_a;
        if (ps[i].is_str) {
            chat_json_dump_string(p->s + ps[i].val_a, vl, &b);
        } else {
            cJSON *j = NULL;
            if (chat_json_parse(p->s + ps[i].val_a, vl, "parameter", &j)) {
                dsv4_clear_error();
                tbuf_free(&b);
                return -1;
            }
            cJSON_Delete(j);
            tbuf_add(&b, p->s + ps[i].val_a, vl);
        }
    }
    tbuf_puts(&b, "}");
    *out = tbuf_take(&b);
    if (!*out) p->nomem = 1;
    return 0;
}

static int push_call(parser *p, size_t name_a, size_t name_b, char *args)
{
    dsml_message *m = p->m;
    dsml_parsed_call *v = realloc(m->calls, (size_t)(m->n_calls + 1) * sizeof *v);
    char *name = dup_range(p, name_a, name_b);
    if (!v || !name) {
        if (v) m->calls = v;
        free(name);
        free(args);
        p->nomem = 1;
        return -1;
    }
    m->calls = v;
    m->calls[m->n_calls].name = name;
    m->calls[m->n_calls].arguments = args;
    m->n_calls++;
    return 0;
}

/* The text stops inside the invoke named s[name_a..name_b) after np
 * complete parameters: record its name and the arguments so far (the
 * complete text without its closing brace). Only when the stop is a
 * streaming one (INCOMPLETE), and the parameters so far are valid. */
static void open_call(parser *p, size_t name_a, size_t name_b, const param_span *ps, int np)
{
    dsml_message *m = p->m;
    if (m->status != DSML_INCOMPLETE || memchr(p->s + name_a, 0, name_b - name_a)) return;
    char *args = NULL;
    if (build_arguments(p, ps, np, &args) || !args) return;
    args[strlen(args) - 1] = 0;
    m->open_name = dup_range(p, name_a, name_b);
    m->open_arguments = args;
}

/* Parses one <｜DSML｜parameter ...> at i (just after PARAM_OPEN). Returns
 * the offset after PARAM_END, or 0 with the status set. */
static size_t parse_param(parser *p, size_t i, param_span *ps)
{
    int w;
    size_t e = find2(p, i, PARAM_END, NULL, &w);
    if (w < 0) { set_status(p, DSML_INCOMPLETE, i, "parameter not finished"); return 0; }
    /* Reference: ^ name="(.*?)" string="(true|false)">(.*?)<$ over s[i..e). */
    static const char head[] = " name=\"";
    if (e - i < sizeof head - 1 || memcmp(p->s + i, head, sizeof head - 1) ||
        p->s[e - 1] != '<') {
        set_status(p, DSML_MALFORMED, i, "bad parameter header");
        return 0;
    }
    size_t a = i + sizeof head - 1;
    static const char *tails[2] = {"\" string=\"true\">", "\" string=\"false\">"};
    for (size_t k = a; k < e; k++) {
        for (int t = 0; t < 2; t++) {
            size_t tl = strlen(tails[t]);
            if (k + tl <= e - 1 && !memcmp(p->s + k, tails[t], tl)) {
                ps->name_a = a;
                ps->name_b = k;
                ps->is_str = t == 0;
                ps->val_a = k + tl;
                ps->val_b = e - 1;
                return e + strlen(PARAM_END);
            }
        }
    }
    set_status(p, DSML_MALFORMED, i, "bad parameter header");
    return 0;
}

/* Expects ">\n" then one of two markers at i; returns the marker's offset
 * with *which set, or n with the status set. */
static size_t expect_gap(parser *p, size_t i, const char *a, const char *b, int *which,
                         const char *why)
{
    size_t at = find2(p, i, a, b, which);
    if (*which >= 0 && at - i == 2 && !memcmp(p->s + i, ">\n", 2)) return at;
    if (*which < 0) {
        tbuf x = {0}, y = {0};
        tbuf_puts(&x, ">\n"); tbuf_puts(&x, a);
        tbuf_puts(&y, ">\n"); tbuf_puts(&y, b);
        int ok = (x.p && is_prefix_of(p, i, x.p)) || (y.p && is_prefix_of(p, i, y.p));
        if (x.oom || y.oom) p->nomem = 1;
        tbuf_free(&x);
        tbuf_free(&y);
        if (ok) { set_status(p, DSML_INCOMPLETE, i, why); return p->n; }
    }
    *which = -1;
    set_status(p, DSML_MALFORMED, i, why);
    return p->n;
}

/* Parses the tool-call block whose opening marker ends at i. Returns the
 * offset after the closing tag, or n with the status set. */
static size_t parse_block(parser *p, size_t i)
{
    for (;;) {
        int w;
        size_t at = expect_gap(p, i, INVOKE_OPEN, CALLS_CLOSE, &w,
                               "expected an invoke or the end of the tool calls");
        if (w < 0) return p->n;
        if (w == 1) return at + strlen(CALLS_CLOSE);
        i = at + strlen(INVOKE_OPEN);

        size_t e = find2(p, i, PARAM_OPEN, INVOKE_CLOSE, &w);
        if (w < 0) { set_status(p, DSML_INCOMPLETE, i, "invoke not finished"); return p->n; }
        /* Reference: ^\s*name="(.*?)">\n$ over s[i..e). Python's $ also
         * matches before a final newline, and an invoke without parameters
         * renders exactly that way: name="f">\n\n</｜DSML｜invoke. */
        size_t a = i;
        while (a < e && (p->s[a] == ' ' || p->s[a] == '\t' || p->s[a] == '\n' ||
                         p->s[a] == '\r' || p->s[a] == '\f' || p->s[a] == '\v'))
            a++;
        size_t name_a = a + 6, name_b = 0;
        if (e - a >= 10 && !memcmp(p->s + e - 4, "\">\n\n", 4)) name_b = e - 4;
        else if (e - a >= 9 && !memcmp(p->s + e - 3, "\">\n", 3)) name_b = e - 3;
        if (!name_b || memcmp(p->s + a, "name=\"", 6) ||
            memchr(p->s + name_a, 0, name_b - name_a)) {
            set_status(p, DSML_MALFORMED, i, "bad invoke header");
            return p->n;
        }

        param_span *ps = NULL;
        int np = 0;
        i = e + (w == 0 ? strlen(PARAM_OPEN) : strlen(INVOKE_CLOSE));
        while (w == 0) {
            param_span cur;
            size_t next = parse_param(p, i, &cur);
            if (!next) { open_call(p, name_a, name_b, ps, np); free(ps); return p->n; }
            for (int k = 0; k < np; k++)
                if (ps[k].name_b - ps[k].name_a == cur.name_b - cur.name_a &&
                    !memcmp(p->s + ps[k].name_a, p->s + cur.name_a, cur.name_b - cur.name_a)) {
                    set_status(p, DSML_MALFORMED, i, "duplicate parameter name");
                    free(ps);
                    return p->n;
                }
            param_span *v = realloc(ps, (size_t)(np + 1) * sizeof *v);
            if (!v) { p->nomem = 1; free(ps); return p->n; }
            ps = v;
            ps[np++] = cur;
            at = expect_gap(p, next, PARAM_OPEN, INVOKE_CLOSE, &w,
                            "expected a parameter or the end of the invoke");
            if (w < 0) { open_call(p, name_a, name_b, ps, np); free(ps); return p->n; }
            i = at + (w == 0 ? strlen(PARAM_OPEN) : strlen(INVOKE_CLOSE));
        }
        char *args = NULL;
        int bad = build_arguments(p, ps, np, &args);
        free(ps);
        if (bad) { set_status(p, DSML_MALFORMED, i, "parameter value is not JSON or holds a NUL byte"); return p->n; }
        if (!args || push_call(p, name_a, name_b, args)) return p->n;
    }
}

static int has(const char *s, const char *needle) { return strstr(s, needle) != NULL; }

/* The reference refuses special tokens inside reasoning or content. */
static int has_special(const char *s)
{
    return has(s, "<｜begin▁of▁sentence｜>") || has(s, DSML_EOS) || has(s, "<think>") ||
           has(s, DSML_THINK_END) || has(s, DSML_TOKEN);
}

static void parse_all(parser *p, int thinking)
{
    dsml_message *m = p->m;
    size_t i = 0;
    int w;
    if (thinking) {
        size_t at = find2(p, 0, DSML_THINK_END, DSML_CALLS_START, &w);
        if (w < 0) {
            size_t hold = partial_tail(p->s, 0, p->n, DSML_THINK_END);
            size_t h2 = partial_tail(p->s, 0, p->n, DSML_CALLS_START);
            if (h2 > hold) hold = h2;
            m->reasoning = dup_range(p, 0, p->n - hold);
            set_status(p, DSML_INCOMPLETE, p->n - hold, "reasoning not finished");
            return;
        }
        m->reasoning = dup_range(p, 0, at);
        if (w == 1) { set_status(p, DSML_MALFORMED, at, "tool calls before </think>"); return; }
        i = at + strlen(DSML_THINK_END);
    }
    size_t at = find2(p, i, DSML_EOS, DSML_CALLS_START, &w);
    if (w < 0) {
        size_t hold = partial_tail(p->s, i, p->n, DSML_EOS);
        size_t h2 = partial_tail(p->s, i, p->n, DSML_CALLS_START);
        if (h2 > hold) hold = h2;
        m->content = dup_range(p, i, p->n - hold);
        if (hold) set_status(p, DSML_INCOMPLETE, p->n - hold, "text may continue into a marker");
    } else {
        m->content = dup_range(p, i, at);
        if (w == 0) {
            i = at + strlen(DSML_EOS);
            m->saw_eos = 1;
        } else {
            i = parse_block(p, at + strlen(DSML_CALLS_START));
            if (m->status != DSML_COMPLETE || p->nomem) return;
            if (is_prefix_of(p, i, DSML_EOS)) {
                if (p->n - i == strlen(DSML_EOS)) m->saw_eos = 1;
                else if (p->n > i) set_status(p, DSML_INCOMPLETE, i, "text may continue into a marker");
                i = p->n;
            } else if (p->n - i > strlen(DSML_EOS) && !memcmp(p->s + i, DSML_EOS, strlen(DSML_EOS))) {
                m->saw_eos = 1;
                i += strlen(DSML_EOS);
            } else {
                set_status(p, DSML_MALFORMED, i, "text after the tool calls");
                return;
            }
        }
        if (i < p->n) { set_status(p, DSML_MALFORMED, i, "text after the end of sentence"); return; }
    }
    if (m->status == DSML_COMPLETE && ((m->content && has_special(m->content)) ||
                                       (m->reasoning && has_special(m->reasoning))))
        set_status(p, DSML_MALFORMED, 0, "special token inside the reply text");
}

dsv4_status dsml_parse_message(const char *text, size_t len, int thinking,
                               dsml_message *out)
{
    memset(out, 0, sizeof *out);
    out->error = "";
    if (!text && len) return dsv4_fail(DSV4_ERR_ARG, "dsml: NULL text");
    parser p = {text ? text : "", len, out, 0};
    parse_all(&p, thinking);
    if (!out->reasoning && !p.nomem) out->reasoning = dup_range(&p, 0, 0);
    if (!out->content && !p.nomem) out->content = dup_range(&p, 0, 0);
    if (p.nomem) {
        dsml_message_free(out);
        return dsv4_fail(DSV4_ERR_NOMEM, "dsml: out of memory");
    }
    return DSV4_OK;
}

void dsml_message_free(dsml_message *m)
{
    for (int i = 0; i < m->n_calls; i++) {
        free(m->calls[i].name);
        free(m->calls[i].arguments);
    }
    free(m->calls);
    free(m->reasoning);
    free(m->content);
    free(m->open_name);
    free(m->open_arguments);
    memset(m, 0, sizeof *m);
    m->error = "";
}

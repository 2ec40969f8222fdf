#include "text/dsml_stream.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"

void dsml_stream_init(dsml_stream *s, int thinking)
{
    memset(s, 0, sizeof *s);
    s->thinking = thinking;
    s->m.error = "";
}

void dsml_stream_free(dsml_stream *s)
{
    dsml_message_free(&s->m);
    free(s->cd);
    memset(s, 0, sizeof *s);
}

/* Thinking mode with a tool-call block before </think>: the reasoning
 * stops at the block, and the block on is parsed as a reply. */
static dsv4_status recover_calls(const char *text, size_t len, dsml_message *m)
{
    size_t at = m->error_at;
    dsml_message r;
    dsv4_status st = dsml_parse_message(text + at, len - at, 0, &r);
    if (st) return st;
    free(m->content);
    for (int i = 0; i < m->n_calls; i++) {
        free(m->calls[i].name);
        free(m->calls[i].arguments);
    }
    free(m->calls);
    free(r.reasoning); /* "": the recovered part has none */
    free(m->open_name);
    free(m->open_arguments);
    m->open_name = r.open_name;
    m->open_arguments = r.open_arguments;
    m->content = r.content;
    m->calls = r.calls;
    m->n_calls = r.n_calls;
    m->status = r.status;
    m->error_at = r.status == DSML_COMPLETE ? 0 : at + r.error_at;
    m->error = r.error;
    m->saw_eos = r.saw_eos;
    return DSV4_OK;
}

/* The bytes of `now` past the `*sent` already handed out. */
static const char *fresh(const char *now, size_t *sent, size_t *n)
{
    size_t l = strlen(now);
    *n = l > *sent ? l - *sent : 0;
    const char *p = now + (l > *sent ? *sent : l);
    if (l > *sent) *sent = l;
    return p;
}

static dsml_call_delta *next_delta(dsml_stream *s, int n)
{
    if (n == s->cap_cd) {
        int cap = s->cap_cd ? 2 * s->cap_cd : 8;
        dsml_call_delta *g = realloc(s->cd, (size_t)cap * sizeof *g);
        if (!g) return NULL;
        s->cd = g;
        s->cap_cd = cap;
    }
    memset(&s->cd[n], 0, sizeof s->cd[n]);
    return &s->cd[n];
}

/* Calls that completed since the last update (each: its name if not yet
 * announced, the rest of its arguments), then the open one's news. */
static dsv4_status call_deltas(dsml_stream *s, dsml_delta *d)
{
    const dsml_message *m = &s->m;
    int n = 0;
    for (; s->n_done < m->n_calls; s->n_done++) {
        dsml_call_delta *c = next_delta(s, n++);
        if (!c) return dsv4_fail(DSV4_ERR_NOMEM, "dsml stream: out of memory");
        const dsml_parsed_call *pc = &m->calls[s->n_done];
        c->index = s->n_done;
        if (!s->open_started) c->name = pc->name;
        size_t len = strlen(pc->arguments), from = s->open_sent < len ? s->open_sent : len;
        c->arguments = pc->arguments + from;
        c->n_arguments = len - from;
        c->complete = 1;
        s->open_started = 0;
        s->open_sent = 0;
    }
    if (m->open_name) {
        size_t len = strlen(m->open_arguments);
        if (!s->open_started || len > s->open_sent) {
            dsml_call_delta *c = next_delta(s, n++);
            if (!c) return dsv4_fail(DSV4_ERR_NOMEM, "dsml stream: out of memory");
            c->index = s->n_done;
            if (!s->open_started) c->name = m->open_name;
            c->arguments = m->open_arguments + (s->open_sent < len ? s->open_sent : len);
            c->n_arguments = len > s->open_sent ? len - s->open_sent : 0;
            s->open_started = 1;
            if (len > s->open_sent) s->open_sent = len;
        }
    }
    d->calls = s->cd;
    d->n_calls = n;
    return DSV4_OK;
}

dsv4_status dsml_stream_update(dsml_stream *s, const char *text, size_t len, int final, dsml_delta *d)
{
    memset(d, 0, sizeof *d);
    dsml_message_free(&s->m);
    dsv4_status st = dsml_parse_message(text, len, s->thinking, &s->m);
    if (st) return st;
    dsml_message *m = &s->m;
    if (s->thinking && m->status == DSML_MALFORMED && !strcmp(m->error, "tool calls before </think>") &&
        (st = recover_calls(text, len, m)))
        return st;
    d->reasoning = fresh(m->reasoning, &s->n_reasoning, &d->n_reasoning);
    d->content = fresh(m->content, &s->n_content, &d->n_content);
    if ((st = call_deltas(s, d))) return st;
    if (final && m->status == DSML_MALFORMED && m->error_at > 0 && m->error_at < len &&
        (!strcmp(m->error, "text after the tool calls") || !strcmp(m->error, "text after the end of sentence"))) {
        /* The reply's content then already ended before error_at; what
         * follows goes out as reply text after it. */
        size_t n = len - m->error_at;
        size_t have = strlen(m->content);
        char *c = malloc(have + n + 1);
        if (!c) return dsv4_fail(DSV4_ERR_NOMEM, "dsml stream: out of memory");
        memcpy(c, m->content, have);
        memcpy(c + have, text + m->error_at, n);
        c[have + n] = 0;
        free(m->content);
        m->content = c;
        d->content = fresh(m->content, &s->n_content, &d->n_content);
    }
    return DSV4_OK;
}

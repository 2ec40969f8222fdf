#include "text/chat.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"

#define LATEST_REMINDER "<｜latest_reminder｜>"

/* Texts of the reference encoding, with its tokens substituted. */
static const char REASONING_EFFORT_MAX[] =
    "Reasoning Effort: Absolute maximum with no shortcuts permitted.\n"
    "You MUST be very thorough in your thinking and comprehensively decompose the problem "
    "to resolve the root cause, rigorously stress-testing your logic against all potential "
    "paths, edge cases, and adversarial scenarios.\n"
    "Explicitly write out your entire deliberation process, documenting every intermediate "
    "step, considered alternative, and rejected hypothesis to ensure absolutely no assumption "
    "is left unchecked.\n\n";

static const char TOOLS_HEAD[] =
    "## Tools\n\n"
    "You have access to a set of tools to help answer the user's question. You can invoke "
    "tools by writing a \"<" DSML_TOKEN "tool_calls>\" block like the following:\n\n"
    "<" DSML_TOKEN "tool_calls>\n"
    "<" DSML_TOKEN "invoke name=\"$TOOL_NAME\">\n"
    "<" DSML_TOKEN "parameter name=\"$PARAMETER_NAME\" string=\"true|false\">$PARAMETER_VALUE</"
    DSML_TOKEN "parameter>\n"
    "...\n"
    "</" DSML_TOKEN "invoke>\n"
    "<" DSML_TOKEN "invoke name=\"$TOOL_NAME2\">\n"
    "...\n"
    "</" DSML_TOKEN "invoke>\n"
    "</" DSML_TOKEN "tool_calls>\n\n"
    "String parameters should be specified as is and set `string=\"true\"`. For all other "
    "types (numbers, booleans, arrays, objects), pass the value in JSON format and set "
    "`string=\"false\"`.\n\n"
    "If thinking_mode is enabled (triggered by <think>), you MUST output your complete "
    "reasoning inside <think>...</think> BEFORE any tool calls or final response.\n\n"
    "Otherwise, output directly after </think> with tool calls or final response.\n\n"
    "### Available Tool Schemas\n\n";
static const char TOOLS_TAIL[] =
    "\n\nYou MUST strictly follow the above defined tool name and parameter schemas to "
    "invoke tool calls.\n";
static const char RESPONSE_FORMAT_HEAD[] =
    "## Response Format:\n\nYou MUST strictly adhere to the following schema to reply:\n";

/* A part of a merged user turn: plain text or a tool result. */
typedef struct {
    int is_result;
    const char *text;
    const char *use_id;
} part;

/* A message after tool merging; strings point into the caller's messages. */
typedef struct {
    chat_role role;
    const char *content, *reasoning;
    const chat_tool_call *calls;
    int n_calls;
    const cJSON *tools, *response_format; /* parsed, NULL when absent */
    int wo_eos;
    part *parts; /* user turns; owned by the merged list */
    int n_parts;
} rmsg;

typedef struct {
    rmsg *v;
    int n;
} rlist;

static void rlist_free(rlist *l)
{
    for (int i = 0; i < l->n; i++) free(l->v[i].parts);
    free(l->v);
    l->v = NULL;
    l->n = 0;
}

/* Python truthiness of a parsed JSON value ({} [] "" 0 null false are false). */
static int truthy(const cJSON *j)
{
    if (!j) return 0;
    if (cJSON_IsArray(j) || cJSON_IsObject(j)) return j->child != NULL;
    if (cJSON_IsString(j)) return j->valuestring[0] != 0;
    if (cJSON_IsRaw(j)) return strcmp(j->valuestring, "0") && strcmp(j->valuestring, "0.0") &&
                               strcmp(j->valuestring, "-0.0");
    return cJSON_IsTrue(j);
}

static int add_part(rmsg *m, int is_result, const char *text, const char *use_id)
{
    part *p = realloc(m->parts, (size_t)(m->n_parts + 1) * sizeof *p);
    if (!p) return -1;
    m->parts = p;
    p[m->n_parts++] = (part){is_result, text, use_id};
    return 0;
}

/* merge_tool_messages over msgs[a..b): consecutive user and tool messages
 * collapse into one user turn of parts. */
static dsv4_status merge(const chat_msg *msgs, int a, int b, const cJSON **tools,
                         const cJSON **rfmt, rlist *out)
{
    out->v = calloc((size_t)(b - a) + 1, sizeof *out->v);
    out->n = 0;
    if (!out->v) return dsv4_fail(DSV4_ERR_NOMEM, "chat: out of memory");
    for (int i = a; i < b; i++) {
        const chat_msg *m = &msgs[i];
        rmsg *last = out->n ? &out->v[out->n - 1] : NULL;
        int joins = last && last->role == CHAT_ROLE_USER;
        if (m->role == CHAT_ROLE_TOOL || m->role == CHAT_ROLE_USER) {
            if (!joins) {
                last = &out->v[out->n++];
                memset(last, 0, sizeof *last);
                last->role = CHAT_ROLE_USER;
                last->content = m->role == CHAT_ROLE_USER ? m->content : NULL;
            }
            int r = m->role == CHAT_ROLE_TOOL
                        ? add_part(last, 1, m->content, m->tool_call_id)
                        : add_part(last, 0, m->content, NULL);
            if (r) return dsv4_fail(DSV4_ERR_NOMEM, "chat: out of memory");
        } else {
            rmsg *r = &out->v[out->n++];
            memset(r, 0, sizeof *r);
            r->role = m->role;
            r->content = m->content;
            r->reasoning = m->reasoning_content;
            r->calls = m->tool_calls;
            r->n_calls = m->n_tool_calls;
            r->tools = tools[i];
            r->response_format = rfmt[i];
            r->wo_eos = m->wo_eos;
        }
    }
    return DSV4_OK;
}

static int id_eq(const char *a, const char *b) { return a && b && !strcmp(a, b); }

/* sort_tool_results_by_call_order: within a user turn, tool results follow
 * the order of the calls of the latest assistant turn that made calls
 * (unknown ids rank as 0; the sort is stable). */
static void sort_results(rlist *l)
{
    const rmsg *caller = NULL;
    for (int i = 0; i < l->n; i++) {
        rmsg *m = &l->v[i];
        if (m->role == CHAT_ROLE_ASSISTANT && m->n_calls > 0) {
            caller = m;
            continue;
        }
        if (m->role != CHAT_ROLE_USER || !caller) continue;
        int has_id = 0, n_res = 0;
        for (int c = 0; c < caller->n_calls; c++)
            if (caller->calls[c].id && caller->calls[c].id[0]) has_id = 1;
        for (int k = 0; k < m->n_parts; k++) n_res += m->parts[k].is_result;
        if (n_res < 2 || !has_id) continue;
        /* Rank = index of the last call with that id (a dict keeps the last). */
        part *res = malloc((size_t)n_res * sizeof *res);
        int *rank = malloc((size_t)n_res * sizeof *rank);
        if (!res || !rank) { free(res); free(rank); continue; }
        int r = 0;
        for (int k = 0; k < m->n_parts; k++) {
            if (!m->parts[k].is_result) continue;
            res[r] = m->parts[k];
            rank[r] = 0;
            for (int c = 0; c < caller->n_calls; c++)
                if (caller->calls[c].id && caller->calls[c].id[0] &&
                    id_eq(caller->calls[c].id, m->parts[k].use_id))
                    rank[r] = c;
            r++;
        }
        for (int x = 1; x < n_res; x++) /* stable insertion sort */
            for (int y = x; y > 0 && rank[y - 1] > rank[y]; y--) {
                part tp = res[y]; res[y] = res[y - 1]; res[y - 1] = tp;
                int tr = rank[y]; rank[y] = rank[y - 1]; rank[y - 1] = tr;
            }
        r = 0;
        for (int k = 0; k < m->n_parts; k++)
            if (m->parts[k].is_result) m->parts[k] = res[r++];
        free(res);
        free(rank);
    }
}

static int last_user_index(const rmsg *v, int n)
{
    for (int i = n - 1; i >= 0; i--)
        if (v[i].role == CHAT_ROLE_USER || v[i].role == CHAT_ROLE_DEVELOPER) return i;
    return -1;
}

/* _drop_thinking_messages: before the last user turn, assistant turns lose
 * their reasoning and developer turns go. Returns the new length; dst shares
 * parts with src. */
static int drop_thinking(const rmsg *src, int n, rmsg *dst)
{
    int lu = last_user_index(src, n), k = 0;
    for (int i = 0; i < n; i++) {
        chat_role r = src[i].role;
        if (r == CHAT_ROLE_USER || r == CHAT_ROLE_SYSTEM || r == CHAT_ROLE_LATEST_REMINDER ||
            i >= lu) {
            dst[k++] = src[i];
        } else if (r == CHAT_ROLE_ASSISTANT) {
            dst[k] = src[i];
            dst[k++].reasoning = NULL;
        }
    }
    return k;
}

static void render_tools(const cJSON *tools, tbuf *out)
{
    tbuf_puts(out, "\n\n");
    tbuf_puts(out, TOOLS_HEAD);
    for (const cJSON *t = tools->child; t; t = t->next) {
        if (t != tools->child) tbuf_puts(out, "\n");
        chat_json_dump(cJSON_GetObjectItemCaseSensitive(t, "function"), out);
    }
    tbuf_puts(out, TOOLS_TAIL);
}

static void render_extras(const rmsg *m, tbuf *out)
{
    if (truthy(m->tools)) render_tools(m->tools, out);
    if (truthy(m->response_format)) {
        tbuf_puts(out, "\n\n");
        tbuf_puts(out, RESPONSE_FORMAT_HEAD);
        chat_json_dump(m->response_format, out);
    }
}

static const char *str(const char *s) { return s ? s : ""; }

/* render_message for v[i]. */
static dsv4_status render_one(const rmsg *v, int n, int i, int thinking, int effort_max,
                              int drop, tbuf *out)
{
    const rmsg *m = &v[i];
    int lu = last_user_index(v, n);
    if (i == 0 && thinking && effort_max) tbuf_puts(out, REASONING_EFFORT_MAX);
    switch (m->role) {
    case CHAT_ROLE_SYSTEM:
        tbuf_puts(out, str(m->content));
        render_extras(m, out);
        break;
    case CHAT_ROLE_DEVELOPER:
        tbuf_puts(out, CHAT_TOK_USER);
        tbuf_puts(out, m->content);
        render_extras(m, out);
        break;
    case CHAT_ROLE_USER:
        tbuf_puts(out, CHAT_TOK_USER);
        for (int k = 0; k < m->n_parts; k++) {
            if (k) tbuf_puts(out, "\n\n");
            if (m->parts[k].is_result) tbuf_puts(out, "<tool_result>");
            tbuf_puts(out, str(m->parts[k].text));
            if (m->parts[k].is_result) tbuf_puts(out, "</tool_result>");
        }
        break;
    case CHAT_ROLE_LATEST_REMINDER:
        tbuf_puts(out, LATEST_REMINDER);
        tbuf_puts(out, str(m->content));
        break;
    case CHAT_ROLE_ASSISTANT:
        if (thinking && (!drop || i > lu)) {
            tbuf_puts(out, str(m->reasoning));
            tbuf_puts(out, CHAT_TOK_THINK_END);
        }
        tbuf_puts(out, str(m->content));
        if (m->n_calls > 0) {
            tbuf_puts(out, "\n\n");
            dsv4_status st = dsml_render_calls(m->calls, m->n_calls, out);
            if (st) return st;
        }
        if (!m->wo_eos) tbuf_puts(out, CHAT_TOK_EOS);
        break;
    case CHAT_ROLE_TOOL: /* merged away before rendering */
        break;
    }
    /* The generation prompt after a user turn that the assistant answers. */
    if (i + 1 < n && v[i + 1].role != CHAT_ROLE_ASSISTANT &&
        v[i + 1].role != CHAT_ROLE_LATEST_REMINDER)
        return DSV4_OK;
    if (m->role == CHAT_ROLE_USER || m->role == CHAT_ROLE_DEVELOPER) {
        tbuf_puts(out, CHAT_TOK_ASSISTANT);
        tbuf_puts(out, thinking && (!drop || i >= lu) ? CHAT_TOK_THINK_START : CHAT_TOK_THINK_END);
    }
    return DSV4_OK;
}

/* Parses and checks the JSON side inputs of every message. */
static dsv4_status parse_inputs(const chat_msg *msgs, int n, cJSON **tools, cJSON **rfmt)
{
    char what[64];
    for (int i = 0; i < n; i++) {
        const chat_msg *m = &msgs[i];
        if ((unsigned)m->role > CHAT_ROLE_LATEST_REMINDER)
            return dsv4_fail(DSV4_ERR_ARG, "chat message %d: unknown role %d", i, (int)m->role);
        if (m->role == CHAT_ROLE_DEVELOPER && (!m->content || !m->content[0]))
            return dsv4_fail(DSV4_ERR_ARG, "chat message %d: developer message needs content", i);
        if (m->n_tool_calls < 0 || (m->n_tool_calls > 0 && !m->tool_calls))
            return dsv4_fail(DSV4_ERR_ARG, "chat message %d: bad tool_calls", i);
        if (m->tools_json) {
            snprintf(what, sizeof what, "chat message %d tools", i);
            dsv4_status st = chat_json_parse(m->tools_json, strlen(m->tools_json), what, &tools[i]);
            if (st) return st;
            if (!cJSON_IsArray(tools[i]))
                return dsv4_fail(DSV4_ERR_ARG, "%s: must be a JSON array", what);
            for (const cJSON *t = tools[i]->child; t; t = t->next)
                if (!cJSON_IsObject(t) || !cJSON_GetObjectItemCaseSensitive(t, "function"))
                    return dsv4_fail(DSV4_ERR_ARG,
                                     "%s: each tool must be an object with a \"function\"", what);
        }
        if (m->response_format_json) {
            snprintf(what, sizeof what, "chat message %d response_format", i);
            dsv4_status st = chat_json_parse(m->response_format_json,
                                             strlen(m->response_format_json), what, &rfmt[i]);
            if (st) return st;
        }
    }
    return DSV4_OK;
}

static dsv4_status render_list(const chat_msg *src, int n, int n_ctx, const chat_opts *o,
                               const cJSON **tools, const cJSON **rfmt, tbuf *out)
{
    int thinking = o->mode != CHAT_NOTHINK;
    rlist ctx = {0}, cur = {0};
    rmsg *full = NULL, *dropped = NULL;
    dsv4_status st = merge(src, 0, n_ctx, tools, rfmt, &ctx);
    if (!st) st = merge(src, n_ctx, n, tools, rfmt, &cur);
    int nf = ctx.n + cur.n;
    if (!st) {
        full = malloc(((size_t)nf + 1) * sizeof *full);
        dropped = malloc(((size_t)nf + 1) * sizeof *dropped);
        if (!full || !dropped) st = dsv4_fail(DSV4_ERR_NOMEM, "chat: out of memory");
    }
    if (st) goto done;
    if (ctx.n) memcpy(full, ctx.v, (size_t)ctx.n * sizeof *full);
    if (cur.n) memcpy(full + ctx.n, cur.v, (size_t)cur.n * sizeof *full);
    rlist fl = {full, nf};
    sort_results(&fl); /* parts arrays are shared, so ctx/cur see the order too */

    int drop = !o->keep_reasoning;
    for (int i = 0; i < nf; i++)
        if (truthy(full[i].tools)) drop = 0;

    if (!o->no_bos && n_ctx == 0) tbuf_puts(out, CHAT_TOK_BOS);
    const rmsg *list = full;
    int len = nf, first = ctx.n;
    if (thinking && drop) {
        len = drop_thinking(full, nf, dropped);
        int ctx_len = drop_thinking(ctx.v, ctx.n, full); /* full is scratch now */
        list = dropped;
        first = ctx_len;
    }
    for (int i = first; i < len && !st; i++)
        st = render_one(list, len, i, thinking, o->mode == CHAT_THINK_MAX, drop, out);
done:
    free(full);
    free(dropped);
    rlist_free(&ctx);
    rlist_free(&cur);
    return st;
}

dsv4_status chat_render(const chat_msg *msgs, int n, const chat_opts *opt, char **out)
{
    *out = NULL;
    chat_opts o = {0};
    if (opt) o = *opt;
    if (n < 0 || (n > 0 && !msgs)) return dsv4_fail(DSV4_ERR_ARG, "chat: bad message list");
    if (o.n_context < 0 || o.n_context > n)
        return dsv4_fail(DSV4_ERR_ARG, "chat: n_context %d out of range 0..%d", o.n_context, n);
    if ((unsigned)o.mode > CHAT_THINK_MAX)
        return dsv4_fail(DSV4_ERR_ARG, "chat: unknown mode %d", (int)o.mode);

    /* Conversation-level tools go to a leading system message. */
    chat_msg *src = malloc(((size_t)n + 1) * sizeof *src);
    cJSON **tools = calloc((size_t)n + 1, sizeof *tools);
    cJSON **rfmt = calloc((size_t)n + 1, sizeof *rfmt);
    dsv4_status st = DSV4_OK;
    if (!src || !tools || !rfmt) { st = dsv4_fail(DSV4_ERR_NOMEM, "chat: out of memory"); goto done; }
    int ns = n, n_ctx = o.n_context;
    if (n) memcpy(src, msgs, (size_t)n * sizeof *src);
    if (o.tools_json) {
        if (n > 0 && src[0].role == CHAT_ROLE_SYSTEM && !src[0].tools_json) {
            src[0].tools_json = o.tools_json;
        } else {
            memmove(src + 1, src, (size_t)n * sizeof *src);
            memset(&src[0], 0, sizeof src[0]);
            src[0].role = CHAT_ROLE_SYSTEM;
            src[0].tools_json = o.tools_json;
            ns++;
            if (n_ctx > 0) n_ctx++;
        }
    }
    st = parse_inputs(src, ns, tools, rfmt);
    if (!st) {
        tbuf b = {0};
        st = render_list(src, ns, n_ctx, &o, (const cJSON **)tools, (const cJSON **)rfmt, &b);
        if (!st && b.oom) st = dsv4_fail(DSV4_ERR_NOMEM, "chat: out of memory");
        if (!st) *out = tbuf_take(&b);
        else tbuf_free(&b);
    }
done:
    if (tools)
        for (int i = 0; i <= n; i++) cJSON_Delete(tools[i]);
    if (rfmt)
        for (int i = 0; i <= n; i++) cJSON_Delete(rfmt[i]);
    free(src);
    free(tools);
    free(rfmt);
    return st;
}

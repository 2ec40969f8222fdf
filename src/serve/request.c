#include "serve/request.h"

#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"
#include "text/chat_json.h"

/* What one parse allocates: the JSON tree, the message array and the
 * strings built for it; all freed once the prompt is rendered. */
typedef struct {
    api_error *e;
    const api_limits *lim;
    chat_msg *msgs;
    int n_msgs, cap_msgs;
    void **pool;
    int n_pool, cap_pool;
} ctx;

static int fail(ctx *c, int status, const char *param, const char *fmt, ...)
    __attribute__((format(printf, 4, 5)));
static int fail(ctx *c, int status, const char *param, const char *fmt, ...)
{
    if (c->e->status) return -1; /* the first problem is the one reported */
    c->e->status = status;
    snprintf(c->e->param, sizeof c->e->param, "%s", param ? param : "");
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(c->e->message, sizeof c->e->message, fmt, ap);
    va_end(ap);
    return -1;
}

static void *keep(ctx *c, void *p)
{
    if (!p) return NULL;
    if (c->n_pool == c->cap_pool) {
        int cap = c->cap_pool ? 2 * c->cap_pool : 32;
        void **g = realloc(c->pool, (size_t)cap * sizeof *g);
        if (!g) { free(p); return NULL; }
        c->pool = g;
        c->cap_pool = cap;
    }
    return c->pool[c->n_pool++] = p;
}

static const cJSON *get(const cJSON *o, const char *k) { return cJSON_GetObjectItemCaseSensitive(o, k); }

static int depth(const cJSON *n, int d, int max)
{
    if (d > max) return 0;
    for (const cJSON *k = n->child; k; k = k->next)
        if (!depth(k, d + 1, max)) return 0;
    return 1;
}

/* Numbers are cJSON_Raw nodes holding Python's spelling (chat_json_parse). */
static int is_num(const cJSON *v) { return v && cJSON_IsRaw(v); }

static int number(ctx *c, const cJSON *o, const char *k, double lo, double hi, double *out)
{
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    double d = is_num(v) ? strtod(v->valuestring, NULL) : NAN;
    if (!is_num(v) || !isfinite(d) || d < lo || d > hi)
        return fail(c, 400, k, "'%s' must be a number in [%g, %g]", k, lo, hi);
    *out = d;
    return 0;
}

static int integer(ctx *c, const cJSON *o, const char *k, long long lo, long long hi, long long *out)
{
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    char *end = NULL;
    errno = 0;
    long long i = is_num(v) ? strtoll(v->valuestring, &end, 10) : 0;
    if (!is_num(v) || *end || errno || i < lo || i > hi)
        return fail(c, 400, k, "'%s' must be an integer in [%lld, %lld]", k, lo, hi);
    *out = i;
    return 0;
}

static int boolean(ctx *c, const cJSON *o, const char *k, int *out)
{
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsBool(v)) return fail(c, 400, k, "'%s' must be a boolean", k);
    *out = cJSON_IsTrue(v);
    return 0;
}

static const char *string(ctx *c, const cJSON *o, const char *k, int required)
{
    const cJSON *v = get(o, k);
    if ((!v || cJSON_IsNull(v)) && !required) return NULL;
    if (!cJSON_IsString(v)) {
        fail(c, 400, k, "'%s' must be a string", k);
        return NULL;
    }
    return v->valuestring;
}

static char *dump(ctx *c, const cJSON *v)
{
    tbuf b = {0};
    chat_json_dump(v, &b);
    char *s = keep(c, tbuf_take(&b));
    if (!s) fail(c, 500, NULL, "out of memory");
    return s;
}

/* Text of a content field: a string, or an array of {"type":"text"} parts
 * (OpenAI) / text blocks (Anthropic system), joined. NULL content: NULL. */
static int text_of(ctx *c, const cJSON *v, const char *what, const char **out)
{
    *out = NULL;
    if (!v || cJSON_IsNull(v)) return 0;
    if (cJSON_IsString(v)) { *out = v->valuestring; return 0; }
    if (!cJSON_IsArray(v)) return fail(c, 400, what, "%s must be a string or an array of text parts", what);
    tbuf b = {0};
    tbuf_puts(&b, "");
    for (const cJSON *p = v->child; p; p = p->next) {
        const cJSON *t = get(p, "type"), *x = get(p, "text");
        if (!cJSON_IsString(t) || strcmp(t->valuestring, "text") || !cJSON_IsString(x)) {
            tbuf_free(&b);
            return fail(c, 400, what, "%s: only text parts are supported", what);
        }
        tbuf_puts(&b, x->valuestring);
    }
    if (!(*out = keep(c, tbuf_take(&b)))) return fail(c, 500, NULL, "out of memory");
    return 0;
}

static chat_msg *add_msg(ctx *c, chat_role role)
{
    if (c->n_msgs >= c->lim->max_messages + 2) { /* + a system message for tools/format */
        fail(c, 413, "messages", "more than %d messages", c->lim->max_messages);
        return NULL;
    }
    if (c->n_msgs == c->cap_msgs) {
        int cap = c->cap_msgs ? 2 * c->cap_msgs : 8;
        chat_msg *g = realloc(c->msgs, (size_t)cap * sizeof *g);
        if (!g) { fail(c, 500, NULL, "out of memory"); return NULL; }
        c->msgs = g;
        c->cap_msgs = cap;
    }
    chat_msg *m = &c->msgs[c->n_msgs++];
    memset(m, 0, sizeof *m);
    m->role = role;
    return m;
}

/* ---- settings shared by the three APIs ---- */

static int stops(ctx *c, const cJSON *o, const char *k, api_request *r)
{
    const cJSON *v = get(o, k);
    if (!v || cJSON_IsNull(v)) return 0;
    int n = cJSON_IsString(v) ? 1 : cJSON_IsArray(v) ? cJSON_GetArraySize(v) : -1;
    if (n < 0) return fail(c, 400, k, "'%s' must be a string or an array of strings", k);
    if (n > c->lim->max_stops) return fail(c, 400, k, "'%s' has more than %d entries", k, c->lim->max_stops);
    r->stops = calloc((size_t)n + 1, sizeof *r->stops);
    if (!r->stops) return fail(c, 500, NULL, "out of memory");
    const cJSON *it = cJSON_IsString(v) ? v : v->child;
    for (; it && r->n_stops < n; it = it->next) {
        if (!cJSON_IsString(it) || !it->valuestring[0])
            return fail(c, 400, k, "'%s' entries must be non-empty strings", k);
        if (!(r->stops[r->n_stops] = strdup(it->valuestring))) return fail(c, 500, NULL, "out of memory");
        r->n_stops++;
    }
    return 0;
}

static int sampling(ctx *c, const cJSON *o, api_request *r)
{
    double d;
    long long i;
    sampling_params *p = &r->sp;
    d = p->temperature;
    if (number(c, o, "temperature", 0, 2, &d)) return -1;
    p->temperature = (float)d;
    d = p->top_p;
    if (number(c, o, "top_p", 1e-9, 1, &d)) return -1;
    p->top_p = (float)d;
    d = p->min_p;
    if (number(c, o, "min_p", 0, 1, &d)) return -1;
    p->min_p = (float)d;
    i = p->top_k;
    if (integer(c, o, "top_k", -1, 1 << 30, &i)) return -1;
    p->top_k = i < 0 ? 0 : (int)i; /* -1: off, as vLLM spells it */
    d = p->presence_penalty;
    if (number(c, o, "presence_penalty", -2, 2, &d)) return -1;
    p->presence_penalty = (float)d;
    d = p->frequency_penalty;
    if (number(c, o, "frequency_penalty", -2, 2, &d)) return -1;
    p->frequency_penalty = (float)d;
    d = p->repetition_penalty;
    if (number(c, o, "repetition_penalty", 1e-3, 100, &d)) return -1;
    p->repetition_penalty = (float)d;
    i = -1;
    if (integer(c, o, "seed", 0, (long long)1 << 62, &i)) return -1;
    if (i >= 0) { p->seed = (uint64_t)i; r->seed_given = 1; }
    if (boolean(c, o, "stream", &r->stream) || boolean(c, o, "ignore_eos", &r->ignore_eos)) return -1;
    const cJSON *so = get(o, "stream_options");
    if (so && !cJSON_IsNull(so)) {
        if (!cJSON_IsObject(so)) return fail(c, 400, "stream_options", "'stream_options' must be an object");
        if (boolean(c, so, "include_usage", &r->include_usage)) return -1;
    }
    const char *model = string(c, o, "model", 0);
    if (c->e->status) return -1;
    snprintf(r->model, sizeof r->model, "%s", model ? model : "");
    return 0;
}

static int max_tokens(ctx *c, const cJSON *o, const char *k, api_request *r)
{
    long long i = r->max_tokens;
    if (integer(c, o, k, 0, 1 << 30, &i)) return -1;
    if (i > c->lim->max_tokens)
        return fail(c, 400, k, "'%s' is %lld, more than this server's limit %d", k, i, c->lim->max_tokens);
    r->max_tokens = (int)i;
    return 0;
}

/* tool_choice that demands a call (required/any, or a named tool, the only
 * one left in tools): the reply must begin with the opening of a call of
 * one of the tools (OpenAI function tools), after its reasoning in
 * thinking mode. */
static int demand_call(ctx *c, int demanded, const cJSON *tools, api_request *r)
{
    if (!demanded) return 0;
    int n = cJSON_GetArraySize(tools);
    if (!n) return fail(c, 400, "tool_choice", "'tool_choice' demands a tool call but 'tools' is empty");
    if (!(r->force = calloc((size_t)n, sizeof *r->force))) return fail(c, 500, NULL, "out of memory");
    for (const cJSON *t = tools->child; t; t = t->next) {
        tbuf b = {0};
        dsml_render_opening(get(get(t, "function"), "name")->valuestring, &b);
        if (!(r->force[r->n_force] = tbuf_take(&b))) return fail(c, 500, NULL, "out of memory");
        r->n_force++;
    }
    return 0;
}

/* ---- OpenAI chat completions ---- */

static int oa_tool_calls(ctx *c, const cJSON *v, chat_msg *m, int idx)
{
    if (!v || cJSON_IsNull(v)) return 0;
    if (!cJSON_IsArray(v)) return fail(c, 400, "tool_calls", "messages[%d].tool_calls must be an array", idx);
    int n = cJSON_GetArraySize(v), k = 0;
    chat_tool_call *tc = keep(c, calloc((size_t)n + 1, sizeof *tc));
    if (!tc) return fail(c, 500, NULL, "out of memory");
    for (const cJSON *t = v->child; t; t = t->next, k++) {
        const cJSON *f = get(t, "function");
        const cJSON *name = get(f, "name"), *args = get(f, "arguments"), *id = get(t, "id");
        if (!cJSON_IsObject(f) || !cJSON_IsString(name))
            return fail(c, 400, "tool_calls", "messages[%d].tool_calls[%d] needs function.name", idx, k);
        tc[k].name = name->valuestring;
        tc[k].id = cJSON_IsString(id) ? id->valuestring : NULL;
        if (cJSON_IsString(args)) tc[k].arguments = args->valuestring;
        else if (args && !cJSON_IsNull(args)) tc[k].arguments = dump(c, args); /* an object given as JSON */
        else tc[k].arguments = "{}";
        if (!tc[k].arguments) return -1;
    }
    m->tool_calls = tc;
    m->n_tool_calls = n;
    return 0;
}

static int oa_messages(ctx *c, const cJSON *arr)
{
    if (!cJSON_IsArray(arr) || !arr->child) return fail(c, 400, "messages", "'messages' must be a non-empty array");
    if (cJSON_GetArraySize(arr) > c->lim->max_messages)
        return fail(c, 413, "messages", "more than %d messages", c->lim->max_messages);
    int idx = 0;
    for (const cJSON *o = arr->child; o; o = o->next, idx++) {
        const cJSON *role = get(o, "role");
        if (!cJSON_IsObject(o) || !cJSON_IsString(role))
            return fail(c, 400, "messages", "messages[%d] needs a string 'role'", idx);
        static const struct { const char *name; chat_role role; } roles[] = {
            {"system", CHAT_ROLE_SYSTEM}, {"developer", CHAT_ROLE_DEVELOPER}, {"user", CHAT_ROLE_USER},
            {"assistant", CHAT_ROLE_ASSISTANT}, {"tool", CHAT_ROLE_TOOL}};
        int ri = -1;
        for (int i = 0; i < 5; i++)
            if (!strcmp(role->valuestring, roles[i].name)) ri = i;
        if (ri < 0) return fail(c, 400, "messages", "messages[%d]: unknown role '%.40s'", idx, role->valuestring);
        chat_msg *m = add_msg(c, roles[ri].role);
        if (!m) return -1;
        char what[48];
        snprintf(what, sizeof what, "messages[%d].content", idx);
        if (text_of(c, get(o, "content"), what, &m->content)) return -1;
        if (m->role == CHAT_ROLE_ASSISTANT) {
            m->reasoning_content = string(c, o, "reasoning_content", 0);
            if (c->e->status || oa_tool_calls(c, get(o, "tool_calls"), m, idx)) return -1;
            int prefix = 0;
            if (boolean(c, o, "prefix", &prefix)) return -1;
            if (prefix && o->next) return fail(c, 400, "messages", "only the last message may be a prefix");
            m->wo_eos = prefix;
        } else if (m->role == CHAT_ROLE_TOOL) {
            m->tool_call_id = string(c, o, "tool_call_id", 0);
            if (c->e->status) return -1;
        } else if (!m->content && m->role != CHAT_ROLE_SYSTEM) {
            return fail(c, 400, "messages", "messages[%d] has no content", idx);
        }
    }
    return 0;
}

/* tools + tool_choice -> the tools array to render (NULL: none). */
static int oa_tools(ctx *c, const cJSON *o, const char **tools_json, api_request *r)
{
    const cJSON *tools = get(o, "tools"), *choice = get(o, "tool_choice");
    *tools_json = NULL;
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) return fail(c, 400, "tools", "'tools' must be an array");
    const char *named = NULL;
    int demanded = 0;
    if (cJSON_IsString(choice)) {
        const char *s = choice->valuestring;
        if (!strcmp(s, "none")) return 0;
        if (strcmp(s, "auto") && strcmp(s, "required"))
            return fail(c, 400, "tool_choice", "'tool_choice' must be none, auto, required or a named function");
        demanded = !strcmp(s, "required");
    } else if (cJSON_IsObject(choice)) {
        const cJSON *n = get(get(choice, "function"), "name");
        if (!cJSON_IsString(n)) return fail(c, 400, "tool_choice", "'tool_choice' object needs function.name");
        named = n->valuestring;
        demanded = 1;
    } else if (choice && !cJSON_IsNull(choice)) {
        return fail(c, 400, "tool_choice", "'tool_choice' must be a string or an object");
    }
    cJSON *keepers = cJSON_CreateArray();
    if (!keepers) return fail(c, 500, NULL, "out of memory");
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *n = get(get(t, "function"), "name");
        if (!cJSON_IsString(n)) {
            cJSON_Delete(keepers);
            return fail(c, 400, "tools", "every tool needs function.name");
        }
        if (named && strcmp(named, n->valuestring)) continue;
        cJSON_AddItemReferenceToArray(keepers, (cJSON *)t);
    }
    if (named && !keepers->child) {
        cJSON_Delete(keepers);
        return fail(c, 400, "tool_choice", "'tool_choice' names a function that is not in 'tools'");
    }
    *tools_json = dump(c, keepers);
    int rc = *tools_json ? demand_call(c, demanded, keepers, r) : -1;
    cJSON_Delete(keepers);
    r->tools_given = 1;
    return rc;
}

static int oa_mode(ctx *c, const cJSON *o, chat_mode *mode)
{
    *mode = CHAT_NOTHINK;
    const cJSON *th = get(o, "thinking");
    if (th && !cJSON_IsNull(th)) {
        const cJSON *t = get(th, "type");
        if (!cJSON_IsString(t) || (strcmp(t->valuestring, "enabled") && strcmp(t->valuestring, "disabled")))
            return fail(c, 400, "thinking", "'thinking.type' must be \"enabled\" or \"disabled\"");
        if (!strcmp(t->valuestring, "enabled")) *mode = CHAT_THINK;
    }
    const cJSON *kw = get(o, "chat_template_kwargs");
    int on = 0;
    if (cJSON_IsObject(kw) && boolean(c, kw, "thinking", &on)) return -1;
    if (on) *mode = CHAT_THINK;
    const char *eff = string(c, o, "reasoning_effort", 0);
    if (c->e->status) return -1;
    if (eff) {
        if (!strcmp(eff, "max")) *mode = CHAT_THINK_MAX;
        else if (!strcmp(eff, "low") || !strcmp(eff, "medium") || !strcmp(eff, "high")) *mode = CHAT_THINK;
        else return fail(c, 400, "reasoning_effort", "'reasoning_effort' must be low, medium, high or max");
    }
    return 0;
}

/* response_format goes on the first system message (one is put first if
 * there is none). */
static int oa_format(ctx *c, const cJSON *o)
{
    const cJSON *rf = get(o, "response_format");
    if (!rf || cJSON_IsNull(rf)) return 0;
    const cJSON *t = get(rf, "type");
    if (!cJSON_IsString(t)) return fail(c, 400, "response_format", "'response_format.type' must be a string");
    if (!strcmp(t->valuestring, "text")) return 0;
    if (strcmp(t->valuestring, "json_object") && strcmp(t->valuestring, "json_schema"))
        return fail(c, 400, "response_format", "response_format type '%.40s' is not supported", t->valuestring);
    const char *js = dump(c, rf);
    if (!js) return -1;
    if (!c->n_msgs || c->msgs[0].role != CHAT_ROLE_SYSTEM) {
        if (!add_msg(c, CHAT_ROLE_SYSTEM)) return -1;
        memmove(c->msgs + 1, c->msgs, (size_t)(c->n_msgs - 1) * sizeof *c->msgs);
        memset(&c->msgs[0], 0, sizeof c->msgs[0]);
        c->msgs[0].role = CHAT_ROLE_SYSTEM;
    }
    c->msgs[0].response_format_json = js;
    return 0;
}

static int render(ctx *c, chat_mode mode, const char *tools_json, api_request *r)
{
    chat_opts opt = {0};
    opt.mode = mode;
    opt.tools_json = tools_json;
    if (chat_render(c->msgs, c->n_msgs, &opt, &r->prompt))
        return fail(c, 400, "messages", "%s", dsv4_last_error());
    size_t n = strlen(r->prompt), k = strlen(CHAT_TOK_THINK_START);
    r->thinking = n >= k && !memcmp(r->prompt + n - k, CHAT_TOK_THINK_START, k);
    return 0;
}

static int parse_chat(ctx *c, const cJSON *o, api_request *r)
{
    chat_mode mode;
    const char *tools_json;
    long long n = 1, top = 0;
    r->max_tokens = c->lim->max_tokens;
    if (sampling(c, o, r) || max_tokens(c, o, "max_tokens", r) || max_tokens(c, o, "max_completion_tokens", r) ||
        stops(c, o, "stop", r) || integer(c, o, "n", 1, 1, &n) || boolean(c, o, "logprobs", &r->logprobs) ||
        integer(c, o, "top_logprobs", 0, 20, &top) || oa_mode(c, o, &mode) || oa_messages(c, get(o, "messages")) ||
        oa_tools(c, o, &tools_json, r) || oa_format(c, o))
        return -1;
    if (top && !r->logprobs) return fail(c, 400, "top_logprobs", "'top_logprobs' needs 'logprobs': true");
    r->top_logprobs = (int)top;
    return render(c, mode, tools_json, r);
}

/* ---- OpenAI completions ---- */

static int parse_completions(ctx *c, const cJSON *o, api_request *r)
{
    long long n = 1, lp = -1;
    r->max_tokens = c->lim->max_tokens < 16 ? c->lim->max_tokens : 16; /* OpenAI's default */
    if (sampling(c, o, r) || max_tokens(c, o, "max_tokens", r) || stops(c, o, "stop", r) ||
        integer(c, o, "n", 1, 1, &n) || integer(c, o, "logprobs", 0, 20, &lp))
        return -1;
    if (get(o, "suffix") && !cJSON_IsNull(get(o, "suffix")))
        return fail(c, 400, "suffix", "'suffix' is not supported");
    int echo = 0;
    if (boolean(c, o, "echo", &echo)) return -1;
    if (echo) return fail(c, 400, "echo", "'echo' is not supported");
    r->logprobs = lp >= 0;
    r->top_logprobs = lp > 0 ? (int)lp : 0;
    const cJSON *p = get(o, "prompt");
    if (cJSON_IsArray(p) && cJSON_GetArraySize(p) == 1) p = p->child;
    if (!cJSON_IsString(p)) return fail(c, 400, "prompt", "'prompt' must be a string (or an array of one)");
    if (!(r->prompt = strdup(p->valuestring))) return fail(c, 500, NULL, "out of memory");
    r->add_bos = 1;
    return 0;
}

/* ---- Anthropic messages ---- */

static int an_blocks(ctx *c, const cJSON *content, chat_role role, int idx)
{
    if (cJSON_IsString(content)) {
        chat_msg *m = add_msg(c, role);
        if (!m) return -1;
        m->content = content->valuestring;
        return 0;
    }
    if (!cJSON_IsArray(content)) return fail(c, 400, "messages", "messages[%d].content must be a string or blocks", idx);
    tbuf text = {0}, reasoning = {0};
    int n_calls = 0, have_text = 0, have_reasoning = 0;
    chat_tool_call *tc = keep(c, calloc((size_t)cJSON_GetArraySize(content) + 1, sizeof *tc));
    if (!tc) return fail(c, 500, NULL, "out of memory");
    int bad = 0, k = 0;
    for (const cJSON *b = content->child; b && !bad; b = b->next, k++) {
        const cJSON *t = get(b, "type");
        const char *type = cJSON_IsString(t) ? t->valuestring : "";
        if (!strcmp(type, "text") && cJSON_IsString(get(b, "text"))) {
            tbuf_puts(&text, get(b, "text")->valuestring);
            have_text = 1;
        } else if (!strcmp(type, "thinking") && role == CHAT_ROLE_ASSISTANT && cJSON_IsString(get(b, "thinking"))) {
            tbuf_puts(&reasoning, get(b, "thinking")->valuestring);
            have_reasoning = 1;
        } else if (!strcmp(type, "redacted_thinking") && role == CHAT_ROLE_ASSISTANT) {
            /* opaque to us: nothing to render */
        } else if (!strcmp(type, "tool_use") && role == CHAT_ROLE_ASSISTANT && cJSON_IsString(get(b, "name")) &&
                   cJSON_IsObject(get(b, "input"))) {
            tc[n_calls].name = get(b, "name")->valuestring;
            tc[n_calls].id = cJSON_IsString(get(b, "id")) ? get(b, "id")->valuestring : NULL;
            if (!(tc[n_calls].arguments = dump(c, get(b, "input")))) bad = 1;
            n_calls++;
        } else if (!strcmp(type, "tool_result") && role == CHAT_ROLE_USER &&
                   cJSON_IsString(get(b, "tool_use_id"))) {
            chat_msg *m = add_msg(c, CHAT_ROLE_TOOL);
            if (!m) { bad = 1; break; }
            m->tool_call_id = get(b, "tool_use_id")->valuestring;
            char what[64];
            snprintf(what, sizeof what, "messages[%d].content[%d].content", idx, k);
            const cJSON *rc = get(b, "content");
            if (text_of(c, rc, what, &m->content)) bad = 1;
            else if (!m->content) m->content = "";
        } else {
            fail(c, 400, "messages", "messages[%d].content[%d]: unsupported or malformed '%.32s' block", idx, k,
                 type);
            bad = 1;
        }
    }
    char *tx = have_text ? keep(c, tbuf_take(&text)) : (tbuf_free(&text), NULL);
    char *rs = have_reasoning ? keep(c, tbuf_take(&reasoning)) : (tbuf_free(&reasoning), NULL);
    if (bad) return -1;
    if ((have_text && !tx) || (have_reasoning && !rs)) return fail(c, 500, NULL, "out of memory");
    if (role == CHAT_ROLE_ASSISTANT || have_text) {
        chat_msg *m = add_msg(c, role);
        if (!m) return -1;
        m->content = tx;
        m->reasoning_content = rs;
        m->tool_calls = n_calls ? tc : NULL;
        m->n_tool_calls = n_calls;
    }
    return 0;
}

static int an_tools(ctx *c, const cJSON *o, const char **tools_json, api_request *r)
{
    const cJSON *tools = get(o, "tools"), *choice = get(o, "tool_choice");
    *tools_json = NULL;
    if (!tools || cJSON_IsNull(tools)) return 0;
    if (!cJSON_IsArray(tools)) return fail(c, 400, "tools", "'tools' must be an array");
    const char *named = NULL;
    int demanded = 0;
    if (choice && !cJSON_IsNull(choice)) {
        const cJSON *t = get(choice, "type");
        if (!cJSON_IsString(t)) return fail(c, 400, "tool_choice", "'tool_choice.type' must be a string");
        if (!strcmp(t->valuestring, "none")) return 0;
        demanded = strcmp(t->valuestring, "auto") != 0;
        if (!strcmp(t->valuestring, "tool")) {
            if (!cJSON_IsString(get(choice, "name")))
                return fail(c, 400, "tool_choice", "'tool_choice' of type tool needs 'name'");
            named = get(choice, "name")->valuestring;
        } else if (strcmp(t->valuestring, "auto") && strcmp(t->valuestring, "any")) {
            return fail(c, 400, "tool_choice", "'tool_choice.type' must be auto, any, tool or none");
        }
    }
    /* Anthropic {name, description, input_schema} -> OpenAI function tools. */
    cJSON *arr = cJSON_CreateArray();
    if (!arr) return fail(c, 500, NULL, "out of memory");
    for (const cJSON *t = tools->child; t; t = t->next) {
        const cJSON *name = get(t, "name"), *desc = get(t, "description"), *schema = get(t, "input_schema");
        if (!cJSON_IsString(name) || (schema && !cJSON_IsObject(schema))) {
            cJSON_Delete(arr);
            return fail(c, 400, "tools", "every tool needs a 'name' and an object 'input_schema'");
        }
        if (named && strcmp(named, name->valuestring)) continue;
        cJSON *fn = cJSON_CreateObject(), *w = cJSON_CreateObject();
        if (!fn || !w) { cJSON_Delete(fn); cJSON_Delete(w); cJSON_Delete(arr); return fail(c, 500, NULL, "out of memory"); }
        cJSON_AddItemReferenceToObject(fn, "name", (cJSON *)name);
        if (cJSON_IsString(desc)) cJSON_AddItemReferenceToObject(fn, "description", (cJSON *)desc);
        if (schema) cJSON_AddItemReferenceToObject(fn, "parameters", (cJSON *)schema);
        cJSON_AddStringToObject(w, "type", "function");
        cJSON_AddItemToObject(w, "function", fn);
        cJSON_AddItemToArray(arr, w);
    }
    if (named && !arr->child) {
        cJSON_Delete(arr);
        return fail(c, 400, "tool_choice", "'tool_choice' names a tool that is not in 'tools'");
    }
    *tools_json = dump(c, arr);
    int rc = *tools_json ? demand_call(c, demanded, arr, r) : -1;
    cJSON_Delete(arr);
    r->tools_given = 1;
    return rc;
}

static int parse_messages(ctx *c, const cJSON *o, api_request *r)
{
    long long mt = -1;
    if (sampling(c, o, r) || integer(c, o, "max_tokens", 1, 1 << 30, &mt) || stops(c, o, "stop_sequences", r))
        return -1;
    if (mt < 0) return fail(c, 400, "max_tokens", "'max_tokens' is required");
    if (mt > c->lim->max_tokens)
        return fail(c, 400, "max_tokens", "'max_tokens' is %lld, more than this server's limit %d", mt,
                    c->lim->max_tokens);
    r->max_tokens = (int)mt;
    chat_mode mode = CHAT_NOTHINK;
    const cJSON *th = get(o, "thinking");
    if (th && !cJSON_IsNull(th)) {
        const cJSON *t = get(th, "type");
        if (!cJSON_IsString(t) || (strcmp(t->valuestring, "enabled") && strcmp(t->valuestring, "disabled")))
            return fail(c, 400, "thinking", "'thinking.type' must be \"enabled\" or \"disabled\"");
        if (!strcmp(t->valuestring, "enabled")) mode = CHAT_THINK;
    }
    const cJSON *sys = get(o, "system");
    if (sys && !cJSON_IsNull(sys)) {
        chat_msg *m = add_msg(c, CHAT_ROLE_SYSTEM);
        if (!m || text_of(c, sys, "system", &m->content)) return -1;
    }
    const cJSON *arr = get(o, "messages");
    if (!cJSON_IsArray(arr) || !arr->child) return fail(c, 400, "messages", "'messages' must be a non-empty array");
    if (cJSON_GetArraySize(arr) > c->lim->max_messages)
        return fail(c, 413, "messages", "more than %d messages", c->lim->max_messages);
    int idx = 0;
    for (const cJSON *m = arr->child; m; m = m->next, idx++) {
        const cJSON *role = get(m, "role");
        if (!cJSON_IsString(role) || (strcmp(role->valuestring, "user") && strcmp(role->valuestring, "assistant")))
            return fail(c, 400, "messages", "messages[%d].role must be user or assistant", idx);
        int is_user = !strcmp(role->valuestring, "user");
        if (an_blocks(c, get(m, "content"), is_user ? CHAT_ROLE_USER : CHAT_ROLE_ASSISTANT, idx)) return -1;
    }
    /* A trailing assistant message is a prefill the reply continues. */
    if (c->n_msgs && c->msgs[c->n_msgs - 1].role == CHAT_ROLE_ASSISTANT) c->msgs[c->n_msgs - 1].wo_eos = true;
    const char *tools_json;
    if (an_tools(c, o, &tools_json, r)) return -1;
    return render(c, mode, tools_json, r);
}

int api_parse(api_kind kind, const char *body, size_t len, const api_limits *lim, api_request *r, api_error *e)
{
    memset(r, 0, sizeof *r);
    memset(e, 0, sizeof *e);
    r->kind = kind;
    r->sp = sampling_default_params();
    ctx c = {.e = e, .lim = lim};
    cJSON *root = NULL;
    int rc = -1;
    if (chat_json_parse(body, len, "request body", &root)) {
        fail(&c, 400, NULL, "%s", dsv4_last_error());
    } else if (!cJSON_IsObject(root)) {
        fail(&c, 400, NULL, "the request body must be a JSON object");
    } else if (!depth(root, 1, lim->max_depth)) {
        fail(&c, 413, NULL, "the request body nests deeper than %d levels", lim->max_depth);
    } else {
        rc = kind == API_CHAT          ? parse_chat(&c, root, r)
             : kind == API_COMPLETIONS ? parse_completions(&c, root, r)
                                       : parse_messages(&c, root, r);
    }
    if (rc && !e->status) fail(&c, 400, NULL, "bad request");
    cJSON_Delete(root);
    for (int i = 0; i < c.n_pool; i++) free(c.pool[i]);
    free(c.pool);
    free(c.msgs);
    if (rc) api_request_free(r);
    return rc;
}

void api_request_free(api_request *r)
{
    for (int i = 0; i < r->n_stops; i++) free(r->stops[i]);
    free(r->stops);
    free(r->prompt);
    for (int i = 0; i < r->n_force; i++) free(r->force[i]);
    free(r->force);
    memset(r, 0, sizeof *r);
}

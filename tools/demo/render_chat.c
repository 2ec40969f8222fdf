/* render_chat: conversations -> prompt text through the engine's own chat
 * encoder (src/text/chat.c), so the demo model is trained on exactly the
 * bytes `dsv4 generate --chat` and `dsv4 chat` will show it.
 *
 * stdin: one JSON object per line,
 *   {"mode": "chat"|"thinking", "tools": [OpenAI tools] (optional),
 *    "messages": [OpenAI-style messages; assistant tool_calls as
 *                 {"id": .., "function": {"name": .., "arguments": "JSON text"}},
 *                 tool results as {"role": "tool", "tool_call_id": .., "content": ..}],
 *    "cuts": [k1, k2, ...]}
 * stdout: one JSON array per line: the rendering of messages[0..k) for every
 * k in cuts (the training data builder takes prompt/completion segments from
 * renderings of growing prefixes). A bad line is reported with its number
 * and the program exits 1.
 *
 * Build: make build/demo_render */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "text/chat.h"

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static int role_of(const char *r, chat_role *out)
{
    static const char *names[] = {"system", "developer", "user", "assistant", "tool", "latest_reminder"};
    for (int i = 0; r && i < 6; i++)
        if (!strcmp(r, names[i])) { *out = (chat_role)i; return 0; }
    return -1;
}

/* Fills msgs[] (strings point into the cJSON tree; calls are malloc'd). */
static int build(const cJSON *arr, chat_msg *msgs, int n)
{
    int i = 0;
    for (const cJSON *j = arr->child; j; j = j->next, i++) {
        if (role_of(jstr(j, "role"), &msgs[i].role)) return -1;
        msgs[i].content = jstr(j, "content");
        msgs[i].reasoning_content = jstr(j, "reasoning_content");
        msgs[i].tool_call_id = jstr(j, "tool_call_id");
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "tool_calls");
        int k = cJSON_IsArray(tc) ? cJSON_GetArraySize(tc) : 0;
        if (!k) continue;
        chat_tool_call *calls = calloc((size_t)k, sizeof *calls);
        if (!calls) return -1;
        int c = 0;
        for (const cJSON *t = tc->child; t; t = t->next, c++) {
            const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
            calls[c] = (chat_tool_call){jstr(t, "id"), jstr(fn, "name"), jstr(fn, "arguments")};
        }
        msgs[i].tool_calls = calls;
        msgs[i].n_tool_calls = k;
    }
    return i == n ? 0 : -1;
}

static int render_line(const char *line, cJSON *out)
{
    cJSON *c = cJSON_Parse(line);
    const cJSON *ms = cJSON_GetObjectItemCaseSensitive(c, "messages");
    const cJSON *cuts = cJSON_GetObjectItemCaseSensitive(c, "cuts");
    const char *mode = jstr(c, "mode");
    int n = cJSON_IsArray(ms) ? cJSON_GetArraySize(ms) : 0, rc = -1;
    chat_msg *msgs = n ? calloc((size_t)n, sizeof *msgs) : NULL;
    char *tools = NULL;
    if (!msgs || !cJSON_IsArray(cuts) || !mode || build(ms, msgs, n)) goto done;
    chat_opts o = {.mode = !strcmp(mode, "thinking") ? CHAT_THINK : CHAT_NOTHINK};
    const cJSON *tj = cJSON_GetObjectItemCaseSensitive(c, "tools");
    if (tj && !(tools = cJSON_PrintUnformatted(tj))) goto done;
    o.tools_json = tools;
    for (const cJSON *k = cuts->child; k; k = k->next) {
        int cut = cJSON_IsNumber(k) ? k->valueint : -1;
        char *text = NULL;
        if (cut < 1 || cut > n || chat_render(msgs, cut, &o, &text)) goto done;
        cJSON_AddItemToArray(out, cJSON_CreateString(text));
        free(text);
    }
    rc = 0;
done:
    for (int i = 0; msgs && i < n; i++) free((void *)msgs[i].tool_calls);
    free(msgs);
    free(tools);
    cJSON_Delete(c);
    return rc;
}

int main(void)
{
    char *line = NULL;
    size_t cap = 0;
    long lineno = 0;
    while (getline(&line, &cap, stdin) > 0) {
        lineno++;
        cJSON *out = cJSON_CreateArray();
        if (!out || render_line(line, out)) {
            fprintf(stderr, "demo_render: line %ld: bad conversation: %s\n", lineno, dsv4_last_error());
            return 1;
        }
        char *s = cJSON_PrintUnformatted(out);
        if (!s) return 1;
        puts(s);
        free(s);
        cJSON_Delete(out);
    }
    free(line);
    return 0;
}

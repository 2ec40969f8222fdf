/* Chat encoding against golden prompts made by DeepSeek-V4's reference
 * encoding_dsv4.py (tests/data/chat/gen_goldens.py over cases.json), plus
 * the Python-compatible JSON printing it depends on and bad-input cases. */
#include "test.h"
#include "text/chat.h"

#define DATA "tests/data/chat/"

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static chat_role role_of(const char *r)
{
    static const char *names[] = {"system", "developer", "user", "assistant", "tool",
                                  "latest_reminder"};
    for (int i = 0; i < 6; i++)
        if (!strcmp(r, names[i])) return (chat_role)i;
    return (chat_role)99;
}

/* Builds chat_msg[] from a case's OpenAI-style messages (strings point into
 * the cJSON tree). */
static chat_msg *build(const cJSON *msgs, int *n)
{
    *n = cJSON_GetArraySize(msgs);
    chat_msg *m = calloc((size_t)*n + 1, sizeof *m);
    int i = 0;
    for (const cJSON *j = msgs->child; j; j = j->next, i++) {
        m[i].role = role_of(jstr(j, "role"));
        m[i].content = jstr(j, "content");
        m[i].reasoning_content = jstr(j, "reasoning_content");
        m[i].tool_call_id = jstr(j, "tool_call_id");
        m[i].tools_json = jstr(j, "tools_json");
        m[i].response_format_json = jstr(j, "response_format_json");
        m[i].wo_eos = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(j, "wo_eos"));
        const cJSON *tc = cJSON_GetObjectItemCaseSensitive(j, "tool_calls");
        if (tc) {
            int k = cJSON_GetArraySize(tc), c = 0;
            chat_tool_call *calls = calloc((size_t)k, sizeof *calls);
            for (const cJSON *t = tc->child; t; t = t->next, c++) {
                const cJSON *fn = cJSON_GetObjectItemCaseSensitive(t, "function");
                calls[c].id = jstr(t, "id");
                calls[c].name = jstr(fn, "name");
                calls[c].arguments = jstr(fn, "arguments");
            }
            m[i].tool_calls = calls;
            m[i].n_tool_calls = k;
        }
    }
    return m;
}

static void free_msgs(chat_msg *m, int n)
{
    for (int i = 0; i < n; i++) free((void *)m[i].tool_calls);
    free(m);
}

static const cJSON *g_case;
static int g_cases_run;

static void check_golden(const char *name, const char *got, const char *variant)
{
    char path[256];
    snprintf(path, sizeof path, DATA "%s.txt", name);
    size_t len = 0;
    char *want = test_read_file(path, &len);
    CHECKF(want != NULL, "missing golden %s", path);
    if (!want || !got) { free(want); return; }
    size_t gl = strlen(got), i = 0;
    while (i < gl && i < len && got[i] == want[i]) i++;
    CHECKF(gl == len && i == len, "%s%s: differs at byte %zu (got %zu bytes, want %zu): got \"%.60s\" want \"%.60s\"",
           name, variant, i, gl, len, got + (i < gl ? i : gl), want + (i < len ? i : len));
    free(want);
}

static void run_case(void)
{
    const cJSON *c = g_case;
    const char *name = jstr(c, "name"), *mode = jstr(c, "mode");
    int n;
    chat_msg *m = build(cJSON_GetObjectItemCaseSensitive(c, "messages"), &n);
    chat_opts o = {0};
    o.mode = !strcmp(mode, "chat") ? CHAT_NOTHINK : !strcmp(mode, "thinking") ? CHAT_THINK : CHAT_THINK_MAX;
    o.keep_reasoning = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "drop_thinking"));
    o.no_bos = cJSON_IsFalse(cJSON_GetObjectItemCaseSensitive(c, "bos"));
    const cJSON *k = cJSON_GetObjectItemCaseSensitive(c, "n_context");
    o.n_context = k ? k->valueint : 0;
    char *out = NULL;
    dsv4_status st = chat_render(m, n, &o, &out);
    CHECKF(st == DSV4_OK, "%s: %s", name, dsv4_last_error());
    check_golden(name, out, "");
    free(out);
    /* The same tools given at the conversation level land in the same place. */
    if (n > 0 && m[0].role == CHAT_ROLE_SYSTEM && m[0].tools_json) {
        o.tools_json = m[0].tools_json;
        m[0].tools_json = NULL;
        st = chat_render(m, n, &o, &out);
        CHECKF(st == DSV4_OK, "%s (opts.tools_json): %s", name, dsv4_last_error());
        check_golden(name, out, " (opts.tools_json)");
        free(out);
    }
    free_msgs(m, n);
    g_cases_run++;
}

static void test_case_count(void)
{
    CHECKF(g_cases_run >= 25, "only %d golden cases ran", g_cases_run);
}

/* Expected strings are Python 3.11's json.dumps(json.loads(in), ensure_ascii=False). */
static void test_python_json_format(void)
{
    static const char *cases[][2] = {
        {"1e16", "1e+16"},
        {"1e15", "1000000000000000.0"},
        {"123456789012345678.0", "1.2345678901234568e+17"},
        {"0.0001", "0.0001"},
        {"0.00001", "1e-05"},
        {"1.5e300", "1.5e+300"},
        {"-1.25e-7", "-1.25e-07"},
        {"100", "100"},
        {"-0", "0"},
        {"2.50", "2.5"},
        {"1E2", "100.0"},
        {"0.1", "0.1"},
        {"1e400", "Infinity"},
        {"-1e400", "-Infinity"},
        {"5e-324", "5e-324"},
        {"1.7976931348623157e308", "1.7976931348623157e+308"},
        {"[1,{\"a\":\"\\u00e9\\u0001\\u007f\"}]", "[1, {\"a\": \"\xc3\xa9\\u0001\x7f\"}]"},
        {"{\"a\":1,\"b\":2,\"a\":3}", "{\"a\": 3, \"b\": 2}"},
        {"\"\\ud83d\\ude00\"", "\"\xf0\x9f\x98\x80\""},
        {" {\"k\" : [ true , false , null ] } ", "{\"k\": [true, false, null]}"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        cJSON *j = NULL;
        dsv4_status st = chat_json_parse(cases[i][0], strlen(cases[i][0]), "t", &j);
        CHECKF(st == DSV4_OK, "%s: %s", cases[i][0], dsv4_last_error());
        if (st) continue;
        tbuf b = {0};
        chat_json_dump(j, &b);
        CHECKF(b.p && !strcmp(b.p, cases[i][1]), "%s -> %s, want %s", cases[i][0], b.p, cases[i][1]);
        tbuf_free(&b);
        cJSON_Delete(j);
    }
}

/* Python's json.loads refuses these, so the encoder must too. */
static void test_json_refuses_non_python(void)
{
    static const char *bad[] = {"01", "1.", ".5", "+1", "[1,]", "{\"a\":1} x", "\"a\x01\"",
                                "\"\\u0000\"", "NaN", "", "[", "{\"a\"}", "-", "1e"};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        cJSON *j = NULL;
        dsv4_status st = chat_json_parse(bad[i], strlen(bad[i]), "args", &j);
        CHECKF(st == DSV4_ERR_FORMAT && !j, "accepted '%s'", bad[i]);
        CHECKF(strstr(dsv4_last_error(), "args") != NULL, "message lacks context: %s", dsv4_last_error());
        cJSON_Delete(j);
    }
}

static dsv4_status render1(const chat_msg *m, int n, const chat_opts *o, char **out)
{
    *out = NULL;
    return chat_render(m, n, o, out);
}

static void test_bad_input(void)
{
    char *out;
    chat_msg dev[] = {{.role = CHAT_ROLE_DEVELOPER, .content = ""}};
    CHECK(render1(dev, 1, NULL, &out) == DSV4_ERR_ARG && !out);
    CHECK(strstr(dsv4_last_error(), "message 0") != NULL);

    chat_msg badrole[] = {{.role = CHAT_ROLE_USER, .content = "a"}, {.role = (chat_role)42}};
    CHECK(render1(badrole, 2, NULL, &out) == DSV4_ERR_ARG && !out);
    CHECK(strstr(dsv4_last_error(), "message 1") != NULL);

    chat_msg tools_obj[] = {{.role = CHAT_ROLE_SYSTEM, .tools_json = "{\"a\": 1}"}};
    CHECK(render1(tools_obj, 1, NULL, &out) == DSV4_ERR_ARG && !out);
    chat_msg tools_nofn[] = {{.role = CHAT_ROLE_SYSTEM, .tools_json = "[{\"type\": \"function\"}]"}};
    CHECK(render1(tools_nofn, 1, NULL, &out) == DSV4_ERR_ARG && !out);
    chat_msg tools_bad[] = {{.role = CHAT_ROLE_SYSTEM, .tools_json = "[{\"function\": "}};
    CHECK(render1(tools_bad, 1, NULL, &out) == DSV4_ERR_FORMAT && !out);
    CHECK(strstr(dsv4_last_error(), "tools") != NULL);
    chat_msg rf_bad[] = {{.role = CHAT_ROLE_SYSTEM, .response_format_json = "{x}"}};
    CHECK(render1(rf_bad, 1, NULL, &out) == DSV4_ERR_FORMAT && !out);

    chat_tool_call arr = {"i", "f", "[1, 2]"};
    chat_msg args_arr[] = {{.role = CHAT_ROLE_USER, .content = "u"},
                           {.role = CHAT_ROLE_ASSISTANT, .tool_calls = &arr, .n_tool_calls = 1}};
    CHECK(render1(args_arr, 2, NULL, &out) == DSV4_ERR_ARG && !out);
    CHECK(strstr(dsv4_last_error(), "'f'") != NULL);
    chat_tool_call noname = {"i", NULL, "{}"};
    args_arr[1].tool_calls = &noname;
    CHECK(render1(args_arr, 2, NULL, &out) == DSV4_ERR_ARG && !out);
    args_arr[1].tool_calls = NULL;
    CHECK(render1(args_arr, 2, NULL, &out) == DSV4_ERR_ARG && !out);

    chat_opts o = {.n_context = 3};
    CHECK(render1(args_arr, 2, &o, &out) == DSV4_ERR_ARG && !out);
    o = (chat_opts){.mode = (chat_mode)7};
    CHECK(render1(args_arr, 2, &o, &out) == DSV4_ERR_ARG && !out);
}

/* Hand-checked facts of the format, independent of the goldens. */
static void test_shapes(void)
{
    char *out = NULL;
    CHECK(chat_render(NULL, 0, NULL, &out) == DSV4_OK && out && !strcmp(out, CHAT_TOK_BOS));
    free(out);
    chat_msg u[] = {{.role = CHAT_ROLE_USER, .content = "hi"}};
    chat_opts o = {.mode = CHAT_THINK};
    CHECK(chat_render(u, 1, &o, &out) == DSV4_OK);
    CHECK(out && !strcmp(out, CHAT_TOK_BOS CHAT_TOK_USER "hi" CHAT_TOK_ASSISTANT CHAT_TOK_THINK_START));
    free(out);
    o.mode = CHAT_NOTHINK;
    CHECK(chat_render(u, 1, &o, &out) == DSV4_OK);
    CHECK(out && !strcmp(out, CHAT_TOK_BOS CHAT_TOK_USER "hi" CHAT_TOK_ASSISTANT CHAT_TOK_THINK_END));
    free(out);
    /* Conversation tools without a system message: a new empty one first. */
    o.tools_json = "[{\"type\": \"function\", \"function\": {\"name\": \"f\"}}]";
    CHECK(chat_render(u, 1, &o, &out) == DSV4_OK);
    CHECK(out && !strncmp(out, CHAT_TOK_BOS "\n\n## Tools\n\n", strlen(CHAT_TOK_BOS) + 11));
    CHECK(out && strstr(out, "### Available Tool Schemas\n\n{\"name\": \"f\"}\n\nYou MUST") != NULL);
    free(out);
}

int main(void)
{
    char *text = test_read_file(DATA "cases.json", NULL);
    cJSON *cases = text ? cJSON_Parse(text) : NULL;
    if (!cases) printf("FAIL load_cases: cannot read " DATA "cases.json (run from the repo root)\n");
    for (const cJSON *c = cases ? cases->child : NULL; c; c = c->next) {
        char name[128];
        snprintf(name, sizeof name, "golden_%s", jstr(c, "name"));
        g_case = c;
        t_run(name, run_case);
    }
    RUN(test_case_count);
    RUN(test_python_json_format);
    RUN(test_json_refuses_non_python);
    RUN(test_bad_input);
    RUN(test_shapes);
    cJSON_Delete(cases);
    free(text);
    if (!cases) return 1;
    TEST_MAIN_END();
}

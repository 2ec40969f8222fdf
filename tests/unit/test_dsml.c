/* DSML tool-call parsing: agreement with DeepSeek-V4's reference parser on
 * tests/data/chat/dsml_cases.json (made by gen_dsml.py), render -> parse
 * round trips, every prefix of a valid completion (streaming), and random
 * damage that must never crash or read out of bounds. */
#include "test.h"
#include "text/chat.h"
#include "text/dsml.h"

#define DATA "tests/data/chat/"

static cJSON *g_cases;

static const char *jstr(const cJSON *o, const char *k)
{
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, k);
    return cJSON_IsString(v) ? v->valuestring : NULL;
}

static void test_reference_agreement(void)
{
    int n = 0;
    for (const cJSON *c = g_cases ? g_cases->child : NULL; c; c = c->next, n++) {
        const char *text = jstr(c, "text"), *note = jstr(c, "note");
        int thinking = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "thinking"));
        dsml_message m;
        CHECK(dsml_parse_message(text, strlen(text), thinking, &m) == DSV4_OK);
        const cJSON *ex = cJSON_GetObjectItemCaseSensitive(c, "expect");
        if (ex) {
            CHECKF(m.status == DSML_COMPLETE && m.saw_eos, "%s: status %d (%s at %zu)", note,
                   m.status, m.error, m.error_at);
            CHECKF(!strcmp(m.content, jstr(ex, "content")), "%s: content '%s'", note, m.content);
            CHECKF(!strcmp(m.reasoning, jstr(ex, "reasoning")), "%s: reasoning '%s'", note, m.reasoning);
            const cJSON *calls = cJSON_GetObjectItemCaseSensitive(ex, "calls");
            CHECKF(m.n_calls == cJSON_GetArraySize(calls), "%s: %d calls", note, m.n_calls);
            int i = 0;
            for (const cJSON *k = calls->child; k && i < m.n_calls; k = k->next, i++) {
                CHECKF(!strcmp(m.calls[i].name, cJSON_GetArrayItem(k, 0)->valuestring),
                       "%s: name %s", note, m.calls[i].name);
                CHECKF(!strcmp(m.calls[i].arguments, cJSON_GetArrayItem(k, 1)->valuestring),
                       "%s: arguments %s, want %s", note, m.calls[i].arguments,
                       cJSON_GetArrayItem(k, 1)->valuestring);
            }
        } else if (!strcmp(note, "missing EOS")) {
            /* Accepted on purpose: callers often stop at the EOS token and
             * never detokenize it; saw_eos tells them apart. */
            CHECK(m.status == DSML_COMPLETE && !m.saw_eos && !strcmp(m.content, text));
        } else {
            CHECKF(m.status == DSML_MALFORMED && m.error[0], "%s: status %d", note, m.status);
        }
        dsml_message_free(&m);
    }
    CHECKF(n >= 16, "only %d cases", n);
}

/* Every prefix of a well-formed completion is INCOMPLETE or COMPLETE, never
 * MALFORMED, and what it reports is a prefix of the final result. */
static void test_streaming_prefixes(void)
{
    for (const cJSON *c = g_cases ? g_cases->child : NULL; c; c = c->next) {
        if (!cJSON_GetObjectItemCaseSensitive(c, "expect")) continue;
        const char *text = jstr(c, "text"), *note = jstr(c, "note");
        int thinking = cJSON_IsTrue(cJSON_GetObjectItemCaseSensitive(c, "thinking"));
        size_t n = strlen(text);
        dsml_message fin;
        CHECK(dsml_parse_message(text, n, thinking, &fin) == DSV4_OK);
        for (size_t k = 0; k < n; k++) {
            char *pre = malloc(k ? k : 1); /* exact size so ASan sees overreads */
            memcpy(pre, text, k);
            dsml_message m;
            CHECK(dsml_parse_message(pre, k, thinking, &m) == DSV4_OK);
            CHECKF(m.status != DSML_MALFORMED, "%s: prefix %zu malformed: %s", note, k, m.error);
            CHECKF(!m.saw_eos, "%s: prefix %zu saw eos", note, k);
            CHECKF(m.n_calls <= fin.n_calls, "%s: prefix %zu has %d calls", note, k, m.n_calls);
            for (int i = 0; i < m.n_calls && i < fin.n_calls; i++)
                CHECKF(!strcmp(m.calls[i].arguments, fin.calls[i].arguments) &&
                       !strcmp(m.calls[i].name, fin.calls[i].name), "%s: prefix %zu call %d", note, k, i);
            CHECKF(!strncmp(fin.content, m.content, strlen(m.content)), "%s: prefix %zu content '%s'",
                   note, k, m.content);
            CHECKF(!strncmp(fin.reasoning, m.reasoning, strlen(m.reasoning)),
                   "%s: prefix %zu reasoning", note, k);
            dsml_message_free(&m);
            free(pre);
        }
        dsml_message_free(&fin);
    }
}

/* Render with our renderer, parse back: each call returns its name and its
 * arguments as Python's json.dumps prints them. */
static void test_round_trip(void)
{
    static const chat_tool_call calls[] = {
        {"1", "get_weather", "{\"city\":\"Paris\",\"days\":2,\"units\":{\"t\":\"C\"},\"ok\":true,\"x\":null}"},
        {"2", "search", "{ \"query\" : \"a \\\"quoted\\\" <tag> and \\\\ backslash\\nnewline\", \"top_k\": 1.50 }"},
        {"3", "noop", "{}"},
        {"4", "shell", "rm -rf / --no-preserve-root"},
        {"5", "uni", "{\"名前\": \"値 🙂\", \"list\": [1e3, -2, 0.1]}"},
    };
    static const char *want[] = {
        "{\"city\": \"Paris\", \"days\": 2, \"units\": {\"t\": \"C\"}, \"ok\": true, \"x\": null}",
        "{\"query\": \"a \\\"quoted\\\" <tag> and \\\\ backslash\\nnewline\", \"top_k\": 1.5}",
        "{}",
        "{\"arguments\": \"rm -rf / --no-preserve-root\"}",
        "{\"名前\": \"値 🙂\", \"list\": [1000.0, -2, 0.1]}",
    };
    int n = (int)(sizeof calls / sizeof calls[0]);
    for (int think = 0; think < 2; think++) {
        tbuf b = {0};
        tbuf_puts(&b, think ? "why</think>" : "");
        tbuf_puts(&b, "Calling tools.\n\n");
        CHECK(dsml_render_calls(calls, n, &b) == DSV4_OK);
        tbuf_puts(&b, DSML_EOS);
        dsml_message m;
        CHECK(dsml_parse_message(b.p, b.len, think, &m) == DSV4_OK);
        CHECKF(m.status == DSML_COMPLETE && m.saw_eos, "status %d: %s at %zu", m.status, m.error, m.error_at);
        CHECK(!strcmp(m.content, "Calling tools."));
        CHECK(!strcmp(m.reasoning, think ? "why" : ""));
        CHECK(m.n_calls == n);
        for (int i = 0; i < m.n_calls && i < n; i++) {
            CHECK(!strcmp(m.calls[i].name, calls[i].name));
            CHECKF(!strcmp(m.calls[i].arguments, want[i]), "call %d: %s", i, m.calls[i].arguments);
        }
        /* Parsing what we parsed and rendering again is a fixed point. */
        chat_tool_call again[8];
        for (int i = 0; i < m.n_calls && i < 8; i++)
            again[i] = (chat_tool_call){NULL, m.calls[i].name, m.calls[i].arguments};
        tbuf b2 = {0};
        tbuf_puts(&b2, think ? "why</think>" : "");
        tbuf_puts(&b2, "Calling tools.\n\n");
        CHECK(dsml_render_calls(again, m.n_calls < 8 ? m.n_calls : 8, &b2) == DSV4_OK);
        tbuf_puts(&b2, DSML_EOS);
        CHECK(b2.p && !strcmp(b.p, b2.p));
        tbuf_free(&b2);
        dsml_message_free(&m);
        tbuf_free(&b);
    }
}

static void expect_status(const char *text, int thinking, dsml_status want, int n_calls)
{
    dsml_message m;
    CHECK(dsml_parse_message(text, strlen(text), thinking, &m) == DSV4_OK);
    CHECKF(m.status == want && m.n_calls == n_calls, "'%s': status %d (%s), %d calls", text,
           m.status, m.error, m.n_calls);
    dsml_message_free(&m);
}

#define BLK "\n\n<" DSML_TOKEN "tool_calls>\n"
#define INV(n) "<" DSML_TOKEN "invoke name=\"" n "\">\n"
#define PAR(k, s, v) "<" DSML_TOKEN "parameter name=\"" k "\" string=\"" s "\">" v "</" DSML_TOKEN "parameter>\n"
#define INV_END "</" DSML_TOKEN "invoke>\n"
#define BLK_END "</" DSML_TOKEN "tool_calls>"

static void test_partial_and_malformed(void)
{
    /* Complete calls before a cut or a fault are still returned. */
    expect_status("a" BLK INV("f") PAR("x", "false", "1") INV_END INV("g") PAR("y", "true", "partial va"),
                  0, DSML_INCOMPLETE, 1);
    /* A name may still grow into name="g">\noops">\n, so this is only cut short... */
    expect_status("a" BLK INV("f") PAR("x", "false", "1") INV_END INV("g") "oops", 0, DSML_INCOMPLETE, 1);
    /* ...but nothing may come between an invoke's end and the next tag. */
    expect_status("a" BLK INV("f") PAR("x", "false", "1") INV_END "oops", 0, DSML_MALFORMED, 1);
    expect_status("a" BLK INV("f") PAR("x", "false", "not json") INV_END BLK_END DSML_EOS, 0,
                  DSML_MALFORMED, 0);
    expect_status("a" BLK INV("f") PAR("x", "false", "[1,2]") INV_END BLK_END DSML_EOS, 0,
                  DSML_COMPLETE, 1);
    expect_status("thinking still", 1, DSML_INCOMPLETE, 0);
    expect_status("", 0, DSML_COMPLETE, 0);
    expect_status("", 1, DSML_INCOMPLETE, 0);
    expect_status("text then half a marker\n\n<\xef\xbd\x9c", 0, DSML_INCOMPLETE, 0);
    expect_status("a" BLK INV("f") INV_END BLK_END DSML_EOS DSML_EOS, 0, DSML_MALFORMED, 1);
    expect_status("a" BLK INV("f") INV_END BLK_END "<\xef\xbd\x9c" "end", 0, DSML_INCOMPLETE, 1);
    /* A held-back partial marker is not part of the content yet. */
    dsml_message m;
    const char *t = "Hello\n\n<\xef\xbd\x9c" "DS";
    CHECK(dsml_parse_message(t, strlen(t), 0, &m) == DSV4_OK);
    CHECK(m.status == DSML_INCOMPLETE && !strcmp(m.content, "Hello"));
    dsml_message_free(&m);
    t = "reasoning</th";
    CHECK(dsml_parse_message(t, strlen(t), 1, &m) == DSV4_OK);
    CHECK(m.status == DSML_INCOMPLETE && !strcmp(m.reasoning, "reasoning") && !strcmp(m.content, ""));
    dsml_message_free(&m);
    CHECK(dsml_parse_message(NULL, 3, 0, &m) == DSV4_ERR_ARG);
}

/* Deterministic random damage: byte flips, cuts and splices of valid text,
 * and random bytes biased towards the markup's own characters. */
static void test_random_damage(void)
{
    uint64_t x = 0x9e3779b97f4a7c15ull;
    const char *alphabet[] = {"<", ">", "\n", "\"", "/", DSML_TOKEN, "invoke", "parameter", "tool_calls",
                              " name=\"", " string=\"true\">", " string=\"false\">", "</think>", DSML_EOS, "a", "{", "}"};
    int na = (int)(sizeof alphabet / sizeof alphabet[0]);
    int n_cases = cJSON_GetArraySize(g_cases);
    for (int it = 0; it < 20000; it++) {
        tbuf b = {0};
        x ^= x << 13; x ^= x >> 7; x ^= x << 17;
        if (it % 2 && n_cases) {
            const char *src = jstr(cJSON_GetArrayItem(g_cases, (int)(x % (uint64_t)n_cases)), "text");
            tbuf_puts(&b, src);
            for (int k = 0; k < 3 && b.len; k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                b.p[(x >> 8) % b.len] = (char)(x >> 32);
            }
        } else {
            int len = (int)(x % 40);
            for (int k = 0; k < len; k++) {
                x ^= x << 13; x ^= x >> 7; x ^= x << 17;
                tbuf_puts(&b, alphabet[x % (uint64_t)na]);
            }
        }
        size_t cut = b.len ? (size_t)((x >> 20) % (b.len + 1)) : 0;
        char *exact = malloc(cut ? cut : 1);
        if (cut) memcpy(exact, b.p, cut);
        dsml_message m;
        CHECK(dsml_parse_message(exact, cut, (int)(x & 1), &m) == DSV4_OK);
        CHECK(m.content && m.reasoning && m.error);
        dsml_message_free(&m);
        free(exact);
        tbuf_free(&b);
    }
}

/* dsml_render_opening is how the chat encoder's rendering of a reply that
 * calls that tool continues after the reply's text: the reply of an
 * assistant turn (its rendering after the generation prompt) is
 * [reasoning</think>]content + opening + the parameters. */
static void test_opening_is_the_encoders(void)
{
    static const chat_tool_call call = {"c1", "get_time", "{\"city\": \"Oslo\", \"n\": 2}"};
    for (int think = 0; think < 2; think++) {
        chat_msg m[2] = {{.role = CHAT_ROLE_USER, .content = "what time is it?"},
                         {.role = CHAT_ROLE_ASSISTANT, .content = "Let me look.", .reasoning_content = "Oslo.",
                          .tool_calls = &call, .n_tool_calls = 1}};
        chat_opts o = {.mode = think ? CHAT_THINK : CHAT_NOTHINK, .keep_reasoning = true};
        char *prompt = NULL, *full = NULL;
        CHECK(chat_render(m, 1, &o, &prompt) == DSV4_OK && chat_render(m, 2, &o, &full) == DSV4_OK);
        tbuf want = {0}, open = {0};
        if (think) tbuf_puts(&want, "Oslo." CHAT_TOK_THINK_END);
        tbuf_puts(&want, "Let me look.");
        dsml_render_opening("get_time", &open);
        tbuf_puts(&want, open.p);
        size_t n = strlen(prompt);
        CHECKF(!strncmp(full, prompt, n) && !strncmp(full + n, want.p, want.len), "think %d: reply '%s'", think,
               full + n);
        CHECK(strstr(open.p, "get_time\">\n") && !strncmp(open.p, DSML_CALLS_START, strlen(DSML_CALLS_START)));
        tbuf_free(&want);
        tbuf_free(&open);
        free(prompt);
        free(full);
    }
}

int main(void)
{
    char *text = test_read_file(DATA "dsml_cases.json", NULL);
    g_cases = text ? cJSON_Parse(text) : NULL;
    if (!g_cases) printf("FAIL load_cases: cannot read " DATA "dsml_cases.json (run from the repo root)\n");
    RUN(test_reference_agreement);
    RUN(test_streaming_prefixes);
    RUN(test_round_trip);
    RUN(test_partial_and_malformed);
    RUN(test_random_damage);
    RUN(test_opening_is_the_encoders);
    cJSON_Delete(g_cases);
    free(text);
    if (!g_cases) return 1;
    TEST_MAIN_END();
}

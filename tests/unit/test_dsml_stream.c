/* The streaming reader of assistant replies (text/dsml_stream.c): the
 * deltas it hands out for a reply cut into random pieces add up to the
 * parse of the whole reply, every intermediate state is a prefix of the
 * final one (nothing sent is ever taken back), no piece of a marker is
 * ever sent, and tool calls are announced by name then grow their
 * arguments in pieces. Also: tool calls written inside the reasoning are
 * recovered as calls. */
#include <stdint.h>

#include "test.h"
#include "text/dsml_stream.h"

#define T "\xEF\xBD\x9C" "DSML" "\xEF\xBD\x9C" /* ｜DSML｜ */

static const char k_reply[] =
    "Let me check the weather.</think>Sure: caf\xC3\xA9 \xE2\x9C\x93\n"
    "\n\n<" T "tool_calls>\n"
    "<" T "invoke name=\"get_weather\">\n"
    "<" T "parameter name=\"city\" string=\"true\">Paris</" T "parameter>\n"
    "<" T "parameter name=\"days\" string=\"false\">3</" T "parameter>\n"
    "</" T "invoke>\n"
    "<" T "invoke name=\"get_time\">\n"
    "<" T "parameter name=\"zone\" string=\"true\">CET</" T "parameter>\n"
    "</" T "invoke>\n"
    "</" T "tool_calls>";

static uint64_t rng = 12345;
static unsigned rnd(unsigned n)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng >> 33) % n;
}

/* Feeds text in random pieces (cut at UTF-8 character starts, as the
 * generation request's visible text is) and checks the deltas. */
static void stream_pieces(const char *text, int thinking, const char *want_r, const char *want_c, int want_calls,
                          char names[][32], char args[][64])
{
    size_t len = strlen(text);
    int pieces_seen = 0; /* updates that grew some call's arguments without completing it */
    for (int trial = 0; trial < 200; trial++) {
        dsml_stream s;
        dsml_stream_init(&s, thinking);
        char r[512] = "", c[512] = "", a[4][128] = {{0}};
        size_t nr = 0, nc = 0, na[4] = {0};
        int named = 0, complete = 0, ok = 1;
        for (size_t at = 0; at < len;) {
            size_t step = 1 + rnd(trial % 3 == 0 ? 4 : 24);
            at = at + step > len ? len : at + step;
            while (at < len && ((unsigned char)text[at] & 0xC0) == 0x80) at++;
            dsml_delta d;
            CHECK(dsml_stream_update(&s, text, at, at == len, &d) == DSV4_OK);
            memcpy(r + nr, d.reasoning, d.n_reasoning);
            nr += d.n_reasoning;
            memcpy(c + nc, d.content, d.n_content);
            nc += d.n_content;
            r[nr] = c[nc] = 0;
            /* what was sent is a prefix of the final answer: never a piece of a marker */
            if (strncmp(r, want_r, nr) || strncmp(c, want_c, nc)) ok = 0;
            for (int i = 0; i < d.n_calls; i++) {
                const dsml_call_delta *cd = &d.calls[i];
                int k = cd->index;
                if (k < 0 || k >= want_calls || k >= 4) { ok = 0; continue; }
                if (cd->name) {
                    CHECKF(k == named && !strcmp(cd->name, names[k]), "call %d announced as %s", k, cd->name);
                    named++;
                }
                CHECKF(k == complete, "call %d grew while call %d was open", k, complete);
                memcpy(a[k] + na[k], cd->arguments, cd->n_arguments);
                na[k] += cd->n_arguments;
                a[k][na[k]] = 0;
                if (strncmp(a[k], args[k], na[k])) ok = 0;
                if (cd->complete) {
                    CHECKF(!strcmp(a[k], args[k]), "call %d args %s", k, a[k]);
                    complete++;
                } else if (cd->n_arguments) {
                    pieces_seen++;
                }
            }
        }
        CHECKF(ok, "trial %d: a delta went beyond the final text (r='%s' c='%s')", trial, r, c);
        CHECKF(!strcmp(r, want_r), "trial %d: reasoning '%s'", trial, r);
        CHECKF(!strcmp(c, want_c), "trial %d: content '%s'", trial, c);
        CHECKF(named == want_calls && complete == want_calls, "trial %d: %d named, %d complete", trial, named,
               complete);
        dsml_stream_free(&s);
        if (t_failed_now) return;
    }
    CHECKF(!want_calls || pieces_seen > 0, "arguments never arrived in pieces");
}

static void test_stream_matches_whole_parse(void)
{
    char names[2][32] = {"get_weather", "get_time"};
    char args[2][64] = {"{\"city\": \"Paris\", \"days\": 3}", "{\"zone\": \"CET\"}"};
    stream_pieces(k_reply, 1, "Let me check the weather.", "Sure: caf\xC3\xA9 \xE2\x9C\x93\n", 2, names, args);
}

/* Blank lines at the end of the reply text could start the tool-call
 * block: they are held back until the text goes on, then sent. */
static void test_held_newlines_released(void)
{
    stream_pieces("one\n\ntwo\n\n<not a marker", 0, "", "one\n\ntwo\n\n<not a marker", 0, NULL, NULL);
}

static void test_calls_inside_reasoning_recovered(void)
{
    char names[1][32] = {"search"};
    char args[1][64] = {"{\"q\": \"x\"}"};
    stream_pieces("I should search.\n\n<" T "tool_calls>\n<" T "invoke name=\"search\">\n<" T
                  "parameter name=\"q\" string=\"true\">x</" T "parameter>\n</" T "invoke>\n</" T "tool_calls>",
                  1, "I should search.", "", 1, names, args);
}

int main(void)
{
    RUN(test_stream_matches_whole_parse);
    RUN(test_held_newlines_released);
    RUN(test_calls_inside_reasoning_recovered);
    TEST_MAIN_END();
}

/* Limits the library enforces whatever the caller asks (issue 8 #2/#3):
 * no path evaluates past max_position_embeddings, sizes from the caller are
 * refused before any arithmetic, and a refused call changes nothing. */
#include <stdint.h>

#include "dsv4.h"
#include "engine/session.h"
#include "test.h"
#include "test_state.h"

#define FX "tests/fixtures/tiny-mixed-f32"

static dsv4_model *g_m;

static void test_context_bound(void)
{
    int ctx = dsv4_model_max_positions(g_m);
    CHECK(ctx == 65536); /* the fixture's config */
    int32_t *tok = calloc((size_t)ctx + 1, sizeof *tok);
    dsv4_session *s = NULL, *t = NULL;
    CHECK(dsv4_session_new(g_m, &s) == DSV4_OK && dsv4_session_new(g_m, &t) == DSV4_OK);
    CHECK(dsv4_session_eval(s, tok, 3, NULL) == DSV4_OK);
    CHECK(dsv4_session_eval(s, tok, ctx - 2, NULL) == DSV4_ERR_ARG);
    CHECKF(strstr(dsv4_last_error(), "at position 3 pass the context of 65536"), "%s", dsv4_last_error());
    CHECK(dsv4_session_pos(s) == 3 && !dsv4_session_poisoned(s));
    CHECK(dsv4_session_eval(t, tok, ctx + 1, NULL) == DSV4_ERR_ARG && dsv4_session_pos(t) == 0);
    /* benchmarks' random fill: 2^60 positions is refused before any size is computed */
    CHECK(session_fill_random(t, (int64_t)1 << 60) == DSV4_ERR_ARG && dsv4_session_pos(t) == 0);
    /* a session at the end of its context takes no more tokens in a batch */
    CHECK(session_fill_random(t, ctx) == DSV4_OK && dsv4_session_pos(t) == ctx);
    dsv4_session *both[2] = {s, t};
    int32_t two[2] = {1, 2};
    size_t l0 = 0;
    unsigned char *before = image(s, &l0);
    CHECK(dsv4_decode_batch(g_m, both, two, 2, NULL, NULL) == DSV4_ERR_ARG);
    CHECKF(strstr(dsv4_last_error(), "lane 1: the session holds 65536 tokens, the whole context"), "%s", dsv4_last_error());
    size_t l1 = 0;
    unsigned char *after = image(s, &l1);
    CHECK(before && after && l0 == l1 && !memcmp(before, after, l0) && dsv4_session_pos(t) == ctx);
    CHECK(dsv4_session_eval(t, tok, 1, NULL) == DSV4_ERR_ARG);
    free(before);
    free(after);
    free(tok);
    dsv4_session_free(s);
    dsv4_session_free(t);
}

int main(void)
{
    dsv4_load_options o = {.device = "cpu", .n_threads = 2};
    if (dsv4_model_load(FX, &o, &g_m)) { printf("FAIL test_limits: %s\n", dsv4_last_error()); return 1; }
    RUN(test_context_bound);
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

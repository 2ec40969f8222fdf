/* Snapshots from bytes (dsv4_snapshot_from_data), as the server reads them
 * back from its state files: the image of a session, copied out and read
 * back, restores a session that continues bit-identically; images of the
 * wrong length or position are refused; the model identity tells two
 * checkpoints apart and is stable across loads. */
#include <stdint.h>

#include "dsv4.h"
#include "test.h"

#define FX "tests/fixtures/tiny-mixed-f32"
#define FX2 "tests/fixtures/tiny-chat"

static dsv4_model *load(const char *dir)
{
    dsv4_load_options o = {0};
    o.n_threads = 1;
    o.device = "cpu";
    dsv4_model *m = NULL;
    if (dsv4_model_load(dir, &o, &m)) printf("load %s: %s\n", dir, dsv4_last_error());
    return m;
}

static dsv4_model *g_m;

static void test_round_trip_continues_exactly(void)
{
    int vocab = dsv4_model_vocab(g_m);
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 37 + 11) % vocab;
    dsv4_session *a, *b;
    CHECK(dsv4_session_new(g_m, &a) == DSV4_OK && dsv4_session_new(g_m, &b) == DSV4_OK);
    float *la = malloc((size_t)vocab * sizeof *la), *lb = malloc((size_t)vocab * sizeof *lb);
    /* 23 tokens: open compressor windows, a wrapped ring (window 10 or so) */
    CHECK(dsv4_session_eval_last(a, toks, 23, NULL) == DSV4_OK);
    dsv4_snapshot *snap, *back;
    CHECK(dsv4_session_snapshot(a, &snap) == DSV4_OK);
    size_t len;
    const void *img = dsv4_snapshot_data(snap, &len);
    void *copy = malloc(len);
    memcpy(copy, img, len);
    CHECK(dsv4_snapshot_from_data(g_m, copy, len, &back) == DSV4_OK);
    CHECK(dsv4_snapshot_pos(back) == 23);
    CHECK(dsv4_session_restore(b, back) == DSV4_OK);
    CHECK(dsv4_session_eval_last(a, toks + 23, 17, la) == DSV4_OK);
    CHECK(dsv4_session_eval_last(b, toks + 23, 17, lb) == DSV4_OK);
    CHECKF(!memcmp(la, lb, (size_t)vocab * sizeof *la), "logits differ after a restore from bytes");
    /* wrong lengths and positions */
    dsv4_snapshot *bad = (dsv4_snapshot *)1;
    CHECK(dsv4_snapshot_from_data(g_m, copy, len - 1, &bad) == DSV4_ERR_FORMAT && !bad);
    CHECK(dsv4_snapshot_from_data(g_m, copy, 4, &bad) == DSV4_ERR_FORMAT);
    int64_t pos = 22;
    memcpy(copy, &pos, sizeof pos); /* the length of 23 positions does not fit 22 */
    CHECK(dsv4_snapshot_from_data(g_m, copy, len, &bad) == DSV4_ERR_FORMAT);
    CHECKF(strstr(dsv4_last_error(), "position 22") != NULL, "%s", dsv4_last_error());
    pos = -1;
    memcpy(copy, &pos, sizeof pos);
    CHECK(dsv4_snapshot_from_data(g_m, copy, len, &bad) == DSV4_ERR_FORMAT);
    pos = 0; /* position 0: only the position field */
    CHECK(dsv4_snapshot_from_data(g_m, &pos, sizeof pos, &bad) == DSV4_OK && dsv4_snapshot_pos(bad) == 0);
    dsv4_snapshot_free(bad);
    free(copy);
    free(la);
    free(lb);
    dsv4_snapshot_free(snap);
    dsv4_snapshot_free(back);
    dsv4_session_free(a);
    dsv4_session_free(b);
}

static void test_identity(void)
{
    dsv4_model *again = load(FX), *other = load(FX2);
    CHECK(again && other);
    if (!again || !other) return;
    CHECK(dsv4_model_identity(again) == dsv4_model_identity(g_m));
    CHECK(dsv4_model_identity(other) != dsv4_model_identity(g_m));
    dsv4_model_free(again);
    dsv4_model_free(other);
}

int main(void)
{
    g_m = load(FX);
    if (!g_m) { printf("FAIL test_snapshot_data: cannot load %s\n", FX); return 1; }
    RUN(test_round_trip_continues_exactly);
    RUN(test_identity);
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

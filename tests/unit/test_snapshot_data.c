/* Snapshots from bytes (dsv4_snapshot_from_data), as the server reads them
 * back from its state files: the image of a session, copied out and read
 * back, restores a session that continues bit-identically; images of the
 * wrong length or position are refused; with an MTP head the image
 * carries the head's own position and window (read back the same way); the
 * model identity tells two checkpoints apart, and the two cache modes of
 * one, and is stable across loads. All in both cache modes: the official
 * one's images hold the packed rows, and a session's growing part costs
 * exactly the packed bytes per token that dsv4 info reports. */
#include <stdint.h>

#include "dsv4.h"
#include "model/model.h"
#include "test.h"

#define FX "tests/fixtures/tiny-mixed-f32"
#define FX2 "tests/fixtures/tiny-chat"
#define FX_MTP "tests/fixtures/tiny-mtp-f32"

static dsv4_cache_mode g_cache; /* of the models load() makes */

static dsv4_model *load(const char *dir)
{
    dsv4_load_options o = {0};
    o.n_threads = 1;
    o.device = "cpu";
    o.cache = g_cache;
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

/* n model tokens, then MTP rows for the first n_mtp of them (row i reads the
 * streams of position i and token i+1). */
static dsv4_status feed_mtp(dsv4_model *m, dsv4_session *s, const int32_t *t, int n, int n_mtp, float *logits)
{
    float *h = malloc((size_t)n * dsv4_model_hidden_size(m) * sizeof *h);
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .hidden = h};
    dsv4_status st = h ? dsv4_step(m, &ln, 1, NULL) : DSV4_ERR_NOMEM;
    dsv4_lane mt = {.session = s, .tokens = t + 1, .n_tokens = n_mtp, .mtp_in = h,
                    .logits_mode = logits ? DSV4_LOGITS_LAST : DSV4_LOGITS_NONE, .logits = logits};
    if (!st) st = dsv4_step(m, &mt, 1, NULL);
    free(h);
    return st;
}

static void test_mtp_image(void)
{
    dsv4_model *m = load(FX_MTP);
    CHECK(m && dsv4_model_has_mtp(m));
    if (!m) return;
    int vocab = dsv4_model_vocab(m);
    int32_t toks[40];
    for (int i = 0; i < 40; i++) toks[i] = (i * 29 + 5) % vocab;
    dsv4_session *a, *b;
    CHECK(dsv4_session_new(m, &a) == DSV4_OK && dsv4_session_new(m, &b) == DSV4_OK);
    float *la = malloc((size_t)vocab * sizeof *la), *lb = malloc((size_t)vocab * sizeof *lb);
    /* 23 tokens, 14 MTP rows: the MTP ring (window 10) wraps too */
    CHECK(feed_mtp(m, a, toks, 23, 14, NULL) == DSV4_OK && dsv4_session_mtp_pos(a) == 14);
    dsv4_snapshot *snap, *back = NULL, *bad = NULL;
    CHECK(dsv4_session_snapshot(a, &snap) == DSV4_OK);
    size_t len;
    const void *img = dsv4_snapshot_data(snap, &len);
    unsigned char *copy = malloc(len);
    memcpy(copy, img, len);
    CHECK(dsv4_snapshot_from_data(m, copy, len, &back) == DSV4_OK && back && dsv4_snapshot_pos(back) == 23);
    CHECK(back && dsv4_session_restore(b, back) == DSV4_OK && dsv4_session_mtp_pos(b) == 14 &&
          dsv4_session_pos(b) == 23);
    /* both continue the same: 17 more tokens, then 16 MTP rows (their logits
     * read the restored MTP window and streams from the restored layers) */
    CHECK(feed_mtp(m, a, toks + 23, 17, 16, la) == DSV4_OK && feed_mtp(m, b, toks + 23, 17, 16, lb) == DSV4_OK);
    CHECKF(!memcmp(la, lb, (size_t)vocab * sizeof *la), "MTP logits differ after a restore from bytes");
    /* the MTP position lies after the main layers' regions: the last 8 bytes
     * before the MTP ring rows, which the owed rows follow (their count, then
     * 9 tokens and streams: positions 14 .. 22); out of range or inconsistent
     * with the length */
    int64_t mp, n_owed;
    size_t owed = sizeof n_owed + (size_t)9 * (sizeof(int32_t) + (size_t)dsv4_model_hidden_size(m) * sizeof(float));
    size_t at = len - owed - (size_t)9 * (size_t)m->layout.kv.bytes - sizeof mp; /* 9 ring rows */
    memcpy(&n_owed, copy + len - owed, sizeof n_owed);
    CHECKF(n_owed == 9, "owed MTP row count reads %lld", (long long)n_owed);
    memcpy(&mp, copy + at, sizeof mp);
    CHECKF(mp == 14, "MTP position field at %zu reads %lld (head_dim or window of the fixture changed?)", at,
           (long long)mp);
    mp = -3;
    memcpy(copy + at, &mp, sizeof mp);
    CHECK(dsv4_snapshot_from_data(m, copy, len, &bad) == DSV4_ERR_FORMAT && !bad);
    CHECKF(strstr(dsv4_last_error(), "MTP position -3") != NULL, "%s", dsv4_last_error());
    mp = 3; /* 3 ring rows, not 9: the length does not fit */
    memcpy(copy + at, &mp, sizeof mp);
    CHECK(dsv4_snapshot_from_data(m, copy, len, &bad) == DSV4_ERR_FORMAT && !bad);
    CHECK(dsv4_snapshot_from_data(m, copy, at + 4, &bad) == DSV4_ERR_FORMAT && !bad);
    free(copy);
    free(la);
    free(lb);
    dsv4_snapshot_free(snap);
    dsv4_snapshot_free(back);
    dsv4_session_free(a);
    dsv4_session_free(b);
    dsv4_model_free(m);
}

static void test_identity(void)
{
    dsv4_model *again = load(FX), *other = load(FX2);
    g_cache = DSV4_CACHE_OFFICIAL;
    dsv4_model *official = load(FX);
    g_cache = DSV4_CACHE_AUTO;
    CHECK(again && other && official);
    if (!again || !other || !official) return;
    CHECK(dsv4_model_identity(again) == dsv4_model_identity(g_m));
    CHECK(dsv4_model_identity(other) != dsv4_model_identity(g_m));
    CHECK(dsv4_model_identity(official) != dsv4_model_identity(g_m)); /* other numerics, other layout */
    dsv4_model_free(again);
    dsv4_model_free(other);
    dsv4_model_free(official);
}

/* Image bytes of a session of model m after n tokens. */
static size_t image_len(dsv4_model *m, const int32_t *t, int n)
{
    dsv4_session *s = NULL;
    dsv4_snapshot *sn = NULL;
    size_t len = 0;
    if (dsv4_session_new(m, &s) == DSV4_OK && dsv4_session_eval_last(s, t, n, NULL) == DSV4_OK &&
        dsv4_session_snapshot(s, &sn) == DSV4_OK)
        dsv4_snapshot_data(sn, &len);
    dsv4_snapshot_free(sn);
    dsv4_session_free(s);
    return len;
}

/* What a real session stores per token is what the layout and dsv4 info
 * say: between two positions where every window is closed (multiples of
 * both ratios, past the window), the image grows by exactly
 * bytes_per_token per token — the packed figure in the official mode
 * (tiny-fp8-official: (168 + 17) / 4 + 168 / 128 B, FP8 rows of 128 values
 * with 32 rope dims, FP4 keys of 32), 4 B a value in the exact one. */
static void test_bytes_per_token(void)
{
    static const dsv4_cache_mode modes[] = {DSV4_CACHE_EXACT, DSV4_CACHE_OFFICIAL};
    static const double want[] = {(4.0 * 128 + 4.0 * 32) / 4 + 4.0 * 128 / 128, (168.0 + 17) / 4 + 168.0 / 128};
    for (int k = 0; k < 2; k++) {
        g_cache = modes[k];
        dsv4_model *m = load("tests/fixtures/tiny-fp8-official");
        g_cache = DSV4_CACHE_AUTO;
        CHECK(m != NULL);
        if (!m) return;
        CHECK(dsv4_model_cache_mode(m) == modes[k]);
        dsv4_memory_info mi;
        dsv4_model_memory(m, &mi);
        CHECKF(mi.bytes_per_token == want[k], "mode %d: %g bytes per token, want %g", k, mi.bytes_per_token, want[k]);
        int32_t t[384];
        for (int i = 0; i < 384; i++) t[i] = (int32_t)((i * 37 + 11) % dsv4_model_vocab(m));
        size_t a = image_len(m, t, 128), b = image_len(m, t, 384);
        CHECKF(a && b && (double)(b - a) == 256 * mi.bytes_per_token,
               "mode %d: the image grows by %zu bytes over 256 tokens, the layout says %g", k, b - a,
               256 * mi.bytes_per_token);
        dsv4_model_free(m);
    }
}

static void test_official_round_trip(void)
{
    dsv4_model *exact = g_m;
    g_cache = DSV4_CACHE_OFFICIAL;
    g_m = load(FX);
    CHECK(g_m && g_m->layout.kv.kind == ROW_FP8);
    if (g_m) {
        test_round_trip_continues_exactly();
        test_mtp_image();
        dsv4_model_free(g_m);
    }
    g_cache = DSV4_CACHE_AUTO;
    g_m = exact;
}

int main(void)
{
    g_m = load(FX);
    if (!g_m) { printf("FAIL test_snapshot_data: cannot load %s\n", FX); return 1; }
    RUN(test_round_trip_continues_exactly);
    RUN(test_mtp_image);
    RUN(test_identity);
    RUN(test_bytes_per_token);
    RUN(test_official_round_trip);
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

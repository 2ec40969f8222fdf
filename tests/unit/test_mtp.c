/* The MTP head (spec §5.2) against the composed transformers oracle
 * (tools/oracle/mtp.py): logits at every position within 1e-3; its rows are
 * bit-identical however they are chunked and batched; its window is part of
 * the session snapshot; the same head read from a GGUF file (llama.cpp's
 * nextn tensors) gives the same bits. */
#include <stdint.h>

#include "base/ggml_quant.h"
#include "dsv4.h"
#include "io/gguf_write.h"
#include "model/catalog.h"
#include "model/config_gguf.h"
#include "model/names_gguf.h"
#include "test.h"
#include "test_tmpdir.h"

#define FX "tests/fixtures/tiny-mtp-f32"

static dsv4_model *g_m;
static int V, HS, N;
static int32_t g_tok[1024];

static int read_tokens(const char *path)
{
    char *t = test_read_file(path, NULL);
    if (!t) return 0;
    int n = 0;
    for (char *p = t; *p && n < 1024;) {
        g_tok[n++] = (int32_t)strtol(p, &p, 10);
        while (*p == ',' || *p == '\n') p++;
    }
    free(t);
    return n;
}

/* The model's streams of every position (what MTP row i reads). */
static float *model_hidden(dsv4_model *m, dsv4_session *s, const int32_t *t, int n)
{
    float *h = malloc((size_t)n * HS * sizeof *h);
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .hidden = h};
    if (dsv4_step(m, &ln, 1, NULL)) { free(h); return NULL; }
    return h;
}

static dsv4_status mtp_rows(dsv4_model *m, dsv4_session *s, const float *h, const int32_t *t, int n, float *logits,
                            float *hid)
{
    dsv4_lane ln = {.session = s, .tokens = t, .n_tokens = n, .logits_mode = logits ? DSV4_LOGITS_ALL : DSV4_LOGITS_NONE,
                    .logits = logits, .hidden = hid, .mtp_in = h};
    return dsv4_step(m, &ln, 1, NULL);
}

static void test_mtp_matches_oracle(void)
{
    CHECK(dsv4_model_has_mtp(g_m));
    size_t len = 0;
    float *ref = (float *)test_read_file(FX "/mtp_logits.f32", &len);
    CHECKF(ref && len == (size_t)(N - 1) * V * sizeof(float), "mtp_logits.f32 has %zu bytes", len);
    if (!ref || len != (size_t)(N - 1) * V * sizeof(float)) { free(ref); return; }
    dsv4_session *s = NULL;
    CHECK(dsv4_session_new(g_m, &s) == DSV4_OK);
    float *h = model_hidden(g_m, s, g_tok, N);
    float *got = malloc((size_t)(N - 1) * V * sizeof *got);
    CHECK(h && mtp_rows(g_m, s, h, g_tok + 1, N - 1, got, NULL) == DSV4_OK);
    CHECK(dsv4_session_mtp_pos(s) == N - 1 && dsv4_session_pos(s) == N);
    double worst = 0, scale = 0;
    for (size_t i = 0; i < (size_t)(N - 1) * V; i++) {
        double d = fabs((double)got[i] - ref[i]);
        if (d > worst) worst = d;
        if (fabs(ref[i]) > scale) scale = fabs(ref[i]);
    }
    printf("  %s: MTP logits max |diff| %.2e over %d x %d (max |logit| %.2f)\n", FX, worst, N - 1, V, scale);
    CHECK(worst <= 1e-3 && scale > 0.5);
    dsv4_session_free(s);
    free(h); free(got); free(ref);
}

/* MTP rows chunked 1 / 7 / all and batched with a model lane give the same
 * bits, and the MTP window is in the snapshot (restore brings it back). */
static void test_mtp_chunking_and_snapshot(void)
{
    dsv4_session *a = NULL, *b = NULL;
    CHECK(dsv4_session_new(g_m, &a) == DSV4_OK && dsv4_session_new(g_m, &b) == DSV4_OK);
    float *h = model_hidden(g_m, a, g_tok, N);
    dsv4_session_reset(a);
    size_t sz = (size_t)(N - 1) * V;
    float *ref = malloc(sz * sizeof *ref), *got = malloc(sz * sizeof *got);
    float *href = malloc((size_t)(N - 1) * HS * sizeof *href), *hgot = malloc((size_t)(N - 1) * HS * sizeof *hgot);
    float *h2 = model_hidden(g_m, a, g_tok, N);
    CHECK(h && h2 && !memcmp(h, h2, (size_t)N * HS * sizeof *h));
    CHECK(mtp_rows(g_m, a, h, g_tok + 1, N - 1, ref, href) == DSV4_OK);
    static const int chunks[] = {1, 7};
    for (int c = 0; c < 2; c++) {
        dsv4_session_reset(b);
        float *hb = model_hidden(g_m, b, g_tok, N);
        for (int i = 0; i < N - 1; i += chunks[c]) {
            int k = N - 1 - i < chunks[c] ? N - 1 - i : chunks[c];
            CHECK(mtp_rows(g_m, b, h + (size_t)i * HS, g_tok + 1 + i, k, got + (size_t)i * V, hgot + (size_t)i * HS) ==
                  DSV4_OK);
        }
        CHECKF(!memcmp(ref, got, sz * sizeof *ref), "MTP chunk %d changes logits", chunks[c]);
        CHECKF(!memcmp(href, hgot, (size_t)(N - 1) * HS * sizeof *href), "MTP chunk %d changes streams", chunks[c]);
        dsv4_snapshot *sa = NULL, *sb = NULL;
        CHECK(dsv4_session_snapshot(a, &sa) == DSV4_OK && dsv4_session_snapshot(b, &sb) == DSV4_OK);
        size_t la, lb;
        const void *da = dsv4_snapshot_data(sa, &la), *db = dsv4_snapshot_data(sb, &lb);
        CHECK(la == lb && !memcmp(da, db, la));
        dsv4_snapshot_free(sa);
        dsv4_snapshot_free(sb);
        free(hb);
    }
    /* a snapshot taken before the MTP rows differs from after, and restoring it
     * rewinds the MTP: the same rows then give the same logits again */
    dsv4_session *c = NULL;
    CHECK(dsv4_session_new(g_m, &c) == DSV4_OK);
    float *hc = model_hidden(g_m, c, g_tok, N);
    CHECK(mtp_rows(g_m, c, h, g_tok + 1, 20, NULL, NULL) == DSV4_OK);
    dsv4_snapshot *mid = NULL, *end = NULL;
    CHECK(dsv4_session_snapshot(c, &mid) == DSV4_OK);
    CHECK(mtp_rows(g_m, c, h + (size_t)20 * HS, g_tok + 21, N - 21, got, NULL) == DSV4_OK);
    CHECK(!memcmp(got, ref + (size_t)20 * V, (size_t)(N - 21) * V * sizeof *got));
    CHECK(dsv4_session_snapshot(c, &end) == DSV4_OK);
    size_t lm, le;
    const void *dm = dsv4_snapshot_data(mid, &lm), *de = dsv4_snapshot_data(end, &le);
    CHECK(lm != le || memcmp(dm, de, lm));
    CHECK(dsv4_session_restore(c, mid) == DSV4_OK && dsv4_session_mtp_pos(c) == 20);
    CHECK(mtp_rows(g_m, c, h + (size_t)20 * HS, g_tok + 21, N - 21, got, NULL) == DSV4_OK);
    CHECK(!memcmp(got, ref + (size_t)20 * V, (size_t)(N - 21) * V * sizeof *got));
    dsv4_snapshot_free(mid);
    dsv4_snapshot_free(end);
    dsv4_session_free(a); dsv4_session_free(b); dsv4_session_free(c);
    free(h); free(h2); free(hc); free(ref); free(got); free(href); free(hgot);
}

/* One tensor of the GGUF copy: n parts of `bytes` each, laid end to end. */
typedef struct { uint64_t off; const void *part[64]; int n; size_t bytes; } gg_rec;

static void gg_put(gguf_writer *w, gg_rec *r, int *n, const char *pre, const char *name, int layers, int nd,
                   const int64_t *ne, uint32_t type, const void *const *parts, int n_parts, size_t bytes)
{
    char full[160];
    CHECKF(gguf_spelling(pre, name, layers, full, sizeof full), "no GGUF name for %s%s", pre, name);
    r[*n].off = gw_tensor(w, full, nd, ne, type, bytes * (size_t)n_parts);
    r[*n].n = n_parts;
    r[*n].bytes = bytes;
    for (int i = 0; i < n_parts; i++) r[*n].part[i] = parts[i];
    (*n)++;
}

/* The fixture (loaded on the CPU: host views) written the way llama.cpp's
 * converter lays DeepSeek-V4 out: deepseek4 metadata, every bound tensor
 * under its GGUF name, experts merged per layer, the MTP head as block
 * n_layers with its nextn.* tensors. 0 on success. */
static int write_gguf_copy(dsv4_model *m, const char *path)
{
    const dsv4_config *cf = &m->cfg;
    static gg_rec rec[1024];
    int n = 0;
    gguf_writer w = {0};
    if (config_to_gguf(cf, cf->n_mtp, &w)) return -1;
    for (int l = -1; l <= cf->n_layers; l++) { /* -1: the top-level and MTP-head tensors */
        char pre[32];
        if (l == cf->n_layers) snprintf(pre, sizeof pre, "mtp.0.");
        else snprintf(pre, sizeof pre, "layers.%d.", l);
        for (int i = 0; i < k_catalog_count; i++) {
            const cat_tensor *t = &k_catalog[i];
            if ((l < 0) == catalog_per_layer(t) || (l >= 0 && !catalog_present(cf, l, t))) continue;
            const dsv4_mat *v = catalog_slot(m, l < 0 ? 0 : l, t);
            if (!v->data) continue;
            int64_t ne[2] = {v->cols, v->rows};
            gg_put(&w, rec, &n, l >= 0 ? pre : t->where != CAT_TOP ? "mtp.0." : "", t->name[0], cf->n_layers,
                   t->d1 == DM_NONE ? 1 : 2, ne, wformat_ggml_type(v->fmt), &v->data, 1, (size_t)wmat_bytes(v));
        }
        if (l < 0) continue;
        const dsv4_layer_w *lw = &m->layers[l];
        if (lw->tid2eid) {
            int64_t ne[2] = {cf->n_active, cf->vocab};
            const void *p = lw->tid2eid;
            gg_put(&w, rec, &n, pre, "ffn.gate.tid2eid", cf->n_layers, 2, ne, GGML_I32, &p, 1,
                   (size_t)cf->vocab * cf->n_active * 4);
        }
        static const char *const merged[3] = {GGUF_EXPERTS_GATE, GGUF_EXPERTS_UP, GGUF_EXPERTS_DOWN};
        const dsv4_mat *ex[3] = {lw->w1, lw->w3, lw->w2};
        for (int k = 0; k < 3; k++) {
            const void *parts[64];
            for (int e = 0; e < cf->n_experts; e++) parts[e] = ex[k][e].data;
            int64_t ne[3] = {ex[k][0].cols, ex[k][0].rows, cf->n_experts};
            gg_put(&w, rec, &n, pre, merged[k], cf->n_layers, 3, ne, wformat_ggml_type(ex[k][0].fmt), parts,
                   cf->n_experts, (size_t)wmat_bytes(&ex[k][0]));
        }
    }
    void *img;
    size_t len;
    uint8_t *data;
    if (gw_finish(&w, &img, &len, &data)) return -1;
    for (int i = 0; i < n; i++)
        for (int k = 0; k < rec[i].n; k++) memcpy(data + rec[i].off + k * rec[i].bytes, rec[i].part[k], rec[i].bytes);
    FILE *f = fopen(path, "wb");
    int bad = !f || fwrite(img, 1, len, f) != len;
    if (f) bad |= fclose(f) != 0;
    free(img);
    return bad ? -1 : 0;
}

/* GGUF's MTP head (blk.N.nextn.e_proj/h_proj/enorm/hnorm/shared_head_norm/
 * hc_head_*, its block blk.N.*) binds to the engine's MTP, every tensor of
 * the file bound: the copy of the fixture gives the model's streams and the
 * head's logits bit for bit (the same f32 weights), so also the oracle's. */
static void test_gguf_nextn(void)
{
    dsv4_load_options oc = {0};
    oc.device = "cpu";
    oc.n_threads = 1;
    dsv4_model *host = NULL, *gm = NULL;
    CHECK(dsv4_model_load(FX, &oc, &host) == DSV4_OK);
    if (!host) return;
    const char *path = tmp_path("tiny-mtp.gguf");
    CHECK(write_gguf_copy(host, path) == 0);
    dsv4_model_free(host);
    dsv4_load_options o = {0};
    o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
    o.n_threads = 2;
    CHECKF(dsv4_model_load(path, &o, &gm) == DSV4_OK, "load: %s", dsv4_last_error());
    if (!gm) return;
    CHECK(dsv4_model_has_mtp(gm) && gm->n_unknown == 0 && gm->n_mtp_tensors == 0);
    dsv4_session *a = NULL, *b = NULL;
    CHECK(dsv4_session_new(g_m, &a) == DSV4_OK && dsv4_session_new(gm, &b) == DSV4_OK);
    size_t sz = (size_t)(N - 1) * V;
    float *ha = model_hidden(g_m, a, g_tok, N), *hb = model_hidden(gm, b, g_tok, N);
    float *la = malloc(sz * sizeof *la), *lb = malloc(sz * sizeof *lb);
    CHECK(ha && hb && !memcmp(ha, hb, (size_t)N * HS * sizeof *ha));
    CHECK(mtp_rows(g_m, a, ha, g_tok + 1, N - 1, la, NULL) == DSV4_OK);
    CHECK(mtp_rows(gm, b, ha, g_tok + 1, N - 1, lb, NULL) == DSV4_OK);
    CHECK(!memcmp(la, lb, sz * sizeof *la));
    dsv4_session_free(a);
    dsv4_session_free(b);
    free(ha); free(hb); free(la); free(lb);
    dsv4_model_free(gm);
}

static void test_no_mtp_refused(void)
{
    dsv4_load_options o = {0};
    o.device = "cpu";
    o.n_threads = 1;
    dsv4_model *m = NULL;
    CHECK(dsv4_model_load("tests/fixtures/tiny-mixed-f32", &o, &m) == DSV4_OK);
    if (!m) return;
    CHECK(!dsv4_model_has_mtp(m));
    dsv4_session *s = NULL;
    CHECK(dsv4_session_new(m, &s) == DSV4_OK);
    float *h = calloc((size_t)dsv4_model_hidden_size(m), sizeof *h);
    int32_t t = 3;
    dsv4_lane ln = {.session = s, .tokens = &t, .n_tokens = 1, .mtp_in = h};
    CHECK(dsv4_step(m, &ln, 1, NULL) == DSV4_ERR_UNSUPPORTED && strstr(dsv4_last_error(), "MTP"));
    free(h);
    dsv4_session_free(s);
    dsv4_model_free(m);
}

int main(void)
{
    dsv4_load_options o = {0};
    o.device = getenv("DSV4_TEST_DEVICE") ? getenv("DSV4_TEST_DEVICE") : "cpu";
    o.n_threads = 2;
    if (dsv4_model_load(FX, &o, &g_m)) { printf("FAIL test_mtp: load: %s\n", dsv4_last_error()); return 1; }
    V = dsv4_model_vocab(g_m);
    HS = dsv4_model_hidden_size(g_m);
    N = read_tokens(FX "/tokens.txt");
    if (N < 40) { printf("FAIL test_mtp: tokens.txt\n"); return 1; }
    RUN(test_mtp_matches_oracle);
    RUN(test_mtp_chunking_and_snapshot);
    RUN(test_no_mtp_refused);
    if (test_tmpdir_make("/tmp/dsv4_mtp_") == 0) {
        RUN(test_gguf_nextn);
        test_tmpdir_remove();
    }
    dsv4_model_free(g_m);
    TEST_MAIN_END();
}

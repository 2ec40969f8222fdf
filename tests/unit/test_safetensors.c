/* Safetensors loader: well-formed files, sharded directories, and every kind
 * of corruption the loader must refuse with a message naming file and tensor.
 * Files are built byte by byte in a temporary directory. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "io/safetensors.h"
#include "test.h"
#include "test_tmpdir.h"

static void write_bytes(const char *path, const void *p, size_t n)
{
    FILE *f = fopen(path, "wb");
    if (!f) { perror(path); exit(2); }
    if (n && fwrite(p, 1, n, f) != n) { perror(path); exit(2); }
    fclose(f);
}

/* Image = u64 LE hlen_field, header bytes, data_len bytes of pattern (i*7+1). */
static uint8_t *image_n(const char *hdr, size_t h, uint64_t hlen_field, size_t data_len,
                        size_t *len)
{
    *len = 8 + h + data_len;
    uint8_t *b = malloc(*len);
    for (int i = 0; i < 8; i++) b[i] = (uint8_t)(hlen_field >> (8 * i));
    memcpy(b + 8, hdr, h);
    for (size_t i = 0; i < data_len; i++) b[8 + h + i] = (uint8_t)(i * 7 + 1);
    return b;
}

static uint8_t *image(const char *hdr, uint64_t hlen_field, size_t data_len, size_t *len)
{
    return image_n(hdr, strlen(hdr), hlen_field, data_len, len);
}

static const char *write_st(const char *dir_rel, const char *name, const char *hdr,
                            size_t data_len)
{
    size_t len;
    uint8_t *b = image(hdr, strlen(hdr), data_len, &len);
    char rel[256];
    if (dir_rel) {
        snprintf(rel, sizeof rel, "%s/%s", dir_rel, name);
        mkdir(tmp_path(dir_rel), 0700);
    } else {
        snprintf(rel, sizeof rel, "%s", name);
    }
    const char *p = tmp_path(rel);
    write_bytes(p, b, len);
    free(b);
    return p;
}

static const char *k_good =
    "{\"__metadata__\":{\"format\":\"pt\"},"
    "\"w.weight\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,24]},"
    "\"b.bias\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[24,32]},"
    "\"empty\":{\"dtype\":\"I64\",\"shape\":[0,5],\"data_offsets\":[32,32]},"
    "\"scalar\":{\"dtype\":\"U8\",\"shape\":[],\"data_offsets\":[32,33]}}  ";

static void check_good(const st_archive *a, const uint8_t *data_start)
{
    CHECK(st_count(a) == 4);
    const st_tensor *w = st_find(a, "w.weight"), *b = st_find(a, "b.bias");
    const st_tensor *e = st_find(a, "empty"), *s = st_find(a, "scalar");
    CHECK(w && b && e && s);
    if (!w || !b || !e || !s) return;
    CHECK(w->dtype == DT_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3);
    CHECK(w->nbytes == 24 && w->shard == 0 && strcmp(w->name, "w.weight") == 0);
    CHECK(b->dtype == DT_BF16 && b->ndim == 1 && b->shape[0] == 4 && b->nbytes == 8);
    CHECK(e->nbytes == 0 && e->ndim == 2 && e->shape[0] == 0 && e->dtype == DT_I64);
    CHECK(s->ndim == 0 && s->nbytes == 1);
    /* Data pointers address the bytes at their offsets (pattern i*7+1). */
    const uint8_t *wd = w->data, *bd = b->data, *sd = s->data;
    CHECK(wd[0] == 1 && wd[23] == (uint8_t)(23 * 7 + 1));
    CHECK(bd[0] == (uint8_t)(24 * 7 + 1) && sd[0] == (uint8_t)(32 * 7 + 1));
    if (data_start) CHECK(wd == data_start);
    CHECK(st_find(a, "nope") == NULL && st_find(a, "") == NULL);
    CHECK(st_get(a, 4) == NULL && st_get(a, -1) == NULL && st_get(a, 0) != NULL);
}

static void test_good_file(void)
{
    const char *p = write_st(NULL, "good.safetensors", k_good, 33);
    st_archive *a = NULL;
    dsv4_status st = st_open_file(p, &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (!a) return;
    check_good(a, NULL);
    CHECK(st_mapped_bytes(a) == 8 + strlen(k_good) + 33);
    st_close(a);
}

static void test_good_memory(void)
{
    size_t len;
    uint8_t *b = image(k_good, strlen(k_good), 33, &len);
    st_archive *a = NULL;
    dsv4_status st = st_open_memory(b, len, "mem", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (a) check_good(a, b + 8 + strlen(k_good));
    st_close(a);
    free(b);
}

/* Open a file image (header text, header-length field, data bytes) and expect
 * failure with status want and a message holding every given fragment. */
static void expect_bad_image_n(const char *hdr, size_t hsize, uint64_t hlen, size_t data_len,
                               dsv4_status want, const char *frag1, const char *frag2)
{
    size_t len;
    uint8_t *b = image_n(hdr, hsize, hlen, data_len, &len);
    const char *p = tmp_path("bad.safetensors");
    write_bytes(p, b, len);
    free(b);
    st_archive *a = (st_archive *)1;
    dsv4_status st = st_open_file(p, &a);
    const char *m = dsv4_last_error();
    CHECKF(st == want, "status %s for header %s", dsv4_status_name(st), hdr);
    if (getenv("ST_SHOW")) printf("  %s\n", m);
    CHECK(a == NULL);
    CHECKF(strstr(m, p) != NULL, "message lacks file name: %s", m);
    CHECKF(!frag1 || strstr(m, frag1), "message lacks '%s': %s", frag1, m);
    CHECKF(!frag2 || strstr(m, frag2), "message lacks '%s': %s", frag2, m);
    if (st == DSV4_OK) st_close(a);
}

static void expect_bad_image(const char *hdr, uint64_t hlen, size_t data_len, dsv4_status want,
                             const char *frag1, const char *frag2)
{
    expect_bad_image_n(hdr, strlen(hdr), hlen, data_len, want, frag1, frag2);
}

#define BAD(hdr, data, f1, f2) expect_bad_image(hdr, strlen(hdr), data, DSV4_ERR_FORMAT, f1, f2)

static void test_bad_lengths(void)
{
    /* shorter than the 8-byte length field */
    const char *p = tmp_path("short.safetensors");
    write_bytes(p, "\x05\0\0\0", 4);
    st_archive *a = NULL;
    CHECK(st_open_file(p, &a) == DSV4_ERR_FORMAT && a == NULL);
    CHECK(strstr(dsv4_last_error(), p) && strstr(dsv4_last_error(), "too short"));
    write_bytes(p, "", 0);
    CHECK(st_open_file(p, &a) == DSV4_ERR_FORMAT && strstr(dsv4_last_error(), p));
    /* header length beyond the file, and absurdly large */
    expect_bad_image("{}", 3, 0, DSV4_ERR_FORMAT, "exceeds the file", NULL);
    expect_bad_image("{}", 1ull << 40, 0, DSV4_ERR_FORMAT, "absurd", NULL);
    expect_bad_image("{}", UINT64_MAX, 0, DSV4_ERR_FORMAT, "absurd", NULL);
    /* header length of zero: no JSON at all */
    expect_bad_image("", 0, 4, DSV4_ERR_FORMAT, "invalid JSON", NULL);
}

static void test_bad_json(void)
{
    BAD("{\"a\": ", 0, "invalid JSON near byte", NULL);
    BAD("{\"a\":{\"dtype\":\"F32\",\"shape\":[1],\"data_offsets\":[0,4]}} x", 4, "invalid JSON",
        NULL);
    BAD("[1,2]", 0, "not a JSON object", NULL);
    BAD("\"str\"", 0, "not a JSON object", NULL);
    /* a NUL inside the header ends cJSON's view: must not pass as valid */
    expect_bad_image_n("{}\0{}", 5, 5, 0, DSV4_ERR_FORMAT, "invalid JSON", NULL);
}

static void test_bad_fields(void)
{
    BAD("{\"t\":{\"dtype\":\"Q7\",\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 't'",
        "unknown dtype 'Q7'");
    BAD("{\"t\":{\"dtype\":3,\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 't'", "dtype");
    BAD("{\"t\":{\"shape\":[1],\"data_offsets\":[0,1]}}", 1, "tensor 't'", "dtype");
    BAD("{\"t\":[1,2]}", 0, "tensor 't'", "not an object");
    BAD("{\"t\":{\"dtype\":\"U8\",\"data_offsets\":[0,1]}}", 1, "tensor 't'", "shape");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[-1],\"data_offsets\":[0,1]}}", 1, "tensor 't'",
        "shape[0]");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1.5],\"data_offsets\":[0,1]}}", 1, "tensor 't'",
        "shape[0]");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1,\"2\"],\"data_offsets\":[0,2]}}", 2, "tensor 't'",
        "shape[1]");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1,1,1,1,1,1,1,1,1],\"data_offsets\":[0,1]}}", 1,
        "tensor 't'", "dims");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[4294967296,4294967296,16],\"data_offsets\":[0,1]}}", 1,
        "tensor 't'", "too many");
    BAD("{\"t\":{\"dtype\":\"F64\",\"shape\":[4294967296,1073741824],\"data_offsets\":[0,1]}}", 1,
        "tensor 't'", "too many bytes");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1e300],\"data_offsets\":[0,1]}}", 1, "tensor 't'",
        "shape[0]");
    BAD("{\"__metadata__\":{\"format\":1}}", 0, "__metadata__", "not a string");
    BAD("{\"__metadata__\":[]}", 0, "__metadata__", NULL);
}

static void test_bad_offsets(void)
{
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1]}}", 1, "tensor 't'", "data_offsets");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1,2]}}", 2, "tensor 't'",
        "data_offsets");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[-1,0]}}", 2, "tensor 't'",
        "data_offsets");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[0],\"data_offsets\":[2,1]}}", 2, "tensor 't'",
        "begin 2 > end 1");
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]}}", 7, "tensor 't'",
        "beyond the data area");
    BAD("{\"t\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1e19]}}", 7, "tensor 't'",
        "data_offsets");
    /* nbytes differs from prod(shape) * dtype size */
    BAD("{\"t\":{\"dtype\":\"F32\",\"shape\":[2,3],\"data_offsets\":[0,20]}}", 24, "tensor 't'",
        "needs 24");
    BAD("{\"t\":{\"dtype\":\"BF16\",\"shape\":[3],\"data_offsets\":[0,3]}}", 24, "tensor 't'",
        "needs 6");
}

static void test_overlap_and_duplicates(void)
{
    BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[0,16]},"
        "\"b\":{\"dtype\":\"U8\",\"shape\":[16],\"data_offsets\":[8,24]}}",
        24, "overlaps", "tensor 'a'");
    /* the overlap is found whatever the order in the header */
    BAD("{\"b\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[20,24]},"
        "\"c\":{\"dtype\":\"U8\",\"shape\":[8],\"data_offsets\":[0,8]},"
        "\"a\":{\"dtype\":\"U8\",\"shape\":[4],\"data_offsets\":[6,10]}}",
        24, "tensor 'a'", "overlaps tensor 'c'");
    BAD("{\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[0,1]},"
        "\"a\":{\"dtype\":\"U8\",\"shape\":[1],\"data_offsets\":[1,2]}}",
        2, "tensor 'a'", "duplicate");
    BAD("{\"__metadata__\":{},\"__metadata__\":{}}", 0, "duplicate __metadata__", NULL);
}

static void test_missing_file(void)
{
    st_archive *a = (st_archive *)1;
    const char *p = tmp_path("does-not-exist.safetensors");
    CHECK(st_open_file(p, &a) == DSV4_ERR_IO && a == NULL);
    CHECK(strstr(dsv4_last_error(), p) != NULL);
    CHECK(st_open_file(g_dir, &a) == DSV4_ERR_IO); /* a directory is not a file */
}

static const char *k_shard1 =
    "{\"x\":{\"dtype\":\"F32\",\"shape\":[2],\"data_offsets\":[0,8]},"
    "\"y\":{\"dtype\":\"U8\",\"shape\":[3],\"data_offsets\":[8,11]}}";
static const char *k_shard2 = "{\"z\":{\"dtype\":\"I32\",\"shape\":[1,1],\"data_offsets\":[0,4]}}";

static void write_index(const char *dir_rel, const char *json)
{
    char rel[256];
    mkdir(tmp_path(dir_rel), 0700);
    snprintf(rel, sizeof rel, "%s/model.safetensors.index.json", dir_rel);
    write_bytes(tmp_path(rel), json, strlen(json));
}

static void test_dir_single(void)
{
    write_st("single", "model.safetensors", k_good, 33);
    st_archive *a = NULL;
    dsv4_status st = st_open_dir(tmp_path("single"), &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (a) check_good(a, NULL);
    st_close(a);
}

static void test_dir_sharded(void)
{
    write_st("sharded", "model-00001-of-00002.safetensors", k_shard1, 11);
    write_st("sharded", "model-00002-of-00002.safetensors", k_shard2, 4);
    write_index("sharded", "{\"metadata\":{\"total_size\":15},\"weight_map\":{"
                           "\"x\":\"model-00001-of-00002.safetensors\","
                           "\"z\":\"model-00002-of-00002.safetensors\","
                           "\"y\":\"model-00001-of-00002.safetensors\"}}");
    st_archive *a = NULL;
    dsv4_status st = st_open_dir(tmp_path("sharded"), &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (!a) return;
    CHECK(st_count(a) == 3);
    const st_tensor *x = st_find(a, "x"), *y = st_find(a, "y"), *z = st_find(a, "z");
    CHECK(x && y && z);
    if (x && y && z) {
        CHECK(x->shard == 0 && y->shard == 0 && z->shard == 1);
        CHECK(z->dtype == DT_I32 && z->ndim == 2 && z->nbytes == 4);
        CHECK(((const uint8_t *)y->data)[0] == (uint8_t)(8 * 7 + 1));
    }
    CHECK(st_mapped_bytes(a) == 8 + strlen(k_shard1) + 11 + 8 + strlen(k_shard2) + 4);
    st_close(a);
}

static void expect_dir_fail(const char *dir_rel, dsv4_status want, const char *f1, const char *f2)
{
    st_archive *a = (st_archive *)1;
    dsv4_status st = st_open_dir(tmp_path(dir_rel), &a);
    const char *m = dsv4_last_error();
    CHECKF(st == want, "%s: status %s: %s", dir_rel, dsv4_status_name(st), m);
    if (getenv("ST_SHOW")) printf("  %s\n", m);
    CHECK(a == NULL);
    CHECKF(!f1 || strstr(m, f1), "message lacks '%s': %s", f1, m);
    CHECKF(!f2 || strstr(m, f2), "message lacks '%s': %s", f2, m);
    if (st == DSV4_OK) st_close(a);
}

static void test_dir_bad(void)
{
    write_st("miss", "a.safetensors", k_shard1, 11);
    write_index("miss", "{\"weight_map\":{\"x\":\"a.safetensors\",\"z\":\"gone.safetensors\"}}");
    expect_dir_fail("miss", DSV4_ERR_IO, "gone.safetensors", "missing");

    write_st("lacks", "a.safetensors", k_shard1, 11);
    write_index("lacks", "{\"weight_map\":{\"x\":\"a.safetensors\",\"w\":\"a.safetensors\"}}");
    expect_dir_fail("lacks", DSV4_ERR_FORMAT, "tensor 'w'", "a.safetensors");

    /* the index names the wrong shard for a tensor that exists elsewhere */
    write_st("wrong", "a.safetensors", k_shard1, 11);
    write_st("wrong", "b.safetensors", k_shard2, 4);
    write_index("wrong", "{\"weight_map\":{\"x\":\"a.safetensors\",\"z\":\"a.safetensors\","
                         "\"y\":\"b.safetensors\"}}");
    expect_dir_fail("wrong", DSV4_ERR_FORMAT, "tensor 'z'", "a.safetensors");

    /* the same tensor in two shards */
    write_st("dup", "a.safetensors", k_shard2, 4);
    write_st("dup", "b.safetensors", k_shard2, 4);
    write_index("dup", "{\"weight_map\":{\"z\":\"a.safetensors\",\"q\":\"b.safetensors\"}}");
    expect_dir_fail("dup", DSV4_ERR_FORMAT, "tensor 'z'", "duplicate");

    /* a corrupt shard is reported with its own path */
    write_st("corrupt", "a.safetensors", "{\"x\":{\"dtype\":\"F32\"}}", 0);
    write_index("corrupt", "{\"weight_map\":{\"x\":\"a.safetensors\"}}");
    expect_dir_fail("corrupt", DSV4_ERR_FORMAT, "corrupt/a.safetensors", "tensor 'x'");

    write_index("escape", "{\"weight_map\":{\"x\":\"../good.safetensors\"}}");
    expect_dir_fail("escape", DSV4_ERR_FORMAT, "tensor 'x'", "plain file name");
    write_index("nonstr", "{\"weight_map\":{\"x\":3}}");
    expect_dir_fail("nonstr", DSV4_ERR_FORMAT, "tensor 'x'", NULL);
    write_index("nomap", "{\"metadata\":{}}");
    expect_dir_fail("nomap", DSV4_ERR_FORMAT, "model.safetensors.index.json", "weight_map");
    write_index("emptymap", "{\"weight_map\":{}}");
    expect_dir_fail("emptymap", DSV4_ERR_FORMAT, "weight_map", "empty");
    write_index("badjson", "{\"weight_map\":{\"x\":");
    expect_dir_fail("badjson", DSV4_ERR_FORMAT, "model.safetensors.index.json", "invalid JSON");

    mkdir(tmp_path("nothing"), 0700);
    expect_dir_fail("nothing", DSV4_ERR_IO, "nothing", "no model.safetensors");
    expect_dir_fail("no-such-dir", DSV4_ERR_IO, "no-such-dir", NULL);
}

static void test_dir_unindexed_set(void)
{
    write_st("set", "part-b.safetensors", k_shard2, 4);
    write_st("set", "part-a.safetensors", k_shard1, 11);
    st_archive *a = NULL;
    dsv4_status st = st_open_dir(tmp_path("set"), &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (!a) return;
    CHECK(st_count(a) == 3);
    /* files are taken in name order */
    CHECK(st_find(a, "x") && st_find(a, "x")->shard == 0);
    CHECK(st_find(a, "z") && st_find(a, "z")->shard == 1);
    st_close(a);
}

/* Files written by the reference implementation (python safetensors
 * save_file): w = arange(6).reshape(2,3) f32, b = ones(4) bf16;
 * q = zeros(3) f8_e4m3, i = ones(2) i32, x = zeros(1,1,1,1) bool. */
static void test_reference_writer(void)
{
    st_archive *a = NULL;
    dsv4_status st = st_open_file("tests/data/ref_two.safetensors", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (a) {
        const st_tensor *w = st_find(a, "w"), *b = st_find(a, "b");
        CHECK(st_count(a) == 2 && w && b);
        if (w && b) {
            CHECK(w->dtype == DT_F32 && w->ndim == 2 && w->shape[0] == 2 && w->shape[1] == 3);
            for (int i = 0; i < 6; i++) {
                float v;
                memcpy(&v, (const char *)w->data + 4 * i, 4);
                CHECK(v == (float)i);
            }
            uint16_t h;
            memcpy(&h, (const char *)b->data + 6, 2);
            CHECK(b->dtype == DT_BF16 && bf16_to_f32(h) == 1.0f);
        }
        st_close(a);
    }
    st = st_open_file("tests/data/ref_mixed.safetensors", &a);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (a) {
        const st_tensor *q = st_find(a, "q"), *i = st_find(a, "i"), *x = st_find(a, "x");
        CHECK(q && i && x);
        if (q && i && x) {
            CHECK(q->dtype == DT_F8_E4M3 && q->nbytes == 3);
            CHECK(i->dtype == DT_I32 && ((const uint8_t *)i->data)[0] == 1);
            CHECK(x->dtype == DT_BOOL && x->ndim == 4 && x->nbytes == 1);
        }
        st_close(a);
    }
}

int main(void)
{
    if (test_tmpdir_make("/tmp/dsv4_st_")) return 2;
    RUN(test_good_file);
    RUN(test_good_memory);
    RUN(test_reference_writer);
    RUN(test_bad_lengths);
    RUN(test_bad_json);
    RUN(test_bad_fields);
    RUN(test_bad_offsets);
    RUN(test_overlap_and_duplicates);
    RUN(test_missing_file);
    RUN(test_dir_single);
    RUN(test_dir_sharded);
    RUN(test_dir_bad);
    RUN(test_dir_unindexed_set);
    test_tmpdir_remove();
    TEST_MAIN_END();
}

/* GGUF reader: a file with metadata of every value type and tensors of
 * several ggml types, split sets, and every kind of corruption the reader
 * must refuse with a one-line message (including every truncation of a
 * valid image). Images are built byte by byte (tests/gguf_build.h). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/ggml_quant.h"
#include "gguf_build.h"
#include "io/gguf.h"
#include "test.h"
#include "test_tmpdir.h"

static void write_file(const char *path, const gb_buf *g)
{
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(g->b, 1, g->n, f) != g->n) { perror(path); exit(2); }
    fclose(f);
}

/* The valid image: 14 kv (every scalar type, string array, u32 array,
 * alignment 64), tensors "a" F32 [2][3] (ne {3,2}), "q" Q8_0 [1][64],
 * "b" BF16 [4]. Data bytes are the pattern i*7+1 over the data section. */
static gb_buf good_image(size_t *data_start)
{
    gb_buf g = {0};
    gb_header(&g, 3, 15);
    const char *names[] = {"k.u8", "k.i8", "k.u16", "k.i16", "k.u32", "k.i32", "k.f32", "k.bool",
                           "k.str", "k.arr", "k.u64", "k.i64", "k.f64"};
    uint64_t vals[] = {200, 0xFE, 60000, 0xFFFE, 4000000000u, 0xFFFFFFFEu, 0x3FC00000u, 1, 0, 0,
                       1ull << 40, (uint64_t)-5, 0x4004000000000000ull};
    int sizes[] = {1, 1, 2, 2, 4, 4, 4, 1, 0, 0, 8, 8, 8};
    for (uint32_t t = 0; t < 13; t++) {
        gb_str(&g, names[t]);
        gb_u32(&g, t);
        if (t == 8) gb_str(&g, "hello");
        else if (t == 9) { gb_u32(&g, 8); gb_u64(&g, 3); gb_str(&g, "x"); gb_str(&g, ""); gb_str(&g, "zz"); }
        else gb_uint(&g, vals[t], sizes[t]);
    }
    gb_str(&g, "k.u32arr");
    gb_u32(&g, 9);
    gb_u32(&g, 4);
    gb_u64(&g, 3);
    gb_u32(&g, 4); gb_u32(&g, 0); gb_u32(&g, 128);
    gb_kv_u32(&g, "general.alignment", 64);
    gb_tensor(&g, "a", 2, (uint64_t[]){3, 2}, GGML_F32, 0);
    gb_tensor(&g, "q", 2, (uint64_t[]){64, 1}, GGML_Q8_0, 64);
    gb_tensor(&g, "b", 1, (uint64_t[]){4}, GGML_BF16, 192);
    gb_pad(&g, 64);
    *data_start = g.n;
    for (int i = 0; i < 200; i++) gb_uint(&g, (uint8_t)(i * 7 + 1), 1);
    return g;
}

static void check_good(const gguf_file *f, const uint8_t *data)
{
    CHECK(gguf_kv_count(f) == 15 && gguf_tensor_count(f) == 3);
    int64_t v;
    double d;
    const gguf_kv *kv;
    CHECK((kv = gguf_find_kv(f, "k.u8")) && gguf_kv_int(kv, 0, &v) && v == 200);
    CHECK((kv = gguf_find_kv(f, "k.i8")) && gguf_kv_int(kv, 0, &v) && v == -2);
    CHECK((kv = gguf_find_kv(f, "k.u16")) && gguf_kv_int(kv, 0, &v) && v == 60000);
    CHECK((kv = gguf_find_kv(f, "k.i16")) && gguf_kv_int(kv, 0, &v) && v == -2);
    CHECK((kv = gguf_find_kv(f, "k.u32")) && gguf_kv_int(kv, 0, &v) && v == 4000000000ll);
    CHECK((kv = gguf_find_kv(f, "k.i32")) && gguf_kv_int(kv, 0, &v) && v == -2);
    CHECK((kv = gguf_find_kv(f, "k.f32")) && gguf_kv_num(kv, 0, &d) && d == 1.5 && !gguf_kv_int(kv, 0, &v));
    CHECK((kv = gguf_find_kv(f, "k.bool")) && gguf_kv_int(kv, 0, &v) && v == 1 && !gguf_kv_num(kv, 0, &d));
    CHECK((kv = gguf_find_kv(f, "k.str")) && kv->type == GGUF_T_STRING && kv->strs[0].len == 5 &&
          memcmp(kv->strs[0].s, "hello", 5) == 0);
    CHECK((kv = gguf_find_kv(f, "k.arr")) && kv->type == GGUF_T_ARRAY && kv->elem_type == GGUF_T_STRING &&
          kv->count == 3 && kv->strs[1].len == 0 && kv->strs[2].len == 2 && kv->strs[0].s[0] == 'x');
    CHECK((kv = gguf_find_kv(f, "k.u64")) && gguf_kv_int(kv, 0, &v) && v == 1ll << 40);
    CHECK((kv = gguf_find_kv(f, "k.i64")) && gguf_kv_int(kv, 0, &v) && v == -5);
    CHECK((kv = gguf_find_kv(f, "k.f64")) && gguf_kv_num(kv, 0, &d) && d == 2.5);
    CHECK((kv = gguf_find_kv(f, "k.u32arr")) && kv->count == 3 && gguf_kv_int(kv, 2, &v) && v == 128 &&
          !gguf_kv_int(kv, 3, &v));
    CHECK(gguf_find_kv(f, "nope") == NULL);
    const gguf_tensor *a = gguf_find_tensor(f, "a"), *q = gguf_find_tensor(f, "q"), *b = gguf_find_tensor(f, "b");
    CHECK(a && q && b);
    if (!a || !q || !b) return;
    /* row-major shapes: ggml's ne reversed */
    CHECK(a->ndim == 2 && a->shape[0] == 2 && a->shape[1] == 3 && a->type == GGML_F32 && a->nbytes == 24);
    CHECK(q->ndim == 2 && q->shape[0] == 1 && q->shape[1] == 64 && q->nbytes == 68);
    CHECK(b->ndim == 1 && b->shape[0] == 4 && b->nbytes == 8);
    CHECK((const uint8_t *)a->data == data && (const uint8_t *)q->data == data + 64 &&
          (const uint8_t *)b->data == data + 192);
    CHECK(((const uint8_t *)q->data)[0] == (uint8_t)(64 * 7 + 1));
    CHECK(gguf_tensor_at(f, 3) == NULL && gguf_find_tensor(f, "") == NULL);
}

static void test_good(void)
{
    size_t ds;
    gb_buf g = good_image(&ds);
    gguf_file *f = NULL;
    dsv4_status st = gguf_open_memory(g.b, g.n, "mem", &f);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (f) check_good(f, g.b + ds);
    gguf_close(f);
    const char *p = tmp_path("good.gguf");
    write_file(p, &g);
    st = gguf_open(p, &f);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (f) {
        CHECK(gguf_n_files(f) == 1 && gguf_mapped_bytes(f) == g.n && strcmp(gguf_label(f), p) == 0);
        CHECK(gguf_tensor_count(f) == 3);
    }
    gguf_close(f);
    free(g.b);
}

/* Every proper prefix of the valid image is refused (the data section is
 * needed in full: the last tensor ends at its last byte). */
static void test_every_truncation(void)
{
    size_t ds;
    gb_buf g = good_image(&ds);
    size_t end = ds + 200; /* b ends at 200 */
    int bad = 0;
    for (size_t n = 0; n < end; n++) {
        uint8_t *copy = malloc(n ? n : 1);
        memcpy(copy, g.b, n);
        gguf_file *f = NULL;
        dsv4_status st = gguf_open_memory(copy, n, "cut", &f);
        if (st == DSV4_OK || f || !dsv4_last_error()[0] || strchr(dsv4_last_error(), '\n')) bad++;
        gguf_close(f);
        free(copy);
    }
    CHECKF(bad == 0, "%d truncations accepted or without a one-line message", bad);
    free(g.b);
}

/* Build a one-tensor image from pieces and expect failure with a fragment. */
static void expect_bad(const gb_buf *g, dsv4_status want, const char *frag)
{
    gguf_file *f = (gguf_file *)1;
    dsv4_status st = gguf_open_memory(g->b, g->n, "bad.gguf", &f);
    const char *m = dsv4_last_error();
    if (getenv("GGUF_SHOW")) printf("  %s\n", m);
    CHECKF(st == want, "status %s (want %s): %s", dsv4_status_name(st), dsv4_status_name(want), m);
    CHECK(f == NULL);
    CHECKF(strstr(m, "bad.gguf") && strstr(m, frag), "message lacks '%s': %s", frag, m);
}

/* One F32 tensor "w" of ne {ne0, ne1} at offset off, data_bytes of data. */
static gb_buf one_tensor(uint64_t ne0, uint64_t ne1, uint32_t type, uint64_t off, size_t data_bytes)
{
    gb_buf g = {0};
    gb_header(&g, 1, 0);
    gb_tensor(&g, "w", 2, (uint64_t[]){ne0, ne1}, type, off);
    gb_pad(&g, 32);
    for (size_t i = 0; i < data_bytes; i++) gb_uint(&g, 0, 1);
    return g;
}

static void test_bad_header(void)
{
    gb_buf g = {0};
    gb_put(&g, "GGUF", 4); gb_u32(&g, 2); gb_u64(&g, 0); gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_UNSUPPORTED, "version 2 is not supported");
    g.n = 0;
    gb_put(&g, "GGUF", 4); gb_u32(&g, 0x03000000u); gb_u64(&g, 0); gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_UNSUPPORTED, "big-endian");
    g.n = 0;
    gb_put(&g, "GGML", 4); gb_u32(&g, 3); gb_u64(&g, 0); gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "no GGUF magic");
    g.n = 0;
    gb_header(&g, 0, 1ull << 60);
    expect_bad(&g, DSV4_ERR_FORMAT, "metadata entries");
    g.n = 0;
    gb_header(&g, UINT64_MAX, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "tensors, more than");
    free(g.b);
}

static void test_bad_metadata(void)
{
    gb_buf g = {0};
    gb_header(&g, 0, 1); gb_u64(&g, 1ull << 62); gb_put(&g, "k_and_some_more", 15);
    expect_bad(&g, DSV4_ERR_FORMAT, "claims");
    g.n = 0;
    gb_header(&g, 0, 1); gb_str(&g, "k"); gb_u32(&g, 13); gb_u32(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "unknown value type 13");
    g.n = 0;
    gb_header(&g, 0, 1); gb_str(&g, "k"); gb_u32(&g, 9); gb_u32(&g, 9); gb_u64(&g, 1);
    expect_bad(&g, DSV4_ERR_FORMAT, "array of arrays");
    g.n = 0;
    gb_header(&g, 0, 1); gb_str(&g, "k"); gb_u32(&g, 9); gb_u32(&g, 8); gb_u64(&g, 1ull << 50);
    expect_bad(&g, DSV4_ERR_FORMAT, "strings cannot fit");
    g.n = 0;
    gb_header(&g, 0, 1); gb_str(&g, "k"); gb_u32(&g, 9); gb_u32(&g, 10); gb_u64(&g, 1ull << 61);
    expect_bad(&g, DSV4_ERR_FORMAT, "values of u64 cannot fit");
    g.n = 0;
    gb_header(&g, 0, 1); gb_str(&g, "k"); gb_u32(&g, 7); gb_uint(&g, 2, 1);
    expect_bad(&g, DSV4_ERR_FORMAT, "bool value 2");
    g.n = 0;
    gb_header(&g, 0, 2); gb_kv_u32(&g, "k", 1); gb_kv_u32(&g, "k", 2);
    expect_bad(&g, DSV4_ERR_FORMAT, "'k' appears twice");
    g.n = 0;
    gb_header(&g, 0, 1); gb_u64(&g, 0); gb_u32(&g, 4); gb_u32(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "metadata key has length 0");
    g.n = 0;
    gb_header(&g, 0, 1); gb_u64(&g, 3); gb_put(&g, "a\0b", 3); gb_u32(&g, 4); gb_u32(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "NUL byte");
    g.n = 0;
    gb_header(&g, 1, 1); gb_kv_u32(&g, "general.alignment", 48);
    gb_tensor(&g, "w", 1, (uint64_t[]){4}, GGML_F32, 0); gb_pad(&g, 64); gb_u64(&g, 0); gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "power-of-two");
    g.n = 0;
    gb_header(&g, 1, 1); gb_kv_str(&g, "general.alignment", "32");
    gb_tensor(&g, "w", 1, (uint64_t[]){4}, GGML_F32, 0); gb_pad(&g, 64); gb_u64(&g, 0); gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "power-of-two");
    free(g.b);
}

static void test_bad_tensors(void)
{
    gb_buf g = one_tensor(4, 2, GGML_F32, 0, 31);
    expect_bad(&g, DSV4_ERR_FORMAT, "runs past the end");
    free(g.b);
    g = one_tensor(4, 2, GGML_F32, 16, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "not a multiple of the alignment");
    free(g.b);
    g = one_tensor(4, 2, GGML_F32, UINT64_MAX - 31, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "runs past the end");
    free(g.b);
    g = one_tensor(4, 2, 4, 0, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "unknown ggml type 4");
    free(g.b);
    g = one_tensor(4, 2, 1234567, 0, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "unknown ggml type 1234567");
    free(g.b);
    g = one_tensor(48, 2, GGML_Q4_K, 0, 600);
    expect_bad(&g, DSV4_ERR_FORMAT, "not whole Q4_K blocks of 256");
    free(g.b);
    g = one_tensor(0, 2, GGML_F32, 0, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "empty tensors");
    free(g.b);
    g = one_tensor(1ull << 40, 1ull << 40, GGML_F32, 0, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "overflows");
    free(g.b);
    g = one_tensor(1ull << 61, 1, GGML_F32, 0, 64);
    expect_bad(&g, DSV4_ERR_FORMAT, "runs past the end");
    free(g.b);
    g = (gb_buf){0};
    gb_header(&g, 1, 0); gb_str(&g, "w"); gb_u32(&g, 5); for (int i = 0; i < 8; i++) gb_u64(&g, 1);
    expect_bad(&g, DSV4_ERR_FORMAT, "5 dimensions");
    g.n = 0;
    gb_header(&g, 1, 0); gb_str(&g, "w"); gb_u32(&g, 0); for (int i = 0; i < 8; i++) gb_u64(&g, 1);
    expect_bad(&g, DSV4_ERR_FORMAT, "0 dimensions");
    g.n = 0;
    gb_header(&g, 2, 0);
    gb_tensor(&g, "w", 1, (uint64_t[]){16}, GGML_F32, 0);
    gb_tensor(&g, "w", 1, (uint64_t[]){16}, GGML_F32, 64);
    gb_pad(&g, 32); for (int i = 0; i < 16; i++) gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "'w' appears twice");
    g.n = 0;
    gb_header(&g, 2, 0);
    gb_tensor(&g, "x", 1, (uint64_t[]){16}, GGML_F32, 32);
    gb_tensor(&g, "y", 1, (uint64_t[]){16}, GGML_F32, 0);
    gb_pad(&g, 32); for (int i = 0; i < 16; i++) gb_u64(&g, 0);
    expect_bad(&g, DSV4_ERR_FORMAT, "overlap");
    free(g.b);
}

/* Split set NAME-0000k-of-00002.gguf: part 1 has the metadata and tensor a,
 * part 2 tensor b. */
static gb_buf split_part(int no, int count, int32_t total, const char *tname)
{
    gb_buf g = {0};
    gb_header(&g, 1, 3);
    gb_str(&g, "split.no"); gb_u32(&g, 2); gb_uint(&g, (uint64_t)no, 2);
    gb_str(&g, "split.count"); gb_u32(&g, 2); gb_uint(&g, (uint64_t)count, 2);
    gb_str(&g, "split.tensors.count"); gb_u32(&g, 5); gb_u32(&g, (uint32_t)total);
    gb_tensor(&g, tname, 1, (uint64_t[]){8}, GGML_F32, 0);
    gb_pad(&g, 32);
    for (int i = 0; i < 8; i++) gb_f32(&g, (float)(no * 10 + i));
    return g;
}

static void expect_open_fails(const char *path, const char *frag)
{
    gguf_file *f = (gguf_file *)1;
    dsv4_status st = gguf_open(path, &f);
    const char *m = dsv4_last_error();
    if (getenv("GGUF_SHOW")) printf("  %s\n", m);
    CHECKF(st != DSV4_OK && f == NULL, "opened %s", path);
    CHECKF(strstr(m, frag) != NULL, "message lacks '%s': %s", frag, m);
}

static void test_split(void)
{
    gb_buf p1 = split_part(0, 2, 2, "a"), p2 = split_part(1, 2, 2, "b");
    write_file(tmp_path("m-00001-of-00002.gguf"), &p1);
    write_file(tmp_path("m-00002-of-00002.gguf"), &p2);
    gguf_file *f = NULL;
    dsv4_status st = gguf_open(tmp_path("m-00001-of-00002.gguf"), &f);
    CHECKF(st == DSV4_OK, "%s", dsv4_last_error());
    if (f) {
        const gguf_tensor *a = gguf_find_tensor(f, "a"), *b = gguf_find_tensor(f, "b");
        CHECK(gguf_n_files(f) == 2 && a && b && a->file == 0 && b->file == 1);
        if (b) CHECK(((const float *)b->data)[3] == 13.0f);
        CHECK(gguf_mapped_bytes(f) == p1.n + p2.n);
    }
    gguf_close(f);
    expect_open_fails(tmp_path("m-00002-of-00002.gguf"), "open the first part");
    /* missing part */
    write_file(tmp_path("n-00001-of-00002.gguf"), &p1);
    expect_open_fails(tmp_path("n-00001-of-00002.gguf"), "missing part 2 of 2");
    /* a part that says it is another part */
    gb_buf w = split_part(0, 2, 2, "b");
    write_file(tmp_path("o-00001-of-00002.gguf"), &p1);
    write_file(tmp_path("o-00002-of-00002.gguf"), &w);
    expect_open_fails(tmp_path("o-00001-of-00002.gguf"), "split.no = 0");
    /* same tensor in both parts */
    gb_buf d = split_part(1, 2, 2, "a");
    write_file(tmp_path("p-00001-of-00002.gguf"), &p1);
    write_file(tmp_path("p-00002-of-00002.gguf"), &d);
    expect_open_fails(tmp_path("p-00001-of-00002.gguf"), "'a' appears twice");
    /* wrong total */
    gb_buf t1 = split_part(0, 2, 3, "a");
    write_file(tmp_path("q-00001-of-00002.gguf"), &t1);
    write_file(tmp_path("q-00002-of-00002.gguf"), &p2);
    expect_open_fails(tmp_path("q-00001-of-00002.gguf"), "split.tensors.count is 3");
    /* split metadata without a split name */
    write_file(tmp_path("plain.gguf"), &p1);
    expect_open_fails(tmp_path("plain.gguf"), "no -00001-of-00002.gguf suffix");
    expect_open_fails(tmp_path("absent.gguf"), "absent.gguf");
    free(p1.b); free(p2.b); free(w.b); free(d.b); free(t1.b);
}

int main(void)
{
    if (test_tmpdir_make("/tmp/dsv4_gguf_")) return 2;
    RUN(test_good);
    RUN(test_every_truncation);
    RUN(test_bad_header);
    RUN(test_bad_metadata);
    RUN(test_bad_tensors);
    RUN(test_split);
    test_tmpdir_remove();
    printf("%d passed, %d failed\n", t_pass, t_fail);
    return t_fail != 0;
}

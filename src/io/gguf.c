/* GGUF v3 reader: see gguf.h for what is checked. Layout of one file:
 *   "GGUF" u32 version, u64 n_tensors, u64 n_kv,
 *   n_kv × (string key, u32 type, value), n_tensors × (string name,
 *   u32 n_dims, u64 ne[n_dims], u32 ggml type, u64 offset),
 *   padding to general.alignment (default 32), then the data section;
 *   tensor offsets are relative to its start.
 * Strings are u64 length + bytes; arrays u32 element type + u64 count +
 * elements. All integers little-endian. */
#include "io/gguf.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/ggml_quant.h"
#include "base/strmap.h"
#include "io/fileio.h"

#define GGUF_DEFAULT_ALIGN 32
#define GGUF_MAX_NAME 256   /* tensor names (ggml itself allows 63) */
#define GGUF_MAX_KEY 65535
#define GGUF_MAX_PARTS 9999
#define GGUF_MAX_COUNT (1 << 24) /* metadata entries / tensors per file: keeps counts in int */

typedef struct {
    char *path;
    const uint8_t *base;
    size_t len;
    int mapped;
} gg_part;

/* One parsed metadata list (the first part's is kept). */
typedef struct {
    gguf_kv *kv;
    int n;
    strmap by_key;
} gg_meta;

struct gguf_file {
    gg_part *parts;
    int n_parts;
    gg_meta meta;
    gguf_tensor *t;
    int n_t;
    strmap by_name;
    uint64_t bytes;
};

static void meta_free(gg_meta *m)
{
    for (int i = 0; i < m->n; i++) {
        free((char *)m->kv[i].key);
        free((void *)m->kv[i].strs);
    }
    free(m->kv);
    strmap_free(&m->by_key);
    memset(m, 0, sizeof *m);
}

void gguf_close(gguf_file *g)
{
    if (!g) return;
    for (int i = 0; i < g->n_parts; i++) {
        if (g->parts[i].mapped) munmap((void *)g->parts[i].base, g->parts[i].len);
        free(g->parts[i].path);
    }
    free(g->parts);
    meta_free(&g->meta);
    for (int i = 0; i < g->n_t; i++) free((char *)g->t[i].name);
    free(g->t);
    strmap_free(&g->by_name);
    free(g);
}

const char *gguf_label(const gguf_file *g) { return g->n_parts ? g->parts[0].path : "gguf"; }
int gguf_n_files(const gguf_file *g) { return g->n_parts; }
uint64_t gguf_mapped_bytes(const gguf_file *g) { return g->bytes; }
int gguf_kv_count(const gguf_file *g) { return g->meta.n; }
const gguf_kv *gguf_kv_at(const gguf_file *g, int i) { return i >= 0 && i < g->meta.n ? &g->meta.kv[i] : NULL; }
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key)
{
    int i = strmap_get(&g->meta.by_key, key);
    return i >= 0 ? &g->meta.kv[i] : NULL;
}
int gguf_tensor_count(const gguf_file *g) { return g->n_t; }
const gguf_tensor *gguf_tensor_at(const gguf_file *g, int i) { return i >= 0 && i < g->n_t ? &g->t[i] : NULL; }
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name)
{
    int i = strmap_get(&g->by_name, name);
    return i >= 0 ? &g->t[i] : NULL;
}

static const struct { const char *name; int size; } k_vt[GGUF_T_COUNT] = {
    [GGUF_T_U8] = {"u8", 1},     [GGUF_T_I8] = {"i8", 1},       [GGUF_T_U16] = {"u16", 2},
    [GGUF_T_I16] = {"i16", 2},   [GGUF_T_U32] = {"u32", 4},     [GGUF_T_I32] = {"i32", 4},
    [GGUF_T_F32] = {"f32", 4},   [GGUF_T_BOOL] = {"bool", 1},   [GGUF_T_STRING] = {"string", 0},
    [GGUF_T_ARRAY] = {"array", 0}, [GGUF_T_U64] = {"u64", 8},   [GGUF_T_I64] = {"i64", 8},
    [GGUF_T_F64] = {"f64", 8},
};

const char *gguf_type_name(uint32_t t) { return t < GGUF_T_COUNT ? k_vt[t].name : "unknown"; }

static uint64_t le(const uint8_t *p, int n)
{
    uint64_t v = 0;
    for (int i = n - 1; i >= 0; i--) v = v << 8 | p[i];
    return v;
}

int gguf_kv_int(const gguf_kv *kv, uint64_t i, int64_t *out)
{
    if (i >= kv->count) return 0;
    uint32_t t = kv->elem_type;
    if (t >= GGUF_T_COUNT || t == GGUF_T_F32 || t == GGUF_T_F64 || !k_vt[t].size) return 0;
    int n = k_vt[t].size;
    uint64_t u = le(kv->data + i * (uint64_t)n, n);
    switch (t) {
    case GGUF_T_I8: *out = (int8_t)u; break;
    case GGUF_T_I16: *out = (int16_t)u; break;
    case GGUF_T_I32: *out = (int32_t)u; break;
    case GGUF_T_I64: *out = (int64_t)u; break;
    case GGUF_T_U64: if (u > (uint64_t)INT64_MAX) return 0; *out = (int64_t)u; break;
    default: *out = (int64_t)u; break;
    }
    return 1;
}

int gguf_kv_num(const gguf_kv *kv, uint64_t i, double *out)
{
    if (i >= kv->count) return 0;
    if (kv->elem_type == GGUF_T_F32) {
        uint32_t u = (uint32_t)le(kv->data + 4 * i, 4);
        float f;
        memcpy(&f, &u, 4);
        *out = f;
        return 1;
    }
    if (kv->elem_type == GGUF_T_F64) {
        uint64_t u = le(kv->data + 8 * i, 8);
        memcpy(out, &u, 8);
        return 1;
    }
    int64_t v;
    if (!gguf_kv_int(kv, i, &v) || kv->elem_type == GGUF_T_BOOL) return 0;
    *out = (double)v;
    return 1;
}

/* ---- parsing one image ---- */

typedef struct {
    const uint8_t *b;
    size_t len, off;
    const char *label;
} cursor;

static dsv4_status truncated(const cursor *c, const char *what)
{
    return dsv4_fail(DSV4_ERR_FORMAT, "%s: truncated GGUF: %s at byte %zu runs past the end (%zu bytes)", c->label,
                     what, c->off, c->len);
}

static int take(cursor *c, uint64_t n, const uint8_t **p)
{
    if (n > c->len - c->off) return 0;
    *p = c->b + c->off;
    c->off += (size_t)n;
    return 1;
}

static dsv4_status rd(cursor *c, int n, uint64_t *v, const char *what)
{
    const uint8_t *p;
    *v = 0;
    if (!take(c, (uint64_t)n, &p)) return truncated(c, what);
    *v = le(p, n);
    return DSV4_OK;
}

static dsv4_status rd_str(cursor *c, gguf_str *s, const char *what)
{
    uint64_t n;
    const uint8_t *p;
    *s = (gguf_str){NULL, 0};
    dsv4_status st = rd(c, 8, &n, what);
    if (st) return st;
    if (!take(c, n, &p))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF %s at byte %zu claims %llu bytes, more than the %zu left",
                         c->label, what, c->off, (unsigned long long)n, c->len - c->off);
    s->s = (const char *)p;
    s->len = n;
    return DSV4_OK;
}

/* A NUL-terminated copy of a name/key (no embedded NUL, 1..max bytes). */
static dsv4_status dup_name(const cursor *c, const gguf_str *s, uint64_t max, const char *what, char **out)
{
    if (s->len == 0 || s->len > max)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF %s has length %llu (allowed 1..%llu)", c->label, what,
                         (unsigned long long)s->len, (unsigned long long)max);
    if (memchr(s->s, 0, (size_t)s->len))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF %s contains a NUL byte", c->label, what);
    if (!(*out = strndup(s->s, (size_t)s->len))) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", c->label);
    return DSV4_OK;
}

/* One metadata value of type t (not ARRAY inside arrays) into kv. */
static dsv4_status rd_value(cursor *c, gguf_kv *kv)
{
    uint64_t t64, n = 1;
    dsv4_status st;
    if ((st = rd(c, 4, &t64, "value type"))) return st;
    if (t64 >= GGUF_T_COUNT)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF key '%s' has unknown value type %llu", c->label, kv->key,
                         (unsigned long long)t64);
    kv->type = kv->elem_type = (uint32_t)t64;
    if (kv->type == GGUF_T_ARRAY) {
        if ((st = rd(c, 4, &t64, "array type")) || (st = rd(c, 8, &n, "array length"))) return st;
        if (t64 >= GGUF_T_COUNT || t64 == GGUF_T_ARRAY)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF key '%s' is an array of %s (type %llu): not supported",
                             c->label, kv->key, t64 == GGUF_T_ARRAY ? "arrays" : "unknown values",
                             (unsigned long long)t64);
        kv->elem_type = (uint32_t)t64;
    }
    kv->count = n;
    if (kv->elem_type == GGUF_T_STRING) {
        /* each string takes at least its 8-byte length */
        if (n > (c->len - c->off) / 8)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF key '%s': %llu strings cannot fit in the %zu bytes left",
                             c->label, kv->key, (unsigned long long)n, c->len - c->off);
        gguf_str *s = malloc((size_t)(n ? n : 1) * sizeof *s);
        if (!s) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory for key '%s'", c->label, kv->key);
        kv->strs = s;
        for (uint64_t i = 0; i < n; i++)
            if ((st = rd_str(c, &s[i], "string value"))) return dsv4_fail_prefix(st, kv->key);
        return DSV4_OK;
    }
    uint64_t size = (uint64_t)k_vt[kv->elem_type].size;
    if (n > (c->len - c->off) / size)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF key '%s': %llu values of %s cannot fit in the %zu bytes left",
                         c->label, kv->key, (unsigned long long)n, k_vt[kv->elem_type].name, c->len - c->off);
    take(c, n * size, &kv->data);
    if (kv->elem_type == GGUF_T_BOOL)
        for (uint64_t i = 0; i < n; i++)
            if (kv->data[i] > 1)
                return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF key '%s': bool value %u is not 0 or 1", c->label,
                                 kv->key, kv->data[i]);
    return DSV4_OK;
}

static dsv4_status rd_meta(cursor *c, uint64_t n_kv, gg_meta *m)
{
    /* each entry takes at least 8 (key length) + 1 (key) + 4 (type) + 1 bytes */
    if (n_kv > GGUF_MAX_COUNT || n_kv > (c->len - c->off) / 14)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF header claims %llu metadata entries, more than the file can hold",
                         c->label, (unsigned long long)n_kv);
    m->kv = calloc((size_t)(n_kv ? n_kv : 1), sizeof *m->kv);
    if (!m->kv) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", c->label);
    dsv4_status st;
    for (uint64_t i = 0; i < n_kv; i++) {
        gguf_str k;
        gguf_kv *kv = &m->kv[m->n];
        if ((st = rd_str(c, &k, "metadata key"))) return st;
        char *key;
        if ((st = dup_name(c, &k, GGUF_MAX_KEY, "metadata key", &key))) return st;
        kv->key = key;
        m->n++;
        int r = strmap_put(&m->by_key, key, m->n - 1, NULL);
        if (r < 0) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", c->label);
        if (r > 0) return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF metadata key '%s' appears twice", c->label, key);
        if ((st = rd_value(c, kv))) return st;
    }
    return DSV4_OK;
}

static const gguf_kv *meta_find(const gg_meta *m, const char *key)
{
    int i = strmap_get(&m->by_key, key);
    return i >= 0 ? &m->kv[i] : NULL;
}

/* Tensor infos of one part, appended to g->t (offsets resolved later). */
static dsv4_status rd_tensor_infos(gguf_file *g, cursor *c, uint64_t n_t, int part, uint64_t *offs)
{
    dsv4_status st;
    for (uint64_t i = 0; i < n_t; i++) {
        gguf_str nm;
        gguf_tensor *t = &g->t[g->n_t];
        memset(t, 0, sizeof *t);
        if ((st = rd_str(c, &nm, "tensor name"))) return st;
        char *name;
        if ((st = dup_name(c, &nm, GGUF_MAX_NAME, "tensor name", &name))) return st;
        t->name = name;
        t->file = part;
        g->n_t++;
        int r = strmap_put(&g->by_name, name, g->n_t - 1, NULL);
        if (r < 0) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", c->label);
        if (r > 0) return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' appears twice", c->label, name);
        uint64_t nd, ne[GGUF_MAX_DIMS], type;
        if ((st = rd(c, 4, &nd, "tensor dimension count"))) return st;
        if (nd < 1 || nd > GGUF_MAX_DIMS)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' has %llu dimensions (allowed 1..%d)", c->label,
                             name, (unsigned long long)nd, GGUF_MAX_DIMS);
        uint64_t elems = 1;
        for (uint64_t d = 0; d < nd; d++) {
            if ((st = rd(c, 8, &ne[d], "tensor dimension"))) return st;
            if (ne[d] == 0 || ne[d] > (uint64_t)INT64_MAX / elems)
                return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' dimension %llu is %llu (%s)", c->label, name,
                                 (unsigned long long)d, (unsigned long long)ne[d],
                                 ne[d] ? "element count overflows" : "empty tensors are not allowed");
            elems *= ne[d];
        }
        if ((st = rd(c, 4, &type, "tensor type")) || (st = rd(c, 8, &offs[g->n_t - 1], "tensor offset"))) return st;
        char tb[24];
        const ggml_type_info *ti = ggml_type_get((uint32_t)type);
        if (type > UINT32_MAX || !ti->name)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' has unknown ggml %s", c->label, name,
                             ggml_type_name((uint32_t)(type > UINT32_MAX ? UINT32_MAX : type), tb));
        if (ne[0] % (uint64_t)ti->block_elems)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' rows of %llu values are not whole %s blocks of %d",
                             c->label, name, (unsigned long long)ne[0], ti->name, ti->block_elems);
        uint64_t blocks = elems / (uint64_t)ti->block_elems;
        if (blocks > UINT64_MAX / (uint64_t)ti->block_bytes)
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' byte size overflows", c->label, name);
        t->type = (uint32_t)type;
        t->ndim = (int)nd;
        for (uint64_t d = 0; d < nd; d++) t->shape[nd - 1 - d] = (int64_t)ne[d];
        t->nbytes = blocks * (uint64_t)ti->block_bytes;
    }
    return DSV4_OK;
}

static int by_offset_cmp(const void *a, const void *b, void *ctx)
{
    const uint64_t *off = ctx;
    uint64_t x = off[*(const int *)a], y = off[*(const int *)b];
    return x < y ? -1 : x > y;
}

/* Parses one part image. part 0 keeps its metadata in g->meta; other parts'
 * metadata goes to *other (freed by the caller). */
static dsv4_status parse_part(gguf_file *g, int part, gg_meta *other)
{
    const gg_part *p = &g->parts[part];
    cursor c = {p->base, p->len, 0, p->path};
    uint64_t magic, ver, n_t, n_kv;
    dsv4_status st;
    if (p->len < 4 || memcmp(p->base, "GGUF", 4))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: not a GGUF file (no GGUF magic)", p->path);
    if ((st = rd(&c, 4, &magic, "magic")) || (st = rd(&c, 4, &ver, "version"))) return st;
    if (ver != 3) {
        if (ver == 1 || ver == 2)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: GGUF version %llu is not supported (version 3 only; "
                             "re-convert the model with a current llama.cpp)", p->path, (unsigned long long)ver);
        if ((ver & 0xFFFF) == 0 && ver >> 16)
            return dsv4_fail(DSV4_ERR_UNSUPPORTED, "%s: big-endian GGUF files are not supported", p->path);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: unknown GGUF version %llu", p->path, (unsigned long long)ver);
    }
    if ((st = rd(&c, 8, &n_t, "tensor count")) || (st = rd(&c, 8, &n_kv, "metadata count"))) return st;
    gg_meta *m = part == 0 ? &g->meta : other;
    if ((st = rd_meta(&c, n_kv, m))) return st;
    /* a tensor info takes at least 8 + 1 + 4 + 8 + 4 + 8 bytes */
    if (n_t > GGUF_MAX_COUNT || g->n_t > GGUF_MAX_COUNT || n_t > (c.len - c.off) / 33)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF header claims %llu tensors, more than the file can hold", p->path,
                         (unsigned long long)n_t);
    gguf_tensor *grown = realloc(g->t, (size_t)(g->n_t + (int)n_t + 1) * sizeof *grown);
    uint64_t *offs = malloc((size_t)(g->n_t + (int)n_t + 1) * sizeof *offs);
    int *order = malloc((size_t)(n_t + 1) * sizeof *order);
    if (grown) g->t = grown;
    if (!grown || !offs || !order) {
        free(offs);
        free(order);
        return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", p->path);
    }
    int first = g->n_t;
    st = rd_tensor_infos(g, &c, n_t, part, offs);
    uint64_t align = GGUF_DEFAULT_ALIGN;
    const gguf_kv *ak = st ? NULL : meta_find(m, "general.alignment");
    if (ak) {
        int64_t a;
        if (ak->type != GGUF_T_U32 || !gguf_kv_int(ak, 0, &a) || a == 0 || (a & (a - 1)))
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF general.alignment must be a power-of-two u32", p->path);
        else
            align = (uint64_t)a;
    }
    if (!st) {
        uint64_t start = (c.off + align - 1) / align * align;
        uint64_t dlen = start <= p->len ? p->len - start : 0;
        if (n_t && start > p->len)
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF data section would start at byte %llu, past the end", p->path,
                           (unsigned long long)start);
        for (int i = first; !st && i < g->n_t; i++) {
            gguf_tensor *t = &g->t[i];
            if (offs[i] % align)
                st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' offset %llu is not a multiple of the alignment %llu",
                               p->path, t->name, (unsigned long long)offs[i], (unsigned long long)align);
            else if (offs[i] > dlen || t->nbytes > dlen - offs[i])
                st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensor '%s' (offset %llu, %llu bytes) runs past the end of "
                               "the file's data section (%llu bytes)", p->path, t->name, (unsigned long long)offs[i],
                               (unsigned long long)t->nbytes, (unsigned long long)dlen);
            else
                t->data = p->base + start + offs[i];
        }
        for (int i = 0; i < (int)n_t; i++) order[i] = first + i;
        if (!st) qsort_r(order, (size_t)n_t, sizeof *order, by_offset_cmp, offs);
        for (int i = 1; !st && i < (int)n_t; i++) {
            const gguf_tensor *a = &g->t[order[i - 1]], *b = &g->t[order[i]];
            if (offs[order[i - 1]] + a->nbytes > offs[order[i]])
                st = dsv4_fail(DSV4_ERR_FORMAT, "%s: GGUF tensors '%s' and '%s' overlap", p->path, a->name, b->name);
        }
    }
    free(offs);
    free(order);
    return st;
}

static dsv4_status add_part(gguf_file *g, const char *label, const void *base, size_t len, int mapped)
{
    gg_part *p = realloc(g->parts, (size_t)(g->n_parts + 1) * sizeof *p);
    char *path = strdup(label);
    if (p) g->parts = p;
    if (!p || !path) {
        free(path);
        if (mapped) munmap((void *)base, len);
        return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", label);
    }
    g->parts[g->n_parts++] = (gg_part){path, base, len, mapped};
    g->bytes += len;
    return DSV4_OK;
}

static dsv4_status map_part(gguf_file *g, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dsv4_fail(DSV4_ERR_IO, "%s: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return dsv4_fail(DSV4_ERR_IO, "%s: not a regular file", path);
    }
    if (sb.st_size < 24) {
        close(fd);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %lld bytes is too short for a GGUF file", path, (long long)sb.st_size);
    }
    void *base = mmap(NULL, (size_t)sb.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
    close(fd);
    if (base == MAP_FAILED) return dsv4_fail(DSV4_ERR_IO, "%s: mmap: %s", path, strerror(errno));
    return add_part(g, path, base, (size_t)sb.st_size, 1);
}

static dsv4_status new_file(gguf_file **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? DSV4_OK : dsv4_fail(DSV4_ERR_NOMEM, "gguf: out of memory");
}

dsv4_status gguf_open_memory(const void *buf, size_t len, const char *label, gguf_file **out)
{
    gguf_file *g;
    dsv4_status st = new_file(&g);
    if (!st) st = add_part(g, label, buf, len, 0);
    if (!st) st = parse_part(g, 0, NULL);
    if (st) { gguf_close(g); g = NULL; }
    *out = g;
    return st;
}

/* "PREFIX-00001-of-00003.gguf": sets *no (1-based), *count, *plen (prefix
 * length); 0 when the name has no split suffix. */
static int split_name(const char *path, int *no, int *count, size_t *plen)
{
    size_t n = strlen(path);
    *no = *count = 0;
    *plen = 0;
    const char *suf = "-00000-of-00000.gguf";
    size_t sl = strlen(suf);
    if (n < sl) return 0;
    const char *s = path + n - sl;
    for (size_t i = 0; i < sl; i++) {
        if (suf[i] == '0' ? (s[i] < '0' || s[i] > '9') : s[i] != suf[i]) return 0;
    }
    *no = atoi(s + 1);
    *count = atoi(s + 10);
    *plen = n - sl;
    return 1;
}

static int64_t meta_int(const gg_meta *m, const char *key, int64_t dflt)
{
    const gguf_kv *kv = meta_find(m, key);
    int64_t v;
    return kv && kv->type != GGUF_T_ARRAY && gguf_kv_int(kv, 0, &v) ? v : dflt;
}

/* Each part says which it is; together they hold split.tensors.count tensors. */
static dsv4_status check_split_keys(const gguf_file *g, int part, const gg_meta *m, int count)
{
    const char *path = g->parts[part].path;
    int64_t no = meta_int(m, "split.no", -1), cnt = meta_int(m, "split.count", -1);
    if (no != part || cnt != count)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: split.no = %lld, split.count = %lld; the file name says part %d of %d",
                         path, (long long)no, (long long)cnt, part + 1, count);
    return DSV4_OK;
}

dsv4_status gguf_open(const char *path, gguf_file **out)
{
    *out = NULL;
    gguf_file *g;
    dsv4_status st = new_file(&g);
    if (st) return st;
    int no, count;
    size_t plen;
    int split = split_name(path, &no, &count, &plen);
    if (split && (count < 1 || count > GGUF_MAX_PARTS || no < 1 || no > count))
        split = 0; /* not a split-set name after all (e.g. -00000-of-00000) */
    if (split && no != 1) {
        gguf_close(g);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: part %d of a split GGUF; open the first part (-00001-of-%05d.gguf)",
                         path, no, count);
    }
    if (!(st = map_part(g, path))) st = parse_part(g, 0, NULL);
    int64_t file_count = st ? 1 : meta_int(&g->meta, "split.count", 1);
    if (!st && file_count > 1 && !split)
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: split.count is %lld but the name has no -00001-of-%05lld.gguf suffix",
                       path, (long long)file_count, (long long)file_count);
    if (!st && split) st = check_split_keys(g, 0, &g->meta, count);
    for (int k = 1; !st && split && k < count; k++) {
        char *p = malloc(plen + 32);
        if (!p) { st = dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); break; }
        snprintf(p, plen + 32, "%.*s-%05d-of-%05d.gguf", (int)plen, path, k + 1, count);
        gg_meta other = {0};
        if (!io_is_file(p))
            st = dsv4_fail(DSV4_ERR_IO, "%s: missing part %d of %d of the split GGUF (%s)", path, k + 1, count, p);
        if (!st) st = map_part(g, p);
        if (!st) st = parse_part(g, k, &other);
        if (!st) st = check_split_keys(g, k, &other, count);
        meta_free(&other);
        free(p);
    }
    if (!st && split) {
        int64_t want = meta_int(&g->meta, "split.tensors.count", -1);
        if (want != g->n_t)
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: split.tensors.count is %lld but the %d parts hold %d tensors", path,
                           (long long)want, count, g->n_t);
    }
    if (st) { gguf_close(g); return st; }
    *out = g;
    return DSV4_OK;
}

#include "io/safetensors.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <fcntl.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include "base/error.h"
#include "base/strmap.h"
#include "io/fileio.h"
#include "io/json_parse.h"

/* A header above this is not a checkpoint (V4 shards carry a few MB). */
#define ST_HEADER_MAX (100u << 20)
/* An index lists names and shard file names only. */
#define ST_INDEX_MAX (64u << 20)
#define ST_INDEX_NAME "model.safetensors.index.json"

typedef struct {
    char *path;          /* for messages */
    const uint8_t *base; /* whole file image */
    size_t len;
    int mapped;          /* 1: munmap base on close */
} st_file;

struct st_archive {
    st_file *files;
    int n_files;
    st_tensor *t;
    int n, cap;
    strmap by_name; /* name -> index into t; keys are the t[i].name strings */
    uint64_t bytes;
};

void st_close(st_archive *a)
{
    if (!a) return;
    for (int i = 0; i < a->n_files; i++) {
        if (a->files[i].mapped) munmap((void *)a->files[i].base, a->files[i].len);
        free(a->files[i].path);
    }
    for (int i = 0; i < a->n; i++) free((char *)a->t[i].name);
    free(a->files);
    free(a->t);
    strmap_free(&a->by_name);
    free(a);
}

int st_count(const st_archive *a) { return a->n; }

const st_tensor *st_get(const st_archive *a, int i)
{
    return i >= 0 && i < a->n ? &a->t[i] : NULL;
}

const st_tensor *st_find(const st_archive *a, const char *name)
{
    int i = strmap_get(&a->by_name, name);
    return i >= 0 ? &a->t[i] : NULL;
}

uint64_t st_mapped_bytes(const st_archive *a) { return a->bytes; }

static dsv4_status st_new(st_archive **out)
{
    *out = calloc(1, sizeof **out);
    return *out ? DSV4_OK : dsv4_fail(DSV4_ERR_NOMEM, "safetensors: out of memory");
}

/* Register a file image; the archive owns path and (if mapped) the mapping
 * from here on, so every later error path is covered by st_close(). */
static dsv4_status add_image(st_archive *a, const char *label, const void *base, size_t len,
                             int mapped)
{
    st_file *f = realloc(a->files, (size_t)(a->n_files + 1) * sizeof *f);
    char *path = strdup(label);
    if (f) a->files = f;
    if (!f || !path) {
        free(path);
        if (mapped) munmap((void *)base, len);
        return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", label);
    }
    a->files[a->n_files++] = (st_file){path, base, len, mapped};
    a->bytes += len;
    return DSV4_OK;
}

/* ---- header validation ---- */

static dsv4_status bad(const char *file, const char *name, const char *what)
{
    return dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': %s", file, name, what);
}

static dsv4_status check_metadata(const char *file, const cJSON *m)
{
    if (cJSON_IsNull(m)) return DSV4_OK;
    if (!cJSON_IsObject(m))
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: __metadata__ is not an object", file);
    for (const cJSON *e = m->child; e; e = e->next)
        if (!cJSON_IsString(e))
            return dsv4_fail(DSV4_ERR_FORMAT, "%s: __metadata__ '%s': value is not a string",
                             file, e->string);
    return DSV4_OK;
}

/* Fill t (except name/shard) from one header entry; data area is [data, data+dlen). */
static dsv4_status parse_entry(const char *file, const char *name, const cJSON *e,
                               const uint8_t *data, uint64_t dlen, st_tensor *t)
{
    if (!cJSON_IsObject(e)) return bad(file, name, "entry is not an object");
    const cJSON *dt = cJSON_GetObjectItemCaseSensitive(e, "dtype");
    const cJSON *sh = cJSON_GetObjectItemCaseSensitive(e, "shape");
    const cJSON *off = cJSON_GetObjectItemCaseSensitive(e, "data_offsets");
    if (!cJSON_IsString(dt)) return bad(file, name, "missing or non-string \"dtype\"");
    int d = dtype_from_name(dt->valuestring);
    if (d < 0)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': unknown dtype '%s'", file, name,
                         dt->valuestring);
    t->dtype = (dsv4_dtype)d;

    if (!cJSON_IsArray(sh)) return bad(file, name, "missing or non-array \"shape\"");
    int nd = cJSON_GetArraySize(sh);
    if (nd > ST_MAX_DIMS)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': %d dims (at most %d supported)", file,
                         name, nd, ST_MAX_DIMS);
    t->ndim = nd;
    uint64_t elems = 1;
    int k = 0;
    for (const cJSON *v = sh->child; v; v = v->next, k++) {
        int64_t x;
        if (!json_int_in(v, 0, INT64_MAX, &x))
            return dsv4_fail(DSV4_ERR_FORMAT,
                             "%s: tensor '%s': shape[%d] is not a non-negative integer", file,
                             name, k);
        t->shape[k] = x;
        if (__builtin_mul_overflow(elems, (uint64_t)x, &elems))
            return bad(file, name, "shape has too many elements");
    }
    uint64_t want;
    if (__builtin_mul_overflow(elems, (uint64_t)dtype_size(t->dtype), &want))
        return bad(file, name, "shape has too many bytes");

    int64_t b, en;
    if (!cJSON_IsArray(off) || cJSON_GetArraySize(off) != 2 ||
        !json_int_in(off->child, 0, INT64_MAX, &b) ||
        !json_int_in(off->child->next, 0, INT64_MAX, &en))
        return bad(file, name, "\"data_offsets\" is not a pair of non-negative integers");
    if (b > en)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': data_offsets begin %lld > end %lld",
                         file, name, (long long)b, (long long)en);
    if ((uint64_t)en > dlen)
        return dsv4_fail(DSV4_ERR_FORMAT,
                         "%s: tensor '%s': data_offsets end %lld beyond the data area (%llu bytes)",
                         file, name, (long long)en, (unsigned long long)dlen);
    t->nbytes = (uint64_t)(en - b);
    if (t->nbytes != want)
        return dsv4_fail(DSV4_ERR_FORMAT,
                         "%s: tensor '%s': %llu data bytes but shape x %s needs %llu", file, name,
                         (unsigned long long)t->nbytes, dtype_name(t->dtype),
                         (unsigned long long)want);
    t->data = data + b;
    return DSV4_OK;
}

static int by_offset(const void *x, const void *y)
{
    const st_tensor *a = *(const st_tensor *const *)x, *b = *(const st_tensor *const *)y;
    if (a->data != b->data) return (const uint8_t *)a->data < (const uint8_t *)b->data ? -1 : 1;
    return 0;
}

/* Tensors [first, a->n) come from one file: no two may share a byte. Empty
 * tensors hold no bytes and cannot overlap anything. */
static dsv4_status check_overlap(st_archive *a, int first, const char *file,
                                 const uint8_t *data)
{
    int n = a->n - first, m = 0;
    if (n < 2) return DSV4_OK;
    const st_tensor **v = malloc((size_t)n * sizeof *v);
    if (!v) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", file);
    for (int i = first; i < a->n; i++)
        if (a->t[i].nbytes) v[m++] = &a->t[i];
    qsort(v, (size_t)m, sizeof *v, by_offset);
    dsv4_status st = DSV4_OK;
    for (int i = 1; i < m; i++) {
        const uint8_t *pe = (const uint8_t *)v[i - 1]->data + v[i - 1]->nbytes;
        const uint8_t *cb = v[i]->data;
        if (cb < pe) {
            st = dsv4_fail(DSV4_ERR_FORMAT,
                           "%s: tensor '%s': data [%llu, %llu) overlaps tensor '%s' [%llu, %llu)",
                           file, v[i]->name, (unsigned long long)(cb - data),
                           (unsigned long long)(cb - data + v[i]->nbytes), v[i - 1]->name,
                           (unsigned long long)((const uint8_t *)v[i - 1]->data - data),
                           (unsigned long long)(pe - data));
            break;
        }
    }
    free(v);
    return st;
}

static dsv4_status add_tensor(st_archive *a, const char *file, const char *name,
                              const st_tensor *t)
{
    if (a->n == a->cap) {
        int cap = a->cap ? a->cap * 2 : 64;
        st_tensor *nt = realloc(a->t, (size_t)cap * sizeof *nt);
        if (!nt) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", file);
        a->t = nt;
        a->cap = cap;
    }
    char *nm = strdup(name);
    if (!nm) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", file);
    int old = -1, r = strmap_put(&a->by_name, nm, a->n, &old);
    if (r != 0) {
        free(nm);
        if (r < 0) return dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", file);
        const char *where = a->files[a->t[old].shard].path;
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': duplicate name (also in %s)", file,
                         name, where);
    }
    a->t[a->n] = *t;
    a->t[a->n].name = nm;
    a->n++;
    return DSV4_OK;
}

/* Parse the header of the file image registered last and append its tensors. */
static dsv4_status parse_last_image(st_archive *a)
{
    const int shard = a->n_files - 1;
    const st_file *f = &a->files[shard];
    const char *file = f->path;
    if (f->len < 8)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: %zu bytes, too short for a safetensors header",
                         file, f->len);
    uint64_t hlen = 0;
    for (int i = 7; i >= 0; i--) hlen = hlen << 8 | f->base[i];
    if (hlen > ST_HEADER_MAX)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: header length %llu is absurd (limit %u)", file,
                         (unsigned long long)hlen, ST_HEADER_MAX);
    if (hlen > f->len - 8)
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: header length %llu exceeds the file (%zu bytes)",
                         file, (unsigned long long)hlen, f->len);
    const uint8_t *data = f->base + 8 + hlen;
    uint64_t dlen = f->len - 8 - hlen;

    char label[1024];
    snprintf(label, sizeof label, "%s: header", file);
    cJSON *root;
    dsv4_status st = json_parse_all((const char *)f->base + 8, (size_t)hlen, label, &root);
    if (st) return st;
    if (!cJSON_IsObject(root)) {
        cJSON_Delete(root);
        return dsv4_fail(DSV4_ERR_FORMAT, "%s: header is not a JSON object", file);
    }
    const int first = a->n;
    int seen_meta = 0;
    for (const cJSON *e = root->child; e && !st; e = e->next) {
        if (strcmp(e->string, "__metadata__") == 0) {
            st = seen_meta ? dsv4_fail(DSV4_ERR_FORMAT, "%s: duplicate __metadata__", file)
                           : check_metadata(file, e);
            seen_meta = 1;
            continue;
        }
        st_tensor t = {0};
        t.shard = shard;
        st = parse_entry(file, e->string, e, data, dlen, &t);
        if (!st) st = add_tensor(a, file, e->string, &t);
    }
    cJSON_Delete(root);
    if (!st) st = check_overlap(a, first, file, data);
    return st;
}

static dsv4_status add_file(st_archive *a, const char *path)
{
    int fd = open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return dsv4_fail(DSV4_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return dsv4_fail(DSV4_ERR_IO, "%s: not a regular file", path);
    }
    size_t len = (size_t)sb.st_size;
    /* mmap cannot map 0 bytes; an empty image still gets a proper message. */
    static const uint8_t empty[1];
    const void *base = empty;
    if (len) {
        base = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
        if (base == MAP_FAILED) {
            int e = errno;
            close(fd);
            return dsv4_fail(DSV4_ERR_IO, "%s: mmap failed: %s", path, strerror(e));
        }
    }
    close(fd);
    dsv4_status st = add_image(a, path, base, len, len != 0);
    return st ? st : parse_last_image(a);
}

dsv4_status st_open_file(const char *path, st_archive **out)
{
    *out = NULL;
    st_archive *a;
    dsv4_status st = st_new(&a);
    if (!st) st = add_file(a, path);
    if (st) {
        st_close(a);
        return st;
    }
    *out = a;
    return DSV4_OK;
}

dsv4_status st_open_memory(const void *buf, size_t len, const char *label, st_archive **out)
{
    *out = NULL;
    st_archive *a;
    dsv4_status st = st_new(&a);
    if (!st) st = add_image(a, label, buf, len, 0);
    if (!st) st = parse_last_image(a);
    if (st) {
        st_close(a);
        return st;
    }
    *out = a;
    return DSV4_OK;
}

/* ---- directories ---- */

/* Shard names come from the index: keep them inside the directory. */
static int plain_name(const char *s)
{
    return s[0] && !strchr(s, '/') && strcmp(s, ".") != 0 && strcmp(s, "..") != 0;
}

static dsv4_status open_indexed(st_archive *a, const char *dir, const char *ipath)
{
    char *text;
    size_t len;
    dsv4_status st = io_read_all(ipath, ST_INDEX_MAX, &text, &len);
    if (st) return st;
    cJSON *root;
    st = json_parse_all(text, len, ipath, &root);
    free(text);
    if (st) return st;
    const cJSON *wm = cJSON_GetObjectItemCaseSensitive(root, "weight_map");
    strmap shards = {0}; /* shard file name -> file index; keys live in root */
    if (!cJSON_IsObject(root) || !cJSON_IsObject(wm))
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: no \"weight_map\" object", ipath);
    else if (!wm->child)
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: \"weight_map\" is empty", ipath);
    /* Open each distinct shard once, in order of first mention. */
    for (const cJSON *e = st ? NULL : wm->child; e && !st; e = e->next) {
        if (!cJSON_IsString(e) || !plain_name(e->valuestring)) {
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: tensor '%s': shard is not a plain file name",
                           ipath, e->string);
            break;
        }
        int r = strmap_put(&shards, e->valuestring, a->n_files, NULL);
        if (r < 0) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", ipath);
        if (r != 0) continue;
        char *p = io_join(dir, e->valuestring);
        if (!p) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", ipath);
        else if (!io_is_file(p))
            st = dsv4_fail(DSV4_ERR_IO, "%s: shard missing (named by %s for tensor '%s')", p,
                           ST_INDEX_NAME, e->string);
        else
            st = add_file(a, p);
        free(p);
    }
    /* Every indexed tensor must live in the shard the index names. */
    for (const cJSON *e = st ? NULL : wm->child; e && !st; e = e->next) {
        const st_tensor *t = st_find(a, e->string);
        int want = strmap_get(&shards, e->valuestring);
        if (!t || t->shard != want)
            st = dsv4_fail(DSV4_ERR_FORMAT,
                           "%s: tensor '%s': listed in %s but absent from that shard",
                           a->files[want].path, e->string, ST_INDEX_NAME);
    }
    strmap_free(&shards);
    cJSON_Delete(root);
    return st;
}

static int has_st_suffix(const struct dirent *d)
{
    size_t n = strlen(d->d_name), k = strlen(".safetensors");
    return n > k && strcmp(d->d_name + n - k, ".safetensors") == 0;
}

/* No index and no model.safetensors: take every *.safetensors, sorted. */
static dsv4_status open_all(st_archive *a, const char *dir)
{
    struct dirent **list;
    int n = scandir(dir, &list, has_st_suffix, alphasort);
    if (n < 0) return dsv4_fail(DSV4_ERR_IO, "%s: cannot list: %s", dir, strerror(errno));
    dsv4_status st = DSV4_OK;
    if (n == 0)
        st = dsv4_fail(DSV4_ERR_IO, "%s: no model.safetensors, %s or *.safetensors", dir,
                       ST_INDEX_NAME);
    for (int i = 0; i < n; i++) {
        if (!st) {
            char *p = io_join(dir, list[i]->d_name);
            st = p ? add_file(a, p) : dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", dir);
            free(p);
        }
        free(list[i]);
    }
    free(list);
    return st;
}

dsv4_status st_open_dir(const char *dir, st_archive **out)
{
    *out = NULL;
    st_archive *a;
    dsv4_status st = st_new(&a);
    if (st) return st;
    char *ipath = io_join(dir, ST_INDEX_NAME);
    char *single = io_join(dir, "model.safetensors");
    if (!ipath || !single)
        st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", dir);
    else if (io_is_file(ipath))
        st = open_indexed(a, dir, ipath);
    else if (io_is_file(single))
        st = add_file(a, single);
    else
        st = open_all(a, dir);
    free(ipath);
    free(single);
    if (st) {
        st_close(a);
        return st;
    }
    *out = a;
    return DSV4_OK;
}

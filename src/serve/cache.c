#include "serve/cache.h"

#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "serve/kvstore.h"

/* A verified state file: the tokens it holds (for matching prompts). */
typedef struct {
    char name[24];
    int32_t *tokens;
    int n;
} disk_entry;

struct cache {
    dsv4_model *m;
    metrics *met;
    uint64_t budget, id;
    int max_pos;
    dsv4_memory_info mem;
    cache_slot **slots;
    int n_slots, cap_slots;
    uint64_t clock;
    char *dir;
    disk_entry *disk;
    int n_disk, cap_disk;
};

static void logf_(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void logf_(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "dsv4 serve: ");
    vfprintf(stderr, fmt, ap);
    fputc('\n', stderr);
    va_end(ap);
}

static int lcp(const int32_t *a, int na, const int32_t *b, int nb)
{
    int n = na < nb ? na : nb, i = 0;
    while (i < n && a[i] == b[i]) i++;
    return i;
}

static uint64_t slot_bytes(const cache *c, const cache_slot *sl)
{
    uint64_t b = c->mem.fixed_bytes + (uint64_t)(c->mem.bytes_per_token * (double)sl->n_held);
    for (int i = 0; i < sl->n_marks; i++) {
        size_t len;
        dsv4_snapshot_data(sl->marks[i].snap, &len);
        b += len;
    }
    return b;
}

static void drop_marks_from(cache_slot *sl, int first)
{
    for (int i = first; i < sl->n_marks; i++) dsv4_snapshot_free(sl->marks[i].snap);
    if (first < sl->n_marks) sl->n_marks = first;
}

static void slot_free(cache_slot *sl)
{
    if (!sl) return;
    drop_marks_from(sl, 0);
    dsv4_session_free(sl->s);
    free(sl->held);
    free(sl);
}

static void remove_slot(cache *c, int i)
{
    slot_free(c->slots[i]);
    c->slots[i] = c->slots[--c->n_slots];
    metrics_set(c->met, MET_RESIDENT, c->n_slots);
}

/* Evicts idle sessions, least recently used first, while over budget. */
static void evict(cache *c)
{
    for (;;) {
        uint64_t total = 0;
        int lru = -1;
        for (int i = 0; i < c->n_slots; i++) {
            total += slot_bytes(c, c->slots[i]);
            if (!c->slots[i]->busy && (lru < 0 || c->slots[i]->used < c->slots[lru]->used)) lru = i;
        }
        if (total <= c->budget || lru < 0) return;
        remove_slot(c, lru);
    }
}

/* ---- the kv folder ---- */

static void disk_forget(cache *c, int i)
{
    free(c->disk[i].tokens);
    c->disk[i] = c->disk[--c->n_disk];
}

static int disk_find(const cache *c, const char *name)
{
    for (int i = 0; i < c->n_disk; i++)
        if (!strcmp(c->disk[i].name, name)) return i;
    return -1;
}

static void disk_add(cache *c, const char *name, int32_t *tokens, int n)
{
    int i = disk_find(c, name);
    if (i >= 0) disk_forget(c, i);
    if (c->n_disk == c->cap_disk) {
        int cap = c->cap_disk ? 2 * c->cap_disk : 16;
        disk_entry *g = realloc(c->disk, (size_t)cap * sizeof *g);
        if (!g) { free(tokens); return; }
        c->disk = g;
        c->cap_disk = cap;
    }
    disk_entry *e = &c->disk[c->n_disk++];
    snprintf(e->name, sizeof e->name, "%s", name);
    e->tokens = tokens;
    e->n = n;
}

/* Reads and verifies one file (also as a snapshot of this model). */
static dsv4_status disk_load(cache *c, const char *name, int32_t **tokens, int *n, dsv4_snapshot **snap)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s", c->dir, name);
    void *img;
    size_t len;
    *snap = NULL;
    dsv4_status st = kv_read(path, c->id, c->max_pos, tokens, n, &img, &len);
    if (st) return st;
    st = dsv4_snapshot_from_data(c->m, img, len, snap);
    free(img);
    if (!st && dsv4_snapshot_pos(*snap) != *n)
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: the image holds %lld positions, the file %d tokens", path,
                       (long long)dsv4_snapshot_pos(*snap), *n);
    else if (st) {
        char pre[4100];
        snprintf(pre, sizeof pre, "%s: ", path);
        dsv4_fail_prefix(st, pre);
    }
    if (st) {
        dsv4_snapshot_free(*snap);
        *snap = NULL;
        free(*tokens);
        *tokens = NULL;
    }
    return st;
}

static void disk_scan(cache *c)
{
    DIR *d = opendir(c->dir);
    if (!d) return;
    struct dirent *de;
    while ((de = readdir(d))) {
        size_t l = strlen(de->d_name);
        if (de->d_name[0] == '.' || l != 19 || strcmp(de->d_name + 16, ".kv")) continue;
        int32_t *tokens;
        int n;
        dsv4_snapshot *snap;
        if (disk_load(c, de->d_name, &tokens, &n, &snap)) {
            logf_("kv-dir: %s; ignored", dsv4_last_error());
            metrics_add(c->met, MET_DISK_REJECTS, 1);
            continue;
        }
        dsv4_snapshot_free(snap);
        disk_add(c, de->d_name, tokens, n);
    }
    closedir(d);
    logf_("kv-dir %s: %d stored states", c->dir, c->n_disk);
}

static void disk_store(cache *c, const int32_t *tokens, int n, const dsv4_snapshot *snap)
{
    char name[24];
    kv_name(c->id, tokens, n, name);
    if (disk_find(c, name) >= 0) return;
    if (kv_write(c->dir, c->id, tokens, n, snap)) {
        logf_("kv-dir: %s", dsv4_last_error());
        return;
    }
    int32_t *copy = malloc((size_t)n * sizeof *copy);
    if (!copy) return;
    memcpy(copy, tokens, (size_t)n * sizeof *copy);
    disk_add(c, name, copy, n);
    metrics_add(c->met, MET_DISK_WRITES, 1);
}

/* ---- open / acquire / release ---- */

dsv4_status cache_open(dsv4_model *m, uint64_t budget, const char *kv_dir, metrics *met, cache **out)
{
    cache *c = calloc(1, sizeof *c);
    if (!c) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    c->m = m;
    c->met = met;
    c->budget = budget;
    c->id = dsv4_model_identity(m);
    c->max_pos = dsv4_model_max_positions(m);
    dsv4_model_memory(m, &c->mem);
    if (kv_dir && !(c->dir = strdup(kv_dir))) { free(c); return dsv4_fail(DSV4_ERR_NOMEM, "out of memory"); }
    if (c->dir) disk_scan(c);
    *out = c;
    return DSV4_OK;
}

void cache_close(cache *c)
{
    if (!c) return;
    for (int i = 0; i < c->n_slots; i++) slot_free(c->slots[i]);
    for (int i = 0; i < c->n_disk; i++) free(c->disk[i].tokens);
    free(c->slots);
    free(c->disk);
    free(c->dir);
    free(c);
}

static dsv4_status new_slot(cache *c, cache_slot **out)
{
    *out = NULL;
    if (c->n_slots == c->cap_slots) {
        int cap = c->cap_slots ? 2 * c->cap_slots : 16;
        cache_slot **g = realloc(c->slots, (size_t)cap * sizeof *g);
        if (!g) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        c->slots = g;
        c->cap_slots = cap;
    }
    cache_slot *sl = calloc(1, sizeof *sl);
    if (!sl) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    dsv4_status st = dsv4_session_new(c->m, &sl->s);
    if (st) { free(sl); return st; }
    c->slots[c->n_slots++] = sl;
    metrics_set(c->met, MET_RESIDENT, c->n_slots);
    *out = sl;
    return DSV4_OK;
}

dsv4_status cache_held_add(cache_slot *sl, const int32_t *t, int n)
{
    if (sl->n_held + n > sl->cap_held) {
        int cap = (sl->n_held + n) * 2 + 64;
        int32_t *g = realloc(sl->held, (size_t)cap * sizeof *g);
        if (!g) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
        sl->held = g;
        sl->cap_held = cap;
    }
    memcpy(sl->held + sl->n_held, t, (size_t)n * sizeof *t);
    sl->n_held += n;
    return DSV4_OK;
}

dsv4_status cache_acquire(cache *c, const int32_t *p, int n, cache_slot **out, int *reused)
{
    *out = NULL;
    *reused = 0;
    cache_slot *best = NULL;
    int best_r = 0, best_mark = -1, best_disk = -1;
    for (int i = 0; i < c->n_slots; i++) {
        cache_slot *sl = c->slots[i];
        if (sl->busy) continue;
        int L = lcp(sl->held, sl->n_held, p, n);
        if (L == sl->n_held && L < n && L > best_r) { best = sl; best_r = L; best_mark = -1; }
        for (int k = 0; k < sl->n_marks; k++) {
            int64_t pos = sl->marks[k].pos;
            if (pos <= L && pos < n && pos > best_r) { best = sl; best_r = (int)pos; best_mark = k; }
        }
    }
    for (int i = 0; i < c->n_disk; i++) {
        disk_entry *e = &c->disk[i];
        if (e->n < n && e->n > best_r && lcp(e->tokens, e->n, p, n) == e->n) { best_disk = i; best_r = e->n; }
    }
    dsv4_status st;
    if (best_disk >= 0) {
        char name[24];
        snprintf(name, sizeof name, "%s", c->disk[best_disk].name);
        int32_t *tokens;
        int nt;
        dsv4_snapshot *snap;
        if (disk_load(c, name, &tokens, &nt, &snap)) {
            logf_("kv-dir: %s; ignored", dsv4_last_error());
            metrics_add(c->met, MET_DISK_REJECTS, 1);
            disk_forget(c, best_disk);
            return cache_acquire(c, p, n, out, reused); /* the next best */
        }
        cache_slot *sl;
        if ((st = new_slot(c, &sl))) { free(tokens); dsv4_snapshot_free(snap); return st; }
        st = dsv4_session_restore(sl->s, snap);
        dsv4_snapshot_free(snap);
        if (!st) st = cache_held_add(sl, tokens, nt);
        free(tokens);
        if (st) { remove_slot(c, c->n_slots - 1); return st; }
        metrics_add(c->met, MET_DISK_LOADS, 1);
        best = sl;
        best_r = nt;
    } else if (best && best_mark >= 0) {
        if ((st = dsv4_session_restore(best->s, best->marks[best_mark].snap))) return st;
        best->n_held = best_r;
        drop_marks_from(best, best_mark + 1);
    } else if (!best) {
        /* A fresh session; an idle one is recycled when memory is short. */
        if ((st = new_slot(c, &best))) return st;
    }
    best->busy = 1;
    best->used = ++c->clock;
    /* Marks past the reuse point describe another continuation. */
    int k = 0;
    while (k < best->n_marks && best->marks[k].pos <= best_r) k++;
    drop_marks_from(best, k);
    metrics_add(c->met, best_r ? MET_CACHE_HITS : MET_CACHE_MISSES, 1);
    metrics_add(c->met, MET_CACHED_TOKENS, (uint64_t)best_r);
    evict(c);
    *out = best;
    *reused = best_r;
    return DSV4_OK;
}

dsv4_status cache_mark(cache *c, cache_slot *sl)
{
    (void)c;
    if (sl->n_marks && sl->marks[sl->n_marks - 1].pos == sl->n_held) return DSV4_OK;
    dsv4_snapshot *snap;
    dsv4_status st = dsv4_session_snapshot(sl->s, &snap);
    if (st) return st;
    if (sl->n_marks == CACHE_MAX_MARKS) {
        dsv4_snapshot_free(sl->marks[0].snap);
        memmove(sl->marks, sl->marks + 1, (CACHE_MAX_MARKS - 1) * sizeof sl->marks[0]);
        sl->n_marks--;
    }
    sl->marks[sl->n_marks++] = (cache_mark_t){sl->n_held, snap, 0};
    return DSV4_OK;
}

void cache_release(cache *c, cache_slot *sl, int ok)
{
    int i = 0;
    while (i < c->n_slots && c->slots[i] != sl) i++;
    if (i == c->n_slots) return;
    if (!ok || dsv4_session_poisoned(sl->s)) { remove_slot(c, i); return; }
    sl->busy = 0;
    sl->used = ++c->clock;
    if (c->dir && sl->n_held > 0) {
        for (int k = 0; k < sl->n_marks; k++)
            if (!sl->marks[k].saved && sl->marks[k].pos > 0) {
                disk_store(c, sl->held, (int)sl->marks[k].pos, sl->marks[k].snap);
                sl->marks[k].saved = 1;
            }
        dsv4_snapshot *snap;
        if (!dsv4_session_snapshot(sl->s, &snap)) {
            disk_store(c, sl->held, sl->n_held, snap);
            dsv4_snapshot_free(snap);
        }
    }
    evict(c);
}

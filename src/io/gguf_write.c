/* GGUF v3 image writer: see gguf_write.h. */
#include "io/gguf_write.h"

#include <stdlib.h>
#include <string.h>

#include "base/error.h"
#include "io/gguf.h"

#define GW_ALIGN 32 /* GGUF's default general.alignment */

static void put(gguf_writer *w, int infos, const void *p, size_t n)
{
    uint8_t **b = infos ? &w->ti : &w->kv;
    size_t *len = infos ? &w->n_tib : &w->n_kvb, *cap = infos ? &w->cap_ti : &w->cap_kv;
    if (w->oom) return;
    if (*len + n > *cap) {
        size_t c = (*len + n) * 2 + 256;
        uint8_t *g = realloc(*b, c);
        if (!g) { w->oom = 1; return; }
        *b = g;
        *cap = c;
    }
    memcpy(*b + *len, p, n);
    *len += n;
}

static void put_uint(gguf_writer *w, int infos, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    put(w, infos, t, (size_t)bytes);
}

static void put_str(gguf_writer *w, int infos, const char *s)
{
    put_uint(w, infos, strlen(s), 8);
    put(w, infos, s, strlen(s));
}

static void key(gguf_writer *w, const char *k, uint32_t type)
{
    put_str(w, 0, k);
    put_uint(w, 0, type, 4);
    w->n_kv++;
}

void gw_kv_str(gguf_writer *w, const char *k, const char *v) { key(w, k, GGUF_T_STRING); put_str(w, 0, v); }
void gw_kv_u32(gguf_writer *w, const char *k, uint32_t v) { key(w, k, GGUF_T_U32); put_uint(w, 0, v, 4); }
void gw_kv_bool(gguf_writer *w, const char *k, int v) { key(w, k, GGUF_T_BOOL); put_uint(w, 0, v != 0, 1); }

void gw_kv_f32(gguf_writer *w, const char *k, float v)
{
    uint32_t u;
    memcpy(&u, &v, 4);
    key(w, k, GGUF_T_F32);
    put_uint(w, 0, u, 4);
}

void gw_kv_i32s(gguf_writer *w, const char *k, const int32_t *v, uint64_t n)
{
    key(w, k, GGUF_T_ARRAY);
    put_uint(w, 0, GGUF_T_I32, 4);
    put_uint(w, 0, n, 8);
    for (uint64_t i = 0; i < n; i++) put_uint(w, 0, (uint32_t)v[i], 4);
}

uint64_t gw_tensor(gguf_writer *w, const char *name, int nd, const int64_t *ne, uint32_t ggml_type, uint64_t nbytes)
{
    uint64_t off = (w->data_bytes + GW_ALIGN - 1) / GW_ALIGN * GW_ALIGN;
    put_str(w, 1, name);
    put_uint(w, 1, (uint32_t)nd, 4);
    for (int i = 0; i < nd; i++) put_uint(w, 1, (uint64_t)ne[i], 8);
    put_uint(w, 1, ggml_type, 4);
    put_uint(w, 1, off, 8);
    w->n_t++;
    w->data_bytes = off + nbytes;
    return off;
}

dsv4_status gw_finish(gguf_writer *w, void **image, size_t *len, uint8_t **data)
{
    size_t head = 24 + w->n_kvb + w->n_tib, data_off = (head + GW_ALIGN - 1) / GW_ALIGN * GW_ALIGN;
    size_t total = data_off + (size_t)w->data_bytes;
    uint8_t *img = w->oom ? NULL : calloc(1, total);
    if (img) {
        uint64_t counts[2] = {w->n_t, w->n_kv};
        memcpy(img, "GGUF", 4);
        img[4] = 3; /* version, little-endian u32 */
        memcpy(img + 8, counts, 16); /* little-endian hosts only, like the reader */
        memcpy(img + 24, w->kv, w->n_kvb);
        memcpy(img + 24 + w->n_kvb, w->ti, w->n_tib);
    }
    gw_discard(w);
    if (!img) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory for a %.1f GiB GGUF image", total / 1073741824.0);
    *image = img;
    *len = total;
    *data = img + data_off;
    return DSV4_OK;
}

void gw_discard(gguf_writer *w)
{
    free(w->kv);
    free(w->ti);
    memset(w, 0, sizeof *w);
}

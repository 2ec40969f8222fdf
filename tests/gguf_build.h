/* Building GGUF images byte by byte for tests and the fuzz seed corpus. */
#ifndef DSV4_TESTS_GGUF_BUILD_H
#define DSV4_TESTS_GGUF_BUILD_H
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct {
    uint8_t *b;
    size_t n, cap;
} gb_buf;

static inline void gb_put(gb_buf *g, const void *p, size_t n)
{
    if (g->n + n > g->cap) {
        g->cap = (g->n + n) * 2 + 64;
        g->b = realloc(g->b, g->cap);
    }
    memcpy(g->b + g->n, p, n);
    g->n += n;
}
static inline void gb_uint(gb_buf *g, uint64_t v, int bytes)
{
    uint8_t t[8];
    for (int i = 0; i < bytes; i++) t[i] = (uint8_t)(v >> (8 * i));
    gb_put(g, t, (size_t)bytes);
}
static inline void gb_u32(gb_buf *g, uint32_t v) { gb_uint(g, v, 4); }
static inline void gb_u64(gb_buf *g, uint64_t v) { gb_uint(g, v, 8); }
static inline void gb_f32(gb_buf *g, float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    gb_u32(g, u);
}
static inline void gb_str(gb_buf *g, const char *s)
{
    gb_u64(g, strlen(s));
    gb_put(g, s, strlen(s));
}
static inline void gb_pad(gb_buf *g, size_t align)
{
    while (g->n % align) gb_uint(g, 0, 1);
}
/* header: magic, version 3, counts */
static inline void gb_header(gb_buf *g, uint64_t n_tensors, uint64_t n_kv)
{
    gb_put(g, "GGUF", 4);
    gb_u32(g, 3);
    gb_u64(g, n_tensors);
    gb_u64(g, n_kv);
}
/* key + scalar u32 / string / f32 */
static inline void gb_kv_u32(gb_buf *g, const char *k, uint32_t v) { gb_str(g, k); gb_u32(g, 4); gb_u32(g, v); }
static inline void gb_kv_str(gb_buf *g, const char *k, const char *v) { gb_str(g, k); gb_u32(g, 8); gb_str(g, v); }
static inline void gb_kv_f32(gb_buf *g, const char *k, float v) { gb_str(g, k); gb_u32(g, 6); gb_f32(g, v); }
/* tensor info: ne in ggml order (innermost first) */
static inline void gb_tensor(gb_buf *g, const char *name, int nd, const uint64_t *ne, uint32_t type, uint64_t off)
{
    gb_str(g, name);
    gb_u32(g, (uint32_t)nd);
    for (int i = 0; i < nd; i++) gb_u64(g, ne[i]);
    gb_u32(g, type);
    gb_u64(g, off);
}

#endif

/* Writing a GGUF v3 image in memory (the synthetic GGUF checkpoints): the
 * metadata and the tensor infos are appended in any order, then one call
 * lays out the image (layout in io/gguf.c) with a zeroed data section, each
 * tensor aligned to 32 bytes, for the caller to fill. */
#ifndef DSV4_IO_GGUF_WRITE_H
#define DSV4_IO_GGUF_WRITE_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

typedef struct {
    uint8_t *kv, *ti;          /* metadata and tensor-info bytes */
    size_t n_kvb, cap_kv, n_tib, cap_ti;
    uint64_t n_kv, n_t, data_bytes;
    int oom;                   /* an append ran out of memory: gw_finish fails */
} gguf_writer;

void gw_kv_str(gguf_writer *w, const char *key, const char *v);
void gw_kv_u32(gguf_writer *w, const char *key, uint32_t v);
void gw_kv_f32(gguf_writer *w, const char *key, float v);
void gw_kv_bool(gguf_writer *w, const char *key, int v);
void gw_kv_i32s(gguf_writer *w, const char *key, const int32_t *v, uint64_t n); /* an array of int32 */
/* A tensor of nbytes bytes; ne in ggml order (ne[0]: elements per row).
 * Returns its offset in the data section. */
uint64_t gw_tensor(gguf_writer *w, const char *name, int nd, const int64_t *ne, uint32_t ggml_type, uint64_t nbytes);
/* The image (malloc'd, *len bytes) and its data section (*data); frees the
 * writer's buffers either way. */
dsv4_status gw_finish(gguf_writer *w, void **image, size_t *len, uint8_t **data);
/* Frees the writer's buffers without making an image. */
void gw_discard(gguf_writer *w);

#endif

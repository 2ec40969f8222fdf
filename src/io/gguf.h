/* GGUF files (version 3), one file or a split set (NAME-00001-of-0000N.gguf).
 *
 * Files are mmapped read-only; metadata strings and tensor data point into
 * the mappings and stay valid until gguf_close(). Everything is checked on
 * open: counts against the bytes left, string lengths, value and array
 * types, tensor dims and element counts, the type's block size, alignment,
 * offsets inside the data section, overlaps, duplicate keys and names.
 *
 * Shapes: ggml lists dimensions innermost first (ne[0] = elements per row);
 * gguf_tensor.shape is in row-major order (outermost first), like
 * safetensors and numpy. That reversal happens here and nowhere else. */
#ifndef DSV4_IO_GGUF_H
#define DSV4_IO_GGUF_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

#define GGUF_MAX_DIMS 4

/* Metadata value types (GGUF spec numbering). */
enum {
    GGUF_T_U8 = 0, GGUF_T_I8, GGUF_T_U16, GGUF_T_I16, GGUF_T_U32, GGUF_T_I32, GGUF_T_F32,
    GGUF_T_BOOL, GGUF_T_STRING, GGUF_T_ARRAY, GGUF_T_U64, GGUF_T_I64, GGUF_T_F64,
    GGUF_T_COUNT
};

typedef struct {
    const char *s;  /* into the mapping, not NUL-terminated */
    uint64_t len;
} gguf_str;

typedef struct {
    const char *key;      /* NUL-terminated copy */
    uint32_t type;        /* GGUF_T_* */
    uint32_t elem_type;   /* arrays: element type (never ARRAY); else == type */
    uint64_t count;       /* arrays: number of elements; scalars: 1 */
    const uint8_t *data;  /* fixed-size values: the little-endian bytes of element 0.. */
    const gguf_str *strs; /* strings: count entries */
} gguf_kv;

typedef struct {
    const char *name;     /* NUL-terminated copy */
    uint32_t type;        /* ggml type id (base/ggml_quant.h) */
    int ndim;
    int64_t shape[GGUF_MAX_DIMS]; /* row-major: shape[ndim-1] is ggml's ne[0] */
    const void *data;     /* aligned to general.alignment within its file */
    uint64_t nbytes;
    int file;             /* index in the split set */
} gguf_tensor;

typedef struct gguf_file gguf_file;

/* Open path; a name ending in -00001-of-0000N.gguf opens the whole split set
 * (every part must exist and carry split.no / split.count; metadata comes
 * from the first part, tensors from all; names are unique across parts). */
dsv4_status gguf_open(const char *path, gguf_file **out);
/* Parse one file image from memory (no mapping; tests and the fuzzer). */
dsv4_status gguf_open_memory(const void *buf, size_t len, const char *label, gguf_file **out);
void gguf_close(gguf_file *g);

const char *gguf_label(const gguf_file *g); /* path of the first part, for messages */
int gguf_n_files(const gguf_file *g);
uint64_t gguf_mapped_bytes(const gguf_file *g);

int gguf_kv_count(const gguf_file *g);
const gguf_kv *gguf_kv_at(const gguf_file *g, int i);
const gguf_kv *gguf_find_kv(const gguf_file *g, const char *key);
/* Element i of an integer/bool kv as int64 (u64 above INT64_MAX: 0 returned);
 * of a float or integer kv as double. Return 0 when the kv is not of such a
 * type or i is out of range. */
int gguf_kv_int(const gguf_kv *kv, uint64_t i, int64_t *out);
int gguf_kv_num(const gguf_kv *kv, uint64_t i, double *out);
/* Spelling of a value type for messages ("u32", "array of string", ...). */
const char *gguf_type_name(uint32_t t);

int gguf_tensor_count(const gguf_file *g);
const gguf_tensor *gguf_tensor_at(const gguf_file *g, int i);
const gguf_tensor *gguf_find_tensor(const gguf_file *g, const char *name);

#endif

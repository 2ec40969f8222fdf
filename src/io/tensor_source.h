/* One view over the tensors of a checkpoint, whichever container holds them
 * (safetensors archive or GGUF file), for the weight binder. */
#ifndef DSV4_IO_TENSOR_SOURCE_H
#define DSV4_IO_TENSOR_SOURCE_H
#include <stdint.h>

#include "base/dtype.h"
#include "base/wformat.h"
#include "io/gguf.h"
#include "io/safetensors.h"

typedef struct {
    const st_archive *st; /* exactly one of the two is set */
    const gguf_file *gg;
} tensor_source;

typedef struct {
    const char *name;
    int ndim;
    int64_t shape[ST_MAX_DIMS]; /* row-major (GGUF's reversed ne) */
    const void *data;
    uint64_t nbytes;
    dsv4_dtype dtype;  /* element type; DT_U8 for GGUF block formats; DT_COUNT
                          for GGUF types with no dtype here */
    int fmt;           /* weight format (dsv4_wformat) or -1 (integers, unknown) */
    const char *type;  /* spelling for messages: "BF16", "Q4_K", "IQ1_S", ... */
} src_tensor;

int tsrc_count(const tensor_source *s);
/* Tensor i; returns 0 when i is out of range. */
int tsrc_get(const tensor_source *s, int i, src_tensor *out);
/* Index of the tensor named name (filling *out), or -1. */
int tsrc_find(const tensor_source *s, const char *name, src_tensor *out);
uint64_t tsrc_mapped_bytes(const tensor_source *s);

#endif

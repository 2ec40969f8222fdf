/* Safetensors checkpoints: one file or a sharded set with
 * model.safetensors.index.json. Files are mmapped read-only; tensor data
 * pointers point into the mappings and stay valid until st_close(). */
#ifndef DSV4_IO_SAFETENSORS_H
#define DSV4_IO_SAFETENSORS_H
#include <stddef.h>
#include <stdint.h>

#include "base/dtype.h"
#include "dsv4.h"

#define ST_MAX_DIMS 8

typedef struct {
    const char *name;          /* full name as in the file */
    dsv4_dtype dtype;
    int ndim;
    int64_t shape[ST_MAX_DIMS];
    const void *data;          /* into the mmapped file; aligned only as far as
                                  the file's offsets make it (not checked) */
    uint64_t nbytes;
    int shard;                 /* index of the file it lives in */
} st_tensor;

typedef struct st_archive st_archive;

/* Validate and map one .safetensors file: header length, JSON, dtypes,
 * shapes, data_offsets inside the data area, non-overlapping, nbytes equal to
 * the product of the shape times the dtype size. */
dsv4_status st_open_file(const char *path, st_archive **out);
/* Open DIR: model.safetensors.index.json and its shards (every shard must
 * exist; every tensor of the index must be in the shard it names); else
 * model.safetensors; else every *.safetensors in name order. Tensor names are
 * unique across the whole archive. */
dsv4_status st_open_dir(const char *dir, st_archive **out);
/* Parse a header from memory (no mapping); for tests and the fuzzer.
 * `buf` is the whole file image. */
dsv4_status st_open_memory(const void *buf, size_t len, const char *label,
                           st_archive **out);
void st_close(st_archive *a);

int st_count(const st_archive *a);
const st_tensor *st_get(const st_archive *a, int i);
/* Exact-name lookup (hash table); NULL if absent. */
const st_tensor *st_find(const st_archive *a, const char *name);
/* Total bytes of all mapped files. */
uint64_t st_mapped_bytes(const st_archive *a);

#endif

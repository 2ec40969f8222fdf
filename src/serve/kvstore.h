/* Session state files in --kv-dir: the token ids a state holds and its
 * snapshot image, so a restarted server continues conversations where they
 * were. One file per state, named by a hash of the model identity and the
 * tokens:
 *
 *   magic "DSV4KV\r\n" | u32 version | u32 header bytes (48) | u64 model identity
 *   | u64 token count | u64 image bytes | u64 checksum | i32 tokens[count] | image
 *
 * (host byte order: the files are a cache for this machine, not an exchange
 * format). The checksum is FNV-1a 64 over the identity, the two counts, the
 * tokens and the image. Files are written to a temporary name, fsynced and
 * renamed, then the directory is fsynced, so a crash leaves either the old
 * file or the new one, never a torn one. */
#ifndef DSV4_SERVE_KVSTORE_H
#define DSV4_SERVE_KVSTORE_H
#include <stddef.h>
#include <stdint.h>

#include "dsv4.h"

#define KV_VERSION 2

/* The file name (without the folder) for these tokens: "<16 hex>.kv". */
void kv_name(uint64_t model_id, const int32_t *tokens, int n, char name[24]);

/* Writes tokens + snap to DIR/name. DSV4_ERR_IO naming the step that failed. */
dsv4_status kv_write(const char *dir, uint64_t model_id, const int32_t *tokens, int n,
                     const dsv4_snapshot *snap);

/* Reads and verifies a file: magic, version, identity == model_id, counts
 * against the file size and max_pos, checksum. *tokens and *image are
 * malloc'd. DSV4_ERR_FORMAT (or IO) with a message saying what is wrong. */
dsv4_status kv_read(const char *path, uint64_t model_id, int max_pos, int32_t **tokens, int *n,
                    void **image, size_t *image_len);

#endif

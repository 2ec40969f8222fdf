#include "serve/kvstore.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/error.h"

static const char k_magic[8] = {'D', 'S', 'V', '4', 'K', 'V', '\r', '\n'};

typedef struct {
    char magic[8];
    uint32_t version, header_bytes;
    uint64_t model_id, n_tokens, image_len, checksum;
} kv_header;

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
    const unsigned char *b = p;
    for (size_t i = 0; i < n; i++) h = (h ^ b[i]) * 0x100000001b3ull;
    return h;
}

static uint64_t checksum(const kv_header *h, const int32_t *tokens, const void *image)
{
    uint64_t s = 0xcbf29ce484222325ull;
    s = fnv(s, &h->model_id, sizeof h->model_id);
    s = fnv(s, &h->n_tokens, sizeof h->n_tokens);
    s = fnv(s, &h->image_len, sizeof h->image_len);
    s = fnv(s, tokens, (size_t)h->n_tokens * sizeof *tokens);
    return fnv(s, image, (size_t)h->image_len);
}

void kv_name(uint64_t model_id, const int32_t *tokens, int n, char name[24])
{
    uint64_t h = fnv(0xcbf29ce484222325ull, &model_id, sizeof model_id);
    h = fnv(h, tokens, (size_t)n * sizeof *tokens);
    snprintf(name, 24, "%016llx.kv", (unsigned long long)h);
}

static int write_all(int fd, const void *p, size_t n)
{
    const char *c = p;
    while (n) {
        ssize_t w = write(fd, c, n);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) return -1;
        c += w;
        n -= (size_t)w;
    }
    return 0;
}

dsv4_status kv_write(const char *dir, uint64_t model_id, const int32_t *tokens, int n, const dsv4_snapshot *snap)
{
    size_t ilen;
    const void *img = dsv4_snapshot_data(snap, &ilen);
    kv_header h = {{0}, KV_VERSION, sizeof(kv_header), model_id, (uint64_t)n, ilen, 0};
    memcpy(h.magic, k_magic, sizeof k_magic);
    h.checksum = checksum(&h, tokens, img);
    char name[24], path[4096], tmp[4096];
    kv_name(model_id, tokens, n, name);
    snprintf(path, sizeof path, "%s/%s", dir, name);
    snprintf(tmp, sizeof tmp, "%s/.%s.%ld.tmp", dir, name, (long)getpid());
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return dsv4_fail(DSV4_ERR_IO, "%s: %s", tmp, strerror(errno));
    if (write_all(fd, &h, sizeof h) || write_all(fd, tokens, (size_t)n * sizeof *tokens) ||
        write_all(fd, img, ilen) || fsync(fd)) {
        int e = errno;
        close(fd);
        unlink(tmp);
        return dsv4_fail(DSV4_ERR_IO, "%s: write: %s", tmp, strerror(e));
    }
    if (close(fd) || rename(tmp, path)) {
        int e = errno;
        unlink(tmp);
        return dsv4_fail(DSV4_ERR_IO, "%s: %s", path, strerror(e));
    }
    /* The rename is durable once the directory entry is. */
    int dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (dfd >= 0) {
        fsync(dfd);
        close(dfd);
    }
    return DSV4_OK;
}

dsv4_status kv_read(const char *path, uint64_t model_id, int max_pos, int32_t **tokens, int *n, void **image,
                    size_t *image_len)
{
    *tokens = NULL;
    *image = NULL;
    FILE *f = fopen(path, "rb");
    if (!f) return dsv4_fail(DSV4_ERR_IO, "%s: %s", path, strerror(errno));
    kv_header h;
    dsv4_status st = DSV4_OK;
    long size = fseek(f, 0, SEEK_END) ? -1 : ftell(f);
    rewind(f);
    if (size < (long)sizeof h || fread(&h, sizeof h, 1, f) != 1) {
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: shorter than the %zu-byte header", path, sizeof h);
    } else if (memcmp(h.magic, k_magic, sizeof k_magic)) {
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: not a dsv4 session file (bad magic)", path);
    } else if (h.version != KV_VERSION || h.header_bytes != sizeof h) {
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: format version %u, this build reads %d", path, h.version, KV_VERSION);
    } else if (h.model_id != model_id) {
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: stored for another model (identity %016llx, this one %016llx)", path,
                       (unsigned long long)h.model_id, (unsigned long long)model_id);
    } else if (h.n_tokens < 1 || h.n_tokens > (uint64_t)max_pos ||
               h.image_len != (uint64_t)size - sizeof h - h.n_tokens * sizeof(int32_t)) {
        st = dsv4_fail(DSV4_ERR_FORMAT, "%s: %llu tokens and a %llu-byte image do not fit the %ld-byte file", path,
                       (unsigned long long)h.n_tokens, (unsigned long long)h.image_len, size);
    }
    if (!st) {
        *tokens = malloc((size_t)h.n_tokens * sizeof **tokens);
        *image = malloc(h.image_len ? (size_t)h.image_len : 1);
        if (!*tokens || !*image) st = dsv4_fail(DSV4_ERR_NOMEM, "%s: out of memory", path);
        else if (fread(*tokens, sizeof **tokens, (size_t)h.n_tokens, f) != h.n_tokens ||
                 fread(*image, 1, (size_t)h.image_len, f) != h.image_len)
            st = dsv4_fail(DSV4_ERR_IO, "%s: short read", path);
        else if (checksum(&h, *tokens, *image) != h.checksum)
            st = dsv4_fail(DSV4_ERR_FORMAT, "%s: checksum mismatch (the file is corrupt)", path);
    }
    fclose(f);
    if (st) {
        free(*tokens);
        free(*image);
        *tokens = NULL;
        *image = NULL;
        return st;
    }
    *n = (int)h.n_tokens;
    *image_len = (size_t)h.image_len;
    return DSV4_OK;
}

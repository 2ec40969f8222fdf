/* Memory of the CUDA backend.
 *
 * Activations and session state: cudaMalloc'd blocks with a cache of freed
 * blocks by exact size, so a step that allocates the same scratch as the last
 * one gets the same addresses back (which keeps captured graphs valid).
 * Weights: uploaded once into arena chunks (large ones get their own
 * allocation) and deduplicated by host address, so a view adopted twice
 * shares one device copy. */
#include <stdlib.h>
#include <string.h>

#include "cuda/ggml_blocks.cuh"

#define ARENA_CHUNK ((size_t)256 << 20)
#define ARENA_BIG ((size_t)64 << 20)

void *cu_alloc(dsv4_backend *b, size_t bytes)
{
    if (backend_alloc_injected_failure(b)) return NULL;
    cu_impl *c = cu_of(b);
    cu_flush(c);
    size_t sz = (bytes + 255) & ~(size_t)255;
    if (!sz) sz = 256;
    if (!cu_grow((void **)&c->live, &c->cap_live, c->n_live + 1, sizeof *c->live)) return NULL;
    /* the lowest cached address of this size: blocks freed in another order
     * than the last step's still come back in the same order, so a step that
     * allocates like the last one gets its addresses and replays its graph */
    void *p = NULL;
    int best = -1;
    for (int i = 0; i < c->n_cache; i++)
        if (c->cache[i].bytes == sz && (best < 0 || (uintptr_t)c->cache[i].p < (uintptr_t)c->cache[best].p)) best = i;
    if (best >= 0) {
        p = c->cache[best].p;
        c->cache[best] = c->cache[--c->n_cache];
    }
    if (!p && cudaMalloc(&p, sz) != cudaSuccess) {
        cudaGetLastError(); /* not sticky: the caller reports out of memory */
        return NULL;
    }
    if (cu_check(c, cudaMemsetAsync(p, 0, sz, c->stream), "memset")) return NULL;
    c->live[c->n_live++] = (cu_block){p, sz};
    return p;
}

void cu_free(dsv4_backend *b, void *p)
{
    if (!p) return;
    cu_impl *c = cu_of(b);
    cu_flush(c);
    for (int i = c->n_live - 1; i >= 0; i--)
        if (c->live[i].p == p) {
            cu_block blk = c->live[i];
            c->live[i] = c->live[--c->n_live];
            if (cu_grow((void **)&c->cache, &c->cap_cache, c->n_cache + 1, sizeof *c->cache)) c->cache[c->n_cache++] = blk;
            else {
                cudaStreamSynchronize(c->stream);
                cudaFree(p);
            }
            return;
        }
}

void cu_upload(dsv4_backend *b, void *dst, const void *src, size_t bytes)
{
    cu_impl *c = cu_of(b);
    if (!bytes || cu_record_upload(c, dst, src, bytes)) return;
    cu_flush(c);
    cu_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, c->stream), "upload");
    /* the source is the caller's pageable memory: it may change once we return */
    cu_check(c, cudaStreamSynchronize(c->stream), "upload");
}

void cu_download(dsv4_backend *b, void *dst, const void *src, size_t bytes)
{
    cu_impl *c = cu_of(b);
    if (!bytes || cu_record_download(c, dst, src, bytes)) return;
    cu_flush(c);
    cu_check(c, cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, c->stream), "download");
    cu_check(c, cudaStreamSynchronize(c->stream), "download");
}

/* Device-to-device copies are recorded like kernels, so a step that logs
 * rows (engine/step.c) still runs as one graph. */
typedef struct { int64_t pos0; void *dst; const void *src; size_t bytes; } copy_args;

void cu_exec_copy(cu_impl *c, const void *a, const int64_t *dpos)
{
    copy_args k;
    memcpy(&k, a, sizeof k);
    (void)dpos;
    cu_check(c, cudaMemcpyAsync(k.dst, k.src, k.bytes, cudaMemcpyDeviceToDevice, c->stream), "copy");
}

void cu_copy(dsv4_backend *b, void *dst, const void *src, size_t bytes)
{
    cu_impl *c = cu_of(b);
    if (!bytes) return;
    copy_args a = {0, dst, src, bytes};
    cu_submit(c, K_COPY, &a, sizeof a);
}

void cu_zero(dsv4_backend *b, void *p, size_t bytes)
{
    cu_impl *c = cu_of(b);
    cu_flush(c);
    if (bytes) cu_check(c, cudaMemsetAsync(p, 0, bytes, c->stream), "memset");
}

/* ---- weights ---- */

static size_t hash_ptr(const void *p, size_t cap)
{
    uint64_t x = (uint64_t)(uintptr_t)p;
    x ^= x >> 33;
    x *= 0xff51afd7ed558ccdULL;
    x ^= x >> 33;
    return (size_t)x & (cap - 1);
}

static cu_wmap_entry *wmap_find(cu_impl *c, const void *host, size_t bytes)
{
    if (!c->wmap_cap) return NULL;
    for (size_t i = hash_ptr(host, c->wmap_cap);; i = (i + 1) & (c->wmap_cap - 1)) {
        cu_wmap_entry *e = &c->wmap[i];
        if (!e->host) return NULL;
        if (e->host == host && e->bytes == bytes) return e;
    }
}

static int wmap_insert(cu_impl *c, const void *host, size_t bytes, void *dev)
{
    if (2 * (c->wmap_n + 1) > c->wmap_cap) {
        size_t cap = c->wmap_cap ? 2 * c->wmap_cap : 1024;
        cu_wmap_entry *m = (cu_wmap_entry *)calloc(cap, sizeof *m);
        if (!m) return 0;
        for (size_t i = 0; i < c->wmap_cap; i++) {
            if (!c->wmap[i].host) continue;
            size_t j = hash_ptr(c->wmap[i].host, cap);
            while (m[j].host) j = (j + 1) & (cap - 1);
            m[j] = c->wmap[i];
        }
        free(c->wmap);
        c->wmap = m;
        c->wmap_cap = cap;
    }
    size_t j = hash_ptr(host, c->wmap_cap);
    while (c->wmap[j].host) j = (j + 1) & (c->wmap_cap - 1);
    c->wmap[j] = (cu_wmap_entry){host, bytes, dev};
    c->wmap_n++;
    return 1;
}

static void *weight_alloc(cu_impl *c, size_t bytes)
{
    size_t sz = (bytes + 255) & ~(size_t)255;
    if (!cu_grow((void **)&c->chunks, &c->cap_chunks, c->n_chunks + 1, sizeof *c->chunks)) return NULL;
    void *p = NULL;
    if (sz >= ARENA_BIG) {
        if (cudaMalloc(&p, sz) != cudaSuccess) { cudaGetLastError(); return NULL; }
        c->chunks[c->n_chunks++] = p;
        return p;
    }
    if (!c->arena || c->arena_used + sz > c->arena_cap) {
        if (cudaMalloc(&p, ARENA_CHUNK) != cudaSuccess) { cudaGetLastError(); return NULL; }
        c->chunks[c->n_chunks++] = p;
        c->arena = (char *)p;
        c->arena_used = 0;
        c->arena_cap = ARENA_CHUNK;
    }
    p = c->arena + c->arena_used;
    c->arena_used += sz;
    return p;
}

/* The device copy of `bytes` host bytes at *p (uploaded once: a region
 * adopted again maps to the same copy); *p is repointed. */
static dsv4_status adopt_region(cu_impl *c, const void **p, size_t bytes)
{
    cu_wmap_entry *e = wmap_find(c, *p, bytes);
    if (e) {
        *p = e->dev;
        return DSV4_OK;
    }
    cudaPointerAttributes pa;
    if (cudaPointerGetAttributes(&pa, *p) == cudaSuccess && pa.type == cudaMemoryTypeDevice)
        return DSV4_OK; /* already on the device (adopted before) */
    cudaGetLastError();
    cu_flush(c);
    void *dev = weight_alloc(c, bytes);
    if (!dev) return dsv4_fail(DSV4_ERR_NOMEM, "out of GPU memory uploading a %zu-byte weight", bytes);
    cudaError_t err = cudaMemcpy(dev, *p, bytes, cudaMemcpyHostToDevice);
    if (err != cudaSuccess)
        return dsv4_fail(DSV4_ERR_DEVICE, "CUDA weight upload failed: %s", cudaGetErrorString(err));
    if (!wmap_insert(c, *p, bytes, dev)) return dsv4_fail(DSV4_ERR_NOMEM, "out of memory");
    c->b->weight_bytes += bytes;
    *p = dev;
    return DSV4_OK;
}

/* A weight stays in its checkpoint bytes on the GPU: the element bytes and,
 * for block-scaled formats, the scale grid, each uploaded as they are; the
 * kernels decode them in registers (wload.cuh, ggml_blocks.cuh for GGUF
 * blocks, whose loads rely on the 16-byte start every upload has). */
dsv4_status cu_adopt_weight(dsv4_backend *b, dsv4_mat *m)
{
    cu_impl *c = cu_of(b);
    if (!m->data) return DSV4_OK;
    if (m->fmt != WF_F32 && m->fmt != WF_BF16 && m->fmt != WF_F16 && m->fmt != WF_FP8_E4M3 && m->fmt != WF_MXFP4 &&
        !gg_is_fmt(m->fmt))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "CUDA backend: %s weights are not supported yet (use --device cpu)",
                         wformat_info(m->fmt)->name);
    if ((m->fmt == WF_FP8_E4M3 || m->fmt == WF_MXFP4) && (!m->scale || m->blk_r < 1 || m->blk_c < 1))
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "CUDA backend: a %s weight without its scale grid",
                         wformat_info(m->fmt)->name);
    dsv4_status st = adopt_region(c, &m->data, (size_t)m->rows * (size_t)wformat_row_bytes(m->fmt, m->cols));
    if (st == DSV4_OK && m->scale) st = adopt_region(c, &m->scale, (size_t)wmat_scale_bytes(m));
    if (st == DSV4_OK && gg_is_fmt(m->fmt) && (uintptr_t)m->data % 16) /* only a view made on the device can be */
        return dsv4_fail(DSV4_ERR_UNSUPPORTED, "CUDA backend: a %s weight must start on 16 bytes of device memory",
                         wformat_info(m->fmt)->name);
    return st;
}

/* Everything the memory functions own (at destroy). */
void cu_memory_release(cu_impl *c)
{
    for (int i = 0; i < c->n_live; i++) cudaFree(c->live[i].p);
    for (int i = 0; i < c->n_cache; i++) cudaFree(c->cache[i].p);
    for (int i = 0; i < c->n_chunks; i++) cudaFree(c->chunks[i]);
    for (int i = 0; i < c->n_etab; i++) {
        cudaFree((void *)c->etab[i].tab);
        free(c->etab[i].host);
    }
    free(c->live); free(c->cache); free(c->chunks); free(c->wmap); free(c->etab);
}

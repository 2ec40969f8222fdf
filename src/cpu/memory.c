/* Memory functions of the CPU backend: plain host memory. */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "base/error.h"
#include "cpu/cpu.h"

void *cpu_alloc(dsv4_backend *b, size_t bytes)
{
    if (backend_alloc_injected_failure(b)) return NULL;
    return calloc(1, bytes ? bytes : 1);
}

void cpu_free(dsv4_backend *b, void *p) { (void)b; free(p); }

void cpu_copy(dsv4_backend *b, void *dst, const void *src, size_t bytes)
{
    (void)b;
    if (bytes) memmove(dst, src, bytes);
}

void cpu_zero(dsv4_backend *b, void *p, size_t bytes)
{
    (void)b;
    if (bytes) memset(p, 0, bytes);
}

dsv4_status cpu_adopt_weight(dsv4_backend *b, dsv4_mat *m)
{
    (void)b;
    /* read in place from the mapping; ask the kernel to start reading it in */
    uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), start = (uintptr_t)m->data & ~(page - 1);
    uintptr_t end = (uintptr_t)m->data + (uintptr_t)m->rows * (uintptr_t)wformat_row_bytes(m->fmt, m->cols);
    if (end > start) madvise((void *)start, end - start, MADV_WILLNEED);
    if (m->scale) {
        start = (uintptr_t)m->scale & ~(page - 1);
        end = (uintptr_t)m->scale + (uintptr_t)wmat_scale_bytes(m);
        if (end > start) madvise((void *)start, end - start, MADV_WILLNEED);
    }
    return DSV4_OK;
}

dsv4_status cpu_sync(dsv4_backend *b)
{
    if (b->sticky) dsv4_fail(b->sticky, "%s", b->sticky_msg);
    return b->sticky;
}

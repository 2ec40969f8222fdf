/* Backend choice: --device cpu|cuda|auto. */
#include <string.h>

#include "base/error.h"
#include "ops/ops.h"

#ifndef DSV4_HAVE_CUDA
dsv4_backend *cuda_backend_new(int device, int64_t max_row)
{
    (void)device;
    (void)max_row;
    dsv4_fail(DSV4_ERR_DEVICE, "this build of dsv4 has no CUDA backend (nvcc was not found at build time)");
    return NULL;
}
#endif

void backend_fail_row(dsv4_backend *b, dsv4_status st, int row, const char *msg)
{
    dsv4_status expected = DSV4_OK;
    if (__atomic_compare_exchange_n(&b->sticky, &expected, st, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
        b->sticky_layer = b->cur_layer;
        b->sticky_row = row;
        strncpy(b->sticky_msg, msg, sizeof b->sticky_msg - 1);
        b->sticky_msg[sizeof b->sticky_msg - 1] = 0;
    }
}

void backend_fail(dsv4_backend *b, dsv4_status st, const char *msg) { backend_fail_row(b, st, -1, msg); }

void backend_inject_alloc_failure(dsv4_backend *b, int n) { b->fail_alloc_in = n; }

void backend_clear_error(dsv4_backend *b)
{
    b->sticky = DSV4_OK;
    b->sticky_msg[0] = 0;
}

static dsv4_backend *pick(const char *device, int n_threads, int64_t max_row)
{
    if (device && !strcmp(device, "cpu")) return cpu_backend_new(n_threads, max_row);
    if (device && !strcmp(device, "cuda")) return cuda_backend_new(0, max_row);
    if (device && strcmp(device, "auto")) {
        dsv4_fail(DSV4_ERR_ARG, "unknown device '%s' (use cpu, cuda or auto)", device);
        return NULL;
    }
    dsv4_backend *b = cuda_backend_new(0, max_row);
    return b ? b : cpu_backend_new(n_threads, max_row);
}

dsv4_backend *backend_create(const char *device, int n_threads, int64_t max_row)
{
    dsv4_backend *b = pick(device, n_threads, max_row);
    if (b) b->cur_layer = -1;
    return b;
}

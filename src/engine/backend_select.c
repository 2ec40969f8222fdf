/* Backend choice: --device cpu|cuda|auto (above both backends). */
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

/* libFuzzer harness: any byte string as a safetensors file image. Accepted
 * archives are walked end to end so that a tensor pointing outside the input
 * shows up as an ASan error, not a silent success. */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "io/safetensors.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    st_archive *a = NULL;
    if (st_open_memory(data, size, "fuzz", &a) != DSV4_OK) {
        if (a || !dsv4_last_error()[0]) abort(); /* failures must say why */
        return 0;
    }
    volatile uint8_t sink = 0;
    for (int i = 0; i < st_count(a); i++) {
        const st_tensor *t = st_get(a, i);
        if (st_find(a, t->name) != t) abort();
        if (t->ndim < 0 || t->ndim > ST_MAX_DIMS) abort();
        uint64_t n = dtype_size(t->dtype);
        for (int d = 0; d < t->ndim; d++) n *= (uint64_t)t->shape[d];
        if (n != t->nbytes) abort();
        if (t->nbytes) {
            const uint8_t *p = t->data;
            sink ^= p[0] ^ p[t->nbytes - 1];
        }
    }
    (void)sink;
    st_close(a);
    return 0;
}

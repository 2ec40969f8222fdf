/* libFuzzer harness: any byte string as config.json. An accepted config must
 * satisfy the invariants the rest of the engine relies on. */
#include <stdint.h>
#include <stdlib.h>

#include "model/config.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    static dsv4_config c;
    if (config_parse((const char *)data, size, "fuzz/config.json", &c) != DSV4_OK) {
        if (!dsv4_last_error()[0]) abort(); /* failures must say why */
        return 0;
    }
    if (c.n_layers < 1 || c.n_layers > DSV4_MAX_LAYERS) abort();
    if (c.head_dim % 2 || c.rope_dim % 2 || c.rope_dim < 2 || c.rope_dim > c.head_dim) abort();
    if (c.idx_head_dim < c.rope_dim || c.n_active > c.n_experts || c.n_active < 1) abort();
    if ((int64_t)c.n_heads * c.head_dim % c.o_groups) abort();
    if (c.hc_mult < 1 || c.window < 1 || !(c.norm_eps > 0) || !(c.hc_eps > 0)) abort();
    if (c.ratio_csa < 1 || c.ratio_hca < 1 || c.ratio_csa == c.ratio_hca) abort();
    for (int l = 0; l <= c.n_layers; l++) {
        int r = config_ratio(&c, l);
        if (r != 0 && r != c.ratio_csa && r != c.ratio_hca) abort();
        if (l < c.n_layers && (unsigned)c.hash_layer[l] > 1) abort();
    }
    if (c.rope_compress.yarn && (c.rope_compress.factor < 1 || c.rope_compress.orig_max_pos < 1))
        abort();
    return 0;
}

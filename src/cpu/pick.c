/* Greedy picks over summed rows for the CPU backend (ops.h pick_sum): the
 * host's own scan, so the chained DSpark drafts equal the host path's. */
#include <float.h>
#include <math.h>

#include "cpu/cpu.h"

void cpu_pick_sum(dsv4_backend *b, const float *a, int64_t lda, const float *c, int64_t ldc, int n, int V, int32_t *idx,
                  float *top, int32_t *bad)
{
    (void)b;
    for (int r = 0; r < n; r++) {
        const float *ar = a + (int64_t)r * lda, *cr = c + (int64_t)r * ldc;
        int32_t best = 0, first_bad = -1;
        float bv = ar[0] + cr[0];
        for (int v = 0; v < V; v++) {
            float s = ar[v] + cr[v];
            if (first_bad < 0 && !(fabsf(cr[v]) <= FLT_MAX)) first_bad = v;
            if (s > bv) {
                bv = s;
                best = v;
            }
        }
        idx[r] = best;
        top[r] = bv;
        bad[r] = first_bad;
    }
}

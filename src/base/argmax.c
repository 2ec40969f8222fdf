#include "base/argmax.h"

#include <math.h>

#define LANES 16

int32_t argmax_f32(const float *p, int64_t n)
{
    /* the loop keeps index 0 while p[0] is NaN (nothing compares greater);
     * otherwise it ends at the first index of the largest non-NaN value */
    if (isnan(p[0])) return 0;
    /* `x > m ? x : m` is exact in any order (NaN x never replaces m) and
     * vectorizes as a compare and blend */
    float m[LANES], mx = p[0];
    for (int j = 0; j < LANES; j++) m[j] = p[0];
    int64_t i = 0;
    for (; i + LANES <= n; i += LANES)
        for (int j = 0; j < LANES; j++) m[j] = p[i + j] > m[j] ? p[i + j] : m[j];
    for (int j = 0; j < LANES; j++) mx = m[j] > mx ? m[j] : mx;
    for (; i < n; i++) mx = p[i] > mx ? p[i] : mx;
    for (i = 0; i < n; i++)
        if (p[i] == mx) return (int32_t)i;
    return 0; /* not reached: mx is one of the values */
}

/* The greedy pick over a row of V floats (V = 129280 for DeepSeek-V4: the
 * host does it for every greedy token and every verified draft). */
#ifndef DSV4_BASE_ARGMAX_H
#define DSV4_BASE_ARGMAX_H
#include <stdint.h>

/* What `best = 0; for i: if (p[i] > p[best]) best = i` returns (the lowest
 * index of the largest value, NaNs never chosen past index 0, -0 == +0),
 * in two passes the compiler vectorizes: the maximum, then its first
 * index. n >= 1. */
int32_t argmax_f32(const float *p, int64_t n);

#endif

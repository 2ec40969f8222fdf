/* Byte counts computed from user input and config values (contexts, token
 * counts, lanes, dimensions): products saturate at SIZE_UNREAL (PTRDIFF_MAX,
 * the largest object C allows), which no allocation satisfies, so an
 * overflow becomes an out-of-memory error instead of a short buffer. */
#ifndef DSV4_BASE_SIZE_H
#define DSV4_BASE_SIZE_H
#include <stddef.h>
#include <stdint.h>

#define SIZE_UNREAL ((size_t)PTRDIFF_MAX)

static inline size_t size_mul(size_t a, size_t b)
{
    size_t r;
    return __builtin_mul_overflow(a, b, &r) || r > SIZE_UNREAL ? SIZE_UNREAL : r;
}

static inline size_t size_mul3(size_t a, size_t b, size_t c) { return size_mul(size_mul(a, b), c); }

#endif

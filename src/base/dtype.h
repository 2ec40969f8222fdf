/* Scalar formats found in checkpoints and their conversion to float. */
#ifndef DSV4_BASE_DTYPE_H
#define DSV4_BASE_DTYPE_H
#include <stdint.h>
#include <string.h>

typedef enum {
    DT_F32, DT_F16, DT_BF16, DT_I64, DT_I32, DT_I8, DT_U8,
    DT_F8_E4M3, DT_F8_E8M0, DT_BOOL, DT_F64, DT_I16,
    DT_COUNT
} dsv4_dtype;

/* Bytes per element (all supported safetensors dtypes are whole bytes). */
int dtype_size(dsv4_dtype t);
/* Safetensors spelling ("F32", "BF16", ...); NULL-safe inverse returns -1. */
const char *dtype_name(dsv4_dtype t);
int dtype_from_name(const char *s);

static inline float bf16_to_f32(uint16_t h)
{
    uint32_t u = (uint32_t)h << 16;
    float f;
    memcpy(&f, &u, 4);
    return f;
}

/* Round-to-nearest-even, NaN kept quiet. */
static inline uint16_t f32_to_bf16(float f)
{
    uint32_t u;
    memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40);
    u += 0x7fffu + ((u >> 16) & 1);
    return (uint16_t)(u >> 16);
}

float f16_to_f32(uint16_t h);

/* Every dequantized weight the loaders admit is below 2^DSV4_MAX_WEIGHT_EXP
 * in magnitude (checked on each scale). The GPU's tensor-core products scale
 * an activation row so that its largest |value| lies in [2^14, 2^15)
 * (cuda/tc_f16.cuh) and sum up to 2^17 such terms: with weights below 2^95
 * no partial sum reaches 2^128, so the scaled sums stay finite wherever the
 * plain fp32 product is. */
#define DSV4_MAX_WEIGHT_EXP 95

#endif

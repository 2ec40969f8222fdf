#include "base/dtype.h"

static const struct { const char *name; int size; } k_dtypes[DT_COUNT] = {
    [DT_F32] = {"F32", 4},       [DT_F16] = {"F16", 2},
    [DT_BF16] = {"BF16", 2},     [DT_I64] = {"I64", 8},
    [DT_I32] = {"I32", 4},       [DT_I8] = {"I8", 1},
    [DT_U8] = {"U8", 1},         [DT_F8_E4M3] = {"F8_E4M3", 1},
    [DT_F8_E8M0] = {"F8_E8M0", 1}, [DT_BOOL] = {"BOOL", 1},
    [DT_F64] = {"F64", 8},       [DT_I16] = {"I16", 2},
};

int dtype_size(dsv4_dtype t) { return (unsigned)t < DT_COUNT ? k_dtypes[t].size : 0; }
const char *dtype_name(dsv4_dtype t) { return (unsigned)t < DT_COUNT ? k_dtypes[t].name : "?"; }

int dtype_from_name(const char *s)
{
    for (int i = 0; i < DT_COUNT; i++)
        if (strcmp(s, k_dtypes[i].name) == 0) return i;
    return -1;
}

float f16_to_f32(uint16_t h)
{
    uint32_t sign = (uint32_t)(h & 0x8000) << 16;
    uint32_t exp = (h >> 10) & 0x1f, man = h & 0x3ff, u;
    if (exp == 0) {
        if (man == 0) {
            u = sign;
        } else { /* subnormal: renormalize */
            exp = 127 - 15 + 1;
            while (!(man & 0x400)) { man <<= 1; exp--; }
            u = sign | (exp << 23) | ((man & 0x3ff) << 13);
        }
    } else if (exp == 31) {
        u = sign | 0x7f800000u | (man << 13);
    } else {
        u = sign | ((exp + 127 - 15) << 23) | (man << 13);
    }
    float f;
    memcpy(&f, &u, 4);
    return f;
}

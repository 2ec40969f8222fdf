/* A weight is a value with a format: the element encoding, its block shape
 * and, for checkpoint formats that keep scales apart, a view of the scale
 * grid. Every weight-reading op goes through these facts and, on the CPU,
 * through the one row decoder below, so new formats slot in without touching
 * the forward pass.
 *
 * Two families besides the plain ones (F32, BF16, F16: one element per
 * "block"):
 *   separate scale grid (safetensors, DeepSeek's official checkpoints)
 *     WF_FP8_E4M3  e4m3fn bytes [rows][cols]; scale [ceil(rows/blk_r)][ceil(cols/blk_c)],
 *                  blocks 128×128; scale element F8_E8M0 (byte e → 2^(e−127)) or
 *                  F32 holding the same powers of two (Flash-Base)
 *     WF_MXFP4     bytes [rows][cols/2], low nibble = even column, E2M1 codes;
 *                  scale [rows][cols/32] (blk_r 1, blk_c 32), F8_E8M0
 *   self-contained blocks along a row (GGUF): every row is cols/block_elems
 *     blocks of block_bytes, the scales inside the blocks; no scale view.
 *
 * Exactness: an e4m3 or E2M1 value times a power of two is exactly an fp32
 * (the loader admits only scales for which no product overflows), so the
 * decoded row is the mathematically dequantized weight. */
#ifndef DSV4_BASE_WFORMAT_H
#define DSV4_BASE_WFORMAT_H
#include <stdint.h>

#include "base/dtype.h"
#include "base/ggml_quant.h" /* the ggml type ids of WF_GGUF_BLOCKS */

typedef enum {
    WF_F32, WF_BF16, WF_F16,
    WF_FP8_E4M3, WF_MXFP4,
    WF_Q8_0, WF_Q4_K, WF_Q5_K, WF_Q6_K, WF_Q3_K, WF_Q2_K,
    WF_IQ4_XS, WF_IQ3_XXS, WF_IQ3_S, WF_IQ2_XXS, WF_IQ2_S, WF_MXFP4_GGUF,
    WF_COUNT
} dsv4_wformat;

/* The GGUF block formats: format, name, ggml type id, values and bytes per
 * block (ggml's block_* structs). The facts table, the ggml type mapping and
 * the CUDA decoders (src/cuda/ggml_blocks.cuh) are all built from this list. */
#define WF_GGUF_BLOCKS(X)                                                                                  \
    X(WF_Q8_0, "Q8_0", GGML_Q8_0, 32, 34) X(WF_Q4_K, "Q4_K", GGML_Q4_K, 256, 144)                       \
    X(WF_Q5_K, "Q5_K", GGML_Q5_K, 256, 176) X(WF_Q6_K, "Q6_K", GGML_Q6_K, 256, 210)                     \
    X(WF_Q3_K, "Q3_K", GGML_Q3_K, 256, 110) X(WF_Q2_K, "Q2_K", GGML_Q2_K, 256, 84)                      \
    X(WF_IQ4_XS, "IQ4_XS", GGML_IQ4_XS, 256, 136) X(WF_IQ3_XXS, "IQ3_XXS", GGML_IQ3_XXS, 256, 98)       \
    X(WF_IQ3_S, "IQ3_S", GGML_IQ3_S, 256, 110) X(WF_IQ2_XXS, "IQ2_XXS", GGML_IQ2_XXS, 256, 66)          \
    X(WF_IQ2_S, "IQ2_S", GGML_IQ2_S, 256, 82) X(WF_MXFP4_GGUF, "MXFP4_GGUF", GGML_MXFP4, 32, 17)

typedef struct {
    const char *name;  /* "BF16", "FP8-E4M3", "MXFP4", "Q4_K", ... */
    int block_elems;   /* values per block along a row (plain: 1) */
    int block_bytes;   /* bytes per block (plain: the element size) */
    int scale_grid;    /* 1: scales live in a separate view (FP8, MXFP4) */
    int cpu_decode;    /* 1: wmat_decode_row implements it */
} wformat_facts;

/* Facts of fmt (a zeroed entry with name "?" for an invalid value). */
const wformat_facts *wformat_info(dsv4_wformat fmt);
/* Bytes of one row of cols values (cols a multiple of block_elems). */
int64_t wformat_row_bytes(dsv4_wformat fmt, int64_t cols);
/* The format of a ggml tensor type id (GGUF tensor infos); -1 for types
 * that are not weight formats here. */
int wformat_of_ggml(uint32_t ggml_type);
/* The ggml type id of a GGUF block format or plain format (GGUF tensor
 * infos); UINT32_MAX for the formats GGUF has no type for. */
uint32_t wformat_ggml_type(dsv4_wformat fmt);
/* The plain format of a float dtype; -1 for any other dtype. */
int wformat_of_dtype(dsv4_dtype dt);

/* A weight view [rows = out][cols = in]. Plain tensors: fmt WF_F32/BF16/F16
 * and dtype the matching DT_*; other formats: dtype the storage element
 * (DT_F8_E4M3, DT_I8/U8, DT_U8 for GGUF blocks). Row r's bytes start at
 * data + r · wformat_row_bytes(fmt, cols). Scale grid (scale_grid formats
 * only, else NULL/0): element [i][j] covers rows [i·blk_r, (i+1)·blk_r) and
 * columns [j·blk_c, (j+1)·blk_c) (partial blocks at the edges). */
typedef struct {
    dsv4_dtype dtype;
    int64_t rows, cols;   /* 1-D tensors: rows = 1, cols = length */
    const void *data;     /* NULL: absent */
    dsv4_wformat fmt;
    const void *scale;
    dsv4_dtype scale_dtype; /* DT_F8_E8M0 or DT_F32 */
    int blk_r, blk_c;
    int64_t scale_rows, scale_cols;
} dsv4_mat;

/* A plain view of a float dtype (F32, BF16, F16). */
dsv4_mat wmat_plain(dsv4_dtype dt, int64_t rows, int64_t cols, const void *data);
/* Bytes of the weight itself plus its scale grid (0 when absent). */
uint64_t wmat_bytes(const dsv4_mat *m);
uint64_t wmat_scale_bytes(const dsv4_mat *m);
/* Rows [r0, r0+n) of m as a matrix of its own. Block-scaled formats need
 * r0 a multiple of blk_r (MXFP4: any r0). */
dsv4_mat mat_rows(const dsv4_mat *m, int64_t r0, int64_t n);
/* Element i (row-major) of m converted to float. */
float mat_get(const dsv4_mat *m, int64_t i);

/* The CPU decoder: out[k] = value of m[r][c0 + k], k < n, exactly as the
 * format defines it (plain: the conversion to fp32; FP8/MXFP4: code · scale,
 * exact). Formats without cpu_decode are never bound on the CPU. */
void wmat_decode_row(const dsv4_mat *m, int64_t r, int64_t c0, int64_t n, float *out);

/* Scale element codes → float. E8M0 byte 255 is NaN (rejected at load). */
float e8m0_to_f32(uint8_t e);
float e4m3_to_f32(uint8_t b);
extern const float k_e2m1_values[16];
extern const float k_e4m3_values[256]; /* e4m3_to_f32 of every byte */
/* Round-to-nearest-even into the formats (values beyond the largest finite
 * one saturate to it; callers scale so that they do not occur). */
uint8_t f32_to_e4m3(float f);
int f32_to_e2m1(float f); /* the code 0..15 */
/* 2^ceil(log2(v)) for a positive finite v, exactly (no floating log). */
float pow2_ceil(float v);

#endif

/* ggml's tensor types as stored in GGUF files: per-type block facts and the
 * CPU reference dequantization.
 *
 * A quantized row is a sequence of self-contained blocks of `block_elems`
 * values stored in `block_bytes` bytes. Dequantization follows ggml's own
 * fp32 arithmetic and order (e.g. Q4_K: (d·sc)·q − (dmin·m)), so every value
 * is bit-identical to ggml's dequantize_row_* and to gguf-py's
 * gguf.quants.dequantize. */
#ifndef DSV4_BASE_GGML_QUANT_H
#define DSV4_BASE_GGML_QUANT_H
#include <stdint.h>

#include "base/dtype.h" /* DSV4_MAX_WEIGHT_EXP */

/* ggml type ids (the numbers in GGUF tensor infos). */
enum {
    GGML_F32 = 0, GGML_F16 = 1, GGML_Q4_0 = 2, GGML_Q4_1 = 3, GGML_Q5_0 = 6, GGML_Q5_1 = 7,
    GGML_Q8_0 = 8, GGML_Q8_1 = 9, GGML_Q2_K = 10, GGML_Q3_K = 11, GGML_Q4_K = 12, GGML_Q5_K = 13,
    GGML_Q6_K = 14, GGML_Q8_K = 15, GGML_IQ2_XXS = 16, GGML_IQ2_XS = 17, GGML_IQ3_XXS = 18,
    GGML_IQ1_S = 19, GGML_IQ4_NL = 20, GGML_IQ3_S = 21, GGML_IQ2_S = 22, GGML_IQ4_XS = 23,
    GGML_I8 = 24, GGML_I16 = 25, GGML_I32 = 26, GGML_I64 = 27, GGML_F64 = 28, GGML_IQ1_M = 29,
    GGML_BF16 = 30, GGML_TQ1_0 = 34, GGML_TQ2_0 = 35, GGML_MXFP4 = 39,
    GGML_TYPE_LIMIT = 64
};

typedef struct {
    const char *name;   /* NULL: not a type this build knows */
    int block_elems, block_bytes;
    int decodable;      /* 1: ggml_dequant_blocks handles it (the weight types we run) */
} ggml_type_info;

/* Facts for type t; name NULL for an unknown id (any t is safe). */
const ggml_type_info *ggml_type_get(uint32_t t);
/* Spelling for messages: the type name, or "type N" for an unknown id. */
const char *ggml_type_name(uint32_t t, char buf[24]);

/* Dequantize n_blocks consecutive blocks of a decodable type into
 * n_blocks·block_elems floats. */
void ggml_dequant_blocks(uint32_t t, const void *src, int64_t n_blocks, float *out);

/* The first of n_blocks blocks of a decodable block type t whose scales the
 * engine refuses (an f16 scale that is Inf or NaN, an MXFP4 E8M0 byte whose
 * values could reach 2^DSV4_MAX_WEIGHT_EXP), with the reason in why; -1 if
 * every block is valid. Reads only the scale fields. */
int64_t ggml_check_blocks(uint32_t t, const void *src, int64_t n_blocks, char *why, int why_len);
/* The largest MXFP4 E8M0 byte ggml_check_blocks admits: doubled E2M1 codes
 * (at most 12 < 2^4) times 2^(e−128) stay below 2^DSV4_MAX_WEIGHT_EXP. */
#define GGML_MXFP4_MAX_E (128 + DSV4_MAX_WEIGHT_EXP - 4)

/* n_blocks random valid blocks of a decodable block type t (not F32, F16,
 * BF16) into out: uniform random bytes (every grid index, sign group and
 * nibble is a legal encoding) with finite scales. rms > 0: the scales (f16,
 * or MXFP4's E8M0) are powers of two chosen per block so the values' root
 * mean square is within a factor sqrt(2) of rms (synthetic weights, test
 * matrices); rms = 0: f16 scales drawn over the whole finite range and E8M0
 * bytes over 0..GGML_MXFP4_MAX_E (the decoders' stress test). Block i depends only on
 * (seed, i). */
void ggml_random_blocks(uint32_t t, uint64_t seed, float rms, int64_t n_blocks, void *out);

#endif

/* CPU reference backend: internal declarations shared by the files in src/cpu. */
#ifndef DSV4_CPU_CPU_H
#define DSV4_CPU_CPU_H
#include "base/threadpool.h"
#include "ops/ops.h"

typedef struct {
    dsv4_pool *pool;
    float **row;      /* per-thread scratch of row_cap floats (one weight row) */
    int64_t row_cap;  /* the widest weight row of the model */
} cpu_impl;

static inline dsv4_pool *cpu_pool(dsv4_backend *b) { return ((cpu_impl *)b->impl)->pool; }
static inline float *cpu_scratch_row(dsv4_backend *b, int tid) { return ((cpu_impl *)b->impl)->row[tid]; }

/* The one dot product every CPU op uses: 8 independent fp32 accumulators
 * summed in a fixed order, so the result depends only on the data. */
float cpu_dot(const float *a, const float *b, int64_t n);

/* Ops that other CPU ops call: the products (linear.c), the official FP8
 * rounding of a product's input (cache_quant.c), hc_post (hyperconn.c). */
void cpu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy);
void cpu_matmul_fp8in(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy);
void cpu_act_fp8_round(dsv4_backend *b, const float *x, int T, int n, float *y);
/* The official KV rounding of T rows of width values (norm_rope's n_fp8). */
void cpu_kv_fp8_round(dsv4_backend *b, float *x, int T, int width, int n_fp8);
void cpu_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post,
                 const float *comb);
/* One row of the rmsnorm op (norm_rope.c), for the ops that end in a norm
 * (hc_pre, hc_head): in place allowed. */
void cpu_rms_row(const float *xr, int n, const dsv4_mat *w, float eps, float *yr);
/* the rope op (ops.h); attention and the compressor rotate with it too */
void cpu_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, int64_t pos0,
              int64_t pos_step, const int64_t *pos, const float *inv_freq, int inverse);

/* Packed session rows (cache_quant.c). store: the row x of f->width values
 * in format f (the official rounding: kv_fp8_round, or the Hadamard
 * rotation and FP4 of idx_fp4_round), tmp holding f->width floats for
 * ROW_FP4 (unused otherwise); load: its values back, exactly. */
void cpu_row_store(const dsv4_row_fmt *f, const float *x, uint8_t *dst, float *tmp);
void cpu_row_load(const dsv4_row_fmt *f, const uint8_t *src, float *x);

#endif

/* RMSNorm, RoPE, embedding lookup and the window-ring store for the CPU backend. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

void cpu_rms_row(const float *xr, int n, const dsv4_mat *w, float eps, float *yr)
{
    float ss = cpu_dot(xr, xr, n);
    float r = 1.0f / sqrtf(ss / (float)n + eps);
    if (w) {
        for (int i = 0; i < n; i++) yr[i] = (xr[i] * r) * mat_get(w, i);
    } else {
        for (int i = 0; i < n; i++) yr[i] = xr[i] * r;
    }
}

void cpu_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y)
{
    (void)b;
    for (int t = 0; t < T; t++) cpu_rms_row(x + (int64_t)t * n, n, w, eps, y + (int64_t)t * n);
}

void cpu_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, int64_t pos0,
              int64_t pos_step, const int64_t *rows_pos, const float *inv_freq, int inverse)
{
    (void)b;
    int half = rope_dim / 2;
    for (int t = 0; t < T; t++) {
        /* Angles in fp32 as position·inv_freq, like the reference. */
        float pos = (float)(rows_pos ? rows_pos[t] : pos0 + (int64_t)t * pos_step);
        for (int i = 0; i < half; i++) {
            float ang = pos * inv_freq[i];
            float c = cosf(ang), s = sinf(ang);
            if (inverse) s = -s;
            for (int h = 0; h < n_heads; h++) {
                float *p = x + ((int64_t)t * n_heads + h) * head_dim + (head_dim - rope_dim) + 2 * i;
                float a = p[0], bb = p[1];
                p[0] = a * c - bb * s;
                p[1] = bb * c + a * s;
            }
        }
    }
}

void cpu_norm_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, const dsv4_mat *w,
                   float eps, const int64_t *pos, const float *inv_freq, int n_fp8)
{
    cpu_rmsnorm(b, x, T * n_heads, head_dim, w, eps, x);
    cpu_rope(b, x, T, n_heads, head_dim, rope_dim, 0, 0, pos, inv_freq, 0);
    if (n_fp8 >= 0) cpu_kv_fp8_round(b, x, T * n_heads, head_dim, n_fp8);
}

void cpu_embed(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok, int T, int hc, float *X)
{
    (void)b;
    int64_t D = E->cols;
    for (int t = 0; t < T; t++) {
        float *x0 = X + (int64_t)t * hc * D;
        wmat_decode_row(E, tok[t], 0, D, x0);
        for (int i = 1; i < hc; i++) memcpy(x0 + i * D, x0, (size_t)D * sizeof *x0);
    }
}

void cpu_ring_store(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f, const float *kv, int T,
                    int64_t pos0)
{
    float *tmp = NULL;
    if (f->kind == ROW_FP4 && !(tmp = malloc((size_t)f->width * sizeof *tmp))) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory storing state rows");
        return;
    }
    int first = T > window ? T - window : 0;
    for (int t = first; t < T; t++)
        cpu_row_store(f, kv + (int64_t)t * f->width, ring + ((pos0 + t) % window) * f->bytes, tmp);
    free(tmp);
}

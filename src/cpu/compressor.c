/* KV compressor (spec §3.4) on the CPU.
 *
 * The state keeps the rows of the open window (gates with ape added) and, with
 * overlap (CSA), the series-A half of the last closed window. When token
 * pos = w·ratio + ratio − 1 arrives, entry w is pooled per channel by a
 * softmax over the window's slots (for CSA: prev series A, then this window's
 * series B; window 0 has no A slots), RMS-normed and roped at w·ratio,
 * then stored in the entries' row format (the packed formats round it). */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "cpu/cpu.h"

void cpu_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y);

static void pool_window(const dsv4_comp_params *p, const dsv4_comp_state *st, int64_t w, float *E)
{
    int m = p->ratio, d = p->fmt.width, cw = d * (p->overlap ? 2 : 1);
    int has_a = p->overlap && w > 0;
    for (int c = 0; c < d; c++) {
        /* slots: [A of window w−1 (prev) | B of window w]; without overlap, just the window */
        const int boff = p->overlap ? d : 0;
        float mx = -INFINITY;
        if (has_a)
            for (int j = 0; j < m; j++) mx = fmaxf(mx, st->prev_g[j * d + c]);
        for (int j = 0; j < m; j++) mx = fmaxf(mx, st->open_g[j * cw + boff + c]);
        float sum = 0, acc = 0;
        if (has_a)
            for (int j = 0; j < m; j++) sum += expf(st->prev_g[j * d + c] - mx);
        for (int j = 0; j < m; j++) sum += expf(st->open_g[j * cw + boff + c] - mx);
        if (has_a)
            for (int j = 0; j < m; j++) acc += (expf(st->prev_g[j * d + c] - mx) / sum) * st->prev_u[j * d + c];
        for (int j = 0; j < m; j++)
            acc += (expf(st->open_g[j * cw + boff + c] - mx) / sum) * st->open_u[j * cw + boff + c];
        E[c] = acc;
    }
}

void cpu_compress(dsv4_backend *b, const float *u, const float *g, int T, int64_t pos0, const dsv4_comp_params *p,
                  dsv4_comp_state *st)
{
    int m = p->ratio, d = p->fmt.width, cw = d * (p->overlap ? 2 : 1);
    float *E = malloc(2 * (size_t)d * sizeof *E); /* the entry, then the row store's scratch */
    if (!E) {
        backend_fail(b, DSV4_ERR_NOMEM, "out of memory in the compressor");
        return;
    }
    for (int t = 0; t < T; t++) {
        int64_t pos = pos0 + t;
        int slot = (int)(pos % m);
        float *ou = st->open_u + (int64_t)slot * cw, *og = st->open_g + (int64_t)slot * cw;
        memcpy(ou, u + (int64_t)t * cw, (size_t)cw * sizeof *ou);
        for (int c = 0; c < cw; c++) og[c] = g[(int64_t)t * cw + c] + mat_get(p->ape, (int64_t)slot * cw + c);
        if (slot != m - 1) continue;
        int64_t w = pos / m;
        pool_window(p, st, w, E);
        cpu_rmsnorm(b, E, 1, d, p->norm, p->eps, E);
        cpu_rope(b, E, 1, 1, d, p->rope_dim, w * m, 0, NULL, p->inv_freq, 0);
        cpu_row_store(&p->fmt, E, st->entries + w * p->fmt.bytes, E + d);
        if (p->overlap) /* this window's series A pairs with the next window */
            for (int j = 0; j < m; j++) {
                memcpy(st->prev_u + j * d, st->open_u + (int64_t)j * cw, (size_t)d * sizeof(float));
                memcpy(st->prev_g + j * d, st->open_g + (int64_t)j * cw, (size_t)d * sizeof(float));
            }
    }
    free(E);
}

/* KV compressor (spec §3.4) on the GPU. A step of T tokens at pos0 closes
 * the windows w_open = pos0 / m up to (pos0 + T) / m − 1, each pooled,
 * normalised and roped in shared memory exactly like the CPU, then stored
 * in the entries' row format. The windows are independent: one block an
 * entry, each reading its rows where they are (the step's own rows, or for
 * tokens before pos0 the open rows the state held). Only the first two
 * windows can read the state (w_open's own tokens before pos0 and its
 * series A in prev; w_open + 1's series A is w_open's rows), so block 0
 * takes both and then writes the state's new open rows and series A:
 * nothing another block reads. An entry's arithmetic is the same whoever
 * computes it and wherever its rows come from, so any chunking of a prompt
 * gives the same bits. */
#include <string.h>

#include "cuda/ggml_blocks.cuh"
#include "cuda/state_rows.cuh"

typedef struct {
    int64_t pos0;
    const float *u, *g;
    int T, ratio, overlap, width, rope_dim;
    dsv4_row_fmt fmt; /* the entries' (fmt.width == width) */
    dsv4_mat ape, norm;
    const float *inv_freq;
    float eps;
    dsv4_comp_state st;
} comp_args;

/* Element (j, col) of a GGUF-quantized ape: one call (cu_wval decodes
 * every GGUF format; inlined at each read of the pooling loops it made the
 * kernel 0.9 MB of code, whose instruction fetches a one-block decode
 * launch paid for). */
static __device__ __noinline__ float comp_ape_gguf(const void *data, int fmt, int64_t cols, int j, int col)
{
    dsv4_mat W; /* the fields cu_wval reads of a GGUF matrix */
    memset(&W, 0, sizeof W);
    W.data = data;
    W.fmt = (dsv4_wformat)fmt;
    W.cols = cols;
    return cu_wval(W, j, col);
}

/* Token p's rows as the state stores them (gates with ape added), the
 * token being in slot j of its window (p % m, which every caller knows):
 * the step's own for p >= pos0, the open rows held before the step
 * otherwise (only ever the open window's, p >= pos0 − pos0 % m). Values,
 * not a pointer to the kernel's parameters (which would copy them to
 * local memory). */
struct comp_rows {
    const float *su, *sg, *ou, *og;
    dsv4_mat ape;
    int64_t pos0;
    int cw;
    __device__ float u(int64_t p, int j, int col) const
    {
        return p >= pos0 ? su[(int)(p - pos0) * (int64_t)cw + col] : ou[j * cw + col];
    }
    __device__ float g(int64_t p, int j, int col) const
    {
        if (p < pos0) return og[j * cw + col];
        float ap = gg_is_fmt(ape.fmt) ? comp_ape_gguf(ape.data, ape.fmt, ape.cols, j, col)
                                      : cu_ld(ape.dtype, ape.data, (int64_t)j * ape.cols + col);
        return sg[(int)(p - pos0) * (int64_t)cw + col] + ap;
    }
};

/* Entry w into the state's entries (E: width floats of shared memory).
 * Slots per channel: [series A of window w − 1 | series B of window w]
 * (without overlap just the window; window 0 has no A); w − 1's A is the
 * state's prev when it closed before the step (w == w_open). */
__device__ __forceinline__ void comp_emit(const comp_args &a, const comp_rows &R, int64_t w, int64_t w_open, float *E, float *sh)
{
    int m = a.ratio, d = a.width;
    const dsv4_comp_state &st = a.st;
    int has_a = a.overlap && w > 0, in_prev = w == w_open, boff = a.overlap ? d : 0;
    int64_t pa = (w - 1) * m, pb = w * m; /* first tokens of the A and B slots */
    auto ag = [&](int j, int c) { return in_prev ? st.prev_g[j * d + c] : R.g(pa + j, j, c); };
    auto au = [&](int j, int c) { return in_prev ? st.prev_u[j * d + c] : R.u(pa + j, j, c); };
    float ss = 0.0f;
    for (int c = threadIdx.x; c < d; c += blockDim.x) {
        float mx = -INFINITY;
        if (has_a)
            for (int j = 0; j < m; j++) mx = fmaxf(mx, ag(j, c));
        for (int j = 0; j < m; j++) mx = fmaxf(mx, R.g(pb + j, j, boff + c));
        float sum = 0.0f, acc = 0.0f;
        if (has_a)
            for (int j = 0; j < m; j++) sum += expf(ag(j, c) - mx);
        for (int j = 0; j < m; j++) sum += expf(R.g(pb + j, j, boff + c) - mx);
        if (has_a)
            for (int j = 0; j < m; j++) acc += (expf(ag(j, c) - mx) / sum) * au(j, c);
        for (int j = 0; j < m; j++)
            acc += (expf(R.g(pb + j, j, boff + c) - mx) / sum) * R.u(pb + j, j, boff + c);
        E[c] = acc;
        ss = fmaf(acc, acc, ss);
    }
    ss = cu_block_sum(ss, sh);
    float r = 1.0f / sqrtf(ss / (float)d + a.eps);
    for (int c = threadIdx.x; c < d; c += blockDim.x) E[c] = (E[c] * r) * cu_ld(a.norm.dtype, a.norm.data, c);
    __syncthreads();
    int half = a.rope_dim / 2;
    float p = (float)(w * m);
    for (int i = threadIdx.x; i < half; i += blockDim.x) {
        float ang = p * a.inv_freq[i];
        float cs = cosf(ang), sn = sinf(ang);
        float *q = E + (d - a.rope_dim) + 2 * i;
        float x0 = q[0], x1 = q[1];
        q[0] = x0 * cs - x1 * sn;
        q[1] = x1 * cs + x0 * sn;
    }
    __syncthreads();
    sr_store_block(a.fmt, E, st.entries + w * a.fmt.bytes);
    __syncthreads(); /* E is the next entry's */
}

/* Grid: comp_blocks(T, m). Block 0: windows w_open, w_open + 1, then the
 * state; block b > 0: window w_open + 1 + b (if it closes in the step). */
__global__ void __launch_bounds__(256) compress_kernel(comp_args a, const int64_t *dpos)
{
    cu_pdl();
    __shared__ float sh[32];
    extern __shared__ float E[]; /* [width]: the entry being emitted */
    int m = a.ratio, d = a.width, cw = d * (a.overlap ? 2 : 1);
    int64_t pos0 = dpos ? *dpos : a.pos0, w_open = pos0 / m, w_end = (pos0 + a.T) / m; /* closes [w_open, w_end) */
    const comp_rows R = {a.u, a.g, a.st.open_u, a.st.open_g, a.ape, pos0, cw};
    /* one call site, so the entry's code is inlined once */
    int64_t wa = blockIdx.x ? w_open + 1 + blockIdx.x : w_open, wb = wa + (blockIdx.x ? 1 : 2);
    for (int64_t w = wa; w < w_end && w < wb; w++) comp_emit(a, R, w, w_open, E, sh);
    if (blockIdx.x) return;
    const dsv4_comp_state &st = a.st;
    if (a.overlap && w_end > w_open) /* the last closed window's series A pairs with the next window */
        for (int j = 0; j < m; j++)
            for (int c = threadIdx.x; c < d; c += blockDim.x) {
                int64_t p = (w_end - 1) * m + j;
                st.prev_u[j * d + c] = R.u(p, j, c);
                st.prev_g[j * d + c] = R.g(p, j, c);
            }
    __syncthreads(); /* the old open rows are read: replace them */
    for (int64_t p = a.T > m ? pos0 + a.T - m : pos0; p < pos0 + a.T; p++) { /* the step's last token of each slot */
        int j = (int)(p % m);
        for (int c = threadIdx.x; c < cw; c += blockDim.x) {
            st.open_u[j * cw + c] = R.u(p, j, c);
            st.open_g[j * cw + c] = R.g(p, j, c);
        }
    }
}

/* Blocks for T tokens: at most ceil(T / m) windows close, block 0 takes two. */
static unsigned comp_blocks(int T, int m)
{
    int n = (T + m - 1) / m - 1;
    return n > 1 ? (unsigned)n : 1u;
}

void cu_exec_compress(cu_impl *c, const void *args, const int64_t *dpos)
{
    const comp_args *a = (const comp_args *)args;
    if (a->T <= 0) return;
    cu_launch(c, "compress", compress_kernel, dim3(comp_blocks(a->T, a->ratio)), dim3(256),
              (size_t)a->width * sizeof(float), *a, dpos);
}

void cu_compress(dsv4_backend *b, const float *u, const float *g, int T, int64_t pos0, const dsv4_comp_params *p,
                 dsv4_comp_state *st)
{
    if (p->fmt.width > CU_ROW_MAX) {
        backend_fail(b, DSV4_ERR_UNSUPPORTED, "CUDA compressor: more than 12288 values per entry");
        return;
    }
    comp_args a;
    memset(&a, 0, sizeof a);
    a.pos0 = pos0;
    a.u = u;
    a.g = g;
    a.T = T;
    a.ratio = p->ratio;
    a.overlap = p->overlap;
    a.width = p->fmt.width;
    a.fmt = p->fmt;
    a.rope_dim = p->rope_dim;
    a.ape = *p->ape;
    a.norm = *p->norm;
    a.inv_freq = p->inv_freq;
    a.eps = p->eps;
    a.st = *st;
    cu_submit(cu_of(b), K_COMPRESS, &a, sizeof a);
}

/* KV compressor (spec §3.4) on the GPU: one block walks the chunk's tokens
 * in order (a window that closes inside the chunk pools rows written by the
 * tokens before it), storing open rows and, when a window completes,
 * pooling, normalising and roping its entry in shared memory exactly like
 * the CPU, then storing it in the entries' row format. */
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

__global__ void __launch_bounds__(256) compress_kernel(comp_args a, const int64_t *dpos)
{
    cu_pdl();
    __shared__ float sh[32];
    extern __shared__ float E[]; /* [width]: the entry being emitted */
    int m = a.ratio, d = a.width, cw = d * (a.overlap ? 2 : 1);
    int64_t pos0 = dpos ? *dpos : a.pos0;
    const dsv4_comp_state st = a.st;
    for (int t = 0; t < a.T; t++) {
        int64_t pos = pos0 + t;
        int slot = (int)(pos % m);
        float *ou = st.open_u + (int64_t)slot * cw, *og = st.open_g + (int64_t)slot * cw;
        for (int c = threadIdx.x; c < cw; c += blockDim.x) {
            ou[c] = a.u[(int64_t)t * cw + c];
            og[c] = a.g[(int64_t)t * cw + c] + cu_wval(a.ape, slot, c);
        }
        __syncthreads();
        if (slot != m - 1) continue;
        int64_t w = pos / m;
        int has_a = a.overlap && w > 0, boff = a.overlap ? d : 0;
        float ss = 0.0f;
        for (int c = threadIdx.x; c < d; c += blockDim.x) {
            float mx = -INFINITY;
            if (has_a)
                for (int j = 0; j < m; j++) mx = fmaxf(mx, st.prev_g[j * d + c]);
            for (int j = 0; j < m; j++) mx = fmaxf(mx, st.open_g[(int64_t)j * cw + boff + c]);
            float sum = 0.0f, acc = 0.0f;
            if (has_a)
                for (int j = 0; j < m; j++) sum += expf(st.prev_g[j * d + c] - mx);
            for (int j = 0; j < m; j++) sum += expf(st.open_g[(int64_t)j * cw + boff + c] - mx);
            if (has_a)
                for (int j = 0; j < m; j++) acc += (expf(st.prev_g[j * d + c] - mx) / sum) * st.prev_u[j * d + c];
            for (int j = 0; j < m; j++)
                acc += (expf(st.open_g[(int64_t)j * cw + boff + c] - mx) / sum) * st.open_u[(int64_t)j * cw + boff + c];
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
        if (a.overlap) /* this window's series A pairs with the next window */
            for (int i = threadIdx.x; i < m * d; i += blockDim.x) {
                int j = i / d, c = i % d;
                st.prev_u[i] = st.open_u[(int64_t)j * cw + c];
                st.prev_g[i] = st.open_g[(int64_t)j * cw + c];
            }
        __syncthreads();
    }
}

void cu_exec_compress(cu_impl *c, const void *args, const int64_t *dpos)
{
    const comp_args *a = (const comp_args *)args;
    if (a->T <= 0) return;
    cu_launch(c, "compress", compress_kernel, dim3(1), dim3(256), (size_t)a->width * sizeof(float), *a, dpos);
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

/* Greedy picks over summed rows on the GPU (ops.h pick_sum), one block a
 * row. Each thread scans its strided share with the host's `>` (its first
 * best), the block merges the candidates keeping the larger sum and, of
 * equal ones, the lower id: for sums without NaN (a and c finite) that is
 * the host scan's lowest id of the largest value, ties and signed zeros
 * included. The ids and values stay on the device (a chain of picks reads
 * them as the next tokens). */
#include <float.h>
#include <limits.h>
#include <string.h>

#include "cuda/cuda_internal.cuh"

typedef struct {
    int64_t pos0;
    const float *a, *c;
    int64_t lda, ldc;
    int n, V;
    int32_t *idx, *bad;
    float *top;
} pick_args;

#define PICK_THREADS 1024

/* (v1, i1) becomes the better of it and (v2, i2). */
__device__ __forceinline__ void pick_merge(float &v1, int &i1, float v2, int i2)
{
    if (v2 > v1 || (v2 == v1 && i2 < i1)) {
        v1 = v2;
        i1 = i2;
    }
}

/* The warp's best candidate and lowest bad id, in every lane. */
__device__ __forceinline__ void pick_warp(float &bv, int &bi, int &b0)
{
    for (int o = 16; o > 0; o >>= 1) {
        float v2 = __shfl_xor_sync(0xffffffffu, bv, o);
        int i2 = __shfl_xor_sync(0xffffffffu, bi, o), c2 = __shfl_xor_sync(0xffffffffu, b0, o);
        pick_merge(bv, bi, v2, i2);
        b0 = c2 < b0 ? c2 : b0;
    }
}

__global__ void __launch_bounds__(PICK_THREADS) pick_sum_kernel(pick_args a)
{
    cu_pdl();
    __shared__ float sv[32];
    __shared__ int si[32], sb[32];
    const float *ar = a.a + (int64_t)blockIdx.x * a.lda, *cr = a.c + (int64_t)blockIdx.x * a.ldc;
    int t = threadIdx.x, lane = t & 31, w = t >> 5;
    /* a thread's candidate starts at its first value, so rows of -inf
     * sums still give the lowest id */
    float bv = -INFINITY;
    int bi = INT_MAX, b0 = INT_MAX;
    if (t < a.V) {
        bv = ar[t] + cr[t];
        bi = t;
    }
    for (int v = t; v < a.V; v += blockDim.x) {
        float s = ar[v] + cr[v];
        if (b0 == INT_MAX && !(fabsf(cr[v]) <= FLT_MAX)) b0 = v;
        if (s > bv) {
            bv = s;
            bi = v;
        }
    }
    pick_warp(bv, bi, b0);
    if (lane == 0) {
        sv[w] = bv;
        si[w] = bi;
        sb[w] = b0;
    }
    __syncthreads();
    if (w) return;
    int nw = blockDim.x >> 5;
    bv = lane < nw ? sv[lane] : -INFINITY;
    bi = lane < nw ? si[lane] : INT_MAX;
    b0 = lane < nw ? sb[lane] : INT_MAX;
    pick_warp(bv, bi, b0);
    if (lane == 0) {
        a.idx[blockIdx.x] = bi;
        a.top[blockIdx.x] = bv;
        a.bad[blockIdx.x] = b0 == INT_MAX ? -1 : b0;
    }
}

void cu_exec_pick(cu_impl *c, const void *args, const int64_t *dpos)
{
    const pick_args *a = (const pick_args *)args;
    (void)dpos;
    if (a->n <= 0 || a->V <= 0) return;
    cu_launch(c, "pick_sum", pick_sum_kernel, dim3((unsigned)a->n), dim3(PICK_THREADS), 0, *a);
}

void cu_pick_sum(dsv4_backend *b, const float *a, int64_t lda, const float *cv, int64_t ldc, int n, int V, int32_t *idx,
                 float *top, int32_t *bad)
{
    pick_args p;
    memset(&p, 0, sizeof p);
    p.a = a;
    p.c = cv;
    p.lda = lda;
    p.ldc = ldc;
    p.n = n;
    p.V = V;
    p.idx = idx;
    p.top = top;
    p.bad = bad;
    cu_submit(cu_of(b), K_PICK, &p, sizeof p);
}

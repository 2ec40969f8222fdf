/* The device's limits, measured when a benchmark asks (ops.h
 * measure_limits), so that its figures come with ratios against this
 * machine's own ceilings rather than datasheet numbers alone (and name the
 * device they were measured on):
 *   - the memory's peak rate from the device's attributes: two transfers a
 *     clock of the memory clock times the bus width (H100 SXM: 3.35 TB/s),
 *     the datasheet figure of whichever GPU runs;
 *   - memory read bandwidth: a streaming read (16-byte loads, several in
 *     flight a thread) of a buffer far larger than the L2, best of 5;
 *   - dense tensor-core rate: a 4096x4096x4096 product through cuBLASLt
 *     with FP8 e4m3 inputs (fast accumulation, the library's fastest FP8
 *     mode) and with BF16 inputs, fp32 accumulation and BF16 output, best
 *     of 20 after a warm-up. The inputs are pseudo-random values in
 *     [-1, 1] (all-zero inputs would draw less power and run faster than
 *     real weights);
 *   - the same FP8 product under DeepSeek's block scales (the checkpoint's
 *     128x128 weight blocks, 1x128 activation blocks: cuBLASLt's
 *     BLK128x128 and VEC128 scale modes, fp32 scales, no fast
 *     accumulation): what a library reaches on the official numerics with
 *     no batch-invariance rule, the ceiling that the cost of invariance is
 *     measured against.
 * Plain cudaMalloc buffers, freed before returning; the backend's own
 * memory and pending records are untouched (the step records are flushed
 * and the stream drained first). */
#include <cublasLt.h>
#include <dlfcn.h>
#include <stdio.h>
#include <string.h>
#include <cuda_bf16.h>
#include <cuda_fp8.h>

#include "cuda/cuda_internal.cuh"

#define LIM_N 4096

/* cuBLASLt, opened only when a benchmark asks: linked into the program it
 * would be mapped and relocated at every start (about 200 MB resident for
 * `dsv4 --help`, against 7 MB). The functions used (cublasLt + each name),
 * typed by the header's prototypes. */
#define LIM_LT_FUNCS(X)                                                                                              \
    X(Create) X(Destroy) X(MatmulDescCreate) X(MatmulDescDestroy) X(MatmulDescSetAttribute) X(MatrixLayoutCreate) \
    X(MatrixLayoutDestroy) X(MatmulPreferenceCreate) X(MatmulPreferenceDestroy) X(MatmulPreferenceSetAttribute)   \
    X(MatmulAlgoGetHeuristic) X(Matmul)
typedef struct {
#define LIM_FIELD(f) decltype(&cublasLt##f) f;
    LIM_LT_FUNCS(LIM_FIELD)
#undef LIM_FIELD
} lim_lt;

/* The library of this toolkit's major version (any other: no figure). */
static int lim_lt_open(lim_lt *lt)
{
    char name[64];
    snprintf(name, sizeof name, "libcublasLt.so.%d", CUBLAS_VER_MAJOR);
    void *h = dlopen(name, RTLD_NOW | RTLD_LOCAL);
    if (!h) {
        snprintf(name, sizeof name, "/usr/local/cuda/lib64/libcublasLt.so.%d", CUBLAS_VER_MAJOR);
        if (!(h = dlopen(name, RTLD_NOW | RTLD_LOCAL))) return 0;
    }
#define LIM_SYM(f)                                                                                                   \
    if (!(lt->f = (decltype(&cublasLt##f))dlsym(h, "cublasLt" #f))) {                                            \
        dlclose(h);                                                                                                  \
        return 0;                                                                                                    \
    }
    LIM_LT_FUNCS(LIM_SYM)
#undef LIM_SYM
    return 1; /* kept open: the process may measure again */
}

__device__ __forceinline__ float lim_value(uint64_t i, uint32_t seed)
{
    uint32_t h = (uint32_t)i * 0x9E3779B1u ^ (uint32_t)(i >> 32) ^ seed;
    h ^= h >> 15;
    h *= 0x2C1B3C6Du;
    h ^= h >> 12;
    return (float)(h >> 8) * (2.0f / 16777216.0f) - 1.0f;
}

__global__ void lim_fill_fp8(__nv_fp8_e4m3 *p, uint64_t n, uint32_t seed)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = __nv_fp8_e4m3(lim_value(i, seed));
}

__global__ void lim_fill_bf16(__nv_bfloat16 *p, uint64_t n, uint32_t seed)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = __float2bfloat16(lim_value(i, seed));
}

__global__ void lim_fill_ones(float *p, uint64_t n)
{
    for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
        p[i] = 1.0f;
}

/* Every thread reads 4 pieces a round (their loads in flight together);
 * the xor of everything read goes to *sink only if it has one exact
 * value, so the loads cannot be dropped and nothing is written. */
__global__ void __launch_bounds__(512) lim_read(const uint4 *p, uint64_t n, uint32_t *sink)
{
    uint64_t stride = (uint64_t)gridDim.x * blockDim.x, i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x;
    uint32_t x = 0;
    for (; i + 3 * stride < n; i += 4 * stride) {
        uint4 a = __ldcs(p + i), b = __ldcs(p + i + stride), c = __ldcs(p + i + 2 * stride),
              d = __ldcs(p + i + 3 * stride);
        x ^= a.x ^ a.y ^ a.z ^ a.w ^ b.x ^ b.y ^ b.z ^ b.w ^ c.x ^ c.y ^ c.z ^ c.w ^ d.x ^ d.y ^ d.z ^ d.w;
    }
    for (; i < n; i += stride) {
        uint4 a = __ldcs(p + i);
        x ^= a.x ^ a.y ^ a.z ^ a.w;
    }
    if (x == 0x9E3779B9u) *sink = x;
}

/* Seconds of the fastest of reps runs of f on stream s (f enqueues one). */
template <class F>
static double lim_best(cudaStream_t s, int reps, F f)
{
    cudaEvent_t a, b;
    if (cudaEventCreate(&a) != cudaSuccess) return 0;
    if (cudaEventCreate(&b) != cudaSuccess) { cudaEventDestroy(a); return 0; }
    double best = 0;
    for (int r = 0; r < reps; r++) {
        cudaEventRecord(a, s);
        if (!f()) { best = 0; break; }
        cudaEventRecord(b, s);
        float ms = 0;
        if (cudaEventSynchronize(b) != cudaSuccess || cudaEventElapsedTime(&ms, a, b) != cudaSuccess) { best = 0; break; }
        if (best == 0 || ms * 1e-3 < best) best = ms * 1e-3;
    }
    cudaEventDestroy(a);
    cudaEventDestroy(b);
    return best;
}

/* GB/s of a streaming read of up to 2 GiB (at least 256 MB, five times the
 * largest L2 of the family; 0 when that much is not free). */
static double lim_read_gbs(cu_impl *c)
{
    size_t fr = 0, tot = 0;
    if (cudaMemGetInfo(&fr, &tot) != cudaSuccess) return 0;
    size_t bytes = (size_t)2 << 30;
    if (bytes > fr / 4) bytes = fr / 4 / 4096 * 4096;
    if (bytes < (size_t)256 << 20) return 0;
    void *buf = NULL;
    uint32_t *sink = NULL;
    if (cudaMalloc(&buf, bytes + 64) != cudaSuccess) return 0;
    sink = (uint32_t *)((char *)buf + bytes);
    double t = 0;
    if (cudaMemsetAsync(buf, 0x5A, bytes, c->stream) == cudaSuccess) {
        uint64_t n = bytes / 16;
        t = lim_best(c->stream, 5, [&]() {
            lim_read<<<c->n_sm * 4, 512, 0, c->stream>>>((const uint4 *)buf, n, sink);
            return cudaGetLastError() == cudaSuccess;
        });
    }
    cudaStreamSynchronize(c->stream);
    cudaFree(buf);
    return t > 0 ? (double)bytes / t / 1e9 : 0;
}

/* TFLOP/s of D = A^T·B (4096 square, column-major, A and B of type ab,
 * D bf16) through cuBLASLt; blocks (FP8 only): A scaled per 128x128 block
 * and B per 128 values of a column (ones: the rate does not depend on the
 * scales' values). 0 on any failure (no algorithm, no memory). */
static double lim_gemm_tflops(cu_impl *c, const lim_lt *lt, cudaDataType_t ab, int blocks_scaled)
{
    const int n = LIM_N;
    const size_t ws_bytes = (size_t)64 << 20, in_bytes = (size_t)n * n * (ab == CUDA_R_8F_E4M3 ? 1 : 2);
    /* A's (n/128)^2 block scales and B's n·n/128 vector scales, one buffer
     * of the larger count each */
    const size_t sc_count = (size_t)n * n / 128, sc_bytes = blocks_scaled ? 2 * sc_count * sizeof(float) : 0;
    char *mem = NULL;
    if (cudaMalloc((void **)&mem, 2 * in_bytes + (size_t)n * n * 2 + ws_bytes + sc_bytes) != cudaSuccess) return 0;
    void *A = mem, *B = mem + in_bytes, *D = mem + 2 * in_bytes, *ws = (char *)D + (size_t)n * n * 2;
    float *scales = (float *)((char *)ws + ws_bytes); /* A's, then B's */
    unsigned blocks = (unsigned)c->n_sm * 8;
    if (blocks_scaled) lim_fill_ones<<<blocks, 256, 0, c->stream>>>(scales, 2 * sc_count);
    if (ab == CUDA_R_8F_E4M3) {
        lim_fill_fp8<<<blocks, 256, 0, c->stream>>>((__nv_fp8_e4m3 *)A, (uint64_t)n * n, 1u);
        lim_fill_fp8<<<blocks, 256, 0, c->stream>>>((__nv_fp8_e4m3 *)B, (uint64_t)n * n, 2u);
    } else {
        lim_fill_bf16<<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)A, (uint64_t)n * n, 1u);
        lim_fill_bf16<<<blocks, 256, 0, c->stream>>>((__nv_bfloat16 *)B, (uint64_t)n * n, 2u);
    }
    double t = 0;
    cublasLtHandle_t h = NULL;
    cublasLtMatmulDesc_t op = NULL;
    cublasLtMatrixLayout_t la = NULL, lb = NULL, ld = NULL;
    cublasLtMatmulPreference_t pref = NULL;
    cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
    int8_t fast = 1;
    cublasLtMatmulHeuristicResult_t res;
    int found = 0;
    float alpha = 1.0f, beta = 0.0f;
    if (cudaGetLastError() != cudaSuccess || lt->Create(&h) != CUBLAS_STATUS_SUCCESS) goto done;
    if (lt->MatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F) != CUBLAS_STATUS_SUCCESS ||
        lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta) != CUBLAS_STATUS_SUCCESS ||
        lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb) != CUBLAS_STATUS_SUCCESS)
        goto done;
    if (ab == CUDA_R_8F_E4M3 && !blocks_scaled &&
        lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_FAST_ACCUM, &fast, sizeof fast) != CUBLAS_STATUS_SUCCESS)
        goto done;
    if (blocks_scaled) {
        cublasLtMatmulMatrixScale_t ma = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F,
                                    mb = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
        const float *sa = scales, *sb = scales + sc_count;
        if (lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &ma, sizeof ma) != CUBLAS_STATUS_SUCCESS ||
            lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &mb, sizeof mb) != CUBLAS_STATUS_SUCCESS ||
            lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sa, sizeof sa) != CUBLAS_STATUS_SUCCESS ||
            lt->MatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sb, sizeof sb) != CUBLAS_STATUS_SUCCESS)
            goto done;
    }
    if (lt->MatrixLayoutCreate(&la, ab, n, n, n) != CUBLAS_STATUS_SUCCESS ||
        lt->MatrixLayoutCreate(&lb, ab, n, n, n) != CUBLAS_STATUS_SUCCESS ||
        lt->MatrixLayoutCreate(&ld, CUDA_R_16BF, n, n, n) != CUBLAS_STATUS_SUCCESS)
        goto done;
    if (lt->MatmulPreferenceCreate(&pref) != CUBLAS_STATUS_SUCCESS ||
        lt->MatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                             sizeof ws_bytes) != CUBLAS_STATUS_SUCCESS)
        goto done;
    if (lt->MatmulAlgoGetHeuristic(h, op, la, lb, ld, ld, pref, 1, &res, &found) != CUBLAS_STATUS_SUCCESS ||
        found < 1)
        goto done;
    {
        auto run = [&]() {
            return lt->Matmul(h, op, &alpha, A, la, B, lb, &beta, D, ld, D, ld, &res.algo, ws, ws_bytes,
                                  c->stream) == CUBLAS_STATUS_SUCCESS;
        };
        if (lim_best(c->stream, 3, run) > 0) t = lim_best(c->stream, 20, run);
    }
done:
    if (pref) lt->MatmulPreferenceDestroy(pref);
    if (ld) lt->MatrixLayoutDestroy(ld);
    if (lb) lt->MatrixLayoutDestroy(lb);
    if (la) lt->MatrixLayoutDestroy(la);
    if (op) lt->MatmulDescDestroy(op);
    if (h) lt->Destroy(h);
    cudaStreamSynchronize(c->stream);
    cudaFree(mem);
    return t > 0 ? 2.0 * n * n * (double)n / t / 1e12 : 0;
}

dsv4_status cu_measure_limits(dsv4_backend *b, dsv4_device_limits *out)
{
    cu_impl *c = cu_of(b);
    memset(out, 0, sizeof *out);
    cu_flush(c);
    cudaError_t e = cudaStreamSynchronize(c->stream);
    if (e != cudaSuccess) return dsv4_fail(DSV4_ERR_DEVICE, "CUDA: measuring the device's limits: %s", cudaGetErrorString(e));
    cudaDeviceProp prop;
    if (cudaGetDeviceProperties(&prop, c->device) == cudaSuccess) snprintf(out->name, sizeof out->name, "%.63s", prop.name);
    int khz = 0, bits = 0;
    if (cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, c->device) == cudaSuccess &&
        cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, c->device) == cudaSuccess)
        out->peak_gbs = 2.0 * khz * 1e3 * (bits / 8) / 1e9;
    /* a failed allocation or launch in a measurement is a missing figure:
     * it must not linger as the last error for the next measurement or the
     * backend's next check */
    out->read_gbs = lim_read_gbs(c);
    cudaGetLastError();
    lim_lt lt;
    if (lim_lt_open(&lt)) {
        out->fp8_tflops = lim_gemm_tflops(c, &lt, CUDA_R_8F_E4M3, 0);
        cudaGetLastError();
        out->fp8_block_tflops = lim_gemm_tflops(c, &lt, CUDA_R_8F_E4M3, 1);
        cudaGetLastError();
        out->bf16_tflops = lim_gemm_tflops(c, &lt, CUDA_R_16BF, 0);
        cudaGetLastError();
    }
    return DSV4_OK;
}

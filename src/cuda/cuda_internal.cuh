/* CUDA backend: internal declarations shared by the files in src/cuda.
 *
 * Execution model. Every compute op packs its arguments into a POD struct
 * whose first field is the step position pos0 (the only argument that changes
 * from one decode step to the next) and hands it to cu_submit():
 *   - eager mode: the op's exec function launches its kernels at once;
 *   - record mode (between step_begin and step_end of a small step): the
 *     struct is appended to a list; pos0 goes into a pinned argument block at
 *     the record's slot and is zeroed in the stored copy. A step is recorded
 *     in segments (cu_seg_records: the first short, each next one longer) that
 *     go to the GPU as soon as they are complete, so that the host records
 *     the rest of the step while the GPU runs its start instead of the GPU
 *     waiting for the whole recording. A segment's list is compared byte for
 *     byte with the lists of the captured graphs; on a match only its part
 *     of the argument block changes and the graph is replayed, otherwise the
 *     list is executed under stream capture into a new graph. Captured
 *     kernels read pos0 from the device copy of the argument block, which
 *     the graph's first node copies from the pinned block (each segment its
 *     own part; the host writes no part twice before the step's sync).
 * Exec functions must only enqueue work on the stream (no allocation, no
 * synchronous copy): everything else happens when the op is submitted. */
#ifndef DSV4_CUDA_INTERNAL_CUH
#define DSV4_CUDA_INTERNAL_CUH
#include <cuda_fp16.h>
#include <cuda_runtime.h>
#include <stddef.h>
#include <stdint.h>

extern "C" {
#include "base/error.h"
#include "ops/ops.h"
}

/* Steps of up to this many rows run as CUDA graphs: decode cohorts of up to
 * 64 lanes and short chunks (a longer prompt's launches are a small part of
 * its time; each new shape pays a capture of milliseconds). */
#define CU_GRAPH_MAX_ROWS 64
#define CU_GRAPH_CACHE 32 /* segment graphs (a step has a few; decode alternates between a few step shapes) */
#define CU_GROUPS 8          /* concurrent groups: the main one and up to 7 side ones (a lane each) */
#define CU_REC_ARGS 864  /* the largest op argument struct (the MoE's, 7 weight views) fits */

/* Device-side fault codes written to the mapped error word. */
enum { CU_FAULT_TOKEN = 1, CU_FAULT_EXPERT = 2, CU_FAULT_SELECT = 3 };

/* Operation families, for the profiler and the dispatch table. */
enum {
    K_MATMUL, K_RMSNORM, K_ROPE, K_EMBED, K_HC_PRE, K_HC_POST, K_HC_HEAD, K_RING, K_COMPRESS, K_INDEXER,
    K_ATTENTION, K_MOE, K_UPLOAD, K_DOWNLOAD, K_CACHE_QUANT, K_COPY, K_PICK, K_NORM_ROPE, K_FORK, K_COUNT
};

typedef struct cu_impl cu_impl;
typedef struct { cudaEvent_t a, b; int kind; } cu_prof_ev;
typedef void (*cu_exec_fn)(cu_impl *c, const void *args, const int64_t *dpos);

typedef struct {
    int kind;
    int size;
    int64_t dyn_off;               /* offset of this record's slot in the argument block */
    unsigned char args[CU_REC_ARGS];
} cu_record;

typedef struct {
    int n;
    cu_record *rec;
    size_t arg0, arg1;             /* the part of the argument block its first node copies */
    cudaGraphExec_t exec;
    unsigned long long used;       /* LRU stamp */
} cu_graph;

typedef struct { void *p; size_t bytes; } cu_block;

typedef struct {
    const void *host;
    size_t bytes;
    void *dev;
} cu_wmap_entry;

typedef struct {
    const void *key;               /* host address of the moe params' w1 array */
    const void **tab;              /* device [6][E]: w1, w3, w2 data, then their scales */
    const void **host;             /* host copy, to notice views that moved */
    int n;
} cu_expert_tab;

typedef struct { void *host_dst; size_t off, bytes; } cu_pending_dl;

struct cu_impl {
    dsv4_backend *b;
    int device, n_sm;
    cudaStream_t stream;           /* where kernels go now: streams[0], or a side group's stream */
    cudaStream_t streams[CU_GROUPS]; /* the main stream and the side ones (concurrent groups, cu_exec_fork) */
    cudaEvent_t fork_ev;           /* the groups' start on the main stream */
    cudaEvent_t join_ev[CU_GROUPS]; /* each side stream's end (1 ..) */
    int side;                      /* recording: the group its ops belong to (0 main), whose workspaces they take */
    int n_side_rec;                /* recording: side groups opened since the last join */
    int side_open;                 /* executing: side streams 1..side_open have work the main one has not joined */
    int *err_host, *err_dev;       /* mapped pinned [code, row, layer] of a kernel-detected fault */

    /* memory: live activation blocks and the cache of freed ones (exact sizes) */
    cu_block *live, *cache;
    int n_live, cap_live, n_cache, cap_cache;
    /* weights: arena chunks and the host->device map (dedupe) */
    void **chunks;
    int n_chunks, cap_chunks;
    char *arena;
    size_t arena_used, arena_cap;
    cu_wmap_entry *wmap;
    size_t wmap_cap, wmap_n;
    cu_expert_tab *etab;
    int n_etab;
    /* workspaces by group (main, side ones) and slot, grown on demand; old
     * buffers freed at the next sync */
    void *ws[CU_GROUPS][8];
    size_t ws_bytes[CU_GROUPS][8];
    void **deferred;
    int n_deferred, cap_deferred;

    /* graphs */
    int graphs_on, recording;
    int pdl;                       /* launch with programmatic dependent launch */
    cu_record *rec;
    int n_rec, cap_rec;
    unsigned char *arg_host, *arg_dev; /* pinned host / device argument blocks */
    size_t arg_cap, arg_used;
    unsigned char *stage;          /* pinned staging for downloads of graph steps */
    size_t stage_cap, stage_used;
    cu_pending_dl *dl;
    int n_dl, cap_dl;
    cu_graph graphs[CU_GRAPH_CACHE];
    unsigned long long clock;
    long long n_captures, n_replays; /* steps that captured a graph / that replayed only */
    /* the step's segments: the open one's first argument byte, how many
     * went to the GPU, whether one of them was captured */
    size_t arg_seg;
    int n_seg, seg_captured;
    /* where a graph step's time goes: the host's recording before the GPU
     * starts (step_begin to the first segment's launch) and the graphs on
     * the GPU (events before the first launch and after the last, read at
     * the next sync; a step while one is unread is not timed) */
    double t_begin, host_s, gpu_s;
    cudaEvent_t gev[2];
    int gev_open, gev_started;

    /* profiler */
    int profiling;
    cu_prof_ev *ev;
    int n_ev, cap_ev, ev_open;
    double prof_ms[K_COUNT];
    long long prof_calls[K_COUNT];
};

static inline cu_impl *cu_of(dsv4_backend *b) { return (cu_impl *)b->impl; }

/* Records the first CUDA error (returns nonzero when e is an error). */
int cu_check(cu_impl *c, cudaError_t e, const char *what);
/* Queue or run an op (see above). args starts with int64_t pos0. */
void cu_submit(cu_impl *c, int kind, const void *args, int size);
/* A workspace of at least `bytes`, stable until it must grow. */
void *cu_ws(cu_impl *c, int slot, size_t bytes);
enum { WS_MATMUL, WS_HC, WS_INDEXER, WS_MOE, WS_ATTN, WS_ACT };
int cu_record_upload(cu_impl *c, void *dst, const void *src, size_t bytes);
int cu_record_download(cu_impl *c, void *dst, const void *src, size_t bytes);
/* Runs the pending records eagerly (before an op that cannot be recorded). */
void cu_flush(cu_impl *c);
/* Every kernel starts with cu_pdl() and is launched with cu_launch(), which
 * allows programmatic dependent launch: a kernel is scheduled while its
 * predecessor finishes, and cu_pdl() holds it until the predecessor has
 * completed and its writes are visible (before any read of what earlier
 * kernels wrote, and before any write), so the launch latency between the
 * many small kernels of a step overlaps. Weights, which no kernel writes,
 * may be read before it: their first bytes are then on their way while the
 * predecessor finishes. */
__device__ __forceinline__ void cu_pdl()
{
    asm volatile("griddepcontrol.wait;" ::: "memory");
    asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
}

template <typename... KArgs, typename... Args>
static inline void cu_launch(cu_impl *c, const char *what, void (*kernel)(KArgs...), dim3 grid, dim3 block, size_t shm,
                             Args... args)
{
    cudaLaunchAttribute at[1];
    at[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    at[0].val.programmaticStreamSerializationAllowed = c->pdl;
    cudaLaunchConfig_t cfg = {};
    cfg.gridDim = grid;
    cfg.blockDim = block;
    cfg.dynamicSmemBytes = shm;
    cfg.stream = c->stream;
    cfg.attrs = at;
    cfg.numAttrs = 1;
    cu_check(c, cudaLaunchKernelEx(&cfg, kernel, args...), what);
}

/* Lets kernel use shm bytes of shared memory on c's GPU (above the default
 * 48 KB an opt-in per kernel and device; done[d]: the most already allowed
 * on GPU d, set anew on GPUs past the table). Nonzero on error. */
#define CU_SMEM_GPUS 16
template <typename K>
static inline int cu_allow_smem(cu_impl *c, K kernel, size_t shm, size_t (&done)[CU_SMEM_GPUS])
{
    int d = c->device;
    if (shm <= 48 * 1024 || (d >= 0 && d < CU_SMEM_GPUS && shm <= done[d])) return 0;
    if (cu_check(c, cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)shm),
                 "shared memory above 48 KB"))
        return 1;
    if (d >= 0 && d < CU_SMEM_GPUS) done[d] = shm;
    return 0;
}

/* Exec functions, one per kind. */
void cu_exec_matmul(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_rmsnorm(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_rope(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_embed(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_pick(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_hc_pre(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_norm_rope(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_fork(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_hc_post(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_hc_head(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_ring(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_compress(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_indexer(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_attention(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_moe(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_upload(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_download(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_cache_quant(cu_impl *c, const void *a, const int64_t *dpos);
void cu_exec_copy(cu_impl *c, const void *a, const int64_t *dpos);

/* From an exec function: y[r] = act_fp8_round(x[r] · (r < nf ? f[r] : 1))
 * for rows r < rows of n values (f NULL: no factor), enqueued at once (the
 * MoE rounds its experts' inputs with it). */
void cu_launch_act_fp8(cu_impl *c, const float *x, float *y, int rows, int n, const float *f, int nf);
/* The act_fp8_round op (submitted; cache_quant.cu): matmul_fp8in rounds the
 * input of a product without a tensor-core path with it. */
void cu_act_fp8_round(dsv4_backend *b, const float *x, int T, int n, float *y);

/* Ops that other ops of the backend call (linear.cu, hyperconn.cu). */
void cu_matmul(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy);
void cu_matmul_fp8in(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y, int64_t ldy);
void cu_hc_post(dsv4_backend *b, float *X, int T, int hc, int D, const float *a, const float *post,
                const float *comb);
/* Matmul args, also used directly by the MoE for its gate. */
typedef struct {
    int64_t pos0;
    const float *x;
    int64_t ldx;
    int T;
    dsv4_mat W;
    float *y;
    int64_t ldy;
    int64_t grp_rows; /* matmul_grouped: rows per block of W; 0: plain matmul */
    __half *xq;       /* tensor-core path: the prepared activation rows (tc_f16.cuh), */
    float *pf;        /* and their factors; from cu_matmul_prep_ws */
    int act;          /* matmul_fp8in on the tensor cores: the rows go through FP8 1x128 where they are prepared */
    dsv4_hc_post post; /* fp8_mma.cu (matmul_post): hc_post of y into these streams instead of storing y (X NULL: store) */
    dsv4_mat W2;      /* matmul_pair in one GEMV launch: also y2 = W2 · x (y2 NULL: W alone); */
    float *y2;        /* W2 of W's shape and format (cu_matmul_pair checks) */
    int64_t ldy2;
} cu_matmul_args;
/* Points a's xq/pf at the matmul workspace when its weight takes the
 * tensor-core path (at submit time: exec functions do not allocate). */
void cu_matmul_prep_ws(cu_impl *c, cu_matmul_args *a);

/* Q8_0 products with exact integer block sums (int_dot.cuh):
 * whether W (and the grouping) takes them, the workspace of prepared rows,
 * the preparation of nrows rows (x + t*ldx + g*n, t = r / G, g = r % G)
 * into ws, the run (int_matmul.cu). */
int cu_int_matmul_ok(const dsv4_mat *W, int64_t grp_rows);
size_t cu_int_prep_bytes(int64_t rows, int64_t cols);
void cu_int_prep(cu_impl *c, const float *x, int64_t ldx, int G, int64_t n, int64_t nrows, void *ws);
void cu_int_matmul(cu_impl *c, const cu_matmul_args *a);

/* FP8 weights against FP8-rounded rows (matmul_fp8in) on the e4m3 tensor
 * cores (fp8_mma.cu): whether W takes them, the workspace for T prepared
 * rows of n columns, the run. */
int cu_f8mma_ok(const dsv4_mat *W, int64_t grp_rows);
size_t cu_f8mma_ws_bytes(int64_t T, int64_t n);
void cu_f8mma(cu_impl *c, const cu_matmul_args *a);

/* ---- device helpers ---- */
__device__ __forceinline__ float cu_ld(int dt, const void *p, int64_t i)
{
    if (dt == DT_F32) return ((const float *)p)[i];
    if (dt == DT_BF16) return __uint_as_float((uint32_t)((const uint16_t *)p)[i] << 16);
    return __half2float(((const __half *)p)[i]);
}

__device__ __forceinline__ float cu_warp_sum(float v)
{
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffffu, v, o);
    return v;
}

/* Sum over the block in a fixed order (all threads get it); sh: 32 floats.
 * blockDim.x must be a multiple of 32. */
__device__ __forceinline__ float cu_block_sum(float v, float *sh)
{
    v = cu_warp_sum(v);
    int w = threadIdx.x >> 5, l = threadIdx.x & 31, nw = blockDim.x >> 5;
    __syncthreads();
    if (l == 0) sh[w] = v;
    __syncthreads();
    float r = l < nw ? sh[l] : 0.0f;
    return cu_warp_sum(r);
}

/* Records a fault for sync: err[0] = code, err[1] = activation row,
 * err[2] = the layer the op ran for (host cur_layer at launch). */
__device__ __forceinline__ void cu_fault(int *err, int code, int row, int layer)
{
    if (!err) return;
    ((volatile int *)err)[1] = row;
    ((volatile int *)err)[2] = layer;
    ((volatile int *)err)[0] = code;
}

/* 8 bf16 or f16 weights from one 16-byte load, as floats. */
__device__ __forceinline__ void cu_unpack8(int dt, uint4 u, float *f)
{
    uint32_t q[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int j = 0; j < 4; j++) {
        if (dt == DT_BF16) {
            f[2 * j] = __uint_as_float(q[j] << 16);
            f[2 * j + 1] = __uint_as_float(q[j] & 0xffff0000u);
        } else {
            float2 ff = __half22float2(*(const __half2 *)&q[j]);
            f[2 * j] = ff.x;
            f[2 * j + 1] = ff.y;
        }
    }
}

/* Host: grow a malloc'd array to hold `need` elements (doubling); 0 when out
 * of memory, the array then unchanged. */
static inline int cu_grow(void **p, int *cap, int need, size_t elem)
{
    if (need <= *cap) return 1;
    int n = *cap ? *cap : 64;
    while (n < need) n *= 2;
    void *q = realloc(*p, (size_t)n * elem);
    if (!q) return 0;
    *p = q;
    *cap = n;
    return 1;
}

/* Whether a row of n values of dtype dt at w, against x, can use 16-byte loads. */
__host__ __device__ static inline int cu_vec_ok(int dt, const void *w, int64_t n, const float *x, int64_t ldx)
{
    int per = dt == DT_F32 ? 4 : 8;
    int esz = dt == DT_F32 ? 4 : 2;
    return n % per == 0 && ((uintptr_t)w % 16) == 0 && ((n * esz) % 16) == 0 && ((uintptr_t)x % 16) == 0 &&
           (ldx % 4) == 0;
}

static inline unsigned cu_blocks(int64_t n, int per) { return (unsigned)((n + per - 1) / per); }

#endif

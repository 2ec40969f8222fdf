/* The operations the forward pass needs, implemented once per backend.
 *
 * Conventions: activations are fp32, row-major, one row per token. Weight
 * matrices are dsv4_mat views [rows=out][cols=in] in their checkpoint format
 * (base/wformat.h: plain F32/BF16/F16 or block-scaled FP8/MXFP4); an op reads
 * weights only through the format's facts and decoder. Every reduction runs in a fixed order that depends only
 * on the row length, never on the number of tokens, lanes or threads, so a
 * token's result is the same whatever the chunking or batching.
 *
 * Ops cannot fail in their signature: a backend that hits a failure inside an
 * op (allocation, device fault) records it in the sticky error of the backend
 * (backend_fail); the forward pass checks it before publishing state. */
#ifndef DSV4_OPS_OPS_H
#define DSV4_OPS_OPS_H
#include <stdint.h>

#include "base/wformat.h"
#include "dsv4.h"

typedef struct dsv4_backend dsv4_backend;

/* How the session state stores a row of `width` values: the window-ring
 * rows and main-compressor entries (head_dim values), the indexer keys
 * (idx_head_dim values). model/state_layout.c fills it, once, from the
 * config and the cache mode; the ops store and read rows by these facts.
 *   ROW_F32  width fp32 values (--cache exact)
 *   ROW_FP8  the FlashMLA token layout (spec §6.2): values [0, n_fp8) as
 *            e4m3 bytes from offset 0, values [n_fp8, width) (the rope
 *            dims) as little-endian bf16 from rope_off, one UE8M0 scale per
 *            64 e4m3 values (the last block may be partial) from scale_off,
 *            zero bytes up to `bytes`
 *   ROW_FP4  the values Hadamard-rotated (Sylvester order, ·width^-1/2),
 *            as E2M1 codes two per byte (value 2i in the low nibble) from
 *            offset 0, one UE8M0 scale per 32 values from scale_off
 * Storing a row is the official rounding (ROW_FP8: norm_rope's with
 * n_fp8; ROW_FP4: idx_fp4_round): reading it back gives exactly the fp32
 * values those ops produce, and storing such a value row again gives the
 * same values. Rows are `bytes` apart. */
enum { ROW_F32, ROW_FP8, ROW_FP4 };
typedef struct {
    int kind, width, n_fp8, rope_off, scale_off, bytes;
} dsv4_row_fmt;

/* Compressor state of one layer (see engine/session.h for the lifetimes). */
typedef struct {
    float *open_u, *open_g; /* [ratio][c·width]: rows of the open window, gates incl. ape */
    float *prev_u, *prev_g; /* overlap only, [ratio][width]: series-A half of the last closed window */
    uint8_t *entries;       /* [capacity] rows of dsv4_comp_params.fmt: emitted entries, normed and roped */
} dsv4_comp_state;

typedef struct {
    int ratio, overlap, rope_dim;
    dsv4_row_fmt fmt;       /* the entries' storage; fmt.width values per entry */
    const dsv4_mat *ape, *norm;
    const float *inv_freq;
    float eps;
} dsv4_comp_params;

/* The router's score function of the gate logits (spec §4). */
enum { SCORE_SQRTSOFTPLUS = 0, SCORE_SIGMOID = 1, SCORE_SOFTMAX = 2 };

/* An op's output y [T][D] added into the residual streams by hc_post
 * (X'[k] = post[k]·y + Σ_j comb[j][k]·X[j], in place on X [T][hc][D]) as
 * part of the op, so that a backend can apply it where it stores y instead
 * of in a launch of its own (X NULL: no hc_post). The bits are hc_post's. */
typedef struct {
    float *X;
    int hc;
    const float *post, *comb;
} dsv4_hc_post;

typedef struct {
    const dsv4_mat *gate, *gate_bias; /* gate_bias->data NULL in hash layers */
    const int32_t *tid2eid;           /* hash layers: [vocab][n_active] */
    const dsv4_mat *w1, *w2, *w3;     /* [n_experts] */
    const dsv4_mat *sh_w1, *sh_w2, *sh_w3;
    int n_experts, n_active, inter, score_func; /* SCORE_* */
    float route_scale, swiglu_limit;
    /* official numerics (act_fp8_round below): the experts' inputs (x for
     * w1/w3, not the gate's; the SwiGLU output for w2) pass through FP8, and
     * a routed expert's weight multiplies its SwiGLU output before the
     * rounding and w2 (DeepSeek's Expert.forward), not its w2 output after */
    int act_fp8;
    /* the output into the residual streams (X NULL: none); out then holds
     * the output or is scratch, as the backend chooses */
    dsv4_hc_post post;
} dsv4_moe_params;

/* A device's name and ceilings, found by the backend itself
 * (measure_limits): the peak rate of its memory (GB/s, memory clock x bus
 * width: the datasheet figure of the device in use), the read bandwidth
 * measured (a streaming read far past the caches) and the rate of a dense
 * 4096^3 product through the vendor's library with FP8 e4m3 and with BF16
 * inputs (TFLOP/s), and with FP8 under the checkpoints' block scales
 * (128x128 weight blocks, 1x128 activation blocks, fp32 accumulation): the
 * library's rate on the official numerics, with no invariance rule. */
typedef struct {
    char name[64]; /* the device's name, "" if unknown */
    double peak_gbs, read_gbs, fp8_tflops, bf16_tflops, fp8_block_tflops;
} dsv4_device_limits;

typedef struct {
    /* --- memory. All activation, state and weight pointers handed to the ops
     * below live in the backend's memory (host memory for the CPU, device
     * memory for CUDA). alloc returns zeroed memory or NULL. */
    void *(*alloc)(dsv4_backend *b, size_t bytes);
    void (*free)(dsv4_backend *b, void *p);
    void (*upload)(dsv4_backend *b, void *dst, const void *host_src, size_t bytes);
    void (*download)(dsv4_backend *b, void *host_dst, const void *src, size_t bytes);
    void (*copy)(dsv4_backend *b, void *dst, const void *src, size_t bytes);
    void (*zero)(dsv4_backend *b, void *p, size_t bytes);
    /* Make a checkpoint weight (host, mmapped) usable by the backend: the CPU
     * reads it in place; CUDA uploads it once and repoints m->data. */
    dsv4_status (*adopt_weight)(dsv4_backend *b, dsv4_mat *m);
    /* Wait for queued work; returns the sticky error (see backend_fail),
     * which stays set until backend_clear_error. */
    dsv4_status (*sync)(dsv4_backend *b);
    /* Release the backend and everything it owns. */
    void (*destroy)(dsv4_backend *b);

    /* --- compute.
     * y[t, 0:W.rows] = W · x[t, 0:W.cols]; rows strided by ldx / ldy. */
    void (*matmul)(dsv4_backend *b, const float *x, int64_t ldx, int T,
                   const dsv4_mat *W, float *y, int64_t ldy);
    /* y = x · rsqrt(mean(x²) + eps) [· w]; n values per row, T rows; w NULL:
     * unweighted. In place allowed. */
    void (*rmsnorm)(dsv4_backend *b, const float *x, int T, int n,
                    const dsv4_mat *w, float eps, float *y);
    /* Interleaved RoPE on the last rope_dim values of each of n_heads heads of
     * head_dim values per row; row t is at position pos[t] (pos: T
     * positions in the backend's memory, so that one call covers rows of
     * several lanes), or pos0 + t·pos_step when pos is NULL; inverse
     * rotates by −position. */
    void (*rope)(dsv4_backend *b, float *x, int T, int n_heads, int head_dim,
                 int rope_dim, int64_t pos0, int64_t pos_step, const int64_t *pos,
                 const float *inv_freq, int inverse);
    /* Per head of head_dim values: the rmsnorm op's values (weight w, NULL:
     * unweighted), then rope as above (forward, row t at pos[t]), in place:
     * the query and KV heads' norm and rotation in one op, so that a
     * backend need not launch two. n_fp8 >= 0: then the official KV rounding of
     * each head (values [0, n_fp8) through FP8 e4m3 in blocks of 64 with
     * scale 2^ceil(log2(max(amax,1e-4)/448)), the rest rounded to bf16: the
     * values the FP8 window cache holds); -1: none. */
    void (*norm_rope)(dsv4_backend *b, float *x, int T, int n_heads, int head_dim,
                      int rope_dim, const dsv4_mat *w, float eps, const int64_t *pos,
                      const float *inv_freq, int n_fp8);
    /* X[t][i][:] = E[tok[t]] for every stream i < hc. */
    void (*embed)(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok,
                  int T, int hc, float *X);
    /* mHC mapping (pre, post, Sinkhorn comb) and the pre-weighted collapse
     * of the streams X [T][hc][D], then the block's input RMSNorm of it
     * (weight norm, NULL: unweighted; eps norm_eps; the rmsnorm op's
     * values) into x [T][D]:
     * the norm is part of the op so that a backend need not launch it. */
    void (*hc_pre)(dsv4_backend *b, const float *X, int T, int hc, int D,
                   const dsv4_mat *fn, const dsv4_mat *base, const dsv4_mat *scale,
                   int iters, float hc_eps, float norm_eps, const dsv4_mat *norm,
                   float *x, float *post, float *comb);
    /* X'[k] = post[k]·a + Σ_j comb[j][k]·X[j], in place on X. */
    void (*hc_post)(dsv4_backend *b, float *X, int T, int hc, int D,
                    const float *a, const float *post, const float *comb);
    /* Final collapse, Σ_i (σ(mix_i·scale + base_i) + eps)·X[i], then the
     * final RMSNorm of it (weight norm) into x, as hc_pre. */
    void (*hc_head)(dsv4_backend *b, const float *X, int T, int hc, int D,
                    const dsv4_mat *fn, const dsv4_mat *base, const dsv4_mat *scale,
                    float hc_eps, float norm_eps, const dsv4_mat *norm, float *x);
    /* Stores kv rows [T][f->width] of positions pos0..pos0+T-1 in format f
     * into ring slots pos % window (only the last `window` rows matter;
     * window >= T with pos0 = 0 stores rows 0..T-1 in order). */
    void (*ring_store)(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f,
                       const float *kv, int T, int64_t pos0);
    /* Feeds tokens pos0..pos0+T-1 (projections u, g [T][c·width], gates
     * without ape) into a compressor; each window that completes emits entry
     * pos/ratio into st->entries (normed, roped at window·ratio, stored in
     * p->fmt). */
    void (*compress)(dsv4_backend *b, const float *u, const float *g, int T,
                     int64_t pos0, const dsv4_comp_params *p, dsv4_comp_state *st);
    /* Lightning indexer: for query t (position pos0+t) scores the visible
     * entries s < (pos+1)/ratio as Σ_h (ReLU(q[t][h]·keys[s])·score_scale)·(w[t][h]·w_scale) and
     * selects the top min(topk, visible) (ties: lower index), written in
     * increasing index order to idx[t·topk ...], count n[t]. q [T][heads]
     * [kf->width] fp32; keys stored in format kf, read back one by one. */
    void (*indexer)(dsv4_backend *b, const float *q, const float *w, int T,
                    int64_t pos0, int heads, const uint8_t *keys, const dsv4_row_fmt *kf,
                    int ratio, int topk, float score_scale, float w_scale,
                    int32_t *idx, int32_t *n);
    /* One softmax with sink per (query, head) over the window keys
     * max(0,pos−window+1)..pos (positions ≥ pos0 come from kv [T][hd] fp32,
     * older ones from the ring) plus compressed entries: the indexer's
     * selection when sel_idx != NULL, else (ratio > 0) every entry
     * w < (pos+1)/ratio. Ring rows and entries are stored in format kf
     * (kf->width == hd) and read back key by key. V = K. out [T][H][hd].
     * out_freq != NULL: each output head's last rope_dim dims are then
     * rotated back by its query's position (the rope op's inverse rotation,
     * its values: V = K carries the keys' rotation, spec §3.7), inside the
     * op so that no launch of its own is needed. */
    void (*attention)(dsv4_backend *b, const float *q, int T, int64_t pos0,
                      int H, int hd, int window, const uint8_t *ring, const float *kv,
                      const uint8_t *entries, const dsv4_row_fmt *kf, int ratio, const int32_t *sel_idx,
                      const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks,
                      float scale, int rope_dim, const float *out_freq, float *out);
    /* Routed experts (router, top-k or hash selection, clamped SwiGLU) plus
     * the shared expert: out [T][D]. */
    void (*moe)(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D,
                const dsv4_moe_params *p, float *out);

    /* Block-diagonal matmul (the grouped output projection wo_a): row block
     * g (W.rows / groups rows) of W applies to column block g (W.cols
     * values) of x: y[t, g·R + r] = W[g·R + r] · x[t, g·W.cols ...], in one
     * pass. Batch invariant like matmul (a row's arithmetic depends on the
     * shapes, not on T). */
    void (*matmul_grouped)(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups,
                           float *y, int64_t ldy);
    /* Two products of the same rows: y1 = W1 · x and y2 = W2 · x (x rows at
     * x + t·ldx; y1, y2 disjoint, rows strided by ldy1 / ldy2), each bit
     * for bit what matmul gives for its weight alone, so that a backend can
     * run both in one pass where they share a kernel (the compressors' wkv
     * and wgate: same shape, same format, same input) and run two products
     * where they do not. */
    void (*matmul_pair)(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1,
                        int64_t ldy1, const dsv4_mat *W2, float *y2, int64_t ldy2);

    /* --- the official numerics (spec §8.3; NULL: the backend has none,
     * and models with --cache official are refused on it). In place:
     * idx_fp4_round: each row (width a power of two) is Hadamard-rotated
     * (Sylvester order, scaled by width^-1/2), then passes through FP4 E2M1
     * in blocks of 32 with scale 2^ceil(log2(max(amax,6·2^-126)/6)).
     * The forward rounds this step's KV rows (norm_rope's n_fp8: its
     * attention reads them as fp32) and the indexer queries; the stored
     * state rounds by storing (ROW_FP8, ROW_FP4 above). The backends that
     * implement these implement the packed row formats and norm_rope's
     * rounding too. */
    void (*idx_fp4_round)(dsv4_backend *b, float *x, int rows, int width);
    /* act_fp8_round: y = x (T rows of n values, y == x allowed) through FP8
     * e4m3 in blocks of 128 along the row (the last one partial when n is
     * not a multiple), scale 2^ceil(log2(max(amax,1e-4)/448)), the values
     * kept in fp32: what DeepSeek's act_quant makes of the input of an FP8
     * or FP4 matmul (the forward applies it to exactly those inputs). */
    void (*act_fp8_round)(dsv4_backend *b, const float *x, int T, int n, float *y);
    /* matmul_fp8in: y = W · act_fp8_round(x) for T rows of x (W.cols values
     * each, row t at x + t·ldx; x is not changed), as matmul otherwise: the
     * product of an FP8/FP4 weight with its input as the reference rounds
     * it, one op so that a backend can round each row where it prepares it
     * for the product instead of in a pass of its own. */
    void (*matmul_fp8in)(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, float *y,
                         int64_t ldy);
    /* matmul_post: y = W · x (fp8in: matmul_fp8in's product, else matmul's;
     * x rows at x + t·ldx), then hc_post of y into the streams (post; D =
     * W.rows), in one op so that a backend can apply hc_post where the
     * product stores its rows. y (T rows of W.rows floats) then holds the
     * product or is scratch, as the backend chooses. */
    void (*matmul_post)(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                        const dsv4_hc_post *post);

    /* --- greedy picks on the backend (NULL: the engine picks on the host).
     * pick_sum: for each of n rows, with s[v] = a[r·lda + v] + c[r·ldc + v]
     * (fp32 sums) over v < V: idx[r] = the lowest v of the largest s[v] (the
     * host's `>` scan over the summed row: argmax_f32), top[r] = that s,
     * bad[r] = the lowest v whose c value is not finite, else -1 (idx and
     * top mean nothing where bad[r] >= 0). a must be finite (then no sum of
     * a row without a bad id is NaN). idx, top and bad are backend memory, so
     * that a chain of picks (DSpark's Markov drafts, engine/spec.c) stays on
     * the device until its end. */
    void (*pick_sum)(dsv4_backend *b, const float *a, int64_t lda, const float *c, int64_t ldc, int n, int V,
                     int32_t *idx, float *top, int32_t *bad);
    /* Optional. Groups of ops that may run at the same time:
     * concurrent(1) opens a side group, concurrent(2) returns to the main
     * group, concurrent(0) ends them all, e.g. concurrent(1), A1,
     * concurrent(1), A2, concurrent(2), B1, concurrent(1), A3,
     * concurrent(2), B2, concurrent(0). A side group starts after every
     * op called before its concurrent(1) outside the side groups (A1 and
     * A2 after what came before them, A3 after B1 too); what follows
     * concurrent(0) waits for all of them. The caller promises that no
     * group reads what another that may run beside it writes (A1, A2, A3
     * and B2 beside each other, B1 beside A1 and A2) and that such groups
     * write disjoint memory, so the results are those of the calls in
     * order, bit for bit. A backend may run them in turn. */
    void (*concurrent)(dsv4_backend *b, int phase);

    /* --- optional hooks (NULL: the backend has none).
     * forward_step brackets its ops with step_begin(rows) .. step_end; a
     * backend may record them and run the step as one unit (CUDA graph).
     * Data reaches host buffers given to download only after sync. */
    void (*step_begin)(dsv4_backend *b, int rows);
    void (*step_end)(dsv4_backend *b);
    /* While on, time op families; report writes up to max (family name,
     * milliseconds since enabling) pairs and returns their count. */
    void (*profile_enable)(dsv4_backend *b, int on);
    int (*profile_report)(dsv4_backend *b, const char **names, double *ms, int max);
    /* Device memory free and in total (backends with their own memory):
     * loading checks the model fits before it uploads anything. */
    dsv4_status (*mem_info)(dsv4_backend *b, uint64_t *free_bytes, uint64_t *total_bytes);
    /* Steps recorded so far that captured a new graph, and that only
     * replayed (a step that keeps being captured pays the capture each
     * time: the bench reports these); the seconds the host spent recording
     * them before their first graph went to the device (the rest of the
     * recording overlaps the device), and the seconds their graphs ran on
     * the device (what is left of a step's wall time is the host between
     * steps and the device idle). */
    void (*graph_counts)(dsv4_backend *b, long long *captured, long long *replayed, double *host_s, double *gpu_s);
    /* For benchmarks: the device's ceilings measured now (see
     * dsv4_device_limits); a figure that could not be measured is 0. */
    dsv4_status (*measure_limits)(dsv4_backend *b, dsv4_device_limits *out);
} dsv4_ops;

struct dsv4_backend {
    const char *name;
    const dsv4_ops *ops;
    void *impl;
    int cur_layer;          /* set by the forward pass: tags failures with their layer */
    dsv4_status sticky;     /* first failure inside an op, DSV4_OK if none */
    int sticky_layer;       /* cur_layer when it happened (-1: outside the layers) */
    int sticky_row;         /* activation row it concerns, -1 if none */
    char sticky_msg[256];
    int fail_alloc_in;      /* tests: > 0 makes the n-th next alloc return NULL */
    uint64_t weight_bytes;  /* weight bytes copied into the backend's memory by adopt_weight
                               (CUDA: checkpoint bytes + scale grids; CPU: 0, it reads the mmap) */
};

/* Records the first failure of an op (thread-safe: the first one wins);
 * row: the activation row concerned, or -1. */
void backend_fail(dsv4_backend *b, dsv4_status st, const char *msg);
void backend_fail_row(dsv4_backend *b, dsv4_status st, int row, const char *msg);
void backend_clear_error(dsv4_backend *b);
/* Tests: make the n-th next alloc of b fail (0: never). Backends call
 * backend_alloc_injected_failure at the top of alloc. */
void backend_inject_alloc_failure(dsv4_backend *b, int n);
static inline int backend_alloc_injected_failure(dsv4_backend *b)
{
    return b->fail_alloc_in > 0 && --b->fail_alloc_in == 0;
}

/* The CPU reference backend. max_row: widest weight row the model has. */
dsv4_backend *cpu_backend_new(int n_threads, int64_t max_row);
/* The CUDA backend (src/cuda); NULL with a message when this build or this
 * machine has no usable GPU. */
dsv4_backend *cuda_backend_new(int device, int64_t max_row);
/* "cpu", "cuda" or NULL/"auto" (cuda when a GPU is usable, else cpu). */
dsv4_backend *backend_create(const char *device, int n_threads, int64_t max_row);

#endif

/* The CUDA backend object: device, stream, the ops table, the sticky
 * error (CUDA errors and kernel-detected faults), the profiler, and the
 * record/replay of small steps as CUDA graphs (see cuda_internal.cuh). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "base/clock.h"
#include "cuda/cuda_internal.cuh"

/* Op entry points (one file per family). */
void *cu_alloc(dsv4_backend *b, size_t bytes);
void cu_free(dsv4_backend *b, void *p);
void cu_upload(dsv4_backend *b, void *dst, const void *src, size_t bytes);
void cu_download(dsv4_backend *b, void *dst, const void *src, size_t bytes);
void cu_copy(dsv4_backend *b, void *dst, const void *src, size_t bytes);
void cu_zero(dsv4_backend *b, void *p, size_t bytes);
dsv4_status cu_adopt_weight(dsv4_backend *b, dsv4_mat *m);
void cu_memory_release(cu_impl *c);
void cu_matmul_grouped(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int groups, float *y,
                       int64_t ldy);
void cu_matmul_pair(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W1, float *y1, int64_t ldy1,
                    const dsv4_mat *W2, float *y2, int64_t ldy2);
void cu_rmsnorm(dsv4_backend *b, const float *x, int T, int n, const dsv4_mat *w, float eps, float *y);
void cu_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, int64_t pos0,
             int64_t pos_step, const int64_t *pos, const float *inv_freq, int inverse);
void cu_norm_rope(dsv4_backend *b, float *x, int T, int n_heads, int head_dim, int rope_dim, const dsv4_mat *w,
                  float eps, const int64_t *pos, const float *inv_freq, int n_fp8);
void cu_embed(dsv4_backend *b, const dsv4_mat *E, const int32_t *tok, int T, int hc, float *X);
void cu_ring_store(dsv4_backend *b, uint8_t *ring, int window, const dsv4_row_fmt *f, const float *kv, int T,
                   int64_t pos0);
void cu_hc_pre(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
               const dsv4_mat *scale, int iters, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x,
               float *post, float *comb);
void cu_hc_head(dsv4_backend *b, const float *X, int T, int hc, int D, const dsv4_mat *fn, const dsv4_mat *base,
                const dsv4_mat *scale, float hc_eps, float norm_eps, const dsv4_mat *norm, float *x);
void cu_compress(dsv4_backend *b, const float *u, const float *g, int T, int64_t pos0, const dsv4_comp_params *p,
                 dsv4_comp_state *st);
void cu_indexer(dsv4_backend *b, const float *q, const float *w, int T, int64_t pos0, int heads, const uint8_t *keys,
                const dsv4_row_fmt *kf, int ratio, int topk, float score_scale, float w_scale, int32_t *idx,
                int32_t *n);
void cu_attention(dsv4_backend *b, const float *q, int T, int64_t pos0, int H, int hd, int window, const uint8_t *ring,
                  const float *kv, const uint8_t *entries, const dsv4_row_fmt *kf, int ratio, const int32_t *sel_idx,
                  const int32_t *sel_n, int sel_cap, const dsv4_mat *sinks, float scale, int rope_dim,
                  const float *out_freq, float *out);
void cu_moe(dsv4_backend *b, const float *x, const int32_t *tok, int T, int D, const dsv4_moe_params *p, float *out);
void cu_idx_fp4_round(dsv4_backend *b, float *x, int rows, int width);
void cu_matmul_post(dsv4_backend *b, const float *x, int64_t ldx, int T, const dsv4_mat *W, int fp8in, float *y,
                    const dsv4_hc_post *post);
void cu_pick_sum(dsv4_backend *b, const float *a, int64_t lda, const float *c, int64_t ldc, int n, int V, int32_t *idx,
                 float *top, int32_t *bad);

static dsv4_status cu_sync(dsv4_backend *b);
static void cu_destroy(dsv4_backend *b);
static void cu_step_begin(dsv4_backend *b, int rows);
static void cu_step_end(dsv4_backend *b);
static void cu_profile_enable(dsv4_backend *b, int on);
static int cu_profile_report(dsv4_backend *b, const char **names, double *ms, int max);
static dsv4_status cu_mem_info(dsv4_backend *b, uint64_t *free_bytes, uint64_t *total_bytes);
static void cu_graph_counts(dsv4_backend *b, long long *captured, long long *replayed, double *host_s, double *gpu_s);
static void cu_concurrent(dsv4_backend *b, int phase);
dsv4_status cu_measure_limits(dsv4_backend *b, dsv4_device_limits *out);

static const dsv4_ops k_cuda_ops = {
    .alloc = cu_alloc,
    .free = cu_free,
    .upload = cu_upload,
    .download = cu_download,
    .copy = cu_copy,
    .zero = cu_zero,
    .adopt_weight = cu_adopt_weight,
    .sync = cu_sync,
    .destroy = cu_destroy,
    .matmul = cu_matmul,
    .rmsnorm = cu_rmsnorm,
    .rope = cu_rope,
    .norm_rope = cu_norm_rope,
    .embed = cu_embed,
    .hc_pre = cu_hc_pre,
    .hc_post = cu_hc_post,
    .hc_head = cu_hc_head,
    .ring_store = cu_ring_store,
    .compress = cu_compress,
    .indexer = cu_indexer,
    .attention = cu_attention,
    .moe = cu_moe,
    .matmul_grouped = cu_matmul_grouped,
    .matmul_pair = cu_matmul_pair,
    .idx_fp4_round = cu_idx_fp4_round,
    .act_fp8_round = cu_act_fp8_round,
    .matmul_fp8in = cu_matmul_fp8in,
    .matmul_post = cu_matmul_post,
    .pick_sum = cu_pick_sum,
    .concurrent = cu_concurrent,
    .step_begin = cu_step_begin,
    .step_end = cu_step_end,
    .profile_enable = cu_profile_enable,
    .profile_report = cu_profile_report,
    .mem_info = cu_mem_info,
    .graph_counts = cu_graph_counts,
    .measure_limits = cu_measure_limits,
};

static const cu_exec_fn k_exec[K_COUNT] = {
    cu_exec_matmul, cu_exec_rmsnorm, cu_exec_rope, cu_exec_embed, cu_exec_hc_pre, cu_exec_hc_post,
    cu_exec_hc_head, cu_exec_ring, cu_exec_compress, cu_exec_indexer, cu_exec_attention, cu_exec_moe,
    cu_exec_upload, cu_exec_download, cu_exec_cache_quant, cu_exec_copy, cu_exec_pick, cu_exec_norm_rope,
    cu_exec_fork,
};

static const char *const k_family[K_COUNT] = {
    "matmul", "rmsnorm", "rope", "embed", "hc_pre", "hc_post", "hc_head", "ring_store", "compress", "indexer",
    "attention", "moe", "upload", "download", "cache_quant", "copy", "pick", "norm_rope", "fork",
};

int cu_check(cu_impl *c, cudaError_t e, const char *what)
{
    if (e == cudaSuccess) return 0;
    char msg[200];
    snprintf(msg, sizeof msg, "CUDA error in %s: %s (%s)", what, cudaGetErrorName(e), cudaGetErrorString(e));
    backend_fail(c->b, DSV4_ERR_DEVICE, msg);
    return 1;
}

/* ---- profiler ---- */

static void prof_begin(cu_impl *c, int kind)
{
    if (!cu_grow((void **)&c->ev, &c->cap_ev, c->n_ev + 1, sizeof *c->ev)) return;
    cu_prof_ev *e = &c->ev[c->n_ev];
    if (cudaEventCreate(&e->a) != cudaSuccess) return;
    if (cudaEventCreate(&e->b) != cudaSuccess) { cudaEventDestroy(e->a); return; }
    e->kind = kind;
    cudaEventRecord(e->a, c->stream);
    c->ev_open = 1;
}

static void prof_end(cu_impl *c)
{
    if (!c->ev_open) return;
    cudaEventRecord(c->ev[c->n_ev].b, c->stream);
    c->n_ev++;
    c->ev_open = 0;
}

static void prof_collect(cu_impl *c)
{
    for (int i = 0; i < c->n_ev; i++) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->ev[i].a, c->ev[i].b) == cudaSuccess) {
            c->prof_ms[c->ev[i].kind] += ms;
            c->prof_calls[c->ev[i].kind]++;
        }
        cudaEventDestroy(c->ev[i].a);
        cudaEventDestroy(c->ev[i].b);
    }
    c->n_ev = 0;
}

static void cu_profile_enable(dsv4_backend *b, int on)
{
    cu_impl *c = cu_of(b);
    cu_flush(c);
    cudaStreamSynchronize(c->stream);
    prof_collect(c);
    memset(c->prof_ms, 0, sizeof c->prof_ms);
    memset(c->prof_calls, 0, sizeof c->prof_calls);
    c->profiling = on;
}

static int cu_profile_report(dsv4_backend *b, const char **names, double *ms, int max)
{
    cu_impl *c = cu_of(b);
    int n = 0;
    for (int k = 0; k < K_COUNT && n < max; k++) {
        if (!c->prof_calls[k]) continue;
        names[n] = k_family[k];
        ms[n] = c->prof_ms[k];
        n++;
    }
    return n;
}

static dsv4_status cu_mem_info(dsv4_backend *b, uint64_t *free_bytes, uint64_t *total_bytes)
{
    (void)b;
    size_t fr = 0, tot = 0;
    cudaError_t e = cudaMemGetInfo(&fr, &tot);
    if (e != cudaSuccess) return dsv4_fail(DSV4_ERR_DEVICE, "CUDA: cudaMemGetInfo: %s", cudaGetErrorString(e));
    *free_bytes = fr;
    *total_bytes = tot;
    return DSV4_OK;
}

static void cu_graph_counts(dsv4_backend *b, long long *captured, long long *replayed, double *host_s, double *gpu_s)
{
    cu_impl *c = cu_of(b);
    *captured = c->n_captures;
    *replayed = c->n_replays;
    *host_s = c->host_s;
    *gpu_s = c->gpu_s;
}

/* ---- submission, recording and graphs ---- */

static void run_now(cu_impl *c, int kind, const void *args, const int64_t *dpos)
{
    if (c->profiling) prof_begin(c, kind);
    k_exec[kind](c, args, dpos);
    if (c->profiling) prof_end(c);
}

/* Appends a record (pos0 to its slot, `extra` bytes reserved after it);
 * 0 when it does not fit. */
static int record_push(cu_impl *c, int kind, const void *args, int size, size_t extra)
{
    size_t need = ((c->arg_used + 8 + 15) & ~(size_t)15) + extra;
    if (size > CU_REC_ARGS || need > c->arg_cap || !cu_grow((void **)&c->rec, &c->cap_rec, c->n_rec + 1, sizeof *c->rec))
        return 0;
    cu_record *r = &c->rec[c->n_rec++];
    memset(r, 0, sizeof *r);
    r->kind = kind;
    r->size = size;
    r->dyn_off = (int64_t)c->arg_used;
    memcpy(r->args, args, (size_t)size);
    memcpy(c->arg_host + c->arg_used, args, 8); /* pos0 */
    memset(r->args, 0, 8);
    c->arg_used += 8;
    return 1;
}

static void segment_launch(cu_impl *c);

/* Records a segment holds before it goes to the GPU: 32 for the first
 * (about one layer: the GPU starts after some 20 us of recording instead
 * of the whole step's 0.5-0.8 ms), four times more for each next, so that
 * a 43-layer step has four segments (each boundary costs the GPU a few
 * microseconds: no programmatic dependent launch across graphs) and the
 * host stays ahead (it records a layer in about 15 us, the GPU runs one
 * in about 200). From the record count alone: the same step, the same
 * segments. */
static int cu_seg_records(int k) { return 32 << (2 * (k < 8 ? k : 8)); }

void cu_submit(cu_impl *c, int kind, const void *args, int size)
{
    if (c->b->sticky) return; /* the step already failed; do not pile up */
    if (c->recording && record_push(c, kind, args, size, 0)) {
        /* a segment ends outside the concurrent groups (a group's fork and
         * join belong to one graph; the fork records themselves never end
         * one: n_side_rec counts a group from after its opening record) */
        if (kind != K_FORK && c->n_side_rec == 0 && c->n_rec >= cu_seg_records(c->n_seg)) segment_launch(c);
        return;
    }
    cu_flush(c); /* could not record: the rest of the step runs eagerly */
    run_now(c, kind, args, NULL);
}

/* ---- concurrent groups (dsv4_ops.concurrent) ----
 * Phase 1 opens a side group on the next side stream, after everything on
 * the main stream so far (past the last side stream the groups share it,
 * one after the other); phase 2 returns to the main stream for the main
 * group (which runs beside the side ones); phase 0 makes the main stream
 * wait for every side group. Under stream capture the events become the
 * graph's fork and join edges. Only recorded steps are grouped
 * (cu_concurrent): eager steps, long prompts, run the groups one after the
 * other. */
typedef struct { int64_t pos0; int phase; } fork_args;

/* The main stream waits for the side groups, if any is open. */
static void fork_join(cu_impl *c)
{
    for (int k = 1; k <= c->side_open; k++) {
        cu_check(c, cudaEventRecord(c->join_ev[k], c->streams[k]), "fork join");
        cu_check(c, cudaStreamWaitEvent(c->streams[0], c->join_ev[k], 0), "fork join");
    }
    c->stream = c->streams[0];
    c->side_open = 0;
}

void cu_exec_fork(cu_impl *c, const void *args, const int64_t *dpos)
{
    const fork_args *a = (const fork_args *)args;
    (void)dpos;
    if (a->phase == 1) {
        cu_check(c, cudaEventRecord(c->fork_ev, c->streams[0]), "fork");
        if (c->side_open < CU_GROUPS - 1) c->side_open++;
        cu_check(c, cudaStreamWaitEvent(c->streams[c->side_open], c->fork_ev, 0), "fork");
        c->stream = c->streams[c->side_open];
    } else if (a->phase == 2) {
        c->stream = c->streams[0];
    } else {
        fork_join(c);
    }
}

/* While recording, c->side names the group (the stream cu_exec_fork will
 * give it) so that each group's ops take workspaces of their own. */
static void cu_concurrent(dsv4_backend *b, int phase)
{
    cu_impl *c = cu_of(b);
    if (!c->recording) return;
    fork_args a = {0, phase};
    cu_submit(c, K_FORK, &a, sizeof a);
    if (phase == 1 && c->n_side_rec < CU_GROUPS - 1) c->n_side_rec++;
    if (phase == 0) c->n_side_rec = 0;
    c->side = phase == 1 ? c->n_side_rec : 0;
}

typedef struct { int64_t pos0; void *dst; size_t bytes, off; } up_args;
typedef struct { int64_t pos0; const void *src; size_t bytes, off; } dl_args;

/* Runs the records eagerly with their recorded positions. */
static void exec_records_eager(cu_impl *c)
{
    int uploads = 0;
    for (int i = 0; i < c->n_rec; i++) {
        cu_record r = c->rec[i];
        memcpy(r.args, c->arg_host + r.dyn_off, 8);
        if (r.kind == K_UPLOAD) { /* its data sits in the pinned argument block */
            up_args u;
            memcpy(&u, r.args, sizeof u);
            cu_check(c, cudaMemcpyAsync(u.dst, c->arg_host + u.off, u.bytes, cudaMemcpyHostToDevice, c->stream),
                     "upload");
            uploads = 1;
            continue;
        }
        run_now(c, r.kind, r.args, NULL);
    }
    fork_join(c); /* a step cut short inside a group */
    if (uploads) cudaStreamSynchronize(c->stream); /* before the block is reused */
    c->n_rec = 0;
}

void cu_flush(cu_impl *c)
{
    if (!c->recording) return;
    exec_records_eager(c);
    c->arg_used = 0;
    c->recording = 0;
    c->side = c->n_side_rec = 0;
}

static void cu_step_begin(dsv4_backend *b, int rows)
{
    cu_impl *c = cu_of(b);
    cu_flush(c);
    c->n_rec = 0;
    c->arg_used = 0;
    c->recording = c->graphs_on && !c->profiling && rows <= CU_GRAPH_MAX_ROWS && !b->sticky;
    c->side = c->n_side_rec = 0;
    c->arg_seg = 0;
    c->n_seg = c->seg_captured = 0;
    c->t_begin = clock_s();
}

static void graph_drop(cu_graph *g)
{
    if (g->exec) cudaGraphExecDestroy(g->exec);
    free(g->rec);
    memset(g, 0, sizeof *g);
}

/* A new graph from the current records (replacing the least recently used). */
static cu_graph *graph_capture(cu_impl *c)
{
    cu_graph *g = &c->graphs[0];
    for (int i = 1; i < CU_GRAPH_CACHE; i++)
        if (c->graphs[i].used < g->used) g = &c->graphs[i];
    graph_drop(g);
    g->rec = (cu_record *)malloc((size_t)c->n_rec * sizeof *g->rec);
    if (!g->rec) return NULL;
    memcpy(g->rec, c->rec, (size_t)c->n_rec * sizeof *g->rec);
    g->n = c->n_rec;
    g->arg0 = c->arg_seg;
    g->arg1 = c->arg_used;
    cudaGraph_t graph = NULL;
    if (cu_check(c, cudaStreamBeginCapture(c->stream, cudaStreamCaptureModeThreadLocal), "graph capture")) {
        graph_drop(g);
        return NULL;
    }
    cudaMemcpyAsync(c->arg_dev + g->arg0, c->arg_host + g->arg0, g->arg1 - g->arg0, cudaMemcpyHostToDevice, c->stream);
    for (int i = 0; i < c->n_rec; i++)
        k_exec[c->rec[i].kind](c, c->rec[i].args, (const int64_t *)(c->arg_dev + c->rec[i].dyn_off));
    fork_join(c); /* the side streams join the capture's end */
    cudaError_t e = cudaStreamEndCapture(c->stream, &graph);
    if (cu_check(c, e, "graph capture") ||
        cu_check(c, cudaGraphInstantiate(&g->exec, graph, 0), "graph instantiate")) {
        if (graph) cudaGraphDestroy(graph);
        graph_drop(g);
        return NULL;
    }
    cudaGraphDestroy(graph);
    c->seg_captured = 1;
    return g;
}

/* Whether two record lists are the same step (the used part of each
 * record's arguments; the rest is zero). */
static int same_records(const cu_record *a, const cu_record *b, int n)
{
    for (int i = 0; i < n; i++)
        if (a[i].kind != b[i].kind || a[i].size != b[i].size || a[i].dyn_off != b[i].dyn_off ||
            memcmp(a[i].args, b[i].args, (size_t)a[i].size))
            return 0;
    return 1;
}

/* The open segment's records to the GPU: a captured graph of the same
 * records and argument bytes replayed, or a new one. */
static void segment_launch(cu_impl *c)
{
    cu_graph *g = NULL;
    for (int i = 0; i < CU_GRAPH_CACHE && !g; i++) {
        cu_graph *h = &c->graphs[i];
        if (h->exec && h->n == c->n_rec && h->arg0 == c->arg_seg && h->arg1 == c->arg_used &&
            same_records(h->rec, c->rec, c->n_rec))
            g = h;
    }
    if (!g) g = graph_capture(c);
    c->n_rec = 0;
    if (!g) { /* capture failed: the sticky error says why, and the step records nothing more */
        c->recording = 0;
        return;
    }
    g->used = ++c->clock;
    if (c->n_seg++ == 0) {
        c->host_s += clock_s() - c->t_begin;
        c->gev_started = !c->gev_open && c->gev[0];
        if (c->gev_started) cudaEventRecord(c->gev[0], c->stream);
    }
    cu_check(c, cudaGraphLaunch(g->exec, c->stream), "graph launch");
    c->arg_seg = c->arg_used;
}

static void cu_step_end(dsv4_backend *b)
{
    cu_impl *c = cu_of(b);
    if (!c->recording) return;
    if (!b->sticky && c->n_rec > 0) segment_launch(c);
    c->recording = 0;
    c->side = c->n_side_rec = 0;
    c->n_rec = 0;
    if (c->n_seg > 0) {
        if (c->seg_captured) c->n_captures++;
        else c->n_replays++;
    }
    if (c->gev_started) { /* the segments that went are timed even when a later one failed */
        cudaEventRecord(c->gev[1], c->stream);
        c->gev_open = 1;
        c->gev_started = 0;
    }
}

/* Uploads and downloads recorded inside a graph step. */
void cu_exec_upload(cu_impl *c, const void *a, const int64_t *dpos)
{
    up_args u;
    memcpy(&u, a, sizeof u);
    (void)dpos;
    cudaMemcpyAsync(u.dst, c->arg_dev + u.off, u.bytes, cudaMemcpyDeviceToDevice, c->stream);
}

void cu_exec_download(cu_impl *c, const void *a, const int64_t *dpos)
{
    dl_args d;
    memcpy(&d, a, sizeof d);
    (void)dpos;
    cudaMemcpyAsync(c->stage + d.off, d.src, d.bytes, cudaMemcpyDeviceToHost, c->stream);
}

/* Called by cu_upload/cu_download while recording; 0 if it could not record
 * (the caller then flushes and copies eagerly). The upload's bytes travel in
 * the argument block; the download lands in pinned staging and reaches the
 * caller's buffer at sync. */
int cu_record_upload(cu_impl *c, void *dst, const void *src, size_t bytes)
{
    if (!c->recording) return 0;
    size_t off = (c->arg_used + 8 + 15) & ~(size_t)15; /* after its own pos slot */
    up_args u = {0, dst, bytes, off};
    if (!record_push(c, K_UPLOAD, &u, sizeof u, bytes)) return 0;
    memcpy(c->arg_host + off, src, bytes);
    c->arg_used = (off + bytes + 7) & ~(size_t)7; /* pos slots stay 8-byte aligned */
    return 1;
}

int cu_record_download(cu_impl *c, void *dst, const void *src, size_t bytes)
{
    if (!c->recording) return 0;
    size_t off = (c->stage_used + 15) & ~(size_t)15;
    if (off + bytes > c->stage_cap) {
        /* a bigger staging buffer moves it: the graphs that wrote the old one go */
        size_t cap = c->stage_cap ? c->stage_cap : (size_t)1 << 20;
        while (cap < off + bytes) cap *= 2;
        unsigned char *s = NULL;
        if (cudaHostAlloc((void **)&s, cap, cudaHostAllocDefault) != cudaSuccess) return 0;
        /* the step's segments that went to the GPU may download into the old
         * one: they finish first, and what they copied moves along */
        if (c->n_seg > 0 && cu_check(c, cudaStreamSynchronize(c->stream), "download staging")) {
            cudaFreeHost(s);
            return 0;
        }
        if (c->stage) {
            memcpy(s, c->stage, c->stage_used);
            cudaFreeHost(c->stage);
        }
        c->stage = s;
        c->stage_cap = cap;
        for (int i = 0; i < CU_GRAPH_CACHE; i++) graph_drop(&c->graphs[i]);
    }
    if (!cu_grow((void **)&c->dl, &c->cap_dl, c->n_dl + 1, sizeof *c->dl)) return 0;
    dl_args d = {0, src, bytes, off};
    if (!record_push(c, K_DOWNLOAD, &d, sizeof d, 0)) return 0;
    c->dl[c->n_dl++] = (cu_pending_dl){dst, off, bytes};
    c->stage_used = off + bytes;
    return 1;
}

/* ---- sync, destroy, creation ---- */

static dsv4_status cu_sync(dsv4_backend *b)
{
    cu_impl *c = cu_of(b);
    if (c->recording) cu_step_end(b);
    cu_check(c, cudaStreamSynchronize(c->stream), "stream synchronize");
    cu_check(c, cudaGetLastError(), "kernel");
    if (c->gev_open) {
        float ms = 0;
        if (cudaEventElapsedTime(&ms, c->gev[0], c->gev[1]) == cudaSuccess) c->gpu_s += 1e-3 * ms;
        c->gev_open = 0;
    }
    volatile int *err = c->err_host;
    if (err[0]) { /* a kernel-detected fault: code, activation row, layer */
        int code = err[0], row = err[1], layer = err[2], cur = b->cur_layer;
        err[0] = 0;
        err[1] = -1;
        err[2] = -1;
        b->cur_layer = layer; /* tags the sticky error with the faulting layer */
        backend_fail_row(b, DSV4_ERR_DEVICE, row,
                         code == CU_FAULT_TOKEN    ? "CUDA kernel: token id outside the vocabulary"
                         : code == CU_FAULT_EXPERT ? "CUDA kernel: routed to an expert id outside the layer's experts"
                         : code == CU_FAULT_SELECT ? "CUDA kernel: indexer selection count out of range"
                                                   : "CUDA kernel: unknown fault");
        b->cur_layer = cur;
    }
    for (int i = 0; i < c->n_dl; i++) memcpy(c->dl[i].host_dst, c->stage + c->dl[i].off, c->dl[i].bytes);
    c->n_dl = 0;
    c->stage_used = 0;
    for (int i = 0; i < c->n_deferred; i++) cudaFree(c->deferred[i]);
    c->n_deferred = 0;
    if (c->profiling) prof_collect(c);
    /* the error stays set until the caller clears it (backend_clear_error) */
    if (b->sticky) dsv4_fail(b->sticky, "%s", b->sticky_msg);
    return b->sticky;
}

/* Each group of a concurrent set has workspaces of its own: its ops run
 * beside the other groups'. */
void *cu_ws(cu_impl *c, int slot, size_t bytes)
{
    void **ws = &c->ws[c->side][slot];
    size_t *have = &c->ws_bytes[c->side][slot];
    if (bytes <= *have) return *ws;
    size_t cap = *have ? *have : 4096;
    while (cap < bytes) cap *= 2;
    void *p = NULL;
    if (cu_check(c, cudaMalloc(&p, cap), "workspace allocation")) return NULL;
    if (*ws) {
        if (cu_grow((void **)&c->deferred, &c->cap_deferred, c->n_deferred + 1, sizeof *c->deferred))
            c->deferred[c->n_deferred++] = *ws;
    }
    *ws = p;
    *have = cap;
    return p;
}

static void cu_destroy(dsv4_backend *b)
{
    if (!b) return;
    cu_impl *c = cu_of(b);
    if (c) {
        cudaStreamSynchronize(c->stream);
        prof_collect(c);
        for (int i = 0; i < CU_GRAPH_CACHE; i++) graph_drop(&c->graphs[i]);
        for (int g = 0; g < CU_GROUPS; g++)
            for (int i = 0; i < 8; i++) cudaFree(c->ws[g][i]);
        for (int i = 0; i < c->n_deferred; i++) cudaFree(c->deferred[i]);
        cu_memory_release(c);
        if (c->arg_host) cudaFreeHost(c->arg_host);
        if (c->arg_dev) cudaFree(c->arg_dev);
        if (c->stage) cudaFreeHost(c->stage);
        if (c->err_host) cudaFreeHost(c->err_host);
        for (int i = 0; i < 2; i++)
            if (c->gev[i]) cudaEventDestroy(c->gev[i]);
        if (c->fork_ev) cudaEventDestroy(c->fork_ev);
        for (int i = 0; i < CU_GROUPS; i++) {
            if (c->join_ev[i]) cudaEventDestroy(c->join_ev[i]);
            if (c->streams[i]) cudaStreamDestroy(c->streams[i]);
        }
        free(c->rec); free(c->dl); free(c->deferred); free(c->ev);
        free(c);
    }
    free(b);
}

/* The streams and events of the concurrent groups. */
static cudaError_t cu_groups_create(cu_impl *c)
{
    cudaError_t e = cudaEventCreateWithFlags(&c->fork_ev, cudaEventDisableTiming);
    for (int i = 0; i < CU_GROUPS && e == cudaSuccess; i++) {
        e = cudaStreamCreateWithFlags(&c->streams[i], cudaStreamNonBlocking);
        if (e == cudaSuccess && i > 0) e = cudaEventCreateWithFlags(&c->join_ev[i], cudaEventDisableTiming);
    }
    return e;
}

extern "C" dsv4_backend *cuda_backend_new(int device, int64_t max_row)
{
    (void)max_row;
    int n = 0;
    cudaError_t e = cudaGetDeviceCount(&n);
    if (e != cudaSuccess || n <= device || device < 0) {
        dsv4_fail(DSV4_ERR_DEVICE, "no usable CUDA GPU %d (%s)", device,
                  e != cudaSuccess ? cudaGetErrorString(e) : "not enough devices");
        return NULL;
    }
    dsv4_backend *b = (dsv4_backend *)calloc(1, sizeof *b);
    cu_impl *c = (cu_impl *)calloc(1, sizeof *c);
    if (!b || !c) {
        free(b); free(c);
        dsv4_fail(DSV4_ERR_NOMEM, "out of memory creating the CUDA backend");
        return NULL;
    }
    b->name = "cuda";
    b->ops = &k_cuda_ops;
    b->impl = c;
    c->b = b;
    c->device = device;
    const char *g = getenv("DSV4_CUDA_GRAPHS");
    c->graphs_on = !(g && !strcmp(g, "0"));
    const char *pdl = getenv("DSV4_CUDA_PDL");
    c->pdl = !(pdl && !strcmp(pdl, "0"));
    c->arg_cap = 1 << 20;
    const char *what = "device setup";
    if ((e = cudaSetDevice(device)) != cudaSuccess ||
        (e = cudaDeviceGetAttribute(&c->n_sm, cudaDevAttrMultiProcessorCount, device)) != cudaSuccess ||
        (e = cu_groups_create(c)) != cudaSuccess ||
        (e = cudaHostAlloc((void **)&c->err_host, 3 * sizeof(int), cudaHostAllocMapped)) != cudaSuccess ||
        (e = cudaHostGetDevicePointer((void **)&c->err_dev, c->err_host, 0)) != cudaSuccess ||
        (e = cudaHostAlloc((void **)&c->arg_host, c->arg_cap, cudaHostAllocDefault)) != cudaSuccess ||
        (e = cudaMalloc((void **)&c->arg_dev, c->arg_cap)) != cudaSuccess ||
        (e = cudaEventCreate(&c->gev[0])) != cudaSuccess || (e = cudaEventCreate(&c->gev[1])) != cudaSuccess) {
        dsv4_fail(DSV4_ERR_DEVICE, "CUDA %s failed on GPU %d: %s", what, device, cudaGetErrorString(e));
        cu_destroy(b);
        return NULL;
    }
    c->stream = c->streams[0];
    c->err_host[0] = 0;
    c->err_host[1] = -1;
    c->err_host[2] = -1;
    return b;
}

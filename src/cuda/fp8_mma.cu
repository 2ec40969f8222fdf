/* Products of FP8 weights with FP8-rounded activation rows (matmul_fp8in,
 * the official numerics) on the e4m3 tensor cores.
 *
 * Under the official numerics an activation row goes through FP8 1x128
 * (spec §7.1) before a product with an FP8 weight: every value is an e4m3
 * code times its 128-column block's power of two. So the product needs no
 * f16 hi/lo split of the row: mma.m16n8k32 takes the weight's bytes and the
 * row's codes as they are (e4m3 x e4m3, fp32 out). On sm_90 ptxas carries
 * it out as exact e4m3 -> f16 conversions (F2FP, two values an instruction;
 * a weight fragment's once for all the warp's token tiles) and two f16
 * MMAs with fp32 accumulation (HMMA.16816): half the MMAs of the hi/lo
 * path and fewer conversion instructions, the f16 path's accumulation.
 * (Hopper's own FP8 tensor path is wgmma.)
 *
 * Numerics, per output (weight row r, token row t): for every 32-column
 * group of a 128-column block, one MMA from zero gives the group's sum of
 * code products (the tensor core's own rounding, the same for a given
 * group whatever else is in the tile), which is added as
 * fmaf(sum, sw·sx, acc): sw the weight's scale of that block (rows r), sx
 * the row's (both powers of two, or F32 weight scales: sw·sx is exact).
 * The groups go in column order inside a slice; the row's blocks are dealt
 * to ks contiguous slices (ks from the shape alone, tc_splits) whose sums
 * are added in slice order (tc_slices_sum), the same for every row count:
 * decode runs the slices on parallel warps, prompts run them in turn.
 *
 * Layout. A warp holds 16 weight rows (g = lane/4: rows g and g+8) and
 * NT tiles of 8 token rows. For a 64-column half of a block, thread q
 * (lane%4) loads the 16 bytes at column 16q of each of its rows and the
 * same 16 codes of token g; bytes 0-7 feed the first MMA (A slots 4q..4q+3
 * and 16+4q.. take bytes 0-3 and 4-7, B the same codes) and bytes 8-15 the
 * second. A group is thus the columns {16q + 8s + 0..7 : q = 0..3} of the
 * half, fixed by the column index alone.
 *
 * Prepared rows: codes (one byte a column, f8_npad(n) a row, zeros past
 * n) and scales (one float a 128-column block). Decode steps whose rows
 * fit prepare them in each block into shared memory (after issuing their
 * first weight loads); larger steps take a preparation launch. The codes
 * and scales are act_fp8_round's values (cq_act_block) encoded. */
#include "cuda/hc_post.cuh"
#include "cuda/tc_tile.cuh" /* tc_slices_sum, tc_part_floats, tc_splits (tc_f16.cuh); tt_cp16z */

#define F8_BLK 128 /* columns of an activation scale block */

__host__ __device__ static inline int64_t f8_npad(int64_t n) { return (n + F8_BLK - 1) / F8_BLK * F8_BLK; }
__host__ __device__ static inline int64_t f8_nblk(int64_t n) { return (n + F8_BLK - 1) / F8_BLK; }

/* Bytes of T prepared rows: the codes, then the scales. */
__host__ static inline size_t f8_prep_bytes(int64_t T, int64_t n)
{
    return (size_t)T * (size_t)f8_npad(n) + (size_t)T * (size_t)f8_nblk(n) * 4;
}

int cu_f8mma_ok(const dsv4_mat *W, int64_t grp_rows)
{
    return !grp_rows && cu_wfam(*W) == CU_W_FP8 && cu_w_loads_ok(*W) && W->blk_c % F8_BLK == 0;
}

size_t cu_f8mma_ws_bytes(int64_t T, int64_t n) { return f8_prep_bytes(T, n) + 16; }

/* The scales of T prepared rows of n columns, after their codes. */
static inline float *f8_scales(void *codes, int64_t T, int64_t n)
{
    return (float *)((uint8_t *)codes + (size_t)T * (size_t)f8_npad(n));
}

/* Floats of a block's staged scales (nr rows of nb blocks), rounded up
 * so that the staged codes after them start 16-byte aligned. */
__host__ __device__ static inline int64_t f8_stage_scale_floats(int nr, int64_t nb) { return (nr * nb + 3) / 4 * 4; }

/* Block b of a row (n values at row, 16-byte pieces wholly inside or past
 * n: n % 16 == 0, cu_w_loads_ok) by one warp, 4 consecutive values a lane,
 * in two steps so that a warp can have several blocks' loads in flight:
 * f8_prep_load reads the lane's values (zeros past n); f8_prep_store takes
 * the block's largest |value| (at least 1e-4, as cq_act_block), its power of
 * two s = pow2_ceil(amax / 448) and each value's e4m3 code at that scale
 * (code · s is act_fp8_round's value), and stores the codes (0 past n) and
 * s. */
__device__ __forceinline__ float4 f8_prep_load(const float *row, int64_t n, int64_t b, int lane)
{
    int64_t c = b * F8_BLK + 4 * lane;
    if (c >= n) return make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    if ((uintptr_t)(row + c) % 16 == 0) return *(const float4 *)(row + c);
    return make_float4(row[c], row[c + 1], row[c + 2], row[c + 3]);
}

__device__ __forceinline__ void f8_prep_store(float4 u, int64_t n, int64_t b, uint8_t *codes, float *scales, int lane)
{
    float v[4] = {u.x, u.y, u.z, u.w}, amax = 1e-4f;
#pragma unroll
    for (int k = 0; k < 4; k++) amax = fmaxf(amax, fabsf(v[k]));
    for (int o = 16; o > 0; o >>= 1) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    float s = cq_pow2_ceil(amax / 448.0f), inv = 1.0f / s;
    uint32_t w = 0;
    if (b * F8_BLK + 4 * lane < n)
#pragma unroll
        for (int k = 0; k < 4; k++) w |= (uint32_t)sr_to_e4m3(v[k] * inv) << (8 * k);
    ((uint32_t *)(codes + b * F8_BLK))[lane] = w;
    if (lane == 0) scales[b] = s;
}

/* nr rows (row i at x + i·ldx) prepared by the whole block: codes
 * [nr][npad], scales [nr][nblk]; a warp takes blocks warp, warp + nw, ...
 * F8_PREP_LOADS at a time, their loads in flight together (one after the
 * other, each block waited for its own L2 round trip; each block's codes
 * and scale are its own either way). */
#define F8_PREP_LOADS 4
__device__ __forceinline__ void f8_prep_rows(const float *x, int64_t ldx, int nr, int64_t n, uint8_t *codes,
                                             float *scales)
{
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, nw = blockDim.x >> 5;
    int64_t nb = f8_nblk(n), np = f8_npad(n), nk = nr * nb;
    for (int64_t k0 = warp; k0 < nk; k0 += F8_PREP_LOADS * nw) {
        float4 u[F8_PREP_LOADS];
#pragma unroll
        for (int p = 0; p < F8_PREP_LOADS; p++) {
            int64_t k = k0 + p * nw;
            u[p] = k < nk ? f8_prep_load(x + k / nb * ldx, n, k % nb, lane) : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
        }
#pragma unroll
        for (int p = 0; p < F8_PREP_LOADS; p++) {
            int64_t k = k0 + p * nw, i = k / nb, b = k % nb;
            if (k < nk) f8_prep_store(u[p], n, b, codes + i * np, scales + i * nb, lane);
        }
    }
}

/* Block (token row t, 8 blocks of its columns). */
__global__ void __launch_bounds__(256) f8_prep_kernel(const float *x, int64_t ldx, int64_t n, uint8_t *codes,
                                                      float *scales)
{
    cu_pdl();
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5;
    int64_t t = blockIdx.x, b = (int64_t)blockIdx.y * 8 + warp;
    if (b < f8_nblk(n))
        f8_prep_store(f8_prep_load(x + t * ldx, n, b, lane), n, b, codes + t * f8_npad(n), scales + t * f8_nblk(n), lane);
}

/* d = A·B (m16n8k32, e4m3 in, fp32 out) from zero. */
__device__ __forceinline__ void f8_mma(float *d, uint32_t a0, uint32_t a1, uint32_t a2, uint32_t a3, uint32_t b0,
                                       uint32_t b1)
{
    asm("mma.sync.aligned.m16n8k32.row.col.f32.e4m3.e4m3.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%10,%10,%10,%10};"
        : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
        : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1), "f"(0.0f));
}

/* A block's weight pieces for this thread: w[h][p] = 16 bytes of row g + 8h
 * at column 128b + 64p + 16q (zeros past n), and the rows' scales. */
struct f8_wblk {
    uint4 w[2][2];
    float s[2];
};

__device__ __forceinline__ void f8_load(const dsv4_mat &W, const char *const *wr, const char *const *sr, int64_t n,
                                        int64_t b, int q, f8_wblk &o)
{
#pragma unroll
    for (int h = 0; h < 2; h++) {
#pragma unroll
        for (int p = 0; p < 2; p++) {
            int64_t c = b * F8_BLK + 64 * p + 16 * q;
            o.w[h][p] = c < n ? __ldg((const uint4 *)(wr[h] + c)) : make_uint4(0, 0, 0, 0);
        }
        o.s[h] = cu_scale_at(W, sr[h], b * F8_BLK);
    }
}

/* Context of a warp's tile: its two weight rows (g, g+8, clamped) and
 * scale rows, and where its token rows' prepared codes and scales are
 * (offsets from xc / xs: token 8j + g's codes, tokens 8j + 2q + e's
 * scales; rows past the step's repeat its last). */
template <int NT>
struct f8_tile {
    const char *wr[2], *sr[2];
    const uint8_t *xc;
    const float *xs;
    int oc[NT], os[NT][2];
};

/* The tile's weight rows for this thread: rows row0 + g and row0 + g + 8
 * (past the end: the last row, whose sums are dropped) and their scale
 * rows. */
template <int NT>
__device__ __forceinline__ void f8_tile_rows(f8_tile<NT> &tl, const dsv4_mat &W, int64_t row0, int g)
{
    int64_t rb = cu_row_bytes(W);
#pragma unroll
    for (int h = 0; h < 2; h++) {
        int64_t r = row0 + g + 8 * h < W.rows ? row0 + g + 8 * h : W.rows - 1;
        tl.wr[h] = (const char *)W.data + r * rb;
        tl.sr[h] = cu_scale_row(W, r);
    }
}

/* One block's four MMAs for one token tile, added into acc: the thread's
 * token row's codes of the block at xr, the scales of its output columns'
 * token rows sx0 and sx1. */
__device__ __forceinline__ void f8_tile_block(float *acc, const f8_wblk &wb, const uint8_t *xr, float sx0, float sx1,
                                              int q)
{
    float f[4] = {wb.s[0] * sx0, wb.s[0] * sx1, wb.s[1] * sx0, wb.s[1] * sx1};
#pragma unroll
    for (int p = 0; p < 2; p++) {
        uint4 xv = *(const uint4 *)(xr + 64 * p + 16 * q);
        const uint4 &w0 = wb.w[0][p], &w1 = wb.w[1][p];
        float d[4];
        f8_mma(d, w0.x, w1.x, w0.y, w1.y, xv.x, xv.y);
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i] = fmaf(d[i], f[i], acc[i]);
        f8_mma(d, w0.z, w1.z, w0.w, w1.w, xv.z, xv.w);
#pragma unroll
        for (int i = 0; i < 4; i++) acc[i] = fmaf(d[i], f[i], acc[i]);
    }
}

/* One block's MMAs for the warp's tiles, added into acc. */
template <int NT>
__device__ __forceinline__ void f8_block(float (*acc)[4], const f8_wblk &wb, const f8_tile<NT> &tl, int64_t b, int q)
{
#pragma unroll
    for (int j = 0; j < NT; j++)
        f8_tile_block(acc[j], wb, tl.xc + tl.oc[j] + b * F8_BLK, tl.xs[tl.os[j][0] + b], tl.xs[tl.os[j][1] + b], q);
}

/* Slice sp of ks: blocks [sp·nb/ks, (sp+1)·nb/ks) in order into acc
 * (zeroed here); U blocks' loads in flight while U are computed. pre():
 * once, after the first loads are issued (the wait for the previous kernel,
 * the staging of the rows). */
template <int NT, int U, class F>
__device__ __forceinline__ void f8_slice(float (*acc)[4], const dsv4_mat &W, const f8_tile<NT> &tl, int sp, int ks,
                                         int q, int &first, F pre)
{
    int64_t n = W.cols, nb = f8_nblk(n), b0 = sp * nb / ks, b1 = (sp + 1) * nb / ks;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
    f8_wblk cur[U];
#pragma unroll
    for (int u = 0; u < U; u++)
        if (b0 + u < b1) f8_load(W, tl.wr, tl.sr, n, b0 + u, q, cur[u]);
    if (first) {
        pre();
        first = 0;
    }
    for (int64_t b = b0; b < b1; b += U) {
        f8_wblk nxt[U];
#pragma unroll
        for (int u = 0; u < U; u++)
            if (b + U + u < b1) f8_load(W, tl.wr, tl.sr, n, b + U + u, q, nxt[u]);
#pragma unroll
        for (int u = 0; u < U; u++)
            if (b + u < b1) f8_block<NT>(acc, cur[u], tl, b + u, q);
#pragma unroll
        for (int u = 0; u < U; u++) cur[u] = nxt[u];
    }
}

/* uint4s of one warp's copy ring (f8_slice_ring): U + 1 stages of [2 rows][2
 * halves][32 lanes] of 16 bytes, a block's pieces of the warp's rows. */
__host__ __device__ constexpr int f8_ring_u4(int u) { return (u + 1) * 2 * 2 * 32; }

/* f8_slice for one token tile (the decode instance), the weight pieces
 * streamed through the warp's copy ring (ring: this lane's first uint4):
 * U blocks' copies in flight while one is computed, holding no registers
 * while in flight (loads into registers kept the kernel at 128 registers,
 * two blocks an SM and 4 KB in flight a warp at U = 2); a lane reads back
 * only the pieces it copied (zeros past n). The
 * rows' scales ride in U + 1 register sets turning round with the
 * unrolled loop. The same blocks in the same order, the same sums. (With
 * several token tiles the ring's loop took 145-178 registers: those
 * instances keep f8_slice.) */
template <int NT, int U, class F>
__device__ __forceinline__ void f8_slice_ring(float (*acc)[4], const dsv4_mat &W, const f8_tile<NT> &tl, int sp, int ks,
                                              int q, int &first, F pre, uint4 *ring)
{
    int64_t n = W.cols, nb = f8_nblk(n), b0 = sp * nb / ks, b1 = (sp + 1) * nb / ks;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
    float sc[U + 1][2];
    auto issue = [&](int64_t b, int st, float *so) {
#pragma unroll
        for (int h = 0; h < 2; h++) {
#pragma unroll
            for (int p = 0; p < 2; p++) {
                int64_t c = b * F8_BLK + 64 * p + 16 * q;
                tt_cp16z(ring + ((st * 2 + h) * 2 + p) * 32, tl.wr[h] + (c < n ? c : 0), c < n);
            }
            so[h] = cu_scale_at(W, tl.sr[h], b * F8_BLK);
        }
    };
    /* every step commits a group (empty past the slice), so waiting for
     * all but the newest U finds the block's own copies complete */
#pragma unroll
    for (int i = 0; i < U; i++) {
        if (b0 + i < b1) issue(b0 + i, i, sc[i]);
        tc_cp_commit();
    }
    if (first) {
        pre();
        first = 0;
    }
    for (int64_t b = b0; b < b1; b += U + 1) {
#pragma unroll
        for (int i = 0; i <= U; i++) {
            int64_t bi = b + i;
            if (bi >= b1) break;
            if (bi + U < b1) issue(bi + U, (i + U) % (U + 1), sc[(i + U) % (U + 1)]);
            tc_cp_commit();
            tc_cp_wait<U>();
            f8_wblk wb;
#pragma unroll
            for (int h = 0; h < 2; h++) {
#pragma unroll
                for (int p = 0; p < 2; p++) wb.w[h][p] = ring[((i * 2 + h) * 2 + p) * 32];
                wb.s[h] = sc[i][h];
            }
            f8_block<NT>(acc, wb, tl, bi, q);
        }
    }
}

/* Block: 8 warps; a row tile of 16 rows has ks warps (SEQ = 0, decode:
 * one slice each, summed through shared memory) or one (SEQ = 1: the
 * slices in turn); tokens blockIdx.y·8·NT... . stage: the block prepares
 * its token rows of x itself (shared memory after the slice sums);
 * otherwise codes / scales hold every row's. post.X: each output goes
 * through hc_post into those streams (the thread that holds it owns its
 * column) instead of into y. */
template <int NT, int SEQ, int U>
__global__ void __launch_bounds__(256) f8_kernel(const float *x, int64_t ldx, const uint8_t *codes,
                                                 const float *scales, int stage, int T, dsv4_mat W, float *y,
                                                 int64_t ldy, int ks, dsv4_hc_post post)
{
    extern __shared__ float smem[];
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    int wpt = SEQ ? 1 : ks, sp0 = warp % wpt;
    int64_t n = W.cols, np = f8_npad(n), nb = f8_nblk(n), tb = (int64_t)blockIdx.y * 8 * NT;
    int nr = T - tb < 8 * NT ? (int)(T - tb) : 8 * NT;
    constexpr int RU4 = NT == 1 ? f8_ring_u4(U) : 0; /* the warps' copy rings first (f8_slice_ring) */
    uint4 *ring = (uint4 *)smem + warp * RU4 + lane;
    float *part = (float *)((uint4 *)smem + 8 * RU4); /* SEQ = 0, ks > 1: tc_slices_sum's [8 warps][1][NT][4][32] */
    float *sscale = part + tc_part_floats(SEQ, 1, NT, ks);
    uint8_t *scode = (uint8_t *)(sscale + f8_stage_scale_floats(nr, nb)); /* 16-byte aligned */
    if (stage) {
        codes = scode;
        scales = sscale;
    } else {
        codes += tb * np;
        scales += tb * nb;
    }
    auto pre = [&]() {
        cu_pdl();
        if (stage) {
            f8_prep_rows(x + tb * ldx, ldx, nr, n, scode, sscale);
            __syncthreads();
        }
    };
    int64_t row0 = ((int64_t)blockIdx.x * (8 / wpt) + warp / wpt) * 16;
    int active = row0 < W.rows;
    if (wpt == 1 && !active) {
        pre(); /* its barriers */
        return;
    }
    if (!active) row0 = 0; /* a dummy tile, so every warp reaches the barriers */
    f8_tile<NT> tl;
    f8_tile_rows(tl, W, row0, g);
    tl.xc = codes;
    tl.xs = scales;
#pragma unroll
    for (int j = 0; j < NT; j++) {
        int tg = 8 * j + g < nr ? 8 * j + g : nr - 1;
        tl.oc[j] = tg * (int)np;
#pragma unroll
        for (int e = 0; e < 2; e++) {
            int te = 8 * j + 2 * q + e < nr ? 8 * j + 2 * q + e : nr - 1;
            tl.os[j][e] = te * (int)nb;
        }
    }
    float tot[1][NT][4];
    int first = 1;
    int mine = tc_slices_sum<1, NT, SEQ>(tot, ks, sp0, part, [&](float (*acc)[NT][4], int sp) {
        if constexpr (NT == 1) f8_slice_ring<NT, U>(acc[0], W, tl, sp, ks, q, first, pre, ring);
        else f8_slice<NT, U>(acc[0], W, tl, sp, ks, q, first, pre);
    });
    if (!mine || !active) return;
#pragma unroll
    for (int j = 0; j < NT; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int64_t r = row0 + g + (i >= 2 ? 8 : 0), t = tb + 8 * j + 2 * q + (i & 1);
            if (r >= W.rows || t >= T) continue;
            if (post.X) hc_post_elem(post, W.rows, t, r, tot[0][j][i]);
            else y[t * ldy + r] = tot[0][j][i];
        }
}

/* Shared bytes of a decode block that stages nr rows of n columns. */
static size_t f8_stage_bytes(int nr, int64_t n)
{
    return (size_t)nr * (size_t)f8_npad(n) + 4 * (size_t)f8_stage_scale_floats(nr, f8_nblk(n));
}
/* Decode steps of at most this many values in all (T·n) stage their rows
 * in every block; longer ones take one preparation launch, which costs
 * less than every block rounding the rows again (bench_ops matmul:fp8 on an
 * H100, with a warp's blocks prepared one after the other: wo_b 4096x8192
 * 20 us through the launch at T = 2..8 against 22 us staged at T = 1; wq_a
 * 1024x4096 8.2 us through the launch at T = 4 and 8 against 16 and 28 us
 * staged; at T = 1 staged 7.7 us). With F8_PREP_LOADS blocks in flight a
 * warp (2026-12-08): wq_a at T = 1 7.3 -> 6.5 us, the shared w1 8.6 -> 7.1;
 * staging 8192 values instead left wo_b at T = 1 where the launch has it
 * (17.5 us) and made wq_a at T = 2 slower (7.3 -> 9.4 us). */
#define F8_STAGE_VALUES 4096

template <int NT, int SEQ, int U>
static void f8_launch(cu_impl *c, const cu_matmul_args *a, int ks, int stage)
{
    const dsv4_mat *W = &a->W;
    int wpt = SEQ ? 1 : ks;
    size_t shm = (NT == 1 ? (size_t)8 * f8_ring_u4(U) * 16 : 0) + (size_t)tc_part_floats(SEQ, 1, NT, ks) * sizeof(float) +
                 (stage ? f8_stage_bytes(a->T, W->cols) : 0);
    static size_t allowed[CU_SMEM_GPUS];
    if (cu_allow_smem(c, f8_kernel<NT, SEQ, U>, shm, allowed)) return;
    const uint8_t *codes = (const uint8_t *)a->xq;
    const float *scales = stage ? NULL : f8_scales(a->xq, a->T, W->cols);
    dim3 grid(cu_blocks(W->rows, 8 / wpt * 16), cu_blocks(a->T, 8 * NT));
    cu_launch(c, "f8_kernel", f8_kernel<NT, SEQ, U>, grid, dim3(256), shm, a->x, a->ldx, codes, scales, stage, a->T,
              *W, a->y, a->ldy, ks, a->post);
}

/* ---- prompts: block tiles ----
 * Block (128 weight rows, 128 token rows), 8 warps of 16 rows, each against
 * all 128 token rows (16 token tiles): a weight piece loaded into a warp's
 * registers serves 16 MMAs instead of one. The 128 token rows' codes of
 * one 128-column block are staged in shared memory by cp.async, two stages
 * (the next block's copies in flight while this one computes), each token
 * row padded to F8T_PITCH bytes so that a quad's 16-byte reads of eight
 * token rows fall in distinct banks. The weights come into registers as in
 * f8_kernel (the next block's while this one computes). A row's sums are
 * f8_kernel's: per slice from zero, blocks in order, f8_block's MMAs and
 * fmaf in its order, the slices added in order (tc_slices_sum's); post.X:
 * the same hc_post epilogue. */
#define F8T_TOK 128
#define F8T_PITCH 192
#define F8T_SMEM ((size_t)2 * F8T_TOK * F8T_PITCH + (size_t)2 * F8T_TOK * 4)

__device__ __forceinline__ void f8_cp4(void *dst, const void *src)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"((uint32_t)__cvta_generic_to_shared(dst)), "l"(src)
                 : "memory");
}

__global__ void __launch_bounds__(256, 1) f8_tile_kernel(const uint8_t *codes, const float *scales, int T, dsv4_mat W,
                                                         float *y, int64_t ldy, int ks, dsv4_hc_post post)
{
    extern __shared__ float smem[];
    uint8_t *sc = (uint8_t *)smem;                                  /* [2][F8T_TOK][F8T_PITCH] */
    float *ss = (float *)(sc + (size_t)2 * F8T_TOK * F8T_PITCH);    /* [2][F8T_TOK] */
    int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, q = lane & 3;
    int64_t n = W.cols, np = f8_npad(n), nb = f8_nblk(n), tb = (int64_t)blockIdx.y * F8T_TOK;
    int nr = T - tb < F8T_TOK ? (int)(T - tb) : F8T_TOK;
    int64_t row0 = (int64_t)blockIdx.x * 128 + warp * 16;
    f8_tile<1> tl; /* its weight rows (f8_load's view) */
    f8_tile_rows(tl, W, row0, g);
    /* block b's codes and scales of the tile's token rows into stage st
     * (rows past the step's repeat its last) */
    auto stage = [&](int64_t b, int st) {
        for (int i = threadIdx.x; i < F8T_TOK * 8; i += blockDim.x) {
            int tk = i >> 3, pc = i & 7;
            int64_t t = tb + (tk < nr ? tk : nr - 1);
            tc_cp16(sc + ((size_t)st * F8T_TOK + tk) * F8T_PITCH + pc * 16, codes + t * np + b * F8_BLK + pc * 16);
        }
        if (threadIdx.x < F8T_TOK) {
            int64_t t = tb + ((int)threadIdx.x < nr ? (int)threadIdx.x : nr - 1);
            f8_cp4(ss + st * F8T_TOK + threadIdx.x, scales + t * nb + b);
        }
        tc_cp_commit();
    };
    float tot[16][4];
    cu_pdl(); /* the prepared rows are the previous kernel's */
    for (int sp = 0; sp < ks; sp++) {
        int64_t b0 = sp * nb / ks, b1 = (sp + 1) * nb / ks;
        float acc[16][4];
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) acc[j][i] = 0.0f;
        f8_wblk cur, nxt;
        if (b0 < b1) {
            stage(b0, 0);
            f8_load(W, tl.wr, tl.sr, n, b0, q, cur);
        }
        for (int64_t b = b0; b < b1; b++) {
            int st = (int)((b - b0) & 1);
            if (b + 1 < b1) {
                stage(b + 1, st ^ 1);
                f8_load(W, tl.wr, tl.sr, n, b + 1, q, nxt);
                tc_cp_wait<1>();
            } else {
                tc_cp_wait<0>();
            }
            __syncthreads(); /* every thread's copies of stage st have landed */
            const uint8_t *xs = sc + (size_t)st * F8T_TOK * F8T_PITCH;
            const float *sx = ss + st * F8T_TOK;
#pragma unroll
            for (int j = 0; j < 16; j++)
                f8_tile_block(acc[j], cur, xs + (8 * j + g) * F8T_PITCH, sx[8 * j + 2 * q], sx[8 * j + 2 * q + 1], q);
            __syncthreads(); /* stage st is read by all before the next block's copies go there */
            cur = nxt;
        }
#pragma unroll
        for (int j = 0; j < 16; j++)
#pragma unroll
            for (int i = 0; i < 4; i++) tot[j][i] = sp > 0 ? tot[j][i] + acc[j][i] : acc[j][i];
    }
    if (row0 >= W.rows) return;
#pragma unroll
    for (int j = 0; j < 16; j++)
#pragma unroll
        for (int i = 0; i < 4; i++) {
            int64_t r = row0 + g + (i >= 2 ? 8 : 0), t = tb + 8 * j + 2 * q + (i & 1);
            if (r >= W.rows || t >= T) continue;
            if (post.X) hc_post_elem(post, W.rows, t, r, tot[j][i]);
            else y[t * ldy + r] = tot[j][i];
        }
}

/* Steps of more rows than this take the block tiles. */
#define F8T_MIN_ROWS 64

/* The instance sets only how many token rows a warp holds and whether its
 * slices run side by side; every instance computes a row the same way. */
void cu_f8mma(cu_impl *c, const cu_matmul_args *a)
{
    const dsv4_mat *W = &a->W;
    int64_t n = W->cols;
    int ks = tc_splits(W->rows, f8_nblk(n), 2);
    int stage = a->T <= 8 && a->T * n <= F8_STAGE_VALUES; /* f8_stage_bytes: at most 4.2 KB */
    if (!stage) {
        uint8_t *codes = (uint8_t *)a->xq;
        float *scales = f8_scales(codes, a->T, n);
        dim3 grid((unsigned)a->T, cu_blocks(f8_nblk(n), 8));
        cu_launch(c, "f8_prep_kernel", f8_prep_kernel, grid, dim3(256), 0, a->x, a->ldx, n, codes, scales);
    }
    if (a->T <= 8) {
        f8_launch<1, 0, 4>(c, a, ks, stage);
    } else if (a->T <= 32) {
        f8_launch<4, 0, 1>(c, a, ks, 0);
    } else if (a->T <= F8T_MIN_ROWS) {
        f8_launch<8, 1, 1>(c, a, ks, 0);
    } else {
        static size_t allowed[CU_SMEM_GPUS];
        if (cu_allow_smem(c, f8_tile_kernel, F8T_SMEM, allowed)) return;
        const uint8_t *codes = (const uint8_t *)a->xq;
        const float *scales = f8_scales(a->xq, a->T, n);
        dim3 grid(cu_blocks(W->rows, 128), cu_blocks(a->T, F8T_TOK));
        cu_launch(c, "f8_tile_kernel", f8_tile_kernel, grid, dim3(256), F8T_SMEM, codes, scales, a->T, *W, a->y,
                  a->ldy, ks, a->post);
    }
}

/* The shared-memory layout of the prompt tiles (src/cuda/tc_tile.cuh),
 * checked on the CPU with the kernels' own host-callable index functions
 * (no GPU needed): the activation units a thread reads from a stage are
 * the ones tc_kernel reads from the prepared rows in global memory (the
 * condition for the tiles' bit-identical sums), every swizzle is a
 * permutation of a row's slots, the reads of a quarter warp (LDS.128) or a
 * warp (LDS.32) meet on no shared-memory bank, and every kept tile shape
 * fits the H100/H200's 227 KB of shared memory a block. What this cannot
 * check (the copies, barriers and MMAs themselves) the CUDA op tests check
 * on the device. */
#include "cuda/tc_tile.cuh"
#include "test.h"

/* Distinct values among n (small ranges). */
static int distinct(const int *v, int n)
{
    int d = 0;
    for (int i = 0; i < n; i++) {
        int seen = 0;
        for (int j = 0; j < i; j++) seen |= v[j] == v[i];
        d += !seen;
    }
    return d;
}

/* The groups k tc_chunk_mma asks for, counted from a thread's first group
 * of the chunk: FP8 one per pair of its 4 k-steps, MXFP4 one per scale
 * block (four groups apart). */
template <int FAM>
static int n_groups()
{
    return FAM == CU_W_FP8 ? 2 : 4;
}
template <int FAM>
static int group_k(int i)
{
    return FAM == CU_W_FP8 ? i : 4 * i;
}

template <int FAM>
static void check_activations(const char *name)
{
    constexpr int UB = tt_cfg<FAM, TT_MT, TT_NT, TT_WM>::UB, UN = UB / 16;
    /* a permutation of a token's units, for both parities */
    for (int tok = 0; tok < 2; tok++) {
        int v[64];
        for (int u = 0; u < UN; u++) v[u] = tt_unit<FAM>(u, tok);
        for (int u = 0; u < UN; u++) CHECKF(v[u] >= 0 && v[u] < UN, "%s: unit %d -> %d", name, u, v[u]);
        CHECKF(distinct(v, UN) == UN, "%s: tt_unit is no permutation of the %d units (token %d)", name, UN, tok);
    }
    /* the unit read for (chunk c, thread q, group k, term t) holds the
     * bytes tc_chunk_f16 reads: term t of group tc_group(c, q) + k of the
     * prepared row (2 terms of 8 halves a group) */
    for (int c = 0; c < 6; c++)
        for (int q = 0; q < 4; q++)
            for (int i = 0; i < n_groups<FAM>(); i++)
                for (int t = 0; t < 2; t++) {
                    int k = group_k<FAM>(i);
                    long tile = (long)c * UB + 16 * tt_read_unit<FAM>(q, k, t);
                    long global = 2L * ((tc_group(FAM, c, q) + k) * 16 + 8 * t);
                    CHECKF(tile == global, "%s: chunk %d q %d group %d term %d: byte %ld of the row, not %ld", name,
                           c, q, k, t, tile, global);
                }
    /* a quarter warp's eight 16-byte reads of one (tile j, group, term)
     * fall on eight distinct 16-byte bank groups */
    for (int base = 0; base < 128; base += 8)
        for (int i = 0; i < n_groups<FAM>(); i++)
            for (int t = 0; t < 2; t++)
                for (int qw = 0; qw < 4; qw++) {
                    int slot[8];
                    for (int l = 0; l < 8; l++) {
                        int lane = 8 * qw + l, g = lane >> 2, q = lane & 3, tok = base + g;
                        int addr = tok * UB + 16 * tt_unit<FAM>(tt_read_unit<FAM>(q, group_k<FAM>(i), t), tok);
                        slot[l] = addr / 16 % 8;
                    }
                    CHECKF(distinct(slot, 8) == 8, "%s: tokens %d.. group %d term %d: quarter warp %d meets on a bank",
                           name, base, group_k<FAM>(i), t, qw);
                }
}

static void test_activation_units(void)
{
    check_activations<CU_W_FP8>("FP8");
    check_activations<CU_W_FP4>("MXFP4");
}

/* The weight rows of a stage: FP8 threads read their piece q (LDS.128,
 * conflict-free per quarter warp), MXFP4 threads word q of each of the
 * four pieces (LDS.32, conflict-free per warp); tt_wslot permutes a row's
 * four pieces. Rows g and g + 8 of the 16-row tiles of any warp. */
static void test_weight_slots(void)
{
    for (int row = 0; row < 256; row++) {
        int v[4];
        for (int fam = 0; fam < 2; fam++) {
            for (int p = 0; p < 4; p++) v[p] = fam ? tt_wslot<CU_W_FP4>(row, p) : tt_wslot<CU_W_FP8>(row, p);
            CHECKF(distinct(v, 4) == 4, "%s row %d: the pieces' slots are no permutation", fam ? "MXFP4" : "FP8",
                   row);
        }
    }
    for (int r0 = 0; r0 < 256; r0 += 16)
        for (int h = 0; h < 2; h++) {
            for (int qw = 0; qw < 4; qw++) {
                int slot[8];
                for (int l = 0; l < 8; l++) {
                    int lane = 8 * qw + l, g = lane >> 2, q = lane & 3, row = r0 + g + 8 * h;
                    slot[l] = (row * 64 + 16 * tt_wslot<CU_W_FP8>(row, q)) / 16 % 8;
                }
                CHECKF(distinct(slot, 8) == 8, "FP8 rows %d..: quarter warp %d meets on a bank", r0, qw);
            }
            for (int b = 0; b < 4; b++) {
                int bank[32];
                for (int lane = 0; lane < 32; lane++) {
                    int g = lane >> 2, q = lane & 3, row = r0 + g + 8 * h;
                    bank[lane] = (row * 64 + 4 * (4 * tt_wslot<CU_W_FP4>(row, b) + q)) / 4 % 32;
                }
                CHECKF(distinct(bank, 32) == 32, "MXFP4 rows %d.. piece %d: the warp's words meet on a bank", r0, b);
            }
        }
}

/* The kept shapes' shared memory (stages and, with several K slices, the
 * slice sums) within the 227 KB a block may have on sm_90. */
static void test_tile_sizes(void)
{
    const size_t cap = 227 * 1024;
    for (int ks = 1; ks <= 2; ks++) {
        size_t f8 = tt_smem_bytes<CU_W_FP8, TT_MT, TT_NT, TT_WM>(ks), f4 = tt_smem_bytes<CU_W_FP4, TT_MT, TT_NT, TT_WM>(ks);
        CHECKF(f8 <= cap, "FP8 tile with %d slices: %zu bytes of shared memory", ks, f8);
        CHECKF(f4 <= cap, "MXFP4 tile with %d slices: %zu bytes of shared memory", ks, f4);
    }
    CHECK((tt_cfg<CU_W_FP8, TT_MT, TT_NT, TT_WM>::BM) == 128 && (tt_cfg<CU_W_FP8, TT_MT, TT_NT, TT_WM>::BN) == 128);
    CHECK((tt_cfg<CU_W_FP8, TT_MT, TT_NT, TT_WM>::ST) == 3 && (tt_cfg<CU_W_FP4, TT_MT, TT_NT, TT_WM>::ST) == 2);
}

int main(void)
{
    RUN(test_activation_units);
    RUN(test_weight_slots);
    RUN(test_tile_sizes);
    printf("%d passed, %d failed\n", t_pass, t_fail);
    TEST_MAIN_END();
}

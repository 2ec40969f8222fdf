"""Writes tests/data/official_round_vectors.bin: rows and what official_cache.py (torch's
float8_e4m3fn and bfloat16 casts) makes of them, for tests/unit/test_official_round.c to hold the
engine's act_fp8_round and kv_fp8_round to, bit for bit.

  make_round_vectors.py [OUT]

Records, little-endian: u32 kind (0: act_fp8_round, 1: kv_fp8_round), u32 rows, u32 width, u32 n_fp8
(kv only, else 0), rows*width f32 inputs, rows*width f32 expected outputs. Random rows with heavy
tails and blocks of mixed magnitude, plus crafted rows: e4m3 rounding midpoints (ties to even) in
the normal and the subnormal range, an amax exactly 448 * 2^k (the scale's ceiling is exact), an
amax just above it, blocks below the 1e-4 floor, zeros and -0, a partial last block.
(The indexer's FP4 rounding is left out: the oracle computes its Hadamard rotation in double.)
"""

import struct
import sys

import numpy as np
import torch

import official_cache as oc


def crafted_act_rows(width):
    rows = []
    # scale 1 (amax 448): ties between e4m3 neighbours round to the even code
    r = np.zeros(width, np.float32)
    r[0] = 448.0
    ties = [1.0625, 1.1875, 1.3125, 2.125, 2.375, 0.5 + 1 / 32, 2.0 ** -10, 3 * 2.0 ** -10, 5 * 2.0 ** -10,
            2.0 ** -6 + 2.0 ** -10, 248.0, 432.0, -1.0625, -(2.0 ** -10)]
    r[1:1 + len(ties)] = ties
    r[1 + len(ties)] = -0.0
    rows.append(r)
    # the same ties at scale 2^-20 (amax 448 * 2^-20), and amax just above 448 * 2^k (scale doubles)
    rows.append((r * np.float32(2.0 ** -20)).astype(np.float32))
    r2 = r.copy()
    r2[0] = np.nextafter(np.float32(448.0), np.float32(1e9))
    rows.append(r2)
    # below the amax floor 1e-4, and zeros
    rows.append((np.random.default_rng(5).standard_normal(width) * 1e-6).astype(np.float32))
    rows.append(np.zeros(width, np.float32))
    return rows


def random_rows(rng, rows, width):
    x = rng.standard_normal((rows, width)).astype(np.float32)
    x *= np.exp(rng.standard_normal((rows, width)) * 1.5).astype(np.float32)  # heavy tails
    for r in range(rows):   # blocks of very different magnitude within a row
        for c in range(0, width, 64):
            x[r, c:c + 64] *= np.float32(2.0 ** rng.integers(-30, 12))
    return x


def record(kind, x, y, n_fp8=0):
    rows, width = x.shape
    return struct.pack("<4I", kind, rows, width, n_fp8) + x.astype("<f4").tobytes() + y.astype("<f4").tobytes()


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else "tests/data/official_round_vectors.bin"
    rng = np.random.default_rng(20261201)
    blob = b""
    for width in (320, 128, 520, 7):   # 320, 520 and 7: a partial last block of 128
        crafted = crafted_act_rows(width) if width >= 32 else [np.zeros(width, np.float32)]
        x = np.concatenate([np.stack(crafted), random_rows(rng, 3, width)])
        y = oc.fp8_act(torch.from_numpy(x)).numpy()
        blob += record(0, x, y)
    for rows, width, n_fp8 in ((3, 512, 448), (4, 96, 64), (3, 40, 0)):
        x = random_rows(rng, rows, width)
        y = oc.fp8_rows(torch.from_numpy(x), n_fp8).numpy()
        blob += record(1, x, y, n_fp8)
    with open(out, "wb") as f:
        f.write(blob)
    print(f"{out}: {len(blob)} bytes")


if __name__ == "__main__":
    main()

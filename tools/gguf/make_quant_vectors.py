"""Writes tests/data/ggml_quant_vectors.bin: random valid blocks of every
quant type dsv4 decodes and their values from gguf.quants.dequantize (the
oracle for test_ggml_quant, which checks bit-identical dequantization).
Record: u32 ggml type, u32 n_blocks, n_blocks·type_size bytes, then
n_blocks·block_size float32 values (little-endian)."""
import struct
import sys

import numpy as np
from gguf import quants
from gguf.constants import GGMLQuantizationType as T, GGML_QUANT_SIZES

sys.path.insert(0, __file__.rsplit("/", 1)[0])
from qblocks import QUANT_TYPES, random_blocks

rng = np.random.default_rng(20261201)
out = open(sys.argv[1] if len(sys.argv) > 1 else "tests/data/ggml_quant_vectors.bin", "wb")
for qt in QUANT_TYPES:
    n = 24
    blk = random_blocks(rng, qt, n)
    vals = quants.dequantize(blk.reshape(1, -1), qt).astype(np.float32).reshape(-1)
    assert vals.size == n * GGML_QUANT_SIZES[qt][0]
    out.write(struct.pack("<II", int(qt), n) + blk.tobytes() + vals.astype("<f4").tobytes())
# plain types: finite F16 / BF16 bit patterns and their decoding
for qt, exp_mask in ((T.F16, 0x7C00), (T.BF16, 0x7F80)):
    bits = rng.integers(0, 0x10000, size=512).astype(np.uint16)
    bits = np.where((bits & exp_mask) == exp_mask, bits & 0x8000, bits)
    raw = bits.view(np.uint8)
    vals = quants.dequantize(raw, qt) if qt == T.BF16 else bits.view(np.float16).astype(np.float32)
    out.write(struct.pack("<II", int(qt), 512) + raw.tobytes() + vals.astype("<f4").tobytes())
out.close()

"""Seed corpus for tests/fuzz/fuzz_gguf.c: small GGUF files written by the
gguf package with metadata of every value type and tensors of several ggml
types (random valid blocks). python tools/gguf/make_fuzz_seeds.py DIR"""
import os
import sys

import numpy as np
import gguf
from gguf.constants import GGMLQuantizationType as T

sys.path.insert(0, os.path.dirname(__file__))
from qblocks import random_blocks

out = sys.argv[1]
rng = np.random.default_rng(7)
w = gguf.GGUFWriter(os.path.join(out, "kv_types.gguf"), "deepseek4")
w.add_uint8("k.u8", 7); w.add_int8("k.i8", -7); w.add_uint16("k.u16", 700); w.add_int16("k.i16", -700)
w.add_uint32("k.u32", 70000); w.add_int32("k.i32", -70000); w.add_float32("k.f32", 0.5); w.add_bool("k.b", True)
w.add_string("k.s", "text"); w.add_uint64("k.u64", 1 << 40); w.add_int64("k.i64", -(1 << 40)); w.add_float64("k.f64", 0.25)
w.add_array("k.arr_s", ["a", "bb", ""]); w.add_array("k.arr_i", [1, 2, 3]); w.add_array("k.arr_f", [0.5, 1.5])
w.add_tensor("f32", np.arange(12, dtype=np.float32).reshape(3, 4))
w.add_tensor("f16", np.arange(8, dtype=np.float16))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()
for qt in (T.Q8_0, T.Q4_K, T.IQ2_XXS, T.MXFP4):
    w = gguf.GGUFWriter(os.path.join(out, f"{qt.name.lower()}.gguf"), "deepseek4")
    w.add_custom_alignment(64)
    bs, ts = gguf.GGML_QUANT_SIZES[qt]
    blk = random_blocks(rng, qt, 2, scale=0.01)
    w.add_tensor("w", blk.reshape(1, 2 * ts), raw_dtype=qt)
    w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

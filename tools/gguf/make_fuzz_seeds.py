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
# deepseek4 metadata and a tokenizer without tensors (config and tokenizer building)
sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "..", "tests", "tokenizer"))
from tokenizer_to_gguf import tokenizer_kv, write_gguf  # noqa: E402
import json  # noqa: E402
root = os.path.join(os.path.dirname(__file__), "..", "..")
tj = json.load(open(os.path.join(root, "tests/fixtures/tiny-chat/tokenizer.json"), encoding="utf-8"))
write_gguf(os.path.join(out, "tokenizer.gguf"), tokenizer_kv(tj, 285))
src = gguf.GGUFReader(os.path.join(root, "tests/fixtures/gguf-all-types/model.gguf"))
w = gguf.GGUFWriter(os.path.join(out, "deepseek4_meta.gguf"), "deepseek4")
for f in src.fields.values():
    if not f.name.startswith("deepseek4."):
        continue
    v = f.contents()
    t = f.types[0]
    if t == gguf.GGUFValueType.ARRAY:
        w.add_array(f.name, list(v))
    elif t == gguf.GGUFValueType.FLOAT32:
        w.add_float32(f.name, float(v))
    elif t == gguf.GGUFValueType.BOOL:
        w.add_bool(f.name, bool(v))
    elif t == gguf.GGUFValueType.STRING:
        w.add_string(f.name, v)
    else:
        w.add_uint32(f.name, int(v))
w.write_header_to_file(); w.write_kv_data_to_file(); w.write_tensors_to_file(); w.close()

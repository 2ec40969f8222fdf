"""DeepSeek-V4's released weight formats in numpy (spec §7): FP8 e4m3 with 128x128 UE8M0 block scales
for dense matrices, MXFP4 (E2M1 codes, 1x32 UE8M0 scales) for routed experts, which tensor is stored
in which format, and safetensors files holding them.

Quantization:
  FP8    per 128x128 block (partial blocks at the edges): scale 2^e, e = ceil(log2(max(amax, 1e-4) / 448)),
         codes = e4m3fn(w / 2^e) rounded to nearest, ties to even.
  MXFP4  per 1x32 block along a row: scale 2^e, e = ceil(log2(max(amax, 6 * 2^-126) / 6)),
         codes = E2M1(w / 2^e) rounded to nearest, ties to even; low nibble = even column.
The exponent is the exact ceiling of log2 of the fp32 quotient (frexp, no floating-point log), so every
scaled value lies within the format's range. w / 2^e and code * 2^e are exact in fp32, and every
dequantized value (a 4-bit or 2-bit mantissa times a power of two) is exact in bf16.

numpy has no bf16 or fp8 dtype: BF16 tensors are handled as uint16 bit patterns, F8_E4M3 and
F8_E8M0 as uint8 (so safetensors' numpy API, which has neither, is not used: the file format is a
JSON header and raw little-endian bytes).
"""

import json
import os
import re
import struct
import sys

import numpy as np

FP8_BLOCK = 128
FP4_BLOCK = 32
# config.json of the released FP8 checkpoints (and "expert_dtype": "fp4" beside it)
QUANTIZATION_CONFIG = {"activation_scheme": "dynamic", "fmt": "e4m3", "quant_method": "fp8",
                       "scale_fmt": "ue8m0", "weight_block_size": [FP8_BLOCK, FP8_BLOCK]}


def fail(msg):
    sys.exit(f"error: {msg}")


# ----------------------------------------------------------------------------- which tensor is what

# Tensors the released checkpoints store in F32 (spec §7.2): mHC mixers, sinks, compressor position
# biases, router biases. Matches the official and the transformers spellings.
F32_PATTERNS = re.compile(
    r"(hc_head|attn_hc|ffn_hc|hc_attn_|hc_ffn_|hc_head_|sinks$|attn_sink$|position_bias$|\.ape$|"
    r"e_score_correction_bias$|gate\.bias$)")
# FP8 dense projections (official names, main layers and the MTP layer alike): the attention's
# q/kv/output projections, the indexer's query projection, the shared expert, the MTP input fusion.
FP8_PATTERNS = re.compile(
    r"^(layers\.\d+|mtp\.\d+)\.(attn\.(wq_a|wq_b|wkv|wo_a|wo_b|indexer\.wq_b)|ffn\.shared_experts\.w[123])\.weight$"
    r"|^mtp\.\d+\.[eh]_proj\.weight$")
FP4_PATTERN = re.compile(r"^(layers\.\d+|mtp\.\d+)\.ffn\.experts\.\d+\.w[123]\.weight$")
# Every other tensor of an official checkpoint is BF16 (embedding, head, norms, router, compressor and
# indexer-compressor projections, indexer weights_proj) or, for tid2eid, I64.
BF16_PATTERNS = re.compile(
    r"^(embed|head|norm)\.weight$|^mtp\.\d+\.(enorm|hnorm|norm)\.weight$"
    r"|^(layers\.\d+|mtp\.\d+)\.(attn_norm|ffn_norm|attn\.q_norm|attn\.kv_norm|ffn\.gate)\.weight$"
    r"|^layers\.\d+\.attn\.(indexer\.)?compressor\.(wkv|wgate|norm)\.weight$"
    r"|^layers\.\d+\.attn\.indexer\.weights_proj\.weight$")


def storage_kind(name, wo_a_fp8=True):
    """How the released checkpoints store the tensor with official name `name` (spec §7.2):
    "fp8", "fp4", "bf16", "f32" or "i64"; None for a name that is no official DeepSeek-V4 tensor.
    wo_a_fp8=False: wo_a pre-dequantized to BF16, as the official convert.py leaves it."""
    if F32_PATTERNS.search(name):
        return "f32"
    if name.endswith(".ffn.gate.tid2eid"):
        return "i64"
    if FP4_PATTERN.match(name):
        return "fp4"
    if FP8_PATTERNS.match(name):
        return "bf16" if not wo_a_fp8 and name.endswith(".attn.wo_a.weight") else "fp8"
    if BF16_PATTERNS.match(name):
        return "bf16"
    return None


def scale_name(weight_name):
    """X.weight -> X.scale (the official spelling of a weight's scale grid)."""
    return weight_name[: -len(".weight")] + ".scale"


# ----------------------------------------------------------------------------- element codecs

def _e4m3_table():
    """The 256 e4m3fn values (NaN at 0x7f and 0xff)."""
    c = np.arange(256)
    e, m = (c >> 3) & 15, c & 7
    mag = np.where(e == 0, m / 8.0 * 2.0 ** -6, (1 + m / 8.0) * 2.0 ** (e - 7.0))
    mag[(c & 0x7F) == 0x7F] = np.nan
    return np.where(c & 0x80, -mag, mag).astype(np.float32)


E4M3 = _e4m3_table()
E2M1 = np.array([0.0, 0.5, 1.0, 1.5, 2.0, 3.0, 4.0, 6.0, -0.0, -0.5, -1.0, -1.5, -2.0, -3.0, -4.0, -6.0],
                np.float32)


def _nearest_even(a, grid):
    """Index into the ascending non-negative `grid` nearest to each |value| a (float64), ties to the
    even index (= even mantissa: the code's lowest bit)."""
    hi = np.clip(np.searchsorted(grid, a), 0, len(grid) - 1)
    lo = np.maximum(hi - 1, 0)
    dlo, dhi = a - grid[lo], grid[hi] - a
    return np.where((dhi < dlo) | ((dhi == dlo) & (hi % 2 == 0)), hi, lo)


def e4m3_encode(v):
    """fp32 values with |v| <= 448 -> e4m3fn bytes (uint8), round to nearest even, sign kept."""
    code = _nearest_even(np.abs(v).astype(np.float64), E4M3[:0x7F].astype(np.float64)).astype(np.uint8)
    return code | (np.signbit(v).astype(np.uint8) << 7)


def e2m1_encode(v):
    """fp32 values with |v| <= 6 -> E2M1 codes (uint8, 0..15), round to nearest even. A value that
    rounds to zero is stored as +0 (code 0): the sign of a zero product changes no sum."""
    mag = _nearest_even(np.abs(v).astype(np.float64), E2M1[:8].astype(np.float64)).astype(np.uint8)
    return np.where(mag == 0, 0, mag | (np.signbit(v).astype(np.uint8) << 3)).astype(np.uint8)


def ceil_log2(x):
    """Exact ceil(log2(x)) of positive finite fp32 values, as int32."""
    m, k = np.frexp(x.astype(np.float32))     # x = m * 2^k, m in [0.5, 1)
    return np.where(m == 0.5, k - 1, k).astype(np.int32)


def bf16_to_f32(u16):
    return (u16.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16(f):
    """fp32 -> bf16 bit patterns, round to nearest even (finite input)."""
    u = np.ascontiguousarray(f, np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


# ----------------------------------------------------------------------------- block formats

def fp8_quantize(w, blk=FP8_BLOCK):
    """w [R, C] fp32 -> (e4m3 bytes [R, C] uint8, scale exponents [ceil(R/blk), ceil(C/blk)] int32)."""
    R, C = w.shape
    sr, sc = -(-R // blk), -(-C // blk)
    pad = np.zeros((sr * blk, sc * blk), np.float32)
    pad[:R, :C] = w
    blocks = pad.reshape(sr, blk, sc, blk)
    amax = np.maximum(np.abs(blocks).max(axis=(1, 3)), np.float32(1e-4))
    e = ceil_log2(amax / np.float32(448.0))
    v = blocks / np.exp2(e).astype(np.float32)[:, None, :, None]
    codes = e4m3_encode(v).reshape(sr * blk, sc * blk)[:R, :C]
    return np.ascontiguousarray(codes), e


def fp8_dequantize(codes, e, blk=FP8_BLOCK):
    """e4m3 bytes [R, C] and scale exponents -> fp32 [R, C] (exact)."""
    R, C = codes.shape
    s = np.exp2(e).astype(np.float32).repeat(blk, 0).repeat(blk, 1)[:R, :C]
    return E4M3[codes] * s


def mxfp4_quantize(w):
    """w [..., C] fp32 (C % 32 == 0) -> (packed uint8 [..., C/2], scale exponents [..., C/32] int32)."""
    shp = w.shape
    blocks = w.reshape(*shp[:-1], shp[-1] // FP4_BLOCK, FP4_BLOCK)
    amax = np.maximum(np.abs(blocks).max(axis=-1), np.float32(6 * 2.0 ** -126))
    e = ceil_log2(amax / np.float32(6.0))
    codes = e2m1_encode(blocks / np.exp2(e).astype(np.float32)[..., None]).reshape(*shp[:-1], shp[-1] // 2, 2)
    return np.ascontiguousarray(codes[..., 0] | (codes[..., 1] << 4)), e


def mxfp4_dequantize(packed, e):
    """packed uint8 [..., C/2] and scale exponents [..., C/32] -> fp32 [..., C] (exact)."""
    codes = np.stack([packed & 15, packed >> 4], axis=-1).reshape(*packed.shape[:-1], packed.shape[-1] * 2)
    return E2M1[codes] * np.exp2(e).astype(np.float32).repeat(FP4_BLOCK, -1)


# Largest scale exponent the engine admits (src/model/weights.c): every code * scale stays a finite
# fp32 (448 * 2^119 and 6 * 2^125 are below 2^128).
MAX_EXP = {"fp8": 119, "fp4": 125}


def e8m0_bytes(e, kind, name):
    """Scale exponents -> F8_E8M0 bytes (byte b = 2^(b - 127))."""
    if int(e.min()) < -127 or int(e.max()) > MAX_EXP[kind]:
        fail(f"{name}: a block scale 2^{int(e.max())} is outside what {kind.upper()} with E8M0 scales can hold")
    return (e + 127).astype(np.uint8)


def e8m0_exponents(b):
    """F8_E8M0 bytes -> scale exponents."""
    return b.astype(np.int32) - 127


# ----------------------------------------------------------------------------- safetensors

NP_DTYPE = {"F32": np.float32, "BF16": np.uint16, "F16": np.float16, "I64": np.int64, "I32": np.int32,
            "I8": np.uint8, "U8": np.uint8, "F8_E4M3": np.uint8, "F8_E8M0": np.uint8}


def read_safetensors(path):
    """{name: (dtype string, array)} with arrays of NP_DTYPE[dtype] viewing a read-only memory map
    (BF16 as uint16 bit patterns, I8/F8 as uint8)."""
    try:
        with open(path, "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
            hdr = json.loads(f.read(n))
        data = np.memmap(path, np.uint8, "r", offset=8 + n)
    except (OSError, ValueError, struct.error) as ex:
        fail(f"{path}: not a readable safetensors file ({ex})")
    out = {}
    for name, info in hdr.items():
        if name == "__metadata__":
            continue
        dt = info.get("dtype")
        if dt not in NP_DTYPE:
            fail(f"{path}: tensor {name} has dtype {dt}, which this tool does not read")
        b, e = info["data_offsets"]
        a = data[b:e].view(NP_DTYPE[dt])
        if a.size != int(np.prod(info["shape"], dtype=np.int64)):
            fail(f"{path}: tensor {name}: {e - b} bytes do not hold shape {info['shape']}")
        out[name] = (dt, a.reshape(info["shape"]))
    return out


def write_safetensors(path, entries):
    """entries: list of (name, dtype string, shape, bytes). Like safetensors itself, data is laid out
    by element size, largest first, so every tensor is aligned to its elements."""
    entries = sorted(entries, key=lambda e: -np.dtype(NP_DTYPE[e[1]]).itemsize)
    hdr, off = {}, 0
    for name, dt, shape, data in entries:
        hdr[name] = {"dtype": dt, "shape": list(shape), "data_offsets": [off, off + len(data)]}
        off += len(data)
    hdr["__metadata__"] = {"format": "pt"}
    h = json.dumps(hdr, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)))
        f.write(h)
        for _, _, _, data in entries:
            f.write(data)


def shard_files(model_dir):
    """The checkpoint's shard file names in order: the index's, or model.safetensors alone."""
    idx = os.path.join(model_dir, "model.safetensors.index.json")
    if os.path.exists(idx):
        try:
            with open(idx) as f:
                wmap = json.load(f)["weight_map"]
        except (OSError, ValueError, KeyError) as ex:
            fail(f"{idx}: no weight_map ({ex})")
        return sorted(set(wmap.values()))
    if os.path.exists(os.path.join(model_dir, "model.safetensors")):
        return ["model.safetensors"]
    fail(f"{model_dir}: neither model.safetensors.index.json nor model.safetensors")


def write_index(out_dir, shards):
    """shards: {file name: [tensor names]}; writes model.safetensors.index.json (total_size: the bytes
    of the tensor data)."""
    total, wmap = 0, {}
    for fn, names in shards.items():
        for name in names:
            wmap[name] = fn
        with open(os.path.join(out_dir, fn), "rb") as f:
            n = struct.unpack("<Q", f.read(8))[0]
        total += os.path.getsize(os.path.join(out_dir, fn)) - 8 - n
    with open(os.path.join(out_dir, "model.safetensors.index.json"), "w") as f:
        json.dump({"metadata": {"total_size": total}, "weight_map": dict(sorted(wmap.items()))}, f, indent=2)
        f.write("\n")

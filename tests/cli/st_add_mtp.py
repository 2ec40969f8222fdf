#!/usr/bin/env python3
"""Give a sharded FP8 checkpoint (tests/fixtures/tiny-fp8-official's layout) an MTP head mtp.0.*
as the released checkpoints ship it (spec §5.2): e_proj/h_proj FP8 e4m3 [D, D] with 128x128 E8M0
scale grids, enorm/hnorm/norm and hc_head_* next to them, and a block taken from layer 0 (a window
layer; its routed-by-score gate bias from layer 1, since layer 0 is hash-routed). Stdlib only;
the new tensors go into the last shard, then the index is rebuilt.

usage: st_add_mtp.py DIR"""
import json, os, struct, subprocess, sys

d = sys.argv[1]
idx = json.load(open(os.path.join(d, "model.safetensors.index.json")))
shards = sorted(set(idx["weight_map"].values()))
files = {}
for fn in shards:
    data = open(os.path.join(d, fn), "rb").read()
    n = struct.unpack("<Q", data[:8])[0]
    files[fn] = (json.loads(data[8:8 + n]), data[8 + n:])

def tensor(name):
    hdr, body = files[idx["weight_map"][name]]
    t = hdr[name]
    b, e = t["data_offsets"]
    return t["dtype"], t["shape"], body[b:e]

hdr, body = files[shards[-1]]
body = bytearray(body)

def add(name, dtype, shape, raw):
    global body
    body += bytes(-len(body) % 8)
    hdr[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(body), len(body) + len(raw)]}
    body += raw

for name in sorted(idx["weight_map"]):
    if name.startswith("layers.0.") and not name.endswith("ffn.gate.tid2eid"):
        add("mtp.0." + name[len("layers.0."):], *tensor(name))
add("mtp.0.ffn.gate.bias", *tensor("layers.1.ffn.gate.bias"))
for n in ("enorm.weight", "hnorm.weight", "norm.weight"):
    add("mtp.0." + n, *tensor("norm.weight"))
for n in ("hc_head_fn", "hc_head_base", "hc_head_scale"):
    add("mtp.0." + n, *tensor(n))

D = json.load(open(os.path.join(d, "config.json")))["hidden_size"]
G = (D + 127) // 128
x = 12345
for k, n in enumerate(("e_proj", "h_proj")):
    codes = bytearray(D * D)
    for i in range(D * D):
        x = (x * 1103515245 + 12345) & 0x7FFFFFFF
        c = (x >> 16) & 0xFF
        codes[i] = c & 0xF7 if c & 0x7F == 0x7F else c  # no NaN code
    add("mtp.0.%s.weight" % n, "F8_E4M3", [D, D], bytes(codes))
    add("mtp.0.%s.scale" % n, "F8_E8M0", [G, G], bytes([127 - 13 - k]) * (G * G))  # 448 * 2^-13 ~ 1/sqrt(D)

h = json.dumps(hdr).encode()
h += b" " * (-len(h) % 8)
open(os.path.join(d, shards[-1]), "wb").write(struct.pack("<Q", len(h)) + h + bytes(body))
subprocess.check_call([sys.executable, os.path.join(os.path.dirname(__file__), "st_reindex.py"), d])

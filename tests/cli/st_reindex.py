#!/usr/bin/env python3
"""Rebuild DIR/model.safetensors.index.json's weight_map from its shards' headers (stdlib only),
so that bad-input tests can rename or remove tensors in a sharded checkpoint.

usage: st_reindex.py DIR"""
import json, os, struct, sys

d = sys.argv[1]
p = os.path.join(d, "model.safetensors.index.json")
idx = json.load(open(p))
wmap = {}
for fn in sorted(set(idx["weight_map"].values())):
    with open(os.path.join(d, fn), "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        wmap.update({k: fn for k in json.loads(f.read(n)) if k != "__metadata__"})
idx["weight_map"] = dict(sorted(wmap.items()))
with open(p, "w") as f:
    json.dump(idx, f, indent=2)

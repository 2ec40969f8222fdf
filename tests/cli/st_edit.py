#!/usr/bin/env python3
"""Rewrite a safetensors file's header for bad-input tests (stdlib only).

usage: st_edit.py IN OUT ACTION [ARGS]
  rename OLD NEW        rename a tensor
  dtype NAME DT [SHAPE] change a tensor's dtype (and shape, comma-separated)
  shape NAME SHAPE      change a tensor's shape
  offsets NAME B E      change a tensor's data_offsets
  i64 NAME INDEX VALUE  overwrite one int64 element of a tensor's data
  copy NAME NEW         add tensor NEW with NAME's dtype, shape and bytes
  u8 NAME INDEX VALUE   overwrite one byte of a tensor's data
  e8m0_to_f32 NAME [INDEX VALUE]
                        re-store an F8_E8M0 scale tensor as F32 powers of two (Flash-Base's
                        container), optionally setting F32 element INDEX to VALUE
  fp8_to_bf16 NAME      dequantize an F8_E4M3 tensor with its NAME-less-".weight" + ".scale"
                        grid (128x128 E8M0 blocks) and store it as BF16 (the scale removed)
  truncate BYTES        keep only the first BYTES bytes of the file
  hdrlen VALUE          overwrite the 8-byte header length"""
import json, struct, sys

def main():
    src, dst, act = sys.argv[1], sys.argv[2], sys.argv[3]
    a = sys.argv[4:]
    data = open(src, 'rb').read()
    if act == 'truncate':
        open(dst, 'wb').write(data[:int(a[0])])
        return
    if act == 'hdrlen':
        open(dst, 'wb').write(struct.pack('<Q', int(a[0])) + data[8:])
        return
    n = struct.unpack('<Q', data[:8])[0]
    hdr = json.loads(data[8:8 + n])
    body = bytearray(data[8 + n:])
    if act == 'rename':
        hdr[a[1]] = hdr.pop(a[0])
    elif act == 'dtype':
        hdr[a[0]]['dtype'] = a[1]
        if len(a) > 2:
            hdr[a[0]]['shape'] = [int(x) for x in a[2].split(',')]
    elif act == 'shape':
        hdr[a[0]]['shape'] = [int(x) for x in a[1].split(',')]
    elif act == 'offsets':
        hdr[a[0]]['data_offsets'] = [int(a[1]), int(a[2])]
    elif act == 'copy':
        src_t = hdr[a[0]]
        b, e = src_t['data_offsets']
        hdr[a[1]] = {'dtype': src_t['dtype'], 'shape': src_t['shape'], 'data_offsets': [len(body), len(body) + e - b]}
        body += body[b:e]
    elif act == 'i64':
        off = hdr[a[0]]['data_offsets'][0] + 8 * int(a[1])
        body[off:off + 8] = struct.pack('<q', int(a[2]))
    elif act == 'u8':
        body[hdr[a[0]]['data_offsets'][0] + int(a[1])] = int(a[2])
    elif act == 'e8m0_to_f32':
        t = hdr[a[0]]
        b, e = t['data_offsets']
        vals = [2.0 ** (x - 127) for x in body[b:e]]
        if len(a) > 2:
            vals[int(a[1])] = float(a[2])
        body += bytes(-len(body) % 8)   # keep the new data aligned (the loader allows gaps)
        t['dtype'], t['data_offsets'] = 'F32', [len(body), len(body) + 4 * len(vals)]
        body += struct.pack('<%df' % len(vals), *vals)
    elif act == 'fp8_to_bf16':
        w, sname = hdr[a[0]], a[0][:-len('.weight')] + '.scale'
        s = hdr.pop(sname)
        (R, C), (SR, SC) = w['shape'], s['shape']
        wb, sb = w['data_offsets'][0], s['data_offsets'][0]
        out = bytearray()
        for i in range(R):
            for j in range(C):
                x = body[wb + i * C + j]
                sign, ex, m = x >> 7, (x >> 3) & 15, x & 7
                v = (1 + m / 8) * 2.0 ** (ex - 7) if ex else m / 8 * 2.0 ** -6
                v *= 2.0 ** (body[sb + (i // 128) * SC + j // 128] - 127) * (-1 if sign else 1)
                out += struct.pack('<f', v)[2:]   # exact: 4 significant bits fit bf16
        body += bytes(-len(body) % 8)
        w['dtype'], w['data_offsets'] = 'BF16', [len(body), len(body) + len(out)]
        body += out
    else:
        sys.exit('unknown action ' + act)
    h = json.dumps(hdr).encode()
    h += b' ' * (-len(h) % 8)
    open(dst, 'wb').write(struct.pack('<Q', len(h)) + h + bytes(body))

main()

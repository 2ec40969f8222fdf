#!/usr/bin/env python3
"""Rewrite a GGUF file for bad-input tests (stdlib only). Parses the header
(metadata + tensor infos), applies one edit and writes the file back with the
same data section.

usage: gguf_edit.py IN OUT ACTION [ARGS]
  dropkey KEY             remove a metadata key
  setu32 KEY VALUE        set (or add) a u32 metadata value
  setstr KEY TEXT         set (or add) a string metadata value
  setf32 KEY VALUE        set (or add) a float32 metadata value
  rename OLD NEW          rename a tensor
  type NAME TYPEID        change a tensor's ggml type id
  dims NAME D0,D1,...     change a tensor's dims (ggml order, innermost first)
  offset NAME OFF         change a tensor's data offset
  i32 NAME INDEX VALUE    overwrite one int32 element of a tensor's data
  u8 NAME OFFSET VALUE    overwrite one byte of a tensor's data
  truncate BYTES          keep only the first BYTES bytes"""
import struct, sys

SIZES = {0: 1, 1: 1, 2: 2, 3: 2, 4: 4, 5: 4, 6: 4, 7: 1, 10: 8, 11: 8, 12: 8}


class R:
    def __init__(self, b):
        self.b, self.o = b, 0

    def take(self, n):
        v = self.b[self.o:self.o + n]
        self.o += n
        return v

    def u(self, fmt):
        return struct.unpack('<' + fmt, self.take(struct.calcsize(fmt)))[0]

    def s(self):
        return self.take(self.u('Q'))


def read_value(r, t):
    """raw bytes of one value of type t (without the type field)"""
    start = r.o
    if t == 8:
        r.s()
    elif t == 9:
        et, n = r.u('I'), r.u('Q')
        for _ in range(n):
            read_value(r, et)
    else:
        r.take(SIZES[t])
    return r.b[start:r.o]


def main():
    src, dst, act, a = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4:]
    b = open(src, 'rb').read()
    if act == 'truncate':
        open(dst, 'wb').write(b[:int(a[0])])
        return
    r = R(b)
    magic, ver, nt, nkv = r.take(4), r.u('I'), r.u('Q'), r.u('Q')
    kvs = []
    for _ in range(nkv):
        k = r.s()
        t = r.u('I')
        kvs.append([k, t, read_value(r, t)])
    tis = []
    for _ in range(nt):
        name = r.s()
        nd = r.u('I')
        dims = [r.u('Q') for _ in range(nd)]
        tis.append([name, dims, r.u('I'), r.u('Q')])
    align = 32
    for k, t, v in kvs:
        if k == b'general.alignment':
            align = struct.unpack('<I', v)[0]
    data_start = (r.o + align - 1) // align * align
    data = bytearray(b[data_start:])

    def ti(name):
        for x in tis:
            if x[0] == name.encode():
                return x
        sys.exit('no tensor ' + name)

    if act == 'dropkey':
        kvs = [x for x in kvs if x[0] != a[0].encode()]
    elif act in ('setu32', 'setstr', 'setf32'):
        t, v = ((4, struct.pack('<I', int(a[1]))) if act == 'setu32' else (6, struct.pack('<f', float(a[1])))
                if act == 'setf32' else (8, struct.pack('<Q', len(a[1].encode())) + a[1].encode()))
        kvs = [x for x in kvs if x[0] != a[0].encode()] + [[a[0].encode(), t, v]]
    elif act == 'rename':
        ti(a[0])[0] = a[1].encode()
    elif act == 'type':
        ti(a[0])[2] = int(a[1])
    elif act == 'dims':
        ti(a[0])[1] = [int(x) for x in a[1].split(',')]
    elif act == 'offset':
        ti(a[0])[3] = int(a[1])
    elif act == 'u8':
        data[ti(a[0])[3] + int(a[1])] = int(a[2])
    elif act == 'i32':
        off = ti(a[0])[3] + 4 * int(a[1])
        data[off:off + 4] = struct.pack('<i', int(a[2]))
    else:
        sys.exit('unknown action ' + act)
    out = bytearray(magic + struct.pack('<IQQ', ver, len(tis), len(kvs)))
    for k, t, v in kvs:
        out += struct.pack('<Q', len(k)) + k + struct.pack('<I', t) + v
    for name, dims, t, off in tis:
        out += struct.pack('<Q', len(name)) + name + struct.pack('<I', len(dims))
        out += b''.join(struct.pack('<Q', d) for d in dims) + struct.pack('<IQ', t, off)
    out += b'\0' * ((-len(out)) % align)
    open(dst, 'wb').write(bytes(out) + bytes(data))


main()

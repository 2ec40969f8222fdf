#!/usr/bin/env python3
"""Where one kernel's instructions and stalls go, from Nsight Compute's
per-instruction (SASS) table.

Capture one launch on the device (the full set holds the source counters):
    ncu --clock-control none --cache-control none --set full -k regex:'^tc_kernel' \
        --launch-skip 1 --launch-count 1 --page source --print-source sass --csv \
        build/dsv4 bench ... > k.csv
then here:
    tools/bench/sass_mix.py k.csv [--top N]

Prints, for each kernel table in the file: the executed warp instructions
by opcode (without modifiers), the sampled stall reasons, the instructions
with the most stall samples and those with the most excess shared-memory
wavefronts (bank conflicts; a generic LD/ST that lands in shared memory
counts too)."""
import argparse
import csv
import io
from collections import Counter


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return 0.0


def tables(path):
    """The per-instruction tables of the file (one a profiled launch)."""
    lines = open(path, errors="replace").read().splitlines()
    starts = [i for i, l in enumerate(lines) if l.startswith('"Address","Source"')]
    for n, s in enumerate(starts):
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        body = [l for l in lines[s:end] if l.startswith('"')]
        rows = list(csv.reader(io.StringIO("\n".join(body))))
        yield rows[0], rows[1:]


def opcode(src):
    parts = src.split()
    if not parts:
        return "?"
    op = parts[1] if parts[0].startswith("@") and len(parts) > 1 else parts[0]
    return op.split(".")[0]


def report(head, rows, top):
    col = {h: i for i, h in enumerate(head)}
    ex, smp = col["Instructions Executed"], col["Warp Stall Sampling (All Samples)"]
    exc = col.get("L1 Wavefronts Shared Excessive")
    total_ex = sum(num(r[ex]) for r in rows)
    total_smp = sum(num(r[smp]) for r in rows)
    print(f"{len(rows)} SASS instructions, {total_ex:.0f} warp instructions executed, "
          f"{total_smp:.0f} stall samples")
    mix = Counter()
    for r in rows:
        mix[opcode(r[1])] += num(r[ex])
    print("executed, by opcode:")
    for op, n in mix.most_common(top):
        print(f"  {op:10s} {n:12.0f} {100 * n / max(total_ex, 1):6.1f}%")
    stalls = Counter()
    for h, i in col.items():
        if h.startswith("stall_") and "(Not Issued)" not in h:
            stalls[h[6:]] += sum(num(r[i]) for r in rows)
    s_all = sum(stalls.values())
    if s_all:
        print("stall samples, by reason:")
        for k, n in stalls.most_common(8):
            print(f"  {k:16s} {n:8.0f} {100 * n / s_all:6.1f}%")
    hot = sorted(rows, key=lambda r: -num(r[smp]))[:top]
    if total_smp:
        print("most sampled instructions:")
        for r in hot:
            if num(r[smp]) == 0:
                break
            print(f"  {r[0]} {100 * num(r[smp]) / total_smp:5.1f}%  {r[1].strip()[:80]}")
    if exc is not None:
        bad = sorted(rows, key=lambda r: -num(r[exc]))[:top]
        if bad and num(bad[0][exc]) > 0:
            print("excess shared wavefronts (bank conflicts):")
            for r in bad:
                if num(r[exc]) == 0:
                    break
                print(f"  {r[0]} {num(r[exc]):9.0f}  {r[1].strip()[:80]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("csv")
    ap.add_argument("--top", type=int, default=12)
    a = ap.parse_args()
    for n, (head, rows) in enumerate(tables(a.csv)):
        print(f"== table {n + 1}")
        report(head, rows, a.top)


if __name__ == "__main__":
    main()

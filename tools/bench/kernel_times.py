#!/usr/bin/env python3
"""Per-kernel GPU time of dsv4 steps, from Nsight Compute's raw CSV.

usage: ncu --csv --page raw --metrics gpu__time_duration.sum,dram__bytes_read.sum,\
launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    build/dsv4 bench ... > k.csv
       kernel_times.py k.csv [--per KERNEL] [--by-grid]

Prints, per kernel name (template arguments dropped; --by-grid: per name and
grid, which tells a one-token launch from a multi-row one), the calls, the
time per step and its share, the mean time per call, the DRAM bytes read per
second and the registers and achieved occupancy. Steps are counted as the
calls of --per (default embed_kernel: one per forward step). Values are read
in the units of ncu's second row (time in ns/us/ms, bytes in byte/Kbyte/...). ncu serialises
the kernels, so the sum is the step's kernel time without launch overlap
(programmatic dependent launch) and without the host's gaps between graphs.
"""
import csv
import re
import sys
from collections import defaultdict


def short(name):
    name = re.sub(r"^void ", "", name)
    return re.split(r"[<(]", name, maxsplit=1)[0].strip()


def num(s):
    try:
        return float(s.replace(",", ""))
    except ValueError:
        return None


def main(argv):
    args = [a for a in argv if not a.startswith("--")]
    per = "embed_kernel"
    if "--per" in argv:
        per = argv[argv.index("--per") + 1]
        args.remove(per)
    by_grid = "--by-grid" in argv
    if len(args) != 1:
        sys.exit(__doc__)
    with open(args[0], newline="") as f:
        lines = [l for l in f if l.startswith('"')]  # ncu's own log lines are not quoted
    table = list(csv.reader(lines))
    if len(table) < 3:
        sys.exit("kernel_times: no kernel rows in " + args[0])
    head, units = table[0], table[1]  # the second row holds each column's unit
    need = ["ID", "Kernel Name", "Grid Size", "gpu__time_duration.sum"]
    missing = [c for c in need if c not in head]
    if missing:
        sys.exit("kernel_times: %s: no column %s" % (args[0], ", ".join(missing)))
    col = {c: i for i, c in enumerate(head)}
    TIME = {"ns": 1, "nsecond": 1, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6, "s": 1e9, "second": 1e9}
    SIZE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "KB": 1e3, "MB": 1e6, "GB": 1e9}

    def value(row, name, scale):
        i = col.get(name)
        if i is None or i >= len(row):
            return 0.0
        v = num(row[i])
        return 0.0 if v is None else v * scale.get(units[i], 1.0)

    rows = [r for r in table[2:] if len(r) == len(head) and num(r[col["ID"]]) is not None]
    if not rows:
        sys.exit("kernel_times: no kernel rows in " + args[0])
    if units[col["gpu__time_duration.sum"]] not in TIME:
        sys.exit("kernel_times: %s: unknown time unit %r" % (args[0], units[col["gpu__time_duration.sum"]]))
    agg = defaultdict(lambda: [0, 0.0, 0.0, 0.0, 0.0])  # calls, ns, bytes, regs, occupancy
    steps = 0
    for r in rows:
        n = short(r[col["Kernel Name"]])
        if n == per:
            steps += 1
        key = (n, r[col["Grid Size"]]) if by_grid else (n, "")
        a = agg[key]
        a[0] += 1
        a[1] += value(r, "gpu__time_duration.sum", TIME)
        a[2] += value(r, "dram__bytes_read.sum", SIZE)
        a[3] = value(r, "launch__registers_per_thread", {})
        a[4] += value(r, "sm__warps_active.avg.pct_of_peak_sustained_active", {})
    steps = max(steps, 1)
    total = sum(a[1] for a in agg.values())
    print(f"# {len(rows)} kernels, {steps} steps (calls of {per}), {total / steps / 1e3:.1f} us of kernel time per step")
    print(f"{'kernel':<28} {'grid':>14} {'calls/step':>10} {'us/step':>9} {'share':>6} {'us/call':>8} {'GB/s':>7} {'regs':>5} {'occ%':>5}")
    for (n, g), a in sorted(agg.items(), key=lambda kv: -kv[1][1]):
        gbs = a[2] / a[1] if a[1] else 0.0  # bytes per ns = GB/s
        print(f"{n:<28} {g:>14} {a[0] / steps:>10.1f} {a[1] / steps / 1e3:>9.1f} {100 * a[1] / total:>5.1f}% "
              f"{a[1] / a[0] / 1e3:>8.2f} {gbs:>7.0f} {a[3]:>5.0f} {a[4] / a[0]:>5.1f}")


if __name__ == "__main__":
    main(sys.argv[1:])

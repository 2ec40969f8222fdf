#!/usr/bin/env bash
# Per-kernel GPU time of the steps of one `dsv4 bench` run under Nsight
# Compute (one row per kernel launch, graph nodes included), summarised by
# tools/bench/kernel_times.py.
# usage: tools/bench/profile_step.sh OUT.csv [--by-grid] -- BENCH_ARGS...
#   e.g. tools/bench/profile_step.sh /tmp/k.csv -- --device cuda --synthetic flash --layers 4 \
#            --experts 16 --weights fp8-fp4 --contexts 0 --prefill 0 --decode 4
set -eu
out=$1; shift
opts=()
while [ $# -gt 0 ] && [ "$1" != "--" ]; do opts+=("$1"); shift; done
[ "${1:-}" = "--" ] && shift
NCU=$(command -v ncu || ls /usr/local/cuda/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "profile_step: no ncu found" >&2; exit 1; }
bin=${DSV4_BIN:-build/dsv4}
"$NCU" --clock-control none --csv --page raw \
    --metrics gpu__time_duration.sum,dram__bytes_read.sum,launch__registers_per_thread,sm__warps_active.avg.pct_of_peak_sustained_active \
    "$bin" bench "$@" > "$out"
grep -v '^"' "$out" | grep -v '^==PROF==' || true # the bench's own report
python3 "$(dirname "$0")/kernel_times.py" "$out" "${opts[@]}"

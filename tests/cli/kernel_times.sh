#!/usr/bin/env bash
# tools/bench/kernel_times.py: the per-kernel sums of an Nsight Compute raw CSV
# (header row, units row, one row per launch, ncu's own unquoted log lines),
# with values worked out by hand; a CSV without the kernels' columns or rows
# gets a one-line error and a non-zero status.
set -u
. tests/python.sh
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# two steps (two embed_kernel calls); tc_kernel twice per step at 4,000 and
# 6,000 ns reading 30,000 and 30,000 bytes; one gemv per step at 1 us (the
# time column in us here, to check the units row is applied)
cat > "$tmp/k.csv" <<'CSV'
==PROF== Connected to process 1
"ID","Kernel Name","Grid Size","gpu__time_duration.sum","dram__bytes_read.sum","launch__registers_per_thread","sm__warps_active.avg.pct_of_peak_sustained_active"
"","","","us","byte","register/thread","%"
"0","embed_kernel(embed_args)","(16, 1, 1)","1","0","96","10"
"1","void tc_kernel<2, 1, 1, 0, 4>(const __half *)","(256, 1, 1)","4","30,000","122","20"
"2","void tc_kernel<2, 1, 1, 0, 4>(const __half *)","(64, 1, 1)","6","30,000","122","30"
"3","gemv_kernel(args)","(16160, 1, 1)","1","2,000","40","50"
"4","embed_kernel(embed_args)","(16, 1, 1)","1","0","96","10"
"5","void tc_kernel<2, 1, 1, 0, 4>(const __half *)","(256, 1, 1)","4","30,000","122","20"
"6","void tc_kernel<2, 1, 1, 0, 4>(const __half *)","(64, 1, 1)","6","30,000","122","30"
"7","gemv_kernel(args)","(16160, 1, 1)","1","2,000","40","50"
CSV
out=$($PY tools/bench/kernel_times.py "$tmp/k.csv" 2>&1)
# per step: tc 2 calls, 10 us, 60,000 bytes in 10,000 ns = 6 GB/s, 25 % occupancy;
# the step's kernel time 1 + 10 + 1 = 12 us, tc's share 83.3 %
line=$(printf '%s\n' "$out" | grep '^tc_kernel ')
if printf '%s\n' "$out" | grep -q '^# 8 kernels, 2 steps (calls of embed_kernel), 12.0 us of kernel time per step' &&
   [ "$(echo $line | awk '{print $2, $3, $4, $5, $6, $7, $8}')" = "2.0 10.0 83.3% 5.00 6 122 25.0" ]; then
    pass kernel_times_sums
else
    fail kernel_times_sums "$out"
fi
out=$($PY tools/bench/kernel_times.py "$tmp/k.csv" --by-grid 2>&1)
if [ "$(printf '%s\n' "$out" | grep '^tc_kernel .*(64, 1, 1)' | awk '{print $5, $6, $7}')" = "1.0 6.0 50.0%" ]; then
    pass kernel_times_by_grid
else
    fail kernel_times_by_grid "$out"
fi
printf '"ID","Kernel Name"\n"","" \n"0","embed_kernel"\n' > "$tmp/bad.csv"
out=$($PY tools/bench/kernel_times.py "$tmp/bad.csv" 2>&1); rc=$?
if [ $rc -ne 0 ] && [ "$(printf '%s\n' "$out" | wc -l)" -eq 1 ] && printf '%s' "$out" | grep -q "no column Grid Size, gpu__time_duration.sum"; then
    pass kernel_times_bad_csv
else
    fail kernel_times_bad_csv "rc $rc: $out"
fi

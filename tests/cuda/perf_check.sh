#!/usr/bin/env bash
# One device call for a performance change: the CUDA op tests, the oracle and
# transaction tests on cuda, per-op timings and the Flash benches (no
# transformers comparison, no prefill). Logs to $OUT.
set -u
B=${1:-build}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
"$B/tests/test_cuda_ops" 2>&1 | tee "$OUT/check_tests.log" | grep -v "^PASS"
DSV4_TEST_DEVICE=cuda "$B/tests/test_oracle" 2>&1 | tee -a "$OUT/check_tests.log" | tail -2
DSV4_TEST_DEVICE=cuda "$B/tests/test_txn" 2>&1 | tee -a "$OUT/check_tests.log" | tail -2
"$B/tests/bench_ops" matmul 2>&1 | tee "$OUT/check_ops.txt"
"$B/tests/bench_ops" moe 2>&1 | tee -a "$OUT/check_ops.txt"
"$B/tests/bench_ops" small 2>&1 | tee -a "$OUT/check_ops.txt"
"$B/dsv4" bench --device cuda --synthetic flash --layers 4 --experts 16 --contexts 0,32768 \
    --prefill 0 --decode 32 --lanes 1,2,4,8 2>&1 | tee "$OUT/check_flash4x16.txt"
"$B/dsv4" bench --device cuda --synthetic flash --layers 2 --experts 256 --contexts 0 \
    --prefill 0 --decode 32 --lanes 1,2,4,8 2>&1 | tee "$OUT/check_flash2x256.txt"

#!/usr/bin/env bash
# One device call for the weight-format kernels: CUDA op tests (every format
# against the CPU, bitwise row-count invariance), the oracle fixtures and
# transactions on cuda (chunking bitwise), per-op timings at Flash shapes
# (BF16/FP8/MXFP4 GEMV GB/s, 4096^3 prefill TFLOP/s, MoE) and the 4-layer
# Flash bench. usage: format_check.sh BIN_DIR (dsv4 and tests/*); logs to $OUT.
set -u
B=${1:-build}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
echo "== op tests"; timeout 150 "$B/tests/test_cuda_ops" > "$OUT/cuda_ops.log" 2>&1; echo "rc=$?"
grep -v '^PASS' "$OUT/cuda_ops.log"; echo "[$(( $(date +%s) - t0 )) s]"
echo "== oracle + txn on cuda"
DSV4_TEST_DEVICE=cuda timeout 90 "$B/tests/test_oracle" > "$OUT/tests.log" 2>&1; echo "oracle rc=$?"
DSV4_TEST_DEVICE=cuda timeout 90 "$B/tests/test_txn" >> "$OUT/tests.log" 2>&1; echo "txn rc=$?"
grep -E "FAIL|passed" "$OUT/tests.log" | head -20; echo "[$(( $(date +%s) - t0 )) s]"
echo "== ops"
timeout 120 "$B/tests/bench_ops" matmul,moe,prefill > "$OUT/ops.txt" 2>&1; echo "rc=$?"; cat "$OUT/ops.txt"
echo "[$(( $(date +%s) - t0 )) s]"
echo "== bench flash 4x16 bf16"
timeout 120 "$B/dsv4" bench --device cuda --synthetic flash --layers 4 --experts 16 --contexts 0 --prefill 512 \
    --decode 32 --lanes 1,4 > "$OUT/bench.txt" 2>&1; echo "rc=$?"; cat "$OUT/bench.txt" | head -40
echo "[$(( $(date +%s) - t0 )) s]"

#!/usr/bin/env bash
# One device call for the weight-format kernels: CUDA op tests (every format
# against the CPU, bitwise row-count invariance), the oracle fixtures and
# transactions on cuda (chunking bitwise), per-op timings at Flash shapes
# (BF16/FP8/MXFP4 GEMV GB/s, 4096^3 prefill TFLOP/s, MoE) and the 4-layer
# Flash bench. usage: format_check.sh BIN_DIR (dsv4 and tests/*); logs to $OUT.
# TUNES (optional): DSV4_TC_TUNE values to time the tensor-core instances with.
set -u
B=${1:-build}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
t0=$(date +%s)
for tune in ${TUNES:-0,0}; do
    echo "== op tests (DSV4_TC_TUNE=$tune)"
    DSV4_TC_TUNE=$tune timeout 150 "$B/tests/test_cuda_ops" > "$OUT/cuda_ops.$tune.log" 2>&1; echo "rc=$?"
    grep -v '^PASS' "$OUT/cuda_ops.$tune.log"
done
echo "[$(( $(date +%s) - t0 )) s]"
echo "== oracle + txn on cuda"
DSV4_TEST_DEVICE=cuda timeout 90 "$B/tests/test_oracle" > "$OUT/tests.log" 2>&1; echo "oracle rc=$?"
DSV4_TEST_DEVICE=cuda timeout 90 "$B/tests/test_txn" >> "$OUT/tests.log" 2>&1; echo "txn rc=$?"
grep -E "FAIL|passed" "$OUT/tests.log" | head -20; echo "[$(( $(date +%s) - t0 )) s]"
for tune in ${TUNES:-0,0}; do
    echo "== ops (DSV4_TC_TUNE=$tune)"
    DSV4_TC_TUNE=$tune timeout 120 "$B/tests/bench_ops" matmul,prefill > "$OUT/ops.$tune.txt" 2>&1; echo "rc=$?"
    grep -E "T=1 |T=4 |TFLOP" "$OUT/ops.$tune.txt"
done
timeout 60 "$B/tests/bench_ops" moe > "$OUT/moe.txt" 2>&1; cat "$OUT/moe.txt"
echo "[$(( $(date +%s) - t0 )) s]"
for tune in ${BENCH_TUNES:-0,0}; do
    echo "== bench flash 4x16 bf16 (DSV4_TC_TUNE=$tune)"
    DSV4_TC_TUNE=$tune timeout 120 "$B/dsv4" bench --device cuda --synthetic flash --layers 4 --experts 16 --contexts 0 \
        --prefill 512 --decode 32 --lanes 1,4 > "$OUT/bench.$tune.txt" 2>&1; echo "rc=$?"; head -12 "$OUT/bench.$tune.txt"
done
echo "[$(( $(date +%s) - t0 )) s]"

#!/usr/bin/env bash
# The device run behind docs/PERFORMANCE.md and the GPU acceptance points:
# oracle fixtures and transactions on CUDA, then the benchmarks. Logs to $OUT.
set -u
B=${1:-build}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/gpu.txt"
git rev-parse --short HEAD 2>/dev/null | tee -a "$OUT/gpu.txt"
echo "== oracle fixtures and transactions on cuda"
DSV4_TEST_DEVICE=cuda "$B/tests/test_oracle" 2>&1 | tee "$OUT/tests.log"
DSV4_TEST_DEVICE=cuda "$B/tests/test_txn" 2>&1 | tee -a "$OUT/tests.log"
DSV4_BIN="$B/dsv4" DSV4_GEN_DEVICE=cuda bash tests/cli/generate_batch.sh 2>&1 | tee -a "$OUT/tests.log"
echo "== bench: Flash shapes, 4 layers, 16 experts"
"$B/dsv4" bench --device cuda --synthetic flash --layers 4 --experts 16 --contexts 0,4096,32768,131072 \
    --prefill 4096 --decode 32 --hf-compare --lanes 1,2,4,8 2>&1 | tee "$OUT/bench_flash4x16.txt"
echo "== bench: Flash shapes, 2 layers, all 256 experts (batched lanes)"
"$B/dsv4" bench --device cuda --synthetic flash --layers 2 --experts 256 --contexts 0 \
    --prefill 0 --decode 32 --lanes 1,2,4,8 2>&1 | tee "$OUT/bench_flash2x256.txt"

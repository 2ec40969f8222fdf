#!/usr/bin/env bash
# The device run behind docs/PERFORMANCE.md and the GPU acceptance points, in
# one call: build for sm_90a, CUDA op tests (every weight format against the
# CPU, bitwise row-count invariance), the oracle fixtures (the GGUF ones also
# through dsv4 score: chunkings, determinism, graph == eager), transactions,
# the general step, the MTP head and speculative decoding on CUDA; then the
# benchmarks (43-layer FP8/FP4 and GGUF UD-IQ3_XXS-mix synthetic Flash, the
# 4-layer BF16 one for comparison with earlier runs, MTP and DSpark
# speculation) and the server under load.
# usage (on the device, repo root): bash tests/cuda/gpu_suite.sh [tests] [bench] [serve]; logs to $OUT
# (at most 8 files come back).
set -u
# parts: tests, bench, serve (default all three; one device call is limited to
# 10 minutes, so the server part can run as a call of its own)
PARTS=${*:-tests bench serve}
want() { case " $PARTS " in *" $1 "*) return 0 ;; esac; return 1; }
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; cat COMMIT 2>/dev/null; } | tee "$OUT/gpu.txt"
# demo-fp8: the FP8/FP4 demo weights test_oracle's demo-fp8 fixture needs (numpy: the device's python3)
make -j16 all build/tests/test_oracle build/tests/test_txn build/tests/test_step build/tests/test_mtp \
    build/tests/test_spec build/tests/test_dspark build/tests/test_cuda_ops build/tests/test_gg_decode build/tests/test_gg_tc build/tests/test_state_rows build/tests/test_tile_layout build/tests/bench_ops demo-fp8 \
    PYTHON=python3 > "$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; exit 1; }
el
want tests && {
    echo "== cuda op tests"; timeout 150 build/tests/test_cuda_ops 2>&1 | grep -v '^PASS'
    echo "== GGUF block decoders, tensor-core staging, packed-row readers, prompt tile layout (host)"
    for t in gg_decode gg_tc state_rows tile_layout; do build/tests/test_$t 2>&1 | grep -v '^PASS'; done
    for t in oracle txn step mtp spec dspark; do
        echo "== test_$t on cuda"; DSV4_TEST_DEVICE=cuda timeout 150 build/tests/test_$t 2>&1 | grep -v '^PASS'
    done
    echo "== GGUF fixtures through dsv4 score on cuda"
    timeout 150 bash tests/cuda/check_fixtures.sh build/dsv4 /tmp/fx-gguf tests/fixtures/gguf-*/ 2>&1 | grep -v '^PASS'
    echo "== generate --batch on cuda"
    DSV4_BIN=build/dsv4 DSV4_GEN_DEVICE=cuda bash tests/cli/generate_batch.sh 2>&1 | grep -v '^PASS'
} > "$OUT/tests.log" 2>&1
want tests && { cat "$OUT/tests.log"; el; }
want bench && {
    echo "== Flash shapes, 43 layers, 16 experts, FP8 dense + MXFP4 experts"
    timeout 240 build/dsv4 bench --device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 \
        --contexts 0,4096,32768 --prefill 4096 --decode 16 --lanes 1,4,8 2>&1
    echo "== GEMV and MoE per call at Flash shapes: BF16 / FP8 / MXFP4 / GGUF blocks (GB/s at decode)"
    timeout 150 build/tests/bench_ops matmul,moe 2>&1
    echo "== Flash shapes, 43 layers, 16 experts, GGUF UD-IQ3_XXS mix (IQ3_XXS experts, Q8_0 dense, Q6_K head)"
    timeout 300 build/dsv4 bench --device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs \
        --contexts 0,4096,32768 --prefill 4096 --decode 16 --lanes 1,4,8 2>&1
    echo "== the same (FP8/FP4) with MTP speculation, k=1, forced acceptance 0.8"
    timeout 120 build/dsv4 bench --device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 \
        --contexts 0 --prefill 0 --decode 16 --spec mtp:1 --accept 0.8 2>&1
    echo "== the same with Flash-0731's DSpark drafter, k=5, forced acceptance 0.82 (82/67/55/45/37 % per position)"
    timeout 180 build/dsv4 bench --device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 \
        --contexts 0 --prefill 0 --decode 16 --spec dspark:5 --accept 0.82 2>&1
    echo "== Flash shapes, 4 layers, 16 experts, BF16 (earlier runs' shape)"
    timeout 90 build/dsv4 bench --device cuda --synthetic flash --layers 4 --experts 16 --weights bf16 \
        --contexts 0,32768 --prefill 512 --decode 32 --lanes 1,4 2>&1
} > "$OUT/bench.txt" 2>&1
want bench && { cat "$OUT/bench.txt"; el; }
want serve && { OUT="$OUT" bash tests/cuda/serve_load.sh; el; }

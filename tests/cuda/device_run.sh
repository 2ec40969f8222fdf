#!/usr/bin/env bash
# One device session: op tests, fixture checks, decode timing, memcheck.
# Uses binaries from $1 (a build directory). Logs go to $OUT.
set -u
B=${1:-build}; OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
nvidia-smi -L
echo "== op tests"; "$B/tests/test_cuda_ops" 2>&1 | tee "$OUT/unit.log" | grep -v '^PASS'
echo "== fixtures"; tests/cuda/check_fixtures.sh "$B/dsv4" /tmp/fx > "$OUT/fixtures.log" 2>&1
grep -v '^PASS' "$OUT/fixtures.log"
echo "== decode time"
for fx in tests/fixtures/*/; do
    m=$(ls "${fx%/}"/model*.gguf 2>/dev/null | head -1); m=${m:-${fx%/}} # GGUF fixtures: the (first) file
    "$B/tests/decode_time" "$m" cuda 300; DSV4_CUDA_GRAPHS=0 "$B/tests/decode_time" "$m" cuda 300
done 2>&1 | tee "$OUT/decode.log"
echo "== memcheck"
timeout 240 compute-sanitizer --tool memcheck --leak-check full "$B/dsv4" score --model tests/fixtures/tiny-mixed-bf16 \
    --tokens-file tests/fixtures/tiny-mixed-bf16/tokens.txt --chunk 7 --logits-out /tmp/mc.f32 --device cuda \
    > "$OUT/memcheck.log" 2>&1; echo "memcheck rc=$?"; tail -5 "$OUT/memcheck.log"

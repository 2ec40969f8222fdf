#!/usr/bin/env bash
# A/B of a change against an earlier commit on the device, alternating runs
# of the same benches in one call (the device's clocks and the host's
# recording time vary between calls and machines; a ratio measured in one
# call does not).
#
#   here:       tools/bench/ab.sh prepare REV     # REV's sources into ab-base.tgz (ignored: carry it,
#                                                 # with .debs, to the device: the call's 64 MiB
#                                                 # hold the tree, .debs and this archive)
#   the device: tools/bench/ab.sh run [suite|quick] [ops:FILTER] [spec] [prefill]
#       suite      tests/cuda/gpu_suite.sh tests on the working tree first
#       quick      instead of suite, when device time is short (about 2 of its 4 minutes):
#                  test_cuda_ops, then test_step, test_oracle and test_mtp on cuda
#       ops:FILTER build/tests/bench_ops FILTER with both binaries (e.g. ops:matmul:fp8)
#       spec       DSpark k = 5 at P = 0.82 and MTP k = 1 at P = 0.8, context 4096, rows 1/2/6
#       prefill    a 4096-token prompt in one step, with its split by op family (prefill.txt)
#       lanes      batched decode of 1, 4, 8 and 16 lanes at context 0, base then new (lanes.txt)
#       gguf       the GGUF mix (Q8_0 dense, IQ3_XXS experts, Q6_K head): decode at context 0, base and
#                  new twice each, then a 4096-token prompt each (gguf.txt)
# The 43-layer FP8/FP4 synthetic Flash decode at contexts 0 and 4096 always
# runs, base and new twice each. Logs to $OUT (ab.txt, ops.txt, spec.txt,
# prefill.txt, lanes.txt, gguf.txt, suite.txt); ab-base/ and ab-base.tgz are ignored.
set -u
mode=${1:-}; shift || true
case "$mode" in
prepare)
    rev=${1:?usage: tools/bench/ab.sh prepare REV}
    rm -rf ab-base ab-base.tgz && mkdir ab-base
    git archive "$rev" Makefile src include tests/cuda tests/test.h | tar -x -C ab-base
    { git rev-parse --short "$rev"; echo "working tree on $(git rev-parse --short HEAD)$(git diff --quiet HEAD || echo ' with changes')"; } > ab-base/REV
    tar -czf ab-base.tgz ab-base && rm -rf ab-base
    echo "ab-base.tgz: $(git rev-parse --short "$rev")"
    exit 0 ;;
run) ;;
*) echo "usage: tools/bench/ab.sh prepare REV | run [suite|quick] [ops:FILTER] [spec] [prefill] [lanes] [gguf]" >&2; exit 2 ;;
esac
[ -f ab-base.tgz ] || { echo "ab.sh: no ab-base.tgz (run 'tools/bench/ab.sh prepare REV' first)" >&2; exit 1; }
# a warm machine keeps the base's build of an earlier call for the same archive
tar -xzOf ab-base.tgz ab-base/REV | cmp -s - ab-base/REV 2>/dev/null || { rm -rf ab-base && tar -xzf ab-base.tgz; }
[ -f .debs/use-debs.sh ] && source .debs/use-debs.sh
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
{ nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader; echo "base $(head -1 ab-base/REV)"; sed -n 2p ab-base/REV; } | tee "$OUT/gpu.txt"
(cd ab-base && make -j6 build/dsv4 build/tests/bench_ops > /tmp/ab_base_build.log 2>&1) &
suite=0; quick=0; ops=; spec=0; prefill=0; lanes=0; gguf=0
for a in "$@"; do
    case "$a" in suite) suite=1 ;; quick) quick=1 ;; ops:*) ops=${a#ops:} ;; spec) spec=1 ;; prefill) prefill=1 ;; lanes) lanes=1 ;; gguf) gguf=1 ;;
        *) echo "ab.sh: unknown part $a" >&2; exit 2 ;; esac
done
if [ $suite = 1 ]; then
    timeout 330 bash tests/cuda/gpu_suite.sh tests > "$OUT/suite.txt" 2>&1
    grep -E "FAIL|passed|failed" "$OUT/suite.txt" | head -30
elif [ $quick = 1 ]; then
    make -j10 build/dsv4 build/tests/bench_ops build/tests/test_cuda_ops build/tests/test_step build/tests/test_oracle \
        build/tests/test_mtp demo-fp8 PYTHON=python3 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
    { timeout 120 build/tests/test_cuda_ops 2>&1 | grep -v '^PASS'
      for t in step oracle mtp; do
          echo "== test_$t on cuda"; DSV4_TEST_DEVICE=cuda timeout 120 build/tests/test_$t 2>&1 | grep -v '^PASS'
      done; } > "$OUT/tests.log" 2>&1
    grep -E "FAIL|passed|failed|==" "$OUT/tests.log" | head -30
else
    make -j10 build/dsv4 build/tests/bench_ops > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
make -j10 build/tests/bench_ops > /dev/null 2>&1
wait
[ -x ab-base/build/dsv4 ] || { tail -20 /tmp/ab_base_build.log; exit 1; }
el
bin() { if [ "$1" = base ]; then echo ab-base/build; else echo build; fi; }
if [ -n "$ops" ]; then
    for v in base new; do echo "== $v"; timeout 120 "$(bin $v)/tests/bench_ops" "$ops" 2>&1 | grep -v '^#'; done | tee "$OUT/ops.txt"
    el
fi
F="--device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 --prefill 0"
for v in base new base new; do
    echo "== $v"; timeout 60 "$(bin $v)/dsv4" bench $F --decode 32 --contexts 0,4096 2>&1 | grep -A2 '^context' | head -3
done | tee "$OUT/ab.txt"
el
if [ $spec = 1 ]; then
    for v in base new; do
        echo "== $v dspark:5"
        timeout 60 "$(bin $v)/dsv4" bench $F --decode 16 --contexts 4096 --spec dspark:5 --accept 0.82 --rows 1,2,6 2>&1 |
            grep -v '^  \|^#\|decode time'
        echo "== $v mtp:1"
        timeout 60 "$(bin $v)/dsv4" bench $F --decode 16 --contexts 4096 --spec mtp:1 --accept 0.8 2>&1 |
            grep -v '^  \|^#\|decode time'
    done | tee "$OUT/spec.txt"
    el
fi
if [ $prefill = 1 ]; then
    P="--device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 --prefill 4096 --decode 2 --contexts 0"
    for v in base new; do
        echo "== $v"; timeout 120 "$(bin $v)/dsv4" bench $P 2>&1 | grep -A16 '^prefill'
    done | tee "$OUT/prefill.txt"
    el
fi
if [ $lanes = 1 ]; then
    for v in base new; do
        echo "== $v"; timeout 120 "$(bin $v)/dsv4" bench $F --decode 16 --contexts 0 --lanes 1,4,8,16 2>&1 | grep -A5 '^lanes'
    done | tee "$OUT/lanes.txt"
    el
fi
if [ $gguf = 1 ]; then
    G="--device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs --contexts 0"
    { for v in base new base new; do
          echo "== $v"; timeout 60 "$(bin $v)/dsv4" bench $G --prefill 0 --decode 24 2>&1 | grep -A1 '^context' | tail -1
      done
      for v in base new; do
          echo "== $v prefill"; timeout 120 "$(bin $v)/dsv4" bench $G --prefill 4096 --decode 2 2>&1 | grep '^prefill'
      done; } | tee "$OUT/gguf.txt"
    el
fi

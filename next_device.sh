# EXPERIMENT (not for main): next/int-tile-rows against main, in one call.
#   here: tools/bench/ab.sh prepare main     (ab-base.tgz: main)
# run: carry [".debs", "ab-base.tgz"]; about 5 minutes on an H100 (timeout_s 420)
# Steps of 2..8 token rows of GGUF Q8_0/IQ3_XXS products and experts go to the
# integer tile kernels (one token tile) instead of the GEMV, which decoded every
# weight block again for each token row (a 6-row step 3.5x a 1-row step).
set -u
source .debs/use-debs.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
tar -xzOf ab-base.tgz ab-base/REV | cmp -s - ab-base/REV 2>/dev/null || { rm -rf ab-base && tar -xzf ab-base.tgz; }
(cd ab-base && make -j6 build/dsv4 > /tmp/base_build.log 2>&1; echo "base built rc=$?") &
make -j10 build/dsv4 build/tests/test_cuda_ops build/tests/test_step build/tests/test_oracle demo-fp8 PYTHON=python3 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
el
timeout 120 build/tests/test_cuda_ops > $OUT/cuda_ops.txt 2>&1; echo "test_cuda_ops rc=$?"; grep -v '^PASS' $OUT/cuda_ops.txt | tail -5
{ for t in step oracle; do echo "== test_$t on cuda"; DSV4_TEST_DEVICE=cuda timeout 120 build/tests/test_$t 2>&1 | grep -v '^PASS'; done; } > $OUT/tests.log 2>&1
grep -E "FAIL|failed" $OUT/tests.log | head
wait; el
G="--device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs --contexts 0"
bin() { if [ "$1" = base ]; then echo ab-base/build/dsv4; else echo build/dsv4; fi; }
for v in base new base new; do
    echo "== $v rows"; timeout 60 $(bin $v) bench $G --prefill 0 --decode 8 --rows 1,2,6 2>&1 | grep -A4 '^steps of several' | tail -3
done 2>&1 | tee $OUT/ab.txt
for v in base new; do
    echo "== $v lanes"; timeout 90 $(bin $v) bench $G --prefill 0 --decode 8 --lanes 1,4,8 2>&1 | grep -iA4 'lanes' | head -6
done 2>&1 | tee -a $OUT/ab.txt
el

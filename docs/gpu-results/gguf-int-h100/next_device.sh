# EXPERIMENT (not for main): the branch next/int-iq3 (with next/int-rows under it) tested and timed against main, in one call.
#   here: tools/bench/ab.sh prepare main          (ab-base.tgz: main)
#         rm -rf ab-mid && mkdir ab-mid && git archive next/int-rows Makefile src include tests/cuda tests/test.h | tar -x -C ab-mid \
#           && echo int-rows > ab-mid/REV && tar -czf ab-mid.tgz ab-mid && rm -rf ab-mid
#                                              (ab-mid.tgz: Q8_0 GEMV rows + the GGUF head on the GEMV)
# run: carry [".debs", "ab-base.tgz", "ab-mid.tgz"]; about 8 minutes on an H100 (timeout_s 600)
set -u
source .debs/use-debs.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
for v in base mid; do
  tar -xzOf ab-$v.tgz ab-$v/REV | cmp -s - ab-$v/REV 2>/dev/null || { rm -rf ab-$v && tar -xzf ab-$v.tgz; }
  head -1 ab-$v/REV
  (cd ab-$v && make -j4 build/dsv4 > /tmp/${v}_build.log 2>&1; echo "$v built rc=$?") &
done
make -j8 build/dsv4 build/tests/test_cuda_ops build/tests/test_step build/tests/test_oracle build/tests/test_mtp demo-fp8 PYTHON=python3 > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
el
timeout 120 build/tests/test_cuda_ops > $OUT/cuda_ops.txt 2>&1; echo "test_cuda_ops rc=$?"; grep -v '^PASS' $OUT/cuda_ops.txt | tail -8
{ for t in step oracle mtp; do echo "== test_$t on cuda"; DSV4_TEST_DEVICE=cuda timeout 90 build/tests/test_$t 2>&1 | grep -v '^PASS'; done; } > $OUT/tests.log 2>&1
grep -E "FAIL|passed|failed|==" $OUT/tests.log | head -12
wait; el
F="--device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 --contexts 0"
G="--device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs --contexts 0"
bin() { case $1 in base) echo ab-base/build/dsv4 ;; mid) echo ab-mid/build/dsv4 ;; *) echo build/dsv4 ;; esac; }
for i in 1 2; do
  for v in base mid new; do
    echo "== $v gguf"; timeout 45 $(bin $v) bench $G --prefill 0 --decode 24 2>&1 | grep -A1 '^context' | tail -1
  done
done 2>&1 | tee $OUT/ab.txt
for v in base new; do
  echo "== $v fp8"; timeout 45 $(bin $v) bench $F --prefill 0 --decode 24 2>&1 | grep -A1 '^context' | tail -1
  echo "== $v gguf rows 1,2,6"; timeout 60 $(bin $v) bench $G --prefill 0 --decode 8 --rows 1,2,6 2>&1 | grep -A5 '^steps of several rows' | tail -4
  echo "== $v gguf prefill"; timeout 60 $(bin $v) bench $G --prefill 4096 --decode 2 2>&1 | grep '^prefill'
done 2>&1 | tee -a $OUT/ab.txt
el
timeout 100 build/dsv4 bench $G --prefill 4096 --decode 16 > $OUT/gguf_full.txt 2>&1; grep -v '^  ' $OUT/gguf_full.txt | sed -n 3,8p; el

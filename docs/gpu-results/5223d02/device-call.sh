# lean device check: build, op tests, step/oracle/mtp on cuda, decode + prefill A/B against ab-base
source .debs/use-debs.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT; t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee $OUT/gpu.txt
rm -rf ab-base && tar -xzf ab-base.tgz && (cd ab-base && make -j6 build/dsv4 > /tmp/b.log 2>&1) &
make -j12 build/dsv4 build/tests/test_cuda_ops build/tests/test_step build/tests/test_oracle build/tests/test_mtp demo-fp8 PYTHON=python3 > $OUT/build.log 2>&1 || { tail -30 $OUT/build.log; exit 1; }
el
{ timeout 120 build/tests/test_cuda_ops | grep -v ^PASS; for t in step oracle mtp; do echo "== test_$t on cuda"; DSV4_TEST_DEVICE=cuda timeout 120 build/tests/test_$t | grep -v ^PASS; done; } 2>&1 | tee $OUT/tests.log
el; wait; [ -x ab-base/build/dsv4 ] || { tail -20 /tmp/b.log; exit 1; }
F="--device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4"
for v in ab-base/build build ab-base/build build; do echo "== $v"; timeout 40 $v/dsv4 bench $F --prefill 0 --decode 32 --contexts 0,4096 2>&1 | grep -A2 ^context; done | tee $OUT/ab.txt
el
for v in ab-base/build build; do echo "== $v"; timeout 60 $v/dsv4 bench $F --prefill 4096 --decode 2 --contexts 0 2>&1 | grep -A16 ^prefill; done | tee $OUT/prefill.txt
el

set -u
source .debs/use-debs.sh
OUT=${OUT:-/tmp/out}; mkdir -p $OUT
t0=$(date +%s); el() { echo "[$(( $(date +%s) - t0 )) s]"; }
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1); echo "$gpu" | tee $OUT/gpu.txt
make -j16 build/dsv4 build/tests/test_cuda_ops build/tests/test_oracle demo-fp8 PYTHON=python3 > $OUT/build.log 2>&1 || { tail -20 $OUT/build.log; exit 1; }
el
timeout 60 build/tests/test_cuda_ops > $OUT/cuda_ops.txt 2>&1; echo "test_cuda_ops rc=$?"; grep -v '^PASS' $OUT/cuda_ops.txt | tail -5
DSV4_TEST_DEVICE=cuda timeout 90 build/tests/test_oracle > $OUT/oracle.txt 2>&1; echo "test_oracle rc=$?"; grep -E "FAIL|passed|failed" $OUT/oracle.txt | head -5
el
G="--device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs --contexts 0"
timeout 60 build/dsv4 bench $G --prefill 0 --decode 8 --rows 1,2,6 2>&1 | grep -A4 '^steps of several' | tee $OUT/rows.txt
el
case "$gpu" in *H200*) timeout 80 build/dsv4 bench $G --prefill 4096 --decode 16 > $OUT/gguf_full.txt 2>&1; grep -v '^  ' $OUT/gguf_full.txt | head -12; el ;; esac

# EXPERIMENT (not for main): next/combined against main in one call: the
# three waiting branches together (next/hc-post-epilogue, next/f8-tiles,
# next/int-tile-rows; the f8 tiles given the hc_post epilogue where they met).
#   here: tools/bench/ab.sh prepare main      (ab-base.tgz: main)
# run: carry [".debs", "ab-base.tgz"]; about 8 minutes on an H100 (timeout_s 600)
# What to read: tests.log / the test_cuda_ops line (test_matmul_post, the MoE
# cases with the epilogue, test_matmul_fp8in's 70-row tiles, test_int_matmul_bits);
# ab.txt (FP8/FP4 decode: the epilogues), prefill.txt (the f8 tiles), gguf.txt
# and rows.txt (GGUF steps of 2-8 rows on the integer tiles).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
bash tools/bench/ab.sh run quick prefill gguf
G="--device cuda --synthetic flash --layers 43 --experts 16 --weights gguf-iq3_xxs --contexts 0"
for v in base new; do
    b=build/dsv4; [ $v = base ] && b=ab-base/build/dsv4
    echo "== $v gguf rows 1,2,6"; timeout 60 $b bench $G --prefill 0 --decode 8 --rows 1,2,6 2>&1 | grep -A4 '^steps of several' | tail -3
done 2>&1 | tee "$OUT/rows.txt"

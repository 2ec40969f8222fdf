#!/usr/bin/env bash
# tools/quant: the element codecs round as the formats define (nearest, ties
# to even; exact power-of-two scales); a BF16 official checkpoint converted to
# the released FP8/FP4 layout loads in the engine with the tensor types the
# released checkpoints have, and its exact BF16 dequantization
# (tools/quant/dequantize.py) gives the engine the same logits bit for bit (the
# engine's C decoder and the numpy one agree); bad sources get a one-line error.
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
FX=tests/fixtures/tiny-official-sharded
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# Values from the format definitions: e4m3fn 1.0 = 0x38, 1.125 = 0x39, 1.25 = 0x3a,
# 448 = 0x7e (largest), 2^-9 = 0x01 (smallest subnormal); E2M1 codes 0..7 =
# 0, .5, 1, 1.5, 2, 3, 4, 6 with bit 3 the sign.
out=$($PY - 2>&1 <<'EOF'
import sys
import numpy as np
sys.path.insert(0, "tools/quant")
import fp8_fp4 as q
f = lambda *v: np.array(v, np.float32)
checks = [
    ("e4m3 ties to even", q.e4m3_encode(f(1.0625, 1.1875, 2.0 ** -10, 3 * 2.0 ** -10)).tolist(), [0x38, 0x3a, 0x00, 0x02]),
    ("e4m3 range and sign", q.e4m3_encode(f(448, -448, 2.0 ** -9, -0.0, 0.0)).tolist(), [0x7e, 0xfe, 0x01, 0x80, 0x00]),
    ("e2m1 ties to even", q.e2m1_encode(f(0.25, 0.75, 1.25, 2.5, 3.5, 5, -1.25, -5)).tolist(), [0, 2, 2, 4, 6, 6, 10, 14]),
    ("e2m1 zero is +0", q.e2m1_encode(f(-0.2, -0.0)).tolist(), [0, 0]),
    ("fp8 exponents", [int(q.fp8_quantize(f(448, 1).reshape(1, 2))[1][0, 0]),
                       int(q.fp8_quantize(f(449, 1).reshape(1, 2))[1][0, 0]),
                       int(q.fp8_quantize(f(0, 0).reshape(1, 2))[1][0, 0])], [0, 1, -22]),
    ("fp4 exponents", [int(q.mxfp4_quantize(np.full((1, 32), v, np.float32))[1][0, 0]) for v in (6, 6.01, 0.75)], [0, 1, -3]),
    ("bf16 rounding", q.f32_to_bf16(f(1 + 2.0 ** -8, 1 + 3 * 2.0 ** -8, -2.5)).tolist(), [0x3f80, 0x3f82, 0xc020]),
]
for name, got, want in checks:
    print(("ok" if got == want else "BAD") + f" {name}: {got} (want {want})")
EOF
)
if [ -n "$out" ] && ! printf '%s\n' "$out" | grep -qv '^ok'; then pass quant_codecs
else fail quant_codecs "$(printf '%s\n' "$out" | grep -v '^ok' | head -5)"; fi

# BF16 official checkpoint -> FP8/FP4 -> BF16 again.
$PY tools/quant/quantize_fp8.py $FX $tmp/q > $tmp/log 2>&1 && $PY tools/quant/dequantize.py $tmp/q $tmp/d >> $tmp/log 2>&1
"$BIN" info --model $tmp/q > $tmp/info 2>&1
types=$(grep '^weights by type' $tmp/info)
if grep -q '"fmt": "e4m3"' $tmp/q/config.json && grep -q '"expert_dtype": "fp4"' $tmp/q/config.json &&
   echo "$types" | grep -q 'F8_E4M3' && echo "$types" | grep -q 'F8_E8M0' && echo "$types" | grep -q 'I8' &&
   echo "$types" | grep -q 'BF16' && echo "$types" | grep -q 'F32' && echo "$types" | grep -q 'I64' &&
   [ -f $tmp/q/model.safetensors.index.json ]; then pass quant_layout
else fail quant_layout "$(cat $tmp/log) $(head -c 600 $tmp/info)"; fi
tok=$(cat $FX/tokens.txt)
"$BIN" score --device cpu --cache exact --model $tmp/q --tokens "$tok" --logits-out $tmp/q.f32 2>>$tmp/log
"$BIN" score --device cpu --cache exact --model $tmp/d --tokens "$tok" --logits-out $tmp/d.f32 2>>$tmp/log
if [ -s $tmp/q.f32 ] && cmp -s $tmp/q.f32 $tmp/d.f32; then pass quant_dequantized_same_logits
else fail quant_dequantized_same_logits "$(tail -c 400 $tmp/log)"; fi

# The conversion is a pure function of its input.
$PY tools/quant/quantize_fp8.py $FX $tmp/q2 > /dev/null 2>&1
same=1
for f in $tmp/q/*; do cmp -s "$f" "$tmp/q2/$(basename "$f")" || same=0; done
if [ $same = 1 ]; then pass quant_deterministic; else fail quant_deterministic "a second conversion differs"; fi

CASE_PREFIX=quant_
. tests/expect_error.sh
case_ hf_names "not an official DeepSeek-V4 tensor name" -- $PY tools/quant/quantize_fp8.py tests/fixtures/tiny-mixed-bf16 $tmp/x
case_ already_quantized "already has a quantization_config" -- $PY tools/quant/quantize_fp8.py tests/fixtures/tiny-fp8-official $tmp/x
case_ no_checkpoint "config.json" -- $PY tools/quant/quantize_fp8.py $tmp/none $tmp/x
case_ same_dir "must differ" -- $PY tools/quant/quantize_fp8.py $FX $FX
mkdir -p $tmp/trunc && cp $FX/config.json $FX/*.safetensors* $tmp/trunc/ && head -c 100 $FX/model-00001-of-00002.safetensors > $tmp/trunc/model-00001-of-00002.safetensors
case_ truncated "not a readable safetensors file" -- $PY tools/quant/quantize_fp8.py $tmp/trunc $tmp/x

#!/usr/bin/env bash
# FP8/MXFP4 checkpoints (the official layout, tests/fixtures/tiny-fp8-official):
# every corruption of a scale grid or a quantized tensor ends with a one-line
# error naming it and a non-zero status (no sanitizer report under ASan);
# the equivalent spellings load and give the same logits bit for bit.
set -u
BIN=${DSV4_BIN:-build/dsv4}
PY=${DSV4_PYTHON:-python3}
FX=tests/fixtures/tiny-fp8-official
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CASE_PREFIX=fp8_
. tests/expect_error.sh

mk() { rm -rf "$tmp/$1"; mkdir -p "$tmp/$1"; cp "$FX"/* "$tmp/$1/"; }
# the shard file holding tensor NAME
shard() { $PY -c "import json,sys; print(json.load(open('$FX/model.safetensors.index.json'))['weight_map'][sys.argv[1]])" "$1"; }
# edit NAME's shard in copy DIR: edit DIR NAME ACTION ARGS...
# (then the index is rebuilt from the shards, so renames and removals stay consistent)
edit() {
    local d=$1 n=$2; shift 2; local f; f=$(shard "$n")
    $PY tests/cli/st_edit.py "$tmp/$d/$f" "$tmp/$d/$f" "$@" && $PY tests/cli/st_reindex.py "$tmp/$d"
}
score() { "$BIN" score --device cpu --model "$1" --tokens-file $FX/tokens.txt --chunk 7 --logits-out "$2"; }

W=layers.1.attn.wq_a            # FP8 [192, 320]: scale grid [2, 3]
E=layers.2.ffn.experts.1.w2     # MXFP4 [320, 64]: I8 [320, 32], scale [320, 2]

mk miss;  edit miss $W.scale rename $W.scale $W.scales
case_ scale_missing "$W.scale" -- score $tmp/miss $tmp/o.f32
mk shp;   edit shp $W.scale shape $W.scale 3,2
case_ scale_misshaped "$W.scale" -- score $tmp/shp $tmp/o.f32
mk sdt;   edit sdt $W.scale dtype $W.scale I8
case_ scale_wrong_dtype "$W.scale' has dtype I8" -- score $tmp/sdt $tmp/o.f32
mk nan;   edit nan $W.scale u8 $W.scale 4 255
case_ scale_nan "$W.scale'\\[1\\]\\[1\\] is NaN" -- score $tmp/nan $tmp/o.f32
mk big;   edit big $W.scale u8 $W.scale 2 250
case_ scale_out_of_range "$W.scale'\\[0\\]\\[2\\] = 2^123 is out of range" -- score $tmp/big $tmp/o.f32
mk enan;  edit enan $E.scale u8 $E.scale 100 255
case_ expert_scale_nan "$E.scale'\\[50\\]\\[0\\] is NaN" -- score $tmp/enan $tmp/o.f32
mk eshp;  edit eshp $E.scale shape $E.scale 320,1
case_ expert_scale_misshaped "$E.scale" -- score $tmp/eshp $tmp/o.f32
mk f32s;  edit f32s $W.scale e8m0_to_f32 $W.scale 3 0.75
case_ f32_scale_not_power_of_two "$W.scale'\\[1\\]\\[0\\] = 0.75 is not a positive power of two" -- score $tmp/f32s $tmp/o.f32
mk f32i;  edit f32i $W.scale e8m0_to_f32 $W.scale 0 inf
case_ f32_scale_inf "$W.scale'\\[0\\]\\[0\\] = inf" -- score $tmp/f32i $tmp/o.f32
mk wshp;  edit wshp $E.weight shape $E.weight 320,64
case_ fp4_weight_misshaped "$E.weight" -- score $tmp/wshp $tmp/o.f32
mk fp4d;  edit fp4d $W.weight dtype $W.weight I8
case_ fp4_in_dense_slot "only routed experts may be FP4" -- score $tmp/fp4d $tmp/o.f32
mk fp8e;  edit fp8e $E.weight dtype $E.weight F8_E4M3
case_ fp8_expert_under_fp4_config "expert_dtype fp4" -- score $tmp/fp8e $tmp/o.f32
mk norm;  edit norm layers.0.attn_norm.weight dtype layers.0.attn_norm.weight F8_E4M3 640
case_ fp8_norm "layers.0.attn_norm.weight' is F8_E4M3; this tensor must be F32/BF16/F16" -- score $tmp/norm $tmp/o.f32
mk noq;   $PY -c "import json; c=json.load(open('$FX/config.json')); del c['quantization_config']; json.dump(c, open('$tmp/noq/config.json','w'))"
case_ no_quantization_config "no quantization_config" -- score $tmp/noq $tmp/o.f32
mk trunc; f=$(shard $W.weight); $PY tests/cli/st_edit.py $FX/$f $tmp/trunc/$f truncate $(( $(stat -c %s $FX/$f) - 100 ))
case_ truncated_shard "$f" -- score $tmp/trunc $tmp/o.f32

# Equivalent spellings: the same logits, bit for bit.
same() { # NAME DIR
    if score "$2" "$tmp/$1.f32" 2>"$tmp/err" && cmp -s "$tmp/ref.f32" "$tmp/$1.f32"; then echo "PASS fp8_$1"
    else echo "FAIL fp8_$1: $(head -c 300 "$tmp/err")"; fi
}
score $FX "$tmp/ref.f32" || echo "FAIL fp8_reference_score"
mk inv;   edit inv $W.scale rename $W.scale $W.weight_scale_inv
same weight_scale_inv_spelling $tmp/inv
mk f32c;  edit f32c $W.scale e8m0_to_f32 $W.scale
same f32_scale_container $tmp/f32c
mk woa;   for l in 0 1 2; do edit woa layers.$l.attn.wo_a.weight fp8_to_bf16 layers.$l.attn.wo_a.weight; done
same wo_a_predequantized_bf16 $tmp/woa

# MTP tensors (with their scales) are kept, not reported as unknown.
mk mtp;   edit mtp $W.weight copy $W.weight mtp.0.attn.wq_a.weight
edit mtp $W.scale copy $W.scale mtp.0.attn.wq_a.scale
info=$("$BIN" info --model $tmp/mtp 2>&1)
if printf '%s' "$info" | grep -q "mtp tensors: *2" && printf '%s' "$info" | grep -q "unknown tensors: *0"; then
    echo "PASS fp8_mtp_tensors_kept"
else
    echo "FAIL fp8_mtp_tensors_kept: $info"
fi
exit 0

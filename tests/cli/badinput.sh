#!/usr/bin/env bash
# Bad input through the whole CLI: each case must end with a one-line error
# naming what is wrong and a non-zero exit status (and no sanitizer report
# when $DSV4_BIN is an ASan/UBSan build).
set -u
BIN=${DSV4_BIN:-build/dsv4}
PY=${DSV4_PYTHON:-python3}
FX=tests/fixtures/tiny-mixed-f32
SH=tests/fixtures/tiny-official-sharded
ST=model.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CASE_PREFIX=badinput_
. tests/expect_error.sh

# copy FIXTURE NAME -> $tmp/NAME (symlinks for big files we do not edit)
mk() { rm -rf "$tmp/$2"; mkdir -p "$tmp/$2"; cp "$1"/* "$tmp/$2/"; }
score() { "$BIN" score --device cpu --model "$1" --tokens 1,2,3,4,5,6,7,8,9 --logits-out "$tmp/out.f32"; }

mk $FX trunc;   $PY tests/cli/st_edit.py $FX/$ST $tmp/trunc/$ST truncate 5000
case_ truncated_file "$ST" -- score $tmp/trunc
mk $FX hdr;     $PY tests/cli/st_edit.py $FX/$ST $tmp/hdr/$ST hdrlen 999999999999
case_ header_length "$ST" -- score $tmp/hdr
mk $FX hdr2;    $PY tests/cli/st_edit.py $FX/$ST $tmp/hdr2/$ST truncate 7
case_ short_header "$ST" -- score $tmp/hdr2
mk $FX json;    { head -c 8 $FX/$ST; printf '{"x": [1, 2'; } > $tmp/json/$ST
case_ broken_header_json "$ST" -- score $tmp/json
mk $FX oob;     $PY tests/cli/st_edit.py $FX/$ST $tmp/oob/$ST offsets model.norm.weight 0 999999999
case_ offsets_out_of_range "model.norm.weight" -- score $tmp/oob
mk $FX ovl;     $PY tests/cli/st_edit.py $FX/$ST $tmp/ovl/$ST offsets model.norm.weight 0 256
case_ overlapping_tensors "overlap" -- score $tmp/ovl
mk $FX dt;      $PY tests/cli/st_edit.py $FX/$ST $tmp/dt/$ST dtype model.norm.weight I32
case_ wrong_dtype "model.norm.weight" -- score $tmp/dt
mk $FX fp8;     $PY tests/cli/st_edit.py $FX/$ST $tmp/fp8/$ST dtype model.layers.0.attn.wq_a.weight F8_E4M3 32,256
case_ fp8_without_quantization_config "no quantization_config" -- score $tmp/fp8
mk $FX shp;     $PY tests/cli/st_edit.py $FX/$ST $tmp/shp/$ST shape model.layers.2.attn.wkv.weight 32,128
case_ wrong_shape "model.layers.2.attn.wkv.weight" -- score $tmp/shp
mk $FX miss;    $PY tests/cli/st_edit.py $FX/$ST $tmp/miss/$ST rename model.layers.3.ffn_norm.weight model.layers.3.ffn_nrm.weight
case_ missing_tensor "layers.3.ffn_norm.weight" -- score $tmp/miss
mk $FX hash;    $PY tests/cli/st_edit.py $FX/$ST $tmp/hash/$ST i64 model.layers.1.ffn.gate.tid2eid 17 99
case_ tid2eid_out_of_range "tid2eid" -- score $tmp/hash
mk $SH shard;   rm $tmp/shard/model-00002-of-00002.safetensors
case_ missing_shard "model-00002-of-00002.safetensors" -- score $tmp/shard
mk $FX cfg1;    printf '{"hidden_size": 64,' > $tmp/cfg1/config.json
case_ config_broken_json "config.json" -- score $tmp/cfg1
mk $FX cfg2;    sed 's/"num_attention_heads": *4/"num_attention_heads": -4/' $FX/config.json > $tmp/cfg2/config.json
case_ config_out_of_range "num_attention_heads" -- score $tmp/cfg2
mk $FX cfg3;    sed 's/"num_hidden_layers": *5/"num_hidden_layers": 6/' $FX/config.json > $tmp/cfg3/config.json
case_ config_contradictory "layer_types" -- score $tmp/cfg3
mk $FX cfg4;    sed 's/"hidden_size": *64/"hidden_size": 128/' $FX/config.json > $tmp/cfg4/config.json
case_ config_shape_mismatch "shape" -- score $tmp/cfg4
mk $FX cfg5;    rm $tmp/cfg5/config.json
case_ config_missing "config.json" -- score $tmp/cfg5
case_ no_model_dir "does-not-exist" -- score $tmp/does-not-exist
case_ token_out_of_range "outside the vocabulary" -- "$BIN" score --device cpu --model $FX --tokens 1,256 --logits-out $tmp/o.f32
case_ token_negative "outside the vocabulary" -- "$BIN" generate --device cpu --model $FX --tokens 5,-1 -n 2
case_ token_not_integer "not an integer" -- "$BIN" generate --device cpu --model $FX --tokens 5,x7 -n 2
case_ tokens_file_missing "nope.txt" -- "$BIN" generate --device cpu --model $FX --tokens-file $tmp/nope.txt -n 2
# Unknown tensors are reported (a warning naming them), not fatal; mtp.* is known.
mk $FX unk;     $PY tests/cli/st_edit.py $FX/$ST $tmp/unk/$ST copy model.norm.weight model.layers.0.mystery.weight
$PY tests/cli/st_edit.py $tmp/unk/$ST $tmp/unk/$ST copy model.norm.weight mtp.0.enorm.weight
err=$("$BIN" generate --device cpu --model $tmp/unk --tokens 1,2 -n 2 2>&1 >/dev/null); rc=$?
info=$("$BIN" info --model $tmp/unk 2>/dev/null)
if [ $rc -eq 0 ] && printf '%s' "$err" | grep -q "unknown tensor 'model.layers.0.mystery.weight'" &&
   ! printf '%s' "$err" | grep -q mtp && printf '%s' "$info" | grep -q "mtp tensors: *1" &&
   printf '%s' "$info" | grep -q "unknown tensors: *1"; then
    echo "PASS badinput_unknown_tensor_reported"
else
    echo "FAIL badinput_unknown_tensor_reported: rc=$rc $err"
fi
exit 0

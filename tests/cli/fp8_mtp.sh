#!/usr/bin/env bash
# An FP8 checkpoint with an MTP head in the released layout (e_proj/h_proj
# FP8 with scale grids, spec §5.2; tests/cli/st_add_mtp.py builds it from
# tests/fixtures/tiny-fp8-official): the head binds through the catalog,
# speculative decoding prints what plain greedy decoding prints under both
# cache numerics, and a missing or non-FP8-able MTP tensor is a one-line error.
set -u
BIN=${DSV4_BIN:-build/dsv4}
PY=${DSV4_PYTHON:-python3}
FX=tests/fixtures/tiny-fp8-official
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CASE_PREFIX=fp8_mtp_
. tests/expect_error.sh

mk() { rm -rf "$tmp/$1"; mkdir -p "$tmp/$1"; cp "$FX"/* "$tmp/$1/"; $PY tests/cli/st_add_mtp.py "$tmp/$1"; }
gen() { "$BIN" generate --device cpu --model $tmp/m --tokens-file $FX/tokens.txt -n 24 "$@"; }

mk m
info=$("$BIN" info --model $tmp/m 2>&1)
if printf '%s' "$info" | grep -q "mtp head: *yes" && printf '%s' "$info" | grep -q "unknown tensors: *0"; then
    echo "PASS fp8_mtp_head_bound"
else echo "FAIL fp8_mtp_head_bound: $info"; fi

for c in exact official; do
    plain=$(gen --cache $c 2>$tmp/err)
    ok=1
    for k in mtp mtp:3; do
        got=$(gen --cache $c --spec $k 2>>$tmp/err)
        [ -n "$plain" ] && [ "$got" = "$plain" ] || ok=0
    done
    if [ $ok = 1 ] && grep -q "drafts kept" $tmp/err; then echo "PASS fp8_mtp_spec_equals_plain_$c"
    else echo "FAIL fp8_mtp_spec_equals_plain_$c: $(head -c 300 $tmp/err)"; fi
done

# the MTP tensors go through the same checks as the main model's
shard() { $PY -c "import json,sys; print(json.load(open('$1/model.safetensors.index.json'))['weight_map'][sys.argv[1]])" "$2"; }
edit() { # DIR NAME ACTION ARGS...
    local d=$tmp/$1 n=$2; shift 2; local f; f=$(shard "$d" "$n")
    $PY tests/cli/st_edit.py "$d/$f" "$d/$f" "$@" && $PY tests/cli/st_reindex.py "$d"
}
score() { "$BIN" score --device cpu --model "$1" --tokens-file $FX/tokens.txt --chunk 7 --logits-out "$tmp/o.f32"; }
mk miss;  edit miss mtp.0.e_proj.scale rename mtp.0.e_proj.scale mtp.0.e_proj.scales
case_ scale_missing "mtp.0.e_proj.scale' is missing" -- score $tmp/miss
mk nan;   edit nan mtp.0.h_proj.scale u8 mtp.0.h_proj.scale 4 255
case_ scale_nan "mtp.0.h_proj.scale'\\[1\\]\\[1\\] is NaN" -- score $tmp/nan
mk norm;  edit norm mtp.0.enorm.weight dtype mtp.0.enorm.weight F8_E4M3 640
case_ fp8_norm "mtp.0.enorm.weight' is F8_E4M3; this tensor must be F32/BF16/F16" -- score $tmp/norm
mk gone;  edit gone mtp.0.hnorm.weight rename mtp.0.hnorm.weight mtp.0.hnorm.weights
case_ tensor_missing "missing tensor 'mtp.0.hnorm.weight'" -- score $tmp/gone
exit 0

#!/usr/bin/env bash
# dsv4 generate --batch: lanes decoded together print exactly what --serial
# and single-prompt runs print; a step past --step-deadline-ms is refused.
set -u
BIN=${DSV4_BIN:-build/dsv4}
FX=tests/fixtures/tiny-mixed-f32
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
printf '1,2,3\n5,6,7,8,9,10,11,12,13,14,15,16\n\n42\n%s\n' "$(seq -s, 1 37)" > $tmp/p.txt
"$BIN" generate --device ${DSV4_GEN_DEVICE:-cpu} --model $FX --batch $tmp/p.txt -n 20 > $tmp/batch 2>$tmp/err1
"$BIN" generate --device ${DSV4_GEN_DEVICE:-cpu} --model $FX --batch $tmp/p.txt -n 20 --serial > $tmp/serial 2>$tmp/err2
if [ "$(wc -l < $tmp/batch)" -eq 4 ] && [ "$(grep -c '^[0-9][0-9,]*$' $tmp/batch)" -eq 4 ] && cmp -s $tmp/batch $tmp/serial; then
    echo "PASS generate_batch_equals_serial"
else
    echo "FAIL generate_batch_equals_serial: $(cat $tmp/err1 $tmp/err2 | head -2)"
fi
single=$("$BIN" generate --device ${DSV4_GEN_DEVICE:-cpu} --model $FX --tokens 42 -n 20)
if [ "$single" = "$(sed -n 3p $tmp/batch)" ]; then echo "PASS generate_batch_equals_single"
else echo "FAIL generate_batch_equals_single: '$single' vs '$(sed -n 3p $tmp/batch)'"; fi
err=$("$BIN" generate --device ${DSV4_GEN_DEVICE:-cpu} --model $FX --batch $tmp/p.txt -n 5 --step-deadline-ms 0.000001 2>&1 >/dev/null); rc=$?
if [ $rc -ne 0 ] && printf '%s' "$err" | grep -q "deadline"; then echo "PASS generate_step_deadline"
else echo "FAIL generate_step_deadline: rc=$rc $err"; fi

#!/usr/bin/env bash
# Runs every test binary given on the command line, echoes their output and
# closes with the summary line "N passed, N failed".
set -u
pass=0; fail=0
for t in "$@"; do
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out"
    p=$(printf '%s\n' "$out" | grep -c '^PASS ')
    f=$(printf '%s\n' "$out" | grep -c '^FAIL ')
    pass=$((pass + p)); fail=$((fail + f))
    if [ $rc -ne 0 ] && [ "$f" -eq 0 ]; then
        echo "FAIL $(basename "$t"): exited with status $rc"
        fail=$((fail + 1))
    fi
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

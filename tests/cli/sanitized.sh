#!/usr/bin/env bash
# Loader and parser tests again, built with AddressSanitizer + UBSan
# (make test builds $DSV4_ASAN_BUILD first). Test names get an "asan_" prefix.
set -u
B=${DSV4_ASAN_BUILD:-build-asan}
if [ ! -x "$B/dsv4" ]; then echo "FAIL asan_build: $B/dsv4 missing (run make test)"; exit 0; fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
for t in "$B"/tests/test_*; do
    [ -x "$t" ] || continue
    out=$("$t" 2>&1); rc=$?
    printf '%s\n' "$out" | grep -E '^(PASS|FAIL) ' | sed 's/^\(PASS\|FAIL\) /\1 asan_/'
    if printf '%s' "$out" | grep -q -E 'AddressSanitizer|runtime error|LeakSanitizer'; then
        echo "FAIL asan_$(basename "$t"): sanitizer report"
        printf '%s\n' "$out" | grep -E -A3 'AddressSanitizer|runtime error|LeakSanitizer' | head -20
    elif [ $rc -ne 0 ] && ! printf '%s' "$out" | grep -q '^FAIL '; then
        echo "FAIL asan_$(basename "$t"): exited with status $rc"
    fi
done
DSV4_BIN="$B/dsv4" bash tests/cli/badinput.sh | sed 's/^\(PASS\|FAIL\) /\1 asan_/'
DSV4_BIN="$B/dsv4" bash tests/cli/gguf_badinput.sh | sed 's/^\(PASS\|FAIL\) /\1 asan_/'
for s in textgen_badinput.sh textgen.sh fp8_badinput.sh; do
    out=$(DSV4_BIN="$B/dsv4" bash tests/cli/$s 2>&1)
    printf '%s\n' "$out" | sed 's/^\(PASS\|FAIL\) /\1 asan_/'
done
# A GGUF model with every block type, scored under the sanitizers (decoders read only their blocks).
o=$(mktemp)
out=$("$B/dsv4" score --device cpu --model tests/fixtures/gguf-all-types/model.gguf \
      --tokens-file tests/fixtures/gguf-all-types/tokens.txt --chunk 7 --logits-out "$o" 2>&1); rc=$?
rm -f "$o"
if [ $rc -ne 0 ] || printf '%s' "$out" | grep -q -E 'AddressSanitizer|runtime error|LeakSanitizer'; then
    echo "FAIL asan_gguf_score: status $rc: $(printf '%s' "$out" | head -3)"
else
    echo "PASS asan_gguf_score"
fi
# The server under hostile clients, built with the sanitizers (stdlib only).
DSV4_HOSTILE_BIN="$B/dsv4" timeout 240 "${DSV4_PYTHON:-python3}" tests/serve/test_hostile.py 2>&1 |
    sed 's/^\(PASS\|FAIL\) /\1 asan_/'

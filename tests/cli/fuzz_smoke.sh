#!/usr/bin/env bash
# Runs each libFuzzer harness (built by `make test` into build/fuzz) for a
# short while from its seed corpus; a crash or sanitizer report fails.
set -u
B=${DSV4_FUZZ_DIR:-build/fuzz}
T=${DSV4_FUZZ_TIME:-10}
for h in "$B"/fuzz_*; do
    [ -x "$h" ] || continue
    n=${h##*/fuzz_}
    work=$(mktemp -d)
    dict=; [ -f tests/fuzz/$n.dict ] && dict=-dict=tests/fuzz/$n.dict
    seeds=; [ -d tests/fuzz/corpus_$n ] && seeds=tests/fuzz/corpus_$n
    if out=$("$h" -max_total_time=$T $dict -artifact_prefix=$work/ $work $seeds 2>&1); then
        echo "PASS fuzz_$n ($(printf '%s\n' "$out" | grep -o 'Done [0-9]* runs' | tail -1))"
    else
        echo "FAIL fuzz_$n: $(printf '%s\n' "$out" | grep -E 'ERROR|SUMMARY' | head -2)"
    fi
    rm -rf "$work"
done

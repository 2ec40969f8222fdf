#!/usr/bin/env bash
# Device checks of the CUDA backend on every oracle fixture (or the fixture
# directories given): oracle parity for chunk 1, 7 and all-at-once, run-to-run
# bit identity, graph replay vs eager bit identity.
# usage: check_fixtures.sh DSV4_BIN OUT_DIR [FIXTURE_DIR...]
set -u
BIN=$1; OUT=$2; mkdir -p "$OUT"; shift 2
[ $# -gt 0 ] || set -- tests/fixtures/*/
pass=0; fail=0
ok() { echo "PASS $1"; pass=$((pass+1)); }
ko() { echo "FAIL $1"; fail=$((fail+1)); }
for fx in "$@"; do
    fx=${fx%/}; name=$(basename "$fx")
    model=$(ls "$fx"/model*.gguf 2>/dev/null | head -1) # GGUF fixtures: the file (the first part of a split set)
    model=${model:-$fx}
    for chunk in 1 7 all; do
        o="$OUT/$name.$chunk.f32"
        args=(score --model "$model" --tokens-file "$fx/tokens.txt" --logits-out "$o" --device cuda)
        [ "$chunk" != all ] && args+=(--chunk "$chunk")
        if ! "$BIN" "${args[@]}"; then ko "$name chunk $chunk: score failed"; continue; fi
        r=$(python3 tests/oracle/compare_logits.py "$fx" "$o"); echo "  $name chunk $chunk: $r"
        case "$r" in ok*) ok "$name chunk $chunk oracle";; *) ko "$name chunk $chunk oracle";; esac
        "$BIN" "${args[@]/$o/$o.again}" && cmp -s "$o" "$o.again" && ok "$name chunk $chunk deterministic" \
            || ko "$name chunk $chunk deterministic"
    done
    o="$OUT/$name.1.eager.f32"
    DSV4_CUDA_GRAPHS=0 "$BIN" score --model "$model" --tokens-file "$fx/tokens.txt" --logits-out "$o" --device cuda --chunk 1 \
        && cmp -s "$o" "$OUT/$name.1.f32" && ok "$name graph == eager (chunk 1)" || ko "$name graph == eager (chunk 1)"
    "$BIN" score --model "$model" --tokens-file "$fx/tokens.txt" --logits-out "$OUT/$name.cpu.f32" --device cpu --chunk 7 \
        && python3 - "$OUT/$name.cpu.f32" "$OUT/$name.7.f32" <<'PY'
import struct, sys
a = open(sys.argv[1], 'rb').read(); b = open(sys.argv[2], 'rb').read()
x = struct.unpack('<%df' % (len(a) // 4), a); y = struct.unpack('<%df' % (len(b) // 4), b)
print('  cuda vs cpu (chunk 7) max|diff| = %.3g' % max(abs(p - q) for p, q in zip(x, y)))
PY
done
echo "$pass passed, $fail failed"
[ $fail -eq 0 ]

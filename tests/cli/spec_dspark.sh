#!/usr/bin/env bash
# --spec dspark[:K]: speculative decoding with the DSpark drafter prints
# exactly what plain greedy decoding prints (token ids, text, chat turns, a
# server's greedy replies, with /metrics counting the drafts), `dsv4 info`
# reports the drafter, and a --spec naming the other drafter is refused in
# one line. bench --spec dspark measures the drafter's speed with forced
# acceptance, on the fixture and on a synthetic Flash built with
# Flash-0731's DSpark drafter, and refuses what cannot have one.
set -u
BIN=${DSV4_BIN:-build/dsv4}
FX=tests/fixtures/tiny-dspark-bf16
tmp=$(mktemp -d); pids=""
trap 'for p in $pids; do kill $p 2>/dev/null; wait $p 2>/dev/null; done; rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
gen() { "$BIN" generate --device cpu --model $FX "$@"; }

plain=$(gen --tokens 3,1,4,1,5 -n 60 2>$tmp/err)
ok=1
for k in dspark dspark:1 dspark:3; do
    got=$(gen --tokens 3,1,4,1,5 -n 60 --spec $k 2>>$tmp/err)
    [ -n "$plain" ] && [ "$got" = "$plain" ] || { ok=0; echo "  $k: $got" >&2; }
done
if [ $ok = 1 ] && grep -q "^spec dspark:5: [0-9]* verify steps" $tmp/err; then pass dspark_ids_equal_plain
else fail dspark_ids_equal_plain "$(head -c 300 $tmp/err)"; fi

# official numerics: a rejected draft's emitted compressed entries are rolled
# back and replayed rounded as the cache holds them
plain=$(gen --cache official --tokens 3,1,4,1,5 -n 60 2>$tmp/err)
got=$(gen --cache official --tokens 3,1,4,1,5 -n 60 --spec dspark 2>>$tmp/err)
if [ -n "$plain" ] && [ "$got" = "$plain" ]; then pass dspark_official_equals_plain
else fail dspark_official_equals_plain "$(head -c 300 $tmp/err)"; fi

a=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos 2>$tmp/err | od -c)
b=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos --spec dspark:2 2>>$tmp/err | od -c)
if [ -n "$a" ] && [ "$a" = "$b" ]; then pass dspark_text_equals_plain
else fail dspark_text_equals_plain "$(head -c 300 $tmp/err)"; fi

printf 'hello\nhow are you\n/think\nwhy\n/reset\nagain\n' > $tmp/chat.in
"$BIN" chat --device cpu --model $FX --temperature 0 -n 30 < $tmp/chat.in > $tmp/chat.plain 2>$tmp/err
"$BIN" chat --device cpu --model $FX --temperature 0 -n 30 --spec dspark < $tmp/chat.in > $tmp/chat.spec 2>>$tmp/err
if [ "$(wc -l < $tmp/chat.plain)" -ge 4 ] && cmp -s $tmp/chat.plain $tmp/chat.spec; then pass dspark_chat_equals_plain
else fail dspark_chat_equals_plain "$(head -c 300 $tmp/err)"; fi

info=$("$BIN" info --model $FX)
if printf '%s' "$info" | grep -q "dspark drafter: *yes (3 stages" && printf '%s' "$info" | grep -q "mtp head: *no" &&
   "$BIN" info --model tests/fixtures/tiny-mtp-f32 | grep -q "dspark drafter: *no"; then pass info_reports_dspark
else fail info_reports_dspark "$(printf '%s' "$info" | tail -4)"; fi

# bench: "speculative dspark:K, forced acceptance P, context C: X tok/s (T
# tokens/step, ...; N of M drafts kept) -> S x plain decoding"; prints
# "T M N" of that line ("" if absent)
spec_line() { grep "^speculative dspark:$1, forced acceptance $2, context 0: " |
    sed -n 's/.*(\([0-9.]*\) tokens\/step,.*; \([0-9]*\) of \([0-9]*\) drafts kept) -> [0-9.]*x plain decoding$/\1 \3 \2/p'; }
# every step drafts K; the kept drafts follow P: 1 + P + ... + P^5 = 3.69 tokens per step expected at 0.8
read -r t m n <<< "$("$BIN" bench --device cpu --model $FX --contexts 0 --prefill 0 --decode 100 --spec dspark \
    --accept 0.8 2>&1 | spec_line 5 0.80)"
if [ "${m:-}" = 500 ] && [ "$n" -le 500 ] && awk -v t="$t" 'BEGIN { exit !(t >= 3.2 && t <= 4.2) }'; then
    pass dspark_bench_fixture
else fail dspark_bench_fixture "tokens/step ${t:-none}, ${n:-?} of ${m:-?} drafts kept"; fi
# the synthetic Flash (real widths, 1 layer, 6 experts: ~40 s on 2 cores) with the DSpark drafter
out=$("$BIN" bench --device cpu --synthetic flash --layers 1 --experts 6 --contexts 0 --prefill 0 --decode 2 \
    --spec dspark --accept 0.8 2>&1)
read -r t m n <<< "$(printf '%s\n' "$out" | spec_line 5 0.80)"
if [ "${m:-}" = 10 ] && [ "$n" -le 10 ] && awk -v t="$t" 'BEGIN { exit !(t >= 1 && t <= 6) }'; then
    pass dspark_bench_synthetic
else fail dspark_bench_synthetic "$(printf '%s\n' "$out" | grep -v '^ ' | tail -3)"; fi

e1=$("$BIN" bench --device cpu --synthetic flash --layers 1 --experts 6 --weights gguf-iq3_xxs --spec dspark \
    --accept 0.8 2>&1); r1=$?
e2=$("$BIN" bench --device cpu --model tests/fixtures/tiny-mtp-f32 --spec dspark --accept 0.8 2>&1); r2=$?
e3=$("$BIN" bench --device cpu --model $FX --spec dspark:6 --accept 0.8 2>&1); r3=$?
e4=$("$BIN" bench --device cpu --model tests/fixtures/tiny-mixed-f32 --spec dspark --accept 0.8 2>&1); r4=$?
if [ $r1 = 1 ] && echo "$e1" | grep -q "DSpark drafter is not read from GGUF" && [ $r2 = 1 ] &&
   echo "$e2" | grep -q "has an MTP head, not a DSpark drafter" && [ $r3 = 1 ] && echo "$e3" | grep -q "at most 5" &&
   [ $r4 = 1 ] && echo "$e4" | grep -q "no MTP head (mtp.0.\*) or DSpark drafter" &&
   [ "$(printf '%s\n' "$e1" "$e2" "$e3" "$e4" | wc -l)" = 4 ]; then pass dspark_bench_refusals
else fail dspark_bench_refusals "$r1 $e1 / $r2 $e2 / $r3 $e3 / $r4 $e4"; fi

# serve: the same greedy replies with and without --spec dspark
"$BIN" serve --device cpu --threads 1 --model $FX --port 0 >/dev/null 2>$tmp/plain.log & pids="$pids $!"
"$BIN" serve --device cpu --threads 1 --model $FX --port 0 --spec dspark >/dev/null 2>$tmp/spec.log & pids="$pids $!"
port_of() { for _ in $(seq 100); do p=$(grep -o '127.0.0.1:[0-9]*' "$1" | cut -d: -f2); [ -n "$p" ] && { echo "$p"; return; }; sleep 0.1; done; }
pp=$(port_of $tmp/plain.log); ps=$(port_of $tmp/spec.log)
ok=1
for q in "hello world" "how are you"; do
    req="{\"model\":\"x\",\"prompt\":\"$q\",\"max_tokens\":40,\"temperature\":0}"
    a=$(curl -s --max-time 60 "http://127.0.0.1:$pp/v1/completions" -H 'content-type: application/json' -d "$req" | sed 's/"created":[0-9]*//')
    b=$(curl -s --max-time 60 "http://127.0.0.1:$ps/v1/completions" -H 'content-type: application/json' -d "$req" | sed 's/"created":[0-9]*//')
    printf "%s" "$a" | grep -q "finish_reason" && [ "$a" = "$b" ] || { ok=0; echo "  $q: $a // $b" >&2; }
done
drafted=$(curl -s --max-time 60 "http://127.0.0.1:$ps/metrics" | grep '^dsv4_spec_decode_draft_tokens_total' | cut -d' ' -f2)
if [ $ok = 1 ] && grep -q "speculative dspark:5" $tmp/spec.log && [ "${drafted:-0}" -gt 0 ]; then pass dspark_serve_equals_plain
else fail dspark_serve_equals_plain "$pp $ps drafted=$drafted $(head -c 300 $tmp/spec.log)"; fi

e1=$(gen --tokens 1,2 --spec mtp 2>&1); r1=$?
e2=$("$BIN" generate --device cpu --model tests/fixtures/tiny-mtp-f32 --tokens 1,2 --spec dspark 2>&1); r2=$?
e3=$(gen --tokens 1,2 --spec dspark:6 2>&1); r3=$?
e4=$("$BIN" serve --device cpu --model $FX --spec dspark:6 2>&1); r4=$?
if [ $r1 = 1 ] && echo "$e1" | grep -q "has a DSpark drafter, not an MTP head" && [ $r2 = 1 ] &&
   echo "$e2" | grep -q "has an MTP head, not a DSpark drafter" && [ $r3 = 1 ] && echo "$e3" | grep -q "at most 5" &&
   [ $r4 != 0 ] && echo "$e4" | grep -q "at most 5" && [ "$(echo "$e1$e2$e3" | wc -l)" -le 3 ]; then pass dspark_refusals
else fail dspark_refusals "$r1 $e1 / $r2 $e2 / $r3 $e3 / $r4 $e4"; fi

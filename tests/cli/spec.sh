#!/usr/bin/env bash
# --spec mtp[:K]: speculative decoding prints exactly what plain greedy
# decoding prints (token ids alone and in a batch, text with stop conditions),
# seeded sampling is reproducible, and bad --spec/--accept uses are refused.
set -u
BIN=${DSV4_BIN:-build/dsv4}
FX=tests/fixtures/tiny-mtp-f32
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
gen() { "$BIN" generate --device cpu --model $FX "$@"; }

plain=$(gen --tokens 3,1,4,1,5 -n 60 2>$tmp/err)
ok=1
for k in mtp mtp:2 mtp:3 mtp:5; do
    got=$(gen --tokens 3,1,4,1,5 -n 60 --spec $k 2>>$tmp/err)
    [ -n "$plain" ] && [ "$got" = "$plain" ] || { ok=0; echo "  $k: $got" >&2; }
done
if [ $ok = 1 ]; then pass spec_ids_equal_plain; else fail spec_ids_equal_plain "$(head -c 300 $tmp/err)"; fi

# official numerics too: rejected rows' emitted entries come back rounded as the cache holds them
plain=$(gen --cache official --tokens 3,1,4,1,5 -n 60 2>$tmp/err)
got=$(gen --cache official --tokens 3,1,4,1,5 -n 60 --spec mtp:3 2>>$tmp/err)
if [ -n "$plain" ] && [ "$got" = "$plain" ]; then pass spec_official_equals_plain
else fail spec_official_equals_plain "$(head -c 300 $tmp/err)"; fi

printf '1,2,3\n5,6,7,8,9,10,11,12,13,14,15,16\n42\n%s\n' "$(seq -s, 1 37)" > $tmp/p.txt
gen --batch $tmp/p.txt -n 40 > $tmp/plain 2>$tmp/err
gen --batch $tmp/p.txt -n 40 --spec mtp:3 > $tmp/spec 2>$tmp/stats
if [ "$(wc -l < $tmp/plain)" -eq 4 ] && cmp -s $tmp/plain $tmp/spec && grep -q "drafts kept" $tmp/stats; then
    pass spec_batch_equals_plain
else fail spec_batch_equals_plain "$(head -c 300 $tmp/err $tmp/stats)"; fi

# text: greedy with a stop id and a length limit, and a stop string
want=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos 2>>$tmp/err | od -c)
got=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos --spec mtp:2 2>$tmp/stats | od -c)
ids=$(gen --tokens "0,$("$BIN" tokenize --tokenizer $FX -p "hello world")" -n 30)
stop_id=$(echo "$ids" | cut -d, -f12)
want_id=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos --stop-id "$stop_id" 2>>$tmp/err | od -c)
got_id=$(gen -p "hello world" -n 40 --temperature 0 --ignore-eos --stop-id "$stop_id" --spec mtp:3 2>>$tmp/err | od -c)
# the acceptance statistics go to stderr, stdout is the text alone
if [ -n "$want" ] && [ "$want" = "$got" ] && [ "$want_id" = "$got_id" ] && [ "$want_id" != "$want" ] &&
   grep -q "^spec mtp:2: [0-9]* verify steps, [0-9]* of [0-9]* drafts kept" $tmp/stats; then
    pass spec_text_greedy_equals_plain
else fail spec_text_greedy_equals_plain "$got vs $want / $got_id vs $want_id"; fi

# sampling: a seed gives the same text again; the output is valid text of the
# requested length budget
gen -p "hello" -n 30 --seed 5 --temperature 0.9 --top-k 20 --spec mtp:2 > $tmp/a 2>$tmp/err
gen -p "hello" -n 30 --seed 5 --temperature 0.9 --top-k 20 --spec mtp:2 > $tmp/b 2>>$tmp/err
if [ -s $tmp/a ] && cmp -s $tmp/a $tmp/b; then pass spec_sampling_seeded
else fail spec_sampling_seeded "$(head -c 300 $tmp/err)"; fi

# refusals
e1=$(gen --tokens 1,2 --spec eagle 2>&1); r1=$?
e2=$("$BIN" generate --device cpu --model tests/fixtures/tiny-mixed-f32 --tokens 1,2 --spec mtp 2>&1); r2=$?
e3=$("$BIN" bench --device cpu --model $FX --contexts 0 --prefill 0 --spec mtp:2 2>&1); r3=$?
e4=$(gen --tokens 1,2 --spec mtp:99 2>&1); r4=$?
if [ $r1 = 2 ] && echo "$e1" | grep -q "not mtp or mtp:K" && [ $r2 = 1 ] && echo "$e2" | grep -q "no MTP head" &&
   [ $r3 = 2 ] && echo "$e3" | grep -q "go together" && [ $r4 = 2 ]; then pass spec_refusals
else fail spec_refusals "$r1 $e1 / $r2 $e2 / $r3 $e3 / $r4 $e4"; fi

if "$BIN" info --model $FX | grep -q "mtp head: *yes" &&
   "$BIN" info --model tests/fixtures/tiny-mixed-f32 | grep -q "mtp head: *no"; then pass info_reports_mtp
else fail info_reports_mtp "$("$BIN" info --model $FX | tail -3)"; fi

# bench --rows: steps of several rows of one lane, every row's logits, timed
# against the first entry (1.00x) with the bytes each reads
out=$("$BIN" bench --device cpu --model $FX --contexts 0 --prefill 0 --decode 4 --rows 1,3 2>&1)
r1=$(echo "$out" | grep -E '^1 +[0-9.]+ +1\.00x +[0-9.]+' | wc -l)
b1=$(echo "$out" | awk '$1 == 1 && $3 == "1.00x" {print $4}'); b3=$(echo "$out" | awk '$1 == 3 && $3 ~ /x$/ {print $4}')
if echo "$out" | grep -q "^steps of several rows of one lane at context 0" && [ "$r1" = 1 ] && [ -n "$b3" ] &&
   awk -v a="$b1" -v b="$b3" 'BEGIN { exit !(b > a) }'; then pass bench_rows
else fail bench_rows "$(echo "$out" | grep -A3 'steps of several')"; fi

# bench: the speculative line with its acceptance
out=$("$BIN" bench --device cpu --model $FX --contexts 0 --prefill 0 --decode 8 --spec mtp:2 --accept 0.8 2>&1)
if echo "$out" | grep -q "speculative mtp:2, forced acceptance 0.80"; then pass bench_spec
else fail bench_spec "$(echo "$out" | tail -3)"; fi
# the speed model at the expected acceptance: 1 + 0.8 + 0.64 = 2.44 tokens a
# step at k = 2, the same steps' time: its speedup is the measured one scaled
# by 2.44 over the measured tokens a step
tl=$(echo "$out" | sed -n 's/^speculative mtp:2, .*(\([0-9.]*\) tokens\/step,.* -> \([0-9.]*\)x plain decoding$/\1 \2/p')
el=$(echo "$out" | sed -n 's/^at the expected \([0-9.]*\) tokens a step: \([0-9.]*\)x plain decoding$/\1 \2/p')
if [ -n "$tl" ] && [ -n "$el" ] && awk -v a="$tl" -v b="$el" 'BEGIN { split(a, m, " "); split(b, e, " ");
        d = e[2] - m[2] * e[1] / m[1]; if (d < 0) d = -d; exit !(e[1] == 2.44 && d <= 0.02 + 0.01 * e[2]) }'; then pass bench_spec_expected
else fail bench_spec_expected "measured '$tl' expected '$el'"; fi
# ... where a speculative step's time goes: drafting and verify (the host's
# acceptance inside it) add up to the step, as a 1-token step's time is printed
sp=$(echo "$out" | grep '^a speculative step: ' | sed 's/[(),;]/ /g')
read -r sd sv sa sr s1 <<< "$(echo "$sp" | awk '{print $5, $8, $17, $21, $26}')"
step=$(echo "$out" | grep '^speculative ' | sed 's/.* \([0-9.]*\) ms\/step.*/\1/')
if awk -v d="$sd" -v v="$sv" -v a="$sa" -v r="$sr" -v o="$s1" -v s="$step" 'BEGIN {
       exit !(d > 0 && v > 0 && a >= 0 && a <= v && o > 0 && r > -0.01 && (d + v + r - s) ^ 2 < 1e-4) }'; then
    pass bench_spec_split
else fail bench_spec_split "draft '$sd' verify '$sv' accept '$sa' rest '$sr' one '$s1' step '$step': $sp"; fi
# ... and the verify step's bytes: 3 rows of the fixture (8 experts, 3 a token)
# choose 8·(1 − (5/8)^3) = 6.046875 distinct experts a layer under uniform
# routing, 6.046875/3 times one row's expert bytes; the parts add up
v=$(echo "$out" | grep '^verify step of ' | sed 's/[(),=+]/ /g; s/\([0-9]\)x /\1 /')
read -r rows tot dense ex dist st ratio one ex1 <<< "$(echo "$v" | awk '{print $4, $6, $9, $12, $13, $20, $21, $28, $32}')"
if [ "$rows" = 3 ] && [ "$dist" = 6.05 ] &&
   awk -v t="$tot" -v d="$dense" -v e="$ex" -v s="$st" -v r="$ratio" -v o="$one" -v e1="$ex1" 'BEGIN {
       exit !(t - d - e - s < 0.002 && d + e + s - t < 0.002 && e / e1 > 2.0156 * 0.99 && e / e1 < 2.0156 * 1.01 &&
              r - t / o < 0.006 && t / o - r < 0.006 && e1 > 0) }'; then pass bench_spec_verify_bytes
else fail bench_spec_verify_bytes "$(echo "$out" | grep '^verify step' || echo 'no verify line') [$rows $tot $dense $ex $dist $st $ratio $one $ex1]"; fi

# chat: the same replies with --spec over turns, a mode switch (which
# re-renders earlier turns) and /reset
printf 'hello\nhow are you\n/think\nwhy\n/nothink\nok then\n/reset\nagain\n' > $tmp/chat.in
"$BIN" chat --device cpu --model $FX --temperature 0 -n 30 < $tmp/chat.in > $tmp/chat.plain 2>$tmp/err
"$BIN" chat --device cpu --model $FX --temperature 0 -n 30 --spec mtp:2 < $tmp/chat.in > $tmp/chat.spec 2>>$tmp/err
if [ "$(wc -l < $tmp/chat.plain)" -ge 5 ] && cmp -s $tmp/chat.plain $tmp/chat.spec; then pass spec_chat_equals_plain
else fail spec_chat_equals_plain "$(head -c 300 $tmp/err)"; fi

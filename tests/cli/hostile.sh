#!/usr/bin/env bash
# Hostile input through the whole CLI, one group per defect of issue 8 (the
# name says which: hostile_dN_...). A refused input ends with one line of
# error naming what is wrong and a non-zero status; an accepted one gives the
# right output and status 0; never a crash, hang, sanitizer report or lost
# output with status 0. Runs again under ASan/UBSan (tests/cli/sanitized.sh).
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
FX=tests/fixtures/tiny-mixed-f32
CHAT=tests/fixtures/tiny-chat
ST=model.safetensors
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
CASE_PREFIX=hostile_
. tests/expect_error.sh
T="timeout 60" # a hang is a failure too (status 124)
pass() { echo "PASS hostile_$1"; }
fail() { echo "FAIL hostile_$1: $2"; }
sanitizer() { grep -q -E 'AddressSanitizer|runtime error|LeakSanitizer' "$1"; }
mk() { rm -rf "$tmp/$2"; mkdir -p "$tmp/$2"; cp "$1"/* "$tmp/$2/"; }
# config.json of fixture $1 copied to $tmp/$2 with KEY=JSON-VALUE edits
# (KEY may be a dotted path into nested objects)
cfg() {
    local src=$1 dst=$2; shift 2
    mk "$src" "$dst"
    $PY - "$tmp/$dst/config.json" "$@" <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
for kv in sys.argv[2:]:
    k, v = kv.split("=", 1)
    *outer, last = k.split(".")
    o = c
    for part in outer:
        o = o[part]
    o[last] = json.loads(v)
json.dump(c, open(sys.argv[1], "w"), indent=1)
EOF
}
gen() { $T "$BIN" generate --device cpu "$@"; }
nids() { tr ',' '\n' | grep -c '^[0-9][0-9]*$'; }

# ---- 2: sizes from user input are bounded before any arithmetic ----
case_ d2_bench_huge_context "--contexts: '1152921504606846976' is not an integer in 0..2147483647" -- \
    $T "$BIN" bench --device cpu --model $FX --contexts 1152921504606846976
case_ d2_bench_context_past_model "passes the model's context of 65536 positions" -- \
    $T "$BIN" bench --device cpu --model $FX --contexts 65530 --prefill 0
case_ d2_bench_lanes "--lanes: '65' is not an integer in 1..64" -- $T "$BIN" bench --device cpu --model $FX --lanes 1,65
case_ d2_bench_rows "--rows: '65' is not an integer in 1..64" -- $T "$BIN" bench --device cpu --model $FX --rows 1,65
case_ d2_bench_rows_past_model "--rows 64: 16 steps (+2 warm-up) from context 65000 pass the model's context of 65536" -- \
    $T "$BIN" bench --device cpu --model $FX --contexts 65000 --prefill 0 --rows 1,64
case_ d2_bench_prefill "--prefill 70000 is longer than the model's context" -- \
    $T "$BIN" bench --device cpu --model $FX --contexts 0 --prefill 70000

# ---- 3: the token paths respect max_position_embeddings like the text path ----
cfg $FX ctx16 max_position_embeddings=16
seq -s, 1 17 > $tmp/ids17.txt
case_ d3_tokens_longer_than_context "--tokens is 17 tokens, longer than the context (16" -- \
    gen --model $tmp/ctx16 --tokens "$(cat $tmp/ids17.txt)" -n 2
case_ d3_tokens_file_longer_than_context "ids17.txt is 17 tokens, longer than the context (16" -- \
    gen --model $tmp/ctx16 --tokens-file $tmp/ids17.txt -n 2
case_ d3_score_longer_than_context "is 17 tokens, longer than the context (16" -- \
    $T "$BIN" score --device cpu --model $tmp/ctx16 --tokens "$(cat $tmp/ids17.txt)" --logits-out $tmp/o.f32
printf '1,2,3\n%s\n' "$(seq -s, 1 17)" > $tmp/b17.txt
case_ d3_batch_prompt_longer_than_context "line 2 is 17 tokens, longer than the context (16" -- \
    gen --model $tmp/ctx16 --batch $tmp/b17.txt -n 2
# generation stops at the full context and says so: 3 prompt tokens leave
# room for 16 - 3 + 1 = 14 printed tokens (the last one is not fed back)
out=$(gen --model $tmp/ctx16 --tokens 1,2,3 -n 100 2>$tmp/err); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s' "$out" | nids)" -eq 14 ] && grep -q "stopped: the context is full (16 tokens)" $tmp/err &&
   [ "$(wc -l < $tmp/err)" -eq 1 ] && [ "$out" = "$(gen --model $FX --tokens 1,2,3 -n 14)" ]; then
    pass d3_tokens_stop_at_context
else fail d3_tokens_stop_at_context "rc=$rc $(printf '%s' "$out" | nids) ids; $(cat $tmp/err)"; fi
printf '1,2,3\n4,5,6,7,8\n' > $tmp/b2.txt
gen --model $tmp/ctx16 --batch $tmp/b2.txt -n 100 > $tmp/bat 2>$tmp/err1; rc1=$?
gen --model $tmp/ctx16 --batch $tmp/b2.txt -n 100 --serial > $tmp/ser 2>$tmp/err2; rc2=$?
if [ $rc1 -eq 0 ] && [ $rc2 -eq 0 ] && cmp -s $tmp/bat $tmp/ser && [ "$(head -1 $tmp/bat | nids)" -eq 12 ] &&
   [ "$(sed -n 2p $tmp/bat | nids)" -eq 12 ] && grep -q "context is full" $tmp/err1 && grep -q "context is full" $tmp/err2; then
    pass d3_batch_stops_at_context
else fail d3_batch_stops_at_context "rc=$rc1/$rc2 $(cat $tmp/err1 $tmp/err2)"; fi

# ---- 4: one finiteness policy: a NaN weight fails every path, naming lane and position ----
mk $FX nan; $PY tests/cli/st_edit.py $FX/$ST $tmp/nan/$ST float model.norm.weight 0 nan
case_ d4_nan_generate_tokens "lane 0, position 4: non-finite logit" -- gen --model $tmp/nan --tokens 1,2,3,4,5 -n 4
case_ d4_nan_score "lane 0, position 0: non-finite logit" -- \
    $T "$BIN" score --device cpu --model $tmp/nan --tokens 1,2,3 --logits-out $tmp/o.f32
case_ d4_nan_batch "prompt 1: step failed, all its lanes poisoned: lane 0, position 2: non-finite logit" -- gen --model $tmp/nan --batch $tmp/b2.txt -n 3
case_ d4_nan_batch_serial "prompt 1: step failed, all its lanes poisoned: lane 0, position 2: non-finite logit" -- \
    gen --model $tmp/nan --batch $tmp/b2.txt -n 3 --serial
mk $CHAT nanchat; $PY tests/cli/st_edit.py $CHAT/$ST $tmp/nanchat/$ST float model.norm.weight 0 inf
case_ d4_inf_generate_text "non-finite logit" -- gen --model $tmp/nanchat -p hello -n 3

# ---- 5: no signed overflow from -n (bounded by the context) ----
out=$(gen --model $tmp/ctx16 --batch $tmp/b2.txt -n 2147483647 2>$tmp/err); rc=$?
if [ $rc -eq 0 ] && [ "$(printf '%s\n' "$out" | head -1 | nids)" -eq 12 ] && grep -q "context is full" $tmp/err && ! sanitizer $tmp/err; then
    pass d5_batch_n_int_max
else fail d5_batch_n_int_max "rc=$rc $(head -c 300 $tmp/err)"; fi
case_ d5_n_past_int "-n: '2147483648' is not an integer in 0..2147483647" -- gen --model $FX --tokens 1 -n 2147483648

# ---- 6: float config values that overflow are refused (by key) ----
cfg $FX f_rope_theta rope_theta=1e-50 rope_parameters.main.rope_theta=1e-50
case_ d6_config_rope_theta "rope_theta: expected a number in .1, 1e+30.$" -- \
    $T "$BIN" score --device cpu --model $tmp/f_rope_theta --tokens 1,2,3 --logits-out $tmp/o.f32
for kv in hc_eps=1e39 routed_scaling_factor=1e39; do
    k=${kv%%=*}
    cfg $FX "f_$k" "$kv"
    case_ "d6_config_$k" "$k: expected a number in" -- \
        $T "$BIN" score --device cpu --model $tmp/f_$k --tokens 1,2,3 --logits-out $tmp/o.f32
done

# the same limits for a GGUF model's metadata
G=tests/fixtures/gguf-all-types/model.gguf
gg() { $PY tests/cli/gguf_edit.py $G $tmp/$1.gguf "${@:2}"; }
gscore() { $T "$BIN" score --device cpu --model $tmp/$1.gguf --tokens 1,2,3 --logits-out $tmp/o.f32; }
gg g_eps setf32 deepseek4.hyper_connection.epsilon 1e30
case_ d6_gguf_hc_eps "deepseek4.hyper_connection.epsilon: 1e+30 is outside" -- gscore g_eps
gg g_theta setf32 deepseek4.rope.freq_base 1e-30
case_ d6_gguf_rope_base "deepseek4.rope.freq_base: 1e-30 is outside" -- gscore g_theta
gg g_shared setu32 deepseek4.expert_shared_count 2
case_ d14_gguf_shared_experts "n_shared_experts: 2 is not supported (only 1)" -- gscore g_shared
gg g_bos setu32 tokenizer.ggml.bos_token_id 1000000
case_ d14_gguf_bos_outside_vocab "bos_token_id: 1000000 is outside the vocabulary" -- gscore g_bos

# ---- 7: one strict number parser for every numeric option ----
case_ d7_n_exponent "-n: '1e3' is not an integer" -- gen --model $FX --tokens 1 -n 1e3
case_ d7_n_letters "-n: 'abc' is not an integer" -- gen --model $FX --tokens 1 -n abc
case_ d7_n_space "-n: ' 5' is not an integer" -- gen --model $FX --tokens 1 -n " 5"
case_ d7_chunk_suffix "--chunk: '2x' is not an integer in 1.." -- \
    $T "$BIN" score --device cpu --model $FX --tokens 1,2 --chunk 2x --logits-out $tmp/o.f32
case_ d7_threads_letters "--threads: 'abc' is not an integer in 0..4096" -- gen --model $FX --tokens 1 -n 1 --threads abc
case_ d7_deadline "--step-deadline-ms: '5ms' is not a number" -- gen --model $FX --batch $tmp/b2.txt --step-deadline-ms 5ms
case_ d7_text_n "-n: '4.5' is not an integer" -- gen --model $CHAT -p hi -n 4.5
case_ d7_chat_n "-n: '0' is not an integer in 1.." -- $T "$BIN" chat --device cpu --model $CHAT -n 0
case_ d7_temperature_inf "--temperature: '1e999' is not a number" -- gen --model $CHAT -p hi --temperature 1e999
case_ d7_bench_layers "--layers: '-3' is not an integer in 0..256" -- $T "$BIN" bench --synthetic flash --layers -3
case_ d7_bench_decode "--decode: '0' is not an integer in 1.." -- $T "$BIN" bench --device cpu --model $FX --decode 0

# ---- 8: lost output is a failure ----
case_ d8_generate_tokens_full "writing the output failed" -- sh -c '"$0" generate --device cpu --model "$1" --tokens 1,2 -n 3 > /dev/full' "$BIN" $FX
case_ d8_generate_text_full "writing the output failed" -- sh -c '"$0" generate --device cpu --model "$1" -p hi -n 3 > /dev/full' "$BIN" $CHAT
case_ d8_chat_full "writing the output failed" -- sh -c 'echo hi | "$0" chat --device cpu --model "$1" -n 3 > /dev/full' "$BIN" $CHAT
case_ d8_tokenize_full "writing the output failed" -- sh -c '"$0" tokenize --tokenizer "$1" -p hi > /dev/full' "$BIN" $CHAT
case_ d8_help_full "writing the output failed" -- sh -c '"$0" generate --help > /dev/full' "$BIN"

# ---- 9: NUL bytes are refused with their offset, not cut at ----
printf '1,2\0,3' > $tmp/nul.txt
case_ d9_tokens_file_nul "nul.txt: NUL byte at offset 3" -- gen --model $FX --tokens-file $tmp/nul.txt -n 1
printf '1,2,3\n4,5\0,6\n' > $tmp/nulb.txt
case_ d9_batch_nul "nulb.txt: NUL byte at offset 9" -- gen --model $FX --batch $tmp/nulb.txt -n 1
printf '"ab"\n"c\0d"\n' > $tmp/nul.jsonl
case_ d9_jsonl_nul "nul.jsonl: NUL byte at offset 7" -- $T "$BIN" tokenize --tokenizer $CHAT --jsonl $tmp/nul.jsonl
case_ d9_detok_jsonl_nul "nul.jsonl: NUL byte at offset 7" -- $T "$BIN" detokenize --tokenizer $CHAT --jsonl $tmp/nul.jsonl
printf 'he\0llo\nhi\n' | $T "$BIN" chat --device cpu --model $CHAT -n 2 --temperature 0 > $tmp/out 2>$tmp/err; rc=$?
if [ $rc -eq 0 ] && grep -q "input line 1: NUL byte at offset 2" $tmp/err && [ "$(wc -l < $tmp/err)" -eq 1 ] &&
   [ "$(wc -l < $tmp/out)" -eq 1 ]; then pass d9_chat_line_nul
else fail d9_chat_line_nul "rc=$rc $(cat $tmp/err)"; fi

# ---- 10: every input is bounded by what the context can use ----
case_ d10_tokens_file_dev_zero "/dev/zero: larger than 1048576 bytes" -- gen --model $FX --tokens-file /dev/zero -n 1
case_ d10_batch_dev_zero "/dev/zero: larger than" -- gen --model $tmp/ctx16 --batch /dev/zero -n 1
case_ d10_prompt_file_dev_zero "/dev/zero: larger than" -- gen --model $CHAT --prompt-file /dev/zero -n 1
case_ d10_chat_dev_zero "input line 1: longer than" -- sh -c '"$0" chat --device cpu --model "$1" < /dev/zero' "$BIN" $CHAT

# ---- 11: a long run of spaces tokenizes (10 M, one id each in tiny-chat's vocabulary) ----
head -c 10000000 /dev/zero | tr '\0' ' ' > $tmp/spaces.txt
n=$($T "$BIN" tokenize --tokenizer $CHAT --file $tmp/spaces.txt 2>$tmp/err | tr ',' '\n' | sort | uniq -c | awk '{print $1 ":" $2}')
sp=$("$BIN" tokenize --tokenizer $CHAT -p " ")
if [ "$n" = "10000000:$sp" ]; then pass d11_ten_million_spaces
else fail d11_ten_million_spaces "$n; $(head -c 200 $tmp/err)"; fi

# ---- 12: a checkpoint truncated while mapped: one line naming the file, status 1 ----
mk $CHAT trunc
mkfifo $tmp/in
$T "$BIN" chat --device cpu --model $tmp/trunc -n 2 --temperature 0 < $tmp/in > $tmp/out 2> $tmp/err & pid=$!
exec 7> $tmp/in
echo hi >&7
for i in $(seq 100); do [ -s $tmp/out ] && break; sleep 0.1; done # the first reply: weights are mapped and read
truncate -s 4096 $tmp/trunc/$ST
echo "hello again" >&7
exec 7>&-
wait $pid; rc=$?
if [ $rc -eq 1 ] && grep -q "trunc/$ST: the file was truncated or changed while dsv4 was reading it" $tmp/err &&
   [ "$(wc -l < $tmp/err)" -eq 1 ]; then pass d12_checkpoint_truncated_while_mapped
else fail d12_checkpoint_truncated_while_mapped "rc=$rc $(head -c 300 $tmp/err)"; fi

# ---- 13: tokenizer.json is strict JSON ----
mk $CHAT junk; printf ' {"x": 1}' >> $tmp/junk/tokenizer.json
case_ d13_tokenizer_trailing_garbage "tokenizer.json: invalid JSON near byte" -- gen --model $tmp/junk -p hi -n 1

# ---- 14: what is not supported is refused, not ignored ----
cfg $FX shared2 n_shared_experts=2
case_ d14_n_shared_experts "n_shared_experts: 2 is not supported (only 1)" -- \
    $T "$BIN" score --device cpu --model $tmp/shared2 --tokens 1 --logits-out $tmp/o.f32
cfg $CHAT bos bos_token_id=999
case_ d14_bos_outside_vocab "bos_token_id: expected an integer in .0, 284.$" -- gen --model $tmp/bos -p hi -n 1

# ---- 15: clear messages ----
long=$tmp; for i in $(seq 12); do long=$long/$(printf 'd%.0s' $(seq 200)); done
case_ d15_long_path_keeps_cause "config.json: cannot open: No such file or directory" -- \
    $T "$BIN" score --device cpu --model "$long" --tokens 1 --logits-out $tmp/o.f32
err=$($T "$BIN" score --device cpu --model "$long" --tokens 1 --logits-out $tmp/o.f32 2>&1)
if printf '%s' "$err" | grep -q -F "$long/config.json"; then pass d15_long_path_whole
else fail d15_long_path_whole "the path is cut: $(printf '%s' "$err" | head -c 100)"; fi
mk $FX nl; $PY tests/cli/st_edit.py $FX/$ST $tmp/nl/$ST copy model.norm.weight $'evil\nname'
$PY tests/cli/st_edit.py $tmp/nl/$ST $tmp/nl/$ST dtype $'evil\nname' Q9
case_ d15_newline_in_tensor_name "tensor 'evil\\\\nname': unknown dtype 'Q9'" -- \
    $T "$BIN" score --device cpu --model $tmp/nl --tokens 1 --logits-out $tmp/o.f32
mk $FX nlw; $PY tests/cli/st_edit.py $FX/$ST $tmp/nlw/$ST copy model.norm.weight $'odd\nname'
err=$(gen --model $tmp/nlw --tokens 1 -n 1 2>&1 >/dev/null); rc=$?
if [ $rc -eq 0 ] && [ "$err" = "dsv4 generate: warning: unknown tensor 'odd\\nname' ignored" ]; then pass d15_newline_in_warning
else fail d15_newline_in_warning "rc=$rc $err"; fi
cfg $CHAT chat16 max_position_embeddings=16
echo hi | $T "$BIN" chat --device cpu --model $tmp/chat16 -n 100 --temperature 0 --ignore-eos > $tmp/out 2> $tmp/err; rc=$?
if [ $rc -eq 0 ] && grep -q "the context is full; /reset to start over" $tmp/err && [ "$(wc -l < $tmp/err)" -eq 1 ]; then
    pass d15_chat_reply_cut_by_context
else fail d15_chat_reply_cut_by_context "rc=$rc $(cat $tmp/err)"; fi
exit 0

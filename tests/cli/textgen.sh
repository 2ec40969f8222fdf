#!/usr/bin/env bash
# Text in, text out on the tiny-chat checkpoint (random weights, so the text
# is gibberish, often with invalid UTF-8 shown as U+FFFD): generate -p and
# dsv4 chat against the token-id path, the tokenizer CLI and themselves.
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
FX=tests/fixtures/tiny-chat
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
gen() { "$BIN" generate --device cpu --model $FX "$@"; }
chat() { "$BIN" chat --device cpu --model $FX "$@"; }
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }

# A fixed seed gives the same text; another seed gives other text.
gen -p "hello world" -n 24 --seed 7 > $tmp/s7a 2>$tmp/err
gen -p "hello world" -n 24 --seed 7 > $tmp/s7b 2>>$tmp/err
gen -p "hello world" -n 24 --seed 8 > $tmp/s8 2>>$tmp/err
if [ -s $tmp/s7a ] && cmp -s $tmp/s7a $tmp/s7b && ! cmp -s $tmp/s7a $tmp/s8; then pass textgen_seed_deterministic
else fail textgen_seed_deterministic "$(head -c 300 $tmp/err)"; fi

# Greedy text == the token-id path's greedy ids, detokenized. The raw prompt
# is BOS (config bos_token_id 0) + the tokenizer's ids of the text.
ids=$("$BIN" tokenize --tokenizer $FX -p "hello world")
toks=$(gen --tokens "0,$ids" -n 30)
"$BIN" detokenize --tokenizer $FX --ids "$toks" > $tmp/want
gen -p "hello world" -n 30 --temperature 0 --ignore-eos > $tmp/got
if [ "$ids" = "260,266,81,277" ] && cmp -s $tmp/want $tmp/got; then pass textgen_greedy_equals_token_path
else fail textgen_greedy_equals_token_path "ids=$ids; $(od -c $tmp/want | head -3) vs $(od -c $tmp/got | head -3)"; fi

# --stop-id: the text ends right before the first occurrence of that id.
stop_id=$(echo "$toks" | cut -d, -f9)
first=$(echo "$toks" | tr , '\n' | grep -n -x -m1 "$stop_id" | cut -d: -f1)
if [ "$first" -gt 1 ]; then
    "$BIN" detokenize --tokenizer $FX --ids "$(echo "$toks" | cut -d, -f1-$((first - 1)))" > $tmp/want_id
else printf '\n' > $tmp/want_id; fi
gen -p "hello world" -n 30 --temperature 0 --ignore-eos --stop-id "$stop_id" > $tmp/got_id
if cmp -s $tmp/want_id $tmp/got_id; then pass textgen_stop_id
else fail textgen_stop_id "id $stop_id: $(od -c $tmp/got_id | head -2)"; fi

# Stop strings: pick pieces of the greedy text (one inside a token, one
# across tokens, one at the very start); the output must end right before
# the first place the piece occurs, with nothing of it printed.
for spec in "6:3" "11:7" "0:2"; do
    at=${spec%:*}; n=${spec#*:}
    $PY - "$tmp/got" "$at" "$n" > $tmp/stop <<'EOF'
import sys
text = open(sys.argv[1], "rb").read()[:-1].decode()   # output minus the final newline
at, n = int(sys.argv[2]), int(sys.argv[3])
sys.stdout.write(text[at:at + n])
EOF
    stop=$(cat $tmp/stop)
    gen -p "hello world" -n 30 --temperature 0 --ignore-eos --stop "$stop" --stop "<｜User｜>" > $tmp/cut 2>$tmp/err
    if $PY - "$tmp/got" "$tmp/stop" "$tmp/cut" <<'EOF'
import sys
text = open(sys.argv[1], "rb").read()[:-1]
stop = open(sys.argv[2], "rb").read()
cut = open(sys.argv[3], "rb").read()
want = text[:text.index(stop)] + b"\n"
sys.exit(0 if stop and cut == want else 1)
EOF
    then pass "textgen_stop_string_$at"; else fail "textgen_stop_string_$at" "stop '$stop': $(od -c $tmp/cut | head -2) $(head -c 200 $tmp/err)"; fi
done

# --logprobs N: one JSON line per token; top-N sorted, greedy picks the top.
gen -p "hello world" -n 6 --temperature 0 --ignore-eos --logprobs 3 2> $tmp/lp > /dev/null
if $PY - "$tmp/lp" <<'EOF'
import json, math, sys
lines = [json.loads(l) for l in open(sys.argv[1], encoding="utf-8")]
assert len(lines) == 6, len(lines)
for i, l in enumerate(lines):
    top = l["top"]
    assert l["index"] == i and len(top) == 3
    assert all(a["logprob"] >= b["logprob"] for a, b in zip(top, top[1:]))
    assert l["token"] == top[0]["token"] and l["logprob"] <= 0
    assert sum(math.exp(t["logprob"]) for t in top) <= 1 + 1e-5
EOF
then pass textgen_logprobs; else fail textgen_logprobs "$(head -c 300 $tmp/lp)"; fi

# Chat: the first reply is what generate --chat prints for the same turn;
# /reset starts over (same greedy reply again); --check-session compares the
# reused session with a fresh one fed the whole re-rendered transcript.
G="--temperature 0 -n 16"
gen --chat -p "hello" $G > $tmp/g1
printf 'hello\n' | chat $G > $tmp/c1
printf 'hello\nthe world\n' | chat $G > $tmp/c2
printf 'hello\nthe world\n/reset\nhello\n/quit\nnever\n' | chat $G --check-session > $tmp/c3 2>$tmp/e3; rc=$?
cat $tmp/c2 $tmp/c1 > $tmp/c21
if [ -s $tmp/g1 ] && cmp -s $tmp/g1 $tmp/c1; then pass chat_first_turn_equals_generate_chat
else fail chat_first_turn_equals_generate_chat "$(od -c $tmp/g1 | head -2) vs $(od -c $tmp/c1 | head -2)"; fi
if [ $rc -eq 0 ] && cmp -s $tmp/c3 $tmp/c21 && ! cmp -s $tmp/c2 $tmp/c1; then pass chat_two_turns_and_reset
else fail chat_two_turns_and_reset "rc=$rc $(head -c 300 $tmp/e3)"; fi
if [ "$(grep -c '^session check: turn [0-9]*: .*: ok$' $tmp/e3)" -eq 3 ] && ! grep -q MISMATCH $tmp/e3; then
    pass chat_session_equals_rerender
else fail chat_session_equals_rerender "$(cat $tmp/e3)"; fi

# Thinking modes: the reasoning of an earlier reply is dropped from the
# transcript, so the session goes back to before that reply's <think>;
# with --keep-reasoning it never needs to. Mode switches mid-conversation.
printf '/think\nhello\nthe world\n/nothink\nmore\n/thinkmax\nagain\n/think\nlast\n' |
    chat $G --check-session > /dev/null 2>$tmp/e4; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c ': ok$' $tmp/e4)" -eq 5 ]; then pass chat_think_modes_session
else fail chat_think_modes_session "rc=$rc $(cat $tmp/e4)"; fi
printf 'hello\nthe world\nmore\n/nothink\nagain\n/think\nlast\n' |
    chat $G --think --keep-reasoning --check-session > /dev/null 2>$tmp/e5; rc=$?
if [ $rc -eq 0 ] && [ "$(grep -c ': ok$' $tmp/e5)" -eq 5 ]; then pass chat_keep_reasoning_session
else fail chat_keep_reasoning_session "rc=$rc $(cat $tmp/e5)"; fi

# The state is kept between turns: turn 2 evaluates only what follows turn
# 1's prompt (at worst the reply is evaluated again, when its tokens are not
# the canonical tokenization of its text, which random weights make likely).
held1=$(sed -n 's/^session check: turn 1: \([0-9]*\) tokens.*/\1/p' $tmp/e3)
reused2=$(sed -n 's/^session check: turn 2: [0-9]* tokens, \([0-9]*\) reused.*/\1/p' $tmp/e3)
if [ -n "$held1" ] && [ -n "$reused2" ] && [ "$reused2" -ge $((held1 - 1)) ] && [ "$held1" -gt 1 ]; then
    pass chat_reuses_session
else fail chat_reuses_session "$(cat $tmp/e3)"; fi

# Ctrl-C (SIGINT) stops the reply being written; the chat goes on to the
# next turn (stopped the same way) and leaves with status 0 at /quit.
mkfifo $tmp/in
# (dsv4 itself in the background, not the chat() function: $! would be a
# subshell, which ignores SIGINT as a background job)
"$BIN" chat --device cpu --model $FX --temperature 1 --seed 1 --ignore-eos -n 100000 < $tmp/in > $tmp/c7 2>$tmp/e7 &
pid=$!
exec 9> $tmp/in
interrupt() {
    local size=$1
    for _ in $(seq 100); do [ "$(stat -c %s $tmp/c7)" -gt "$size" ] && break; sleep 0.1; done
    sleep 0.2
    kill -INT $pid
    for _ in $(seq 100); do grep -q '^\[stopped\]$' $tmp/e7 && [ "$(grep -c '^\[stopped\]$' $tmp/e7)" -ge "$2" ] && break; sleep 0.1; done
}
printf 'hello\n' >&9; interrupt 0 1
printf 'again\n' >&9; interrupt "$(stat -c %s $tmp/c7)" 2
printf '/quit\n' >&9
exec 9>&-
for _ in $(seq 100); do kill -0 $pid 2>/dev/null || break; sleep 0.1; done
if kill -0 $pid 2>/dev/null; then kill $pid; fail chat_ctrl_c "still running: $(cat $tmp/e7)"
else
    wait $pid; rc=$?
    if [ $rc -eq 0 ] && [ "$(grep -c '^\[stopped\]$' $tmp/e7)" -eq 2 ]; then pass chat_ctrl_c
    else fail chat_ctrl_c "rc=$rc $(head -c 300 $tmp/e7)"; fi
fi

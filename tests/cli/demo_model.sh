#!/usr/bin/env bash
# The demo model (models/demo) answers through the engine: greedy chat replies
# to questions whose answers the shell computes, one-shot and in the chat REPL,
# and a tool call for a prompt that offers tools; its FP8/FP4 copy answers too.
set -u
BIN=${DSV4_BIN:-build/dsv4}
M=models/demo
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
ask() { "$BIN" generate --device cpu --model $M --chat --temperature 0 -p "$1" 2>>$tmp/err; }
# The reply the demo model was trained to give for "A op B" (tools/demo/tasks.py:
# the working one place value at a time, then "So A op B = R."); R is the shell's.
worked() {
    ${DSV4_PYTHON:-python3} -c 'import sys; sys.path.insert(0, "tools/demo"); import tasks
a, op, b = sys.argv[1].split(); print(tasks.worked_answer(int(a), op, int(b), int(sys.argv[2])))' "$1" "$(($1))"
}

# README's main command.
got=$(ask "What is 347 + 285?")
if [ "$got" = "$(worked "347 + 285")" ] && [ "${got##* = }" = "632." ]; then pass demo_readme_question
else fail demo_readme_question "got '$got' $(head -c 300 $tmp/err)"; fi

bad=
for q in "512 + 139" "903 - 457" "46 * 7" "128 - 764"; do
    want=$(worked "$q")
    got=$(ask "What is $q?")
    [ "$got" = "$want" ] || bad="$bad [$q: '$got']"
done
if [ -z "$bad" ]; then pass demo_arithmetic; else fail demo_arithmetic "$bad"; fi

got=$(ask "Convert 7 km to m.")
if [ "$got" = "7 km = 7000 m." ]; then pass demo_unit_conversion; else fail demo_unit_conversion "got '$got'"; fi

# The REPL keeps the conversation: the second reply follows the first turn.
printf 'What is 250 + 250?\nWhat day comes after Monday?\n' |
    "$BIN" chat --device cpu --model $M --temperature 0 > $tmp/chat 2>>$tmp/err
if grep -q "So 250 + 250 = 500\." $tmp/chat && grep -q "Tuesday comes after Monday\." $tmp/chat; then
    pass demo_chat_two_turns
else fail demo_chat_two_turns "$(head -c 400 $tmp/chat)"; fi

# A tool call: the prompt offers the three demo tools (rendered by the engine's
# chat encoder through build/demo_render); the reply must be exactly the DSML
# block the same encoder writes for the right call, then the turn ends.
RENDER=${DSV4_DEMO_RENDER:-build/demo_render}
tools='[{"type":"function","function":{"name":"get_weather","description":"Get the current weather for a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"]}}},{"type":"function","function":{"name":"get_time","description":"Get the current local time in a city.","parameters":{"type":"object","properties":{"city":{"type":"string","description":"City name"}},"required":["city"]}}},{"type":"function","function":{"name":"convert_currency","description":"Convert an amount of money from one currency to another.","parameters":{"type":"object","properties":{"amount":{"type":"number"},"from":{"type":"string","description":"ISO code, e.g. USD"},"to":{"type":"string","description":"ISO code, e.g. EUR"}},"required":["amount","from","to"]}}}]'
msgs='[{"role":"system","content":"You are a helpful assistant."},{"role":"user","content":"How much is 250 EUR in JPY?"},{"role":"assistant","content":"","tool_calls":[{"id":"c0","type":"function","function":{"name":"convert_currency","arguments":"{\"amount\": 250, \"from\": \"EUR\", \"to\": \"JPY\"}"}}]}]'
printf '{"mode":"chat","tools":%s,"messages":%s,"cuts":[2,3]}\n' "$tools" "$msgs" | "$RENDER" > $tmp/r 2>>$tmp/err
# Line 1 of the output is a JSON array of the two renderings; split it with the
# engine-independent python json module.
${DSV4_PYTHON:-python3} -c '
import json, sys
p, full = json.loads(open(sys.argv[1]).read())
open(sys.argv[2], "w").write(p)
open(sys.argv[3], "w").write(full[len(p):].removesuffix("<｜end▁of▁sentence｜>") + "\n")' $tmp/r $tmp/prompt $tmp/want 2>>$tmp/err
"$BIN" generate --device cpu --model $M --temperature 0 --no-bos --prompt-file $tmp/prompt -n 120 > $tmp/got 2>>$tmp/err
if [ -s $tmp/want ] && cmp -s $tmp/want $tmp/got; then pass demo_tool_call
else fail demo_tool_call "$(head -c 300 $tmp/got) / $(head -c 300 $tmp/err)"; fi

# The FP8/FP4 copy (models/demo-fp8, made by `make demo-fp8`): its committed
# reference (test_oracle) was computed on exactly these weights, and it answers
# a held-out question (tools/demo/tasks.py keeps the key 263+880 out of the
# training data) through the FP8/FP4 weights and, by default, the official
# cache numerics.
M8=models/demo-fp8
stale=$(${DSV4_PYTHON:-python3} -c '
import hashlib, json, os, sys
d = sys.argv[1]
want = json.load(open(os.path.join(d, "meta.json")))["weights_sha256"]
for fn, h in sorted(want.items()):
    p = os.path.join(d, fn)
    if not os.path.exists(p) or hashlib.sha256(open(p, "rb").read()).hexdigest() != h:
        print(fn)' $M8 2>&1)
if [ -z "$stale" ]; then pass demo_fp8_reference_current
else fail demo_fp8_reference_current "$M8 differs from the weights its reference was made on ($stale): make demo-fp8 demo-reference"; fi
got=$("$BIN" generate --device cpu --model $M8 --chat --temperature 0 -p "What is 263 + 880?" 2>>$tmp/err)
if [ "$got" = "$(worked "263 + 880")" ]; then pass demo_fp8_held_out_question
else fail demo_fp8_held_out_question "got '$got' $(head -c 300 $tmp/err)"; fi

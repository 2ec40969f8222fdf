#!/usr/bin/env bash
# The demo model (models/demo) answers through the engine: greedy chat replies
# to questions whose answers the shell computes, one-shot and in the chat REPL.
set -u
BIN=${DSV4_BIN:-build/dsv4}
M=models/demo
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
pass() { echo "PASS $1"; }
fail() { echo "FAIL $1: $2"; }
ask() { "$BIN" generate --device cpu --model $M --chat --temperature 0 -p "$1" 2>>$tmp/err; }

# README's main command.
got=$(ask "What is 347 + 285?")
if [ "$got" = "347 + 285 = $((347 + 285))." ]; then pass demo_readme_question
else fail demo_readme_question "got '$got' $(head -c 300 $tmp/err)"; fi

bad=
for q in "512 + 139" "903 - 457" "46 * 7" "128 - 764"; do
    want="$q = $(($q))."
    got=$(ask "What is $q?")
    [ "$got" = "$want" ] || bad="$bad [$q: '$got']"
done
if [ -z "$bad" ]; then pass demo_arithmetic; else fail demo_arithmetic "$bad"; fi

got=$(ask "Convert 7 km to m.")
if [ "$got" = "7 km = 7000 m." ]; then pass demo_unit_conversion; else fail demo_unit_conversion "got '$got'"; fi

# The REPL keeps the conversation: the second reply follows the first turn.
printf 'What is 250 + 250?\nWhat day comes after Monday?\n' |
    "$BIN" chat --device cpu --model $M --temperature 0 > $tmp/chat 2>>$tmp/err
if grep -q "250 + 250 = 500\." $tmp/chat && grep -q "Tuesday comes after Monday\." $tmp/chat; then
    pass demo_chat_two_turns
else fail demo_chat_two_turns "$(head -c 400 $tmp/chat)"; fi

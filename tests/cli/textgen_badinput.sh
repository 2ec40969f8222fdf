#!/usr/bin/env bash
# Bad input to the text commands (generate -p, chat): each case ends with a
# one-line error naming what is wrong and a non-zero status (no sanitizer
# report when $DSV4_BIN is an ASan/UBSan build). In the chat, a bad turn is
# reported and the conversation goes on.
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
FX=tests/fixtures/tiny-chat
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

CASE_PREFIX=textbad_
. tests/expect_error.sh
gen() { "$BIN" generate --device cpu "$@" -n 4 --seed 1; }

# copy the fixture to $tmp/NAME (to edit it)
mk() { rm -rf "$tmp/$1"; mkdir -p "$tmp/$1"; cp $FX/* "$tmp/$1/"; }

case_ invalid_utf8_prompt "not valid UTF-8 at byte 3" -- gen --model $FX -p $'abc\xff\xfedef'
printf 'ok \xc3\x28 then' > $tmp/bad.txt
case_ invalid_utf8_prompt_file "not valid UTF-8 at byte 3" -- gen --model $FX --prompt-file $tmp/bad.txt
case_ invalid_utf8_chat_prompt "not valid UTF-8" -- gen --model $FX --chat -p $'\xe2\x82'
case_ missing_prompt_file "nope.txt" -- gen --model $FX --prompt-file $tmp/nope.txt
case_ unknown_special_stop "unknown special token '<｜Usr｜>'" -- gen --model $FX -p hi --stop "<｜Usr｜>"
case_ unknown_special_inside_stop "unknown special token '<｜nope｜>'" -- gen --model $FX -p hi --stop "x<｜nope｜>y"
case_ invalid_utf8_stop "not valid UTF-8" -- gen --model $FX -p hi --stop $'\xff'
case_ stop_id_out_of_range "--stop-id 285 is outside the vocabulary" -- gen --model $FX -p hi --stop-id 285
case_ bad_top_p "--top-p: '1.5' is not a number in 0..1" -- gen --model $FX -p hi --top-p 1.5
case_ bad_temperature "--temperature: 'warm' is not a number" -- gen --model $FX -p hi --temperature warm
case_ bad_seed "--seed" -- gen --model $FX -p hi --seed -3

mk notok; rm $tmp/notok/tokenizer.json
case_ no_tokenizer "has no tokenizer.json" -- gen --model $tmp/notok -p hi
mk trunc; head -c 3000 $FX/tokenizer.json > $tmp/trunc/tokenizer.json
case_ truncated_tokenizer_json "tokenizer.json" -- gen --model $tmp/trunc -p hi
case_ truncated_tokenizer_chat "tokenizer.json" -- "$BIN" chat --device cpu --model $tmp/trunc
mk merges; $PY - $tmp/merges/tokenizer.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
j["model"]["merges"].append("no_such_piece x")
json.dump(j, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False)
EOF
case_ tokenizer_bad_merge "tokenizer.json" -- gen --model $tmp/merges -p hi
mk big; $PY - $tmp/big/tokenizer.json <<'EOF'
import json, sys
j = json.load(open(sys.argv[1], encoding="utf-8"))
j["added_tokens"].append({"id": 400, "content": "<｜extra｜>", "special": True, "normalized": False,
                          "single_word": False, "lstrip": False, "rstrip": False})
json.dump(j, open(sys.argv[1], "w", encoding="utf-8"), ensure_ascii=False)
EOF
case_ tokenizer_larger_than_vocab "the tokenizer has 401 ids but the model's vocabulary only 285" -- gen --model $tmp/big -p hi
case_ tokenizer_flag_bad_path "/nonexistent/tok.json" -- gen --model $FX --tokenizer /nonexistent/tok.json -p hi

# A context of 16 positions: longer prompts are refused before any work.
mk short; $PY - $tmp/short/config.json <<'EOF'
import json, sys
c = json.load(open(sys.argv[1]))
c["max_position_embeddings"] = 16
json.dump(c, open(sys.argv[1], "w"), indent=1)
EOF
long="the world, the world; the world: the world! the world? the world."
case_ prompt_longer_than_context "longer than the context (16" -- gen --model $tmp/short -p "$long"
case_ chat_prompt_longer_than_context "longer than the context (16" -- gen --model $tmp/short --chat -p "$long"
short_ok=$(gen --model $tmp/short -p "hi" 2>&1 >/dev/null; echo "rc=$?")
[ "$short_ok" = "rc=0" ] && echo "PASS textbad_short_prompt_fits" || echo "FAIL textbad_short_prompt_fits: $short_ok"

# The chat reports a bad turn (too long for the context, invalid UTF-8) on
# one line and answers the next one.
printf '%s\n%s\nhi\n' "$long" $'bad \xff' | "$BIN" chat --device cpu --model $tmp/short -n 2 --temperature 0 \
    > $tmp/out 2> $tmp/err; rc=$?
if [ $rc -eq 0 ] && [ "$(wc -l < $tmp/err)" -eq 2 ] && grep -q "context holds 16" $tmp/err &&
   grep -q "not valid UTF-8" $tmp/err && [ "$(wc -l < $tmp/out)" -ge 1 ] &&
   ! grep -q -E 'AddressSanitizer|runtime error|LeakSanitizer' $tmp/err; then
    echo "PASS textbad_chat_goes_on"
else echo "FAIL textbad_chat_goes_on: rc=$rc $(cat $tmp/err)"; fi
printf '/frobnicate\n' | "$BIN" chat --device cpu --model $FX > /dev/null 2> $tmp/err; rc=$?
if [ $rc -eq 0 ] && grep -q "unknown command '/frobnicate'" $tmp/err; then echo "PASS textbad_chat_unknown_command"
else echo "FAIL textbad_chat_unknown_command: rc=$rc $(cat $tmp/err)"; fi

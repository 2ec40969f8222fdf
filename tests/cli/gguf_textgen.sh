#!/usr/bin/env bash
# One .gguf file is a complete model for text: `generate -p` tokenizes with
# the file's own tokenizer (ids as tiny-chat's tokenizer.json gives them) and
# samples exactly what the token-id path samples; `chat` runs on it.
set -u
BIN=${DSV4_BIN:-build/dsv4}
G=tests/fixtures/gguf-all-types/model.gguf
pass() { echo "PASS gguf_textgen_$1"; }
fail() { echo "FAIL gguf_textgen_$1: $2"; }
ids=$("$BIN" tokenize --tokenizer $G -p "Hello world")
want_ids=$("$BIN" tokenize --tokenizer tests/fixtures/tiny-chat/tokenizer.json -p "Hello world")
want=$("$BIN" generate --device cpu --model $G --tokens "0,$ids" -n 6)
got=$("$BIN" generate --device cpu --model $G -p "Hello world" -n 6 --temperature 0 --ignore-eos --logprobs 1 2>&1 >/dev/null |
      sed -n 's/^{"index":[0-9]*,"token":\([0-9]*\),.*/\1/p' | paste -sd, -)
if [ -n "$ids" ] && [ "$ids" = "$want_ids" ] && [ -n "$want" ] && [ "$want" = "$got" ]; then pass greedy_equals_token_path
else fail greedy_equals_token_path "prompt ids '$ids' vs '$want_ids'; sampled '$got' vs token path '$want'"; fi
out=$(printf 'hello\n' | "$BIN" chat --device cpu --model $G -n 4 --seed 3 2>&1); rc=$?
if [ $rc -eq 0 ] && [ -n "$out" ]; then pass chat_runs; else fail chat_runs "status $rc: $out"; fi
# The file's jinja chat template is never executed; one that is not DeepSeek-V4's is reported.
PY=${DSV4_PYTHON:-python3}
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
$PY tests/cli/gguf_edit.py $G $tmp/other.gguf setstr tokenizer.chat_template "{% for m in messages %}<|im_start|>{{ m.content }}{% endfor %}"
$PY tests/cli/gguf_edit.py $G $tmp/v4.gguf setstr tokenizer.chat_template "{{ bos_token }}<｜User｜>{{ c }}<tool_result></tool_result><｜Assistant｜></think><｜DSML｜tool_calls>"
e1=$("$BIN" generate --device cpu --model $tmp/other.gguf -p hi -n 1 --chat 2>&1 >/dev/null)
e2=$("$BIN" generate --device cpu --model $tmp/v4.gguf -p hi -n 1 --chat 2>&1 >/dev/null)
if printf '%s' "$e1" | grep -q "not DeepSeek-V4's" && ! printf '%s' "$e2" | grep -q "chat template"; then pass template_check
else fail template_check "other: '$e1'; v4: '$e2'"; fi

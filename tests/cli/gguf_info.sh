#!/usr/bin/env bash
# dsv4 info on GGUF models: weight bytes of every storage type in the file,
# state per token, the GPU plan, the chat-template verdict; bad options refused.
set -u
BIN=${DSV4_BIN:-build/dsv4}
G=tests/fixtures/gguf-all-types/model.gguf
CASE_PREFIX=gguf_info_
. tests/expect_error.sh
out=$("$BIN" info --model $G 2>&1); rc=$?
types=$(printf '%s\n' "$out" | sed -n 's/^weights by type: *//p')
miss=
for t in F32 F16 BF16 Q8_0 Q4_K Q5_K Q6_K Q3_K Q2_K IQ4_XS IQ3_XXS IQ3_S IQ2_XXS IQ2_S MXFP4 I32; do
    printf '%s' "$types" | grep -q -E "(^|, )$t [0-9.]+ MiB" || miss="$miss $t"
done
if [ $rc -eq 0 ] && [ -z "$miss" ] && printf '%s' "$out" | grep -q '^session per token:112.00 bytes' &&
   printf '%s' "$out" | grep -q '^gpu plan:.*one session up to 65536 tokens' &&
   printf '%s' "$out" | grep -q '^chat template: *none'; then echo "PASS gguf_info_report"
else echo "FAIL gguf_info_report: status $rc, missing types:$miss: $out"; fi
small=$("$BIN" info --model $G --gpu-gib 0.5 2>&1)
if printf '%s' "$small" | grep -q 'the weights and the reserve do not fit'; then echo "PASS gguf_info_does_not_fit"
else echo "FAIL gguf_info_does_not_fit: $small"; fi
case_ bad_gpu_size "--gpu-gib" -- "$BIN" info --model $G --gpu-gib -3
case_ bad_context "--context" -- "$BIN" info --model $G --context 0

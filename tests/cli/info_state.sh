#!/usr/bin/env bash
# dsv4 info's session-state report comes from the layout sessions hold: the
# official cache mode's packed bytes per token (tiny-fp8-official: FP8 rows of
# 168 B, FP4 keys of 17 B, ratios 4 and 128), fp32 with --cache exact, the
# longest context of a state budget, and Flash's packed figure of spec §6.2
# (FP4 indexer keys: 21 CSA x (584 + 68) / 4 + 20 HCA x 584 / 128 B); a bad
# cache mode is a one-line error.
set -u
BIN=${DSV4_BIN:-build/dsv4}
M=tests/fixtures/tiny-fp8-official
CASE_PREFIX=info_state_
. tests/expect_error.sh
out=$("$BIN" info --model $M --memory-gb 1 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^cache numerics: *official by default' &&
   printf '%s' "$out" | grep -q '^session per token:47.56 bytes (compressed KV + indexer keys, packed FP8 / FP4)' &&
   printf '%s' "$out" | grep -q '^state budget: *one session of up to [0-9]* tokens in 1 GiB'; then
    echo "PASS info_state_official"
else echo "FAIL info_state_official: status $rc: $out"; fi
out=$("$BIN" info --model $M --cache exact 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q '^cache numerics: *exact$' &&
   printf '%s' "$out" | grep -q '^session per token:164.00 bytes (compressed KV + indexer keys, fp32)'; then
    echo "PASS info_state_exact"
else echo "FAIL info_state_exact: status $rc: $out"; fi
out=$("$BIN" info --config tests/data/config_flash_official.json 2>&1); rc=$?
if [ $rc -eq 0 ] && printf '%s' "$out" | grep -q 'official (--cache official: FP8 KV, FP4 idx keys) *3514.25 B/token' &&
   printf '%s' "$out" | grep -q 'FlashMLA FP8 + FP8 idx keys (deployments) *3850.25 B/token'; then
    echo "PASS info_state_flash"
else echo "FAIL info_state_flash: status $rc: $out"; fi
case_ bad_cache "cache" -- "$BIN" info --model $M --cache fp16

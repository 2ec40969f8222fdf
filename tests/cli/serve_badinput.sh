#!/usr/bin/env bash
# dsv4 serve refuses bad options and unusable setups with one line naming
# what is wrong and a non-zero status (no server is left running).
set -u
BIN=${DSV4_BIN:-build/dsv4}
FX=tests/fixtures/tiny-chat
CASE_PREFIX=serve_bad_
. tests/expect_error.sh
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
s() { "$BIN" serve --device cpu --threads 1 --port 0 "$@"; }
case_ no_model "exactly one of --model or --synthetic" -- s
case_ both_models "exactly one of --model or --synthetic" -- s --model $FX --synthetic flash
case_ port "--port: '70000'" -- "$BIN" serve --model $FX --port 70000
case_ sessions "--max-sessions: '65'" -- s --model $FX --max-sessions 65
case_ missing_dir "config.json" -- s --model $tmp/nothing
case_ no_tokenizer "has no tokenizer.json" -- s --model tests/fixtures/tiny-mixed-f32
case_ synthetic_no_tokenizer "--synthetic needs --tokenizer" -- s --synthetic flash
case_ synthetic_preset "synthetic model" -- s --synthetic huge --tokenizer $FX
case_ key_file "$tmp/nokey" -- s --model $FX --api-key-file $tmp/nokey
: > $tmp/empty
case_ key_file_empty "empty" -- s --model $FX --api-key-file $tmp/empty
touch $tmp/file
case_ kv_dir "--kv-dir $tmp/file/kv" -- s --model $FX --kv-dir $tmp/file/kv
case_ host "--host 999.1.1.1" -- s --model $FX --host 999.1.1.1
case_ spec_arg "--spec: 'mtp:9'" -- s --model $FX --spec mtp:9
case_ spec_no_mtp "--spec: $FX has no MTP head" -- s --model $FX --spec mtp
case_ spec_sessions "at most 32 with --spec" -- s --model $FX --spec mtp:2 --max-sessions 33
# A port in use: the second server says so and exits.
"$BIN" serve --device cpu --threads 1 --model $FX --port 0 2>$tmp/first.log &
pid=$!
for i in $(seq 100); do grep -q "on http" $tmp/first.log && break; sleep 0.1; done
port=$(grep -o '127.0.0.1:[0-9]*' $tmp/first.log | cut -d: -f2)
case_ port_in_use "cannot listen on 127.0.0.1:$port" -- "$BIN" serve --device cpu --threads 1 --model $FX --port "$port"
kill $pid; wait $pid

#!/usr/bin/env bash
# The server under load on the GPU (docs/PERFORMANCE.md's server figures):
# dsv4 serve on the 43-layer FP8/FP4 synthetic Flash model, then
# tools/bench/serve_load.py at 1, 4, 16 and 64 concurrent streaming clients.
# Prompts and replies are short because the model's prefill (about 150 tok/s)
# is what a level waits for; each level stops after 60 s and reports what
# completed, so the whole run takes at most about 7 minutes. Needs build/dsv4
# (make build/dsv4) and python3 (the load tool uses only its standard library).
# usage (on the device, repo root): bash tests/cuda/serve_load.sh; logs to $OUT
# (serve.log, serve_load.txt, serve_load.json); gpu_suite.sh runs it last.
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
build/dsv4 serve --device cuda --synthetic flash --layers 43 --experts 16 --weights fp8-fp4 \
    --tokenizer tests/fixtures/tiny-chat/tokenizer.json --port 18000 --max-sessions 64 > "$OUT/serve.log" 2>&1 &
sp=$!
for i in $(seq 90); do curl -sf 127.0.0.1:18000/health >/dev/null && break; sleep 1; done
timeout 330 python3 tools/bench/serve_load.py --url http://127.0.0.1:18000 --clients 1,4,16,64 --requests 2 \
    --max-tokens 32 --prompt-tokens 48 --ignore-eos --level-timeout 60 --json "$OUT/serve_load.json" \
    > "$OUT/serve_load.txt" 2>&1
cat "$OUT/serve_load.txt"
kill "$sp"; wait "$sp" 2>/dev/null

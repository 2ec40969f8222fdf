#!/usr/bin/env bash
# The demo model's third training stage, run on the GPU machine from the repo root:
#
#   tools/demo/stage3_device.sh DATA_DIR        (DATA_DIR from build_data.py --stage3)
#
# Continues from the committed checkpoint models/demo for a short, low-LR run on the
# stage-3 mix and writes, under $OUT:
#   stage3/          the checkpoint as a drop-in for models/demo: shards, index and
#                    config from train.py, tokenizer.json, the three stages' training
#                    logs and data.json of the stage-3 data; tokens.txt, logits.f32 and
#                    meta.json from parity.py (the oracle fixture test_oracle checks);
#   train.out        train.py's output;
#   parity.out       transformers vs `dsv4 score --device cpu` on the new checkpoint;
#   eval_stage3.json held-out scores through `dsv4 generate` (eval.py).
# The exit status is non-zero when a step failed; later steps still run where they can.
#
# Knobs for a CPU smoke test of this script (defaults are the GPU run's):
#   BUDGET_S (55: what stages 1 and 2 leave of 10 minutes) training seconds, MAX_STEPS (0: budget only), BATCH (48),
#   EVAL_N (300) questions per eval category, PY (python3), BUILD (build).
set -uo pipefail
DATA=${1:?usage: tools/demo/stage3_device.sh DATA_DIR   (with \$OUT set)}
: "${OUT:?OUT must name the output folder}"
PY=${PY:-python3}
BUILD=${BUILD:-build}
BUDGET_S=${BUDGET_S:-55}
MAX_STEPS=${MAX_STEPS:-0}
BATCH=${BATCH:-48}
EVAL_N=${EVAL_N:-300}
JOBS=$(nproc)
CK=$OUT/stage3
[ -f "$DATA/train.npz" ] && [ -f "$DATA/tokenizer.json" ] || { echo "$DATA: no train.npz/tokenizer.json"; exit 2; }
cmp -s "$DATA/tokenizer.json" models/demo/tokenizer.json || { echo "$DATA: not models/demo's tokenizer"; exit 2; }
mkdir -p "$OUT"
status=0

make -j"$JOBS" BUILD="$BUILD" "$BUILD/dsv4" "$BUILD/demo_render" > "$OUT/make.out" 2>&1 ||
    { tail -20 "$OUT/make.out"; echo "make failed"; exit 1; }

# LR 3e-4 (stage 2: 6e-4 from stage 1): a fine-tune of a finished model, so half of
# stage 2's peak, a 20-step warm-up and the cosine to 10% over the budget.
"$PY" tools/demo/train.py --data "$DATA" --init-from models/demo --out "$CK" \
    --budget-s "$BUDGET_S" --max-steps "$MAX_STEPS" --batch "$BATCH" --lr 3e-4 --warmup 20 \
    --experts-impl eager --seed 3 2>&1 | tee "$OUT/train.out"
[ "${PIPESTATUS[0]}" = 0 ] && [ -f "$CK/model.safetensors.index.json" ] || { echo "training failed"; exit 1; }
mv "$CK/train_log.json" "$CK/train_log_stage3.json"
cp models/demo/train_log_stage1.json models/demo/train_log_stage2.json "$DATA/tokenizer.json" "$CK/"
cp "$DATA/data.json" "$CK/data_stage3.json"

# The fixture files land in $CK (parity.py writes them next to the checkpoint); the
# engine side is the CPU backend, as test_oracle runs it.
"$PY" tools/demo/parity.py --model "$CK" --dsv4 "$BUILD/dsv4" --render "$BUILD/demo_render" --device cpu \
    > "$OUT/parity.out" 2>&1 || { echo "parity failed"; status=1; }
tail -4 "$OUT/parity.out"

"$PY" tools/demo/eval.py --model "$CK" --dsv4 "$BUILD/dsv4" --render "$BUILD/demo_render" \
    --n "$EVAL_N" --jobs "$JOBS" --out "$OUT/eval_stage3.json" > "$OUT/eval.out" 2>&1 ||
    { tail -20 "$OUT/eval.out"; echo "eval failed"; status=1; }
[ -f "$OUT/eval_stage3.json" ] && "$PY" -c '
import json, sys
s = json.load(open(sys.argv[1]))["scores"]
print("  ".join("%s: %d/%d" % (k, v["correct"], v["n"]) for k, v in s.items()))' "$OUT/eval_stage3.json"
exit $status

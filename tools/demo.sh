#!/usr/bin/env bash
# `make demo`: the main job in one command, on one CPU.
#  1. the demo's small base model: made on first run and cached in build/demo/base
#     (grpo init from examples/demo/base_config.json with the byte-level tokenizer,
#     then grpo sft on examples/demo/sft.jsonl — about a minute on 2 cores);
#  2. GRPO with the seed's settings (examples/demo/grpo_length.yaml: the length
#     reward with target 20 characters, num_generations 64, micro-batches of 4,
#     16 accumulation steps);
#  3. build/demo/reward.svg: reward mean +- std and completion length per step.
# DEMO_SFT_STEPS / DEMO_GRPO_STEPS shorten it (the test uses that); DEMO_BASE_ONLY=1
# stops after the base model (tools/gpu-bundle.sh and tools/gpu_check/demo.sh make it so).
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
GRPO=${GRPO:-build/grpo}
OUT=${DEMO_OUT:-build/demo}
SFT_STEPS=${DEMO_SFT_STEPS:-400}
GRPO_STEPS=${DEMO_GRPO_STEPS:-60}
mkdir -p "$OUT"
t0=$SECONDS
if [ ! -f "$OUT/base/model.safetensors" ] || [ "$(cat "$OUT/base/.sft_steps" 2>/dev/null)" != "$SFT_STEPS" ]; then
    echo "== 1/3 making the base model (cached in $OUT/base)"
    rm -rf "$OUT/init" "$OUT/base"
    "$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --seed 0 --output_dir "$OUT/init"
    "$GRPO" sft --config examples/demo/sft.yaml --model "$OUT/init" --output_dir "$OUT/base" --max_steps "$SFT_STEPS"
    echo "$SFT_STEPS" > "$OUT/base/.sft_steps"
else
    echo "== 1/3 base model: $OUT/base (cached)"
fi
[ "${DEMO_BASE_ONLY:-0}" = 1 ] && exit 0
echo "== the base model, before GRPO:"
"$GRPO" generate --model "$OUT/base" --prompt "Tell me about the cat.
" --num_generations 3 --max_completion_length 64 --seed 1 2>/dev/null | grep -v '^===' || true
echo "== 2/3 GRPO: 64 completions per prompt, micro-batches of 4 x 16 accumulation steps, length reward (target 20 characters)"
rm -rf "$OUT/grpo"
"$GRPO" train --config examples/demo/grpo_length.yaml --model "$OUT/base" --output_dir "$OUT/grpo" --max_steps "$GRPO_STEPS"
echo "== after GRPO:"
"$GRPO" generate --model "$OUT/grpo" --prompt "Tell me about the cat.
" --num_generations 3 --max_completion_length 64 --seed 1 2>/dev/null | grep -v '^===' || true
echo "== 3/3 plotting"
"$GRPO" plot "$OUT/grpo/metrics.jsonl" -o "$OUT/reward.svg"
python3 - "$OUT/grpo/metrics.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1]) if '"reward"' in l]
k = max(1, len(rows) // 5)
first = sum(r["reward"] for r in rows[:k]) / k
last = sum(r["reward"] for r in rows[-k:]) / k
print("mean reward: first %d steps %.2f -> last %d steps %.2f" % (k, first, k, last))
PY
echo
echo "done in $((SECONDS - t0)) s"
echo "  reward curve:   $OUT/reward.svg"
echo "  trained model:  $OUT/grpo   (Hugging Face layout: config.json, model.safetensors, tokenizer)"
echo "  metrics:        $OUT/grpo/metrics.jsonl, completions: $OUT/grpo/completions.jsonl"

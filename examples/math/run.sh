#!/usr/bin/env bash
# The arithmetic example: sums with the exact-match reward, accuracy measured on
# held-out sums (examples/demo/math_test.jsonl) before and after GRPO.
#   1. the demo's base model (make demo makes it) learns the answer format by SFT;
#   2. grpo eval: held-out accuracy (8 samples per sum at temperature 1);
#   3. grpo train --config examples/math/grpo_math.yaml;
#   4. grpo eval again.
# Extra arguments go to grpo train (e.g. --max_steps 20); MATH_SFT_STEPS shortens step 1.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
GRPO=${GRPO:-build/grpo}
OUT=${MATH_OUT:-build/math}
BASE=${MATH_BASE:-build/demo/base}
[ -f "$BASE/model.safetensors" ] || { echo "run make demo first (it makes $BASE)"; exit 1; }
mkdir -p "$OUT"
python3 -c '
import json, sys
with open(sys.argv[2], "w") as f:
    for line in open(sys.argv[1]):
        d = json.loads(line)
        f.write(json.dumps({"prompt": d["prompt"], "completion": d["answer"]}) + "\n")
' examples/demo/math_train.jsonl examples/math/sft_math.jsonl
rm -rf "$OUT/base" "$OUT/grpo"
"$GRPO" sft --config examples/math/sft_math.yaml --model "$BASE" --output_dir "$OUT/base" --quiet \
    ${MATH_SFT_STEPS:+--max_steps "$MATH_SFT_STEPS"}
EVAL=(--dataset examples/demo/math_test.jsonl --reward_funcs exact_match:answer --max_completion_length 8
      --num_generations 8 --temperature 1 --json)
"$GRPO" eval --model "$OUT/base" "${EVAL[@]}" 2>/dev/null > "$OUT/eval_before.json"
"$GRPO" train --config examples/math/grpo_math.yaml --model "$OUT/base" --output_dir "$OUT/grpo" "$@"
"$GRPO" eval --model "$OUT/grpo" "${EVAL[@]}" 2>/dev/null > "$OUT/eval_after.json"
python3 -c '
import json, sys
b, a = (json.load(open(p))["pass@1"] for p in sys.argv[1:3])
print("held-out accuracy (pass@1, 8 samples per sum): before GRPO %.3f, after %.3f" % (b, a))
' "$OUT/eval_before.json" "$OUT/eval_after.json"

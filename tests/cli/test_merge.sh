#!/usr/bin/env bash
# `grpo merge`: a PEFT LoRA adapter folded into its base model and written as a
# full HF model directory that the other commands load; the base's dtype kept or
# --dtype; bad input (an existing output, a refused adapter) leaves nothing.
set -u
. "$ROOT/tests/cli/lib.sh"
B=tests/fixtures/qwen3
"$GRPO" merge --model "$B" --adapter tests/fixtures/lora/adapter --output_dir "$TMP/m" 2>"$TMP/m.err" \
    || fail "merge: $(cat "$TMP/m.err")"
grep -q "wrote $TMP/m (8 adapted weights, r 4, scaling 2)" "$TMP/m.err" || fail "merge's report: $(cat "$TMP/m.err")"
python3 - "$TMP/m" <<'PY' || fail "the merged directory"
import json, struct, sys
d = sys.argv[1]
c = json.load(open(d + "/config.json"))
assert c["model_type"] == "qwen3" and c["torch_dtype"] == "float32", c
b = open(d + "/model.safetensors", "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert not any("lora" in k for k in h) and "model.layers.1.mlp.down_proj.weight" in h, list(h)[:5]
PY
printf '{"prompt_ids": [1, 2, 3], "completion_ids": [4, 5]}\n' > "$TMP/s.jsonl"
"$GRPO" score --model "$TMP/m" --data "$TMP/s.jsonl" > "$TMP/merged.out" && "$GRPO" score --model "$B" --data "$TMP/s.jsonl" > "$TMP/base.out" \
    || fail "score the merged model"
cmp -s "$TMP/merged.out" "$TMP/base.out" && fail "the adapter changed no log-prob"
"$GRPO" merge --model "$B" --adapter tests/fixtures/lora/adapter --output_dir "$TMP/bf" --dtype bfloat16 2>/dev/null \
    && grep -q '"torch_dtype": "bfloat16"' "$TMP/bf/config.json" || fail "--dtype bfloat16"
# bad input: nothing written
expect_error 1 "m: already exists" "$GRPO" merge --model "$B" --adapter tests/fixtures/lora/adapter --output_dir "$TMP/m"
mkdir -p "$TMP/dora" && cp tests/fixtures/lora/adapter/* "$TMP/dora/" \
    && sed -i 's/"use_dora": false/"use_dora": true/' "$TMP/dora/adapter_config.json"
expect_error 1 "dora/adapter_config.json: use_dora true is not supported" \
    "$GRPO" merge --model "$B" --adapter "$TMP/dora" --output_dir "$TMP/x"
expect_error 1 "has shape" "$GRPO" merge --model tests/fixtures/llama --adapter tests/fixtures/lora/adapter --output_dir "$TMP/x"
[ -e "$TMP/x" ] && fail "a refused merge wrote $TMP/x"
expect_error 2 "adapter is required" "$GRPO" merge --model "$B" --output_dir "$TMP/x"
finish

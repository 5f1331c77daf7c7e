#!/usr/bin/env bash
# `grpo merge`: a PEFT LoRA adapter folded into its base model and written as a
# full HF model directory that the other commands load; the base's dtype kept or
# --dtype; --adapter on generate, eval and score gives what the merged directory
# gives; bad input (an existing output, a refused adapter) leaves nothing.
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
mkdir -p "$TMP/dora" && cp tests/fixtures/lora/adapter/* "$TMP/dora/" \
    && sed -i 's/"use_dora": false/"use_dora": true/' "$TMP/dora/adapter_config.json"
# --adapter on generate, eval and score: the same as running the merged directory in fp32
# (--bf16 false: auto holds a model without an adapter in bf16 on CPUs with bf16 instructions)
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' "$B/config.json" > "$TMP/c300.json"
"$GRPO" init --config "$TMP/c300.json" --tokenizer assets/byte-tokenizer --seed 3 --output_dir "$TMP/t" 2>/dev/null \
    && "$GRPO" merge --model "$TMP/t" --adapter tests/fixtures/lora/adapter --output_dir "$TMP/tm" 2>/dev/null \
    || fail "a model with a tokenizer, merged"
printf '{"prompt": "ab", "solution": "1"}\n{"prompt": "cde"}\n' > "$TMP/d.jsonl"
"$GRPO" generate --model "$TMP/t" --adapter tests/fixtures/lora/adapter --prompt ab --json --max_completion_length 6 \
    > "$TMP/g1" 2>/dev/null && "$GRPO" generate --model "$TMP/tm" --bf16 false --prompt ab --json --max_completion_length 6 > "$TMP/g2" 2>/dev/null \
    && cmp -s "$TMP/g1" "$TMP/g2" || fail "generate --adapter differs from the merged model"
"$GRPO" generate --model "$TMP/t" --prompt ab --json --max_completion_length 6 > "$TMP/g0" 2>/dev/null
cmp -s "$TMP/g0" "$TMP/g1" && fail "generate --adapter gave the base's completions"
"$GRPO" eval --model "$TMP/t" --adapter tests/fixtures/lora/adapter --dataset "$TMP/d.jsonl" --reward_funcs reward_len --json --max_completion_length 6 \
    --num_generations 2 --temperature 1 > "$TMP/e1" 2>/dev/null && "$GRPO" eval --model "$TMP/tm" --bf16 false --dataset "$TMP/d.jsonl" \
    --reward_funcs reward_len --json --max_completion_length 6 --num_generations 2 --temperature 1 > "$TMP/e2" 2>/dev/null && cmp -s "$TMP/e1" "$TMP/e2" \
    || fail "eval --adapter differs from the merged model"
"$GRPO" score --model "$TMP/t" --adapter tests/fixtures/lora/adapter --data "$TMP/s.jsonl" > "$TMP/s1" \
    && "$GRPO" score --model "$TMP/tm" --bf16 false --data "$TMP/s.jsonl" > "$TMP/s2" && cmp -s "$TMP/s1" "$TMP/s2" \
    || fail "score --adapter differs from the merged model"
expect_error 1 "dora/adapter_config.json: use_dora true is not supported" \
    "$GRPO" score --model "$TMP/t" --adapter "$TMP/dora" --data "$TMP/s.jsonl"

# bad input: nothing written
expect_error 1 "m: already exists" "$GRPO" merge --model "$B" --adapter tests/fixtures/lora/adapter --output_dir "$TMP/m"
expect_error 1 "dora/adapter_config.json: use_dora true is not supported" \
    "$GRPO" merge --model "$B" --adapter "$TMP/dora" --output_dir "$TMP/x"
expect_error 1 "has shape" "$GRPO" merge --model tests/fixtures/llama --adapter tests/fixtures/lora/adapter --output_dir "$TMP/x"
[ -e "$TMP/x" ] && fail "a refused merge wrote $TMP/x"
expect_error 2 "adapter is required" "$GRPO" merge --model "$B" --output_dir "$TMP/x"
finish

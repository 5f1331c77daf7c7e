#!/usr/bin/env bash
# --bf16: frozen weights (the KL reference; the base under use_peft) held in bf16,
# and the trained model's products in bf16 (mixed precision, full fine-tuning).
# On a model whose weights are bf16 already (grpo init --dtype bfloat16), holding them
# in bf16 loses nothing, so every result must equal the fp32-held run bit for bit:
# completions (decoding reads the bf16 matrices directly), adapters after LoRA GRPO
# with a KL reference (training-shaped passes widen each layer into fp32), LoRA SFT;
# generate, eval and score with --bf16 give the fp32-held output, and refuse --adapter.
# The fp32 runs say --bf16 false: its default, auto, is true on CPUs with bf16
# instructions (test_bf16_default.sh). Full fine-tuning with --bf16 computes in bf16: other weights than fp32's, which the
# plan says; a resume equals the uninterrupted run (the checkpoint omits the
# reference: it never moves); full SFT with --bf16 likewise differs and says so.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 4 --dtype bfloat16 --output_dir "$TMP/m" \
    2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 "format:^a" --num_generations 4
   --per_device_train_batch_size 2 --gradient_accumulation_steps 2 --max_completion_length 8 --max_steps 3
   --learning_rate 1e-3 --adam_epsilon 1e-2 --logging_steps 1 --log_completions true --seed 2)

same() { # LABEL DIR_FP32 DIR_BF16 WEIGHTS_FILE
    cmp -s "$2/$4" "$3/$4" || fail "$1: $4 differs between fp32- and bf16-held frozen weights"
    [ ! -f "$2/completions.jsonl" ] || cmp -s "$2/completions.jsonl" "$3/completions.jsonl" || fail "$1: completions differ"
}

# LoRA GRPO, beta > 0: the base (and the reference: the base with adapters off) in bf16
L=("${T[@]}" --use_peft --lora_target_modules all-linear --lora_dropout 0.1 --beta 0.1)
"$GRPO" "${L[@]}" --output_dir "$TMP/l32" --bf16 false 2>"$TMP/l32.err" || fail "lora fp32: $(tail -2 "$TMP/l32.err")"
"$GRPO" "${L[@]}" --output_dir "$TMP/l16" --bf16 2>"$TMP/l16.err" || fail "lora bf16: $(tail -2 "$TMP/l16.err")"
same "LoRA GRPO" "$TMP/l32" "$TMP/l16" adapter_model.safetensors
grep -q "frozen weights [0-9]* (in bf16)" "$TMP/l16.err" || fail "the plan does not say the base is bf16: $(cat "$TMP/l16.err")"
grep -q "(in bf16)" "$TMP/l32.err" && fail "with --bf16 false the plan says bf16"

# full fine-tuning with a KL reference: the reference in bf16, the policy's products in bf16
F=("${T[@]}" --beta 0.2 --save_steps 1)
"$GRPO" "${F[@]}" --output_dir "$TMP/f32" --bf16 false 2>"$TMP/f32.err" || fail "full fp32: $(tail -2 "$TMP/f32.err")"
"$GRPO" "${F[@]}" --output_dir "$TMP/f16" --bf16 true 2>"$TMP/f16.err" || fail "full bf16: $(tail -2 "$TMP/f16.err")"
cmp -s "$TMP/f32/model.safetensors" "$TMP/f16/model.safetensors" && fail "full bf16: the same weights as fp32"
grep -q "products in bf16" "$TMP/f16.err" || fail "the plan does not say the products run in bf16: $(head -3 "$TMP/f16.err")"
grep -q "products in bf16" "$TMP/f32.err" && fail "with --bf16 false the plan says bf16"
[ -f "$TMP/f32/checkpoint-1/ref_model.safetensors" ] && [ ! -f "$TMP/f16/checkpoint-1/ref_model.safetensors" ] \
    || fail "checkpoints: the fp32 reference is saved, the bf16 one (never moving) is not"
# resume from checkpoint-1 (a copy, with the logs) equals the uninterrupted bf16 run
mkdir -p "$TMP/r16" && cp -r "$TMP/f16/checkpoint-1" "$TMP/f16/metrics.jsonl" "$TMP/f16/completions.jsonl" "$TMP/r16/"
"$GRPO" "${F[@]}" --output_dir "$TMP/r16" --quiet --bf16 true --resume_from_checkpoint "$TMP/r16/checkpoint-1" \
    2>"$TMP/r16.err" || fail "resume with a bf16 reference: $(tail -2 "$TMP/r16.err")"
same "resume with a bf16 reference" "$TMP/f16" "$TMP/r16" model.safetensors

# LoRA SFT on a bf16 base
printf '%s\n' '{"prompt": "1+1=", "completion": "2"}' '{"prompt": "2+2=", "completion": "4"}' '{"text": "abc abc"}' > "$TMP/s.jsonl"
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 3 --learning_rate 1e-2
   --use_peft --lora_target_modules all-linear --quiet)
"$GRPO" "${S[@]}" --output_dir "$TMP/s32" --bf16 false 2>"$TMP/s.err" || fail "sft fp32: $(tail -2 "$TMP/s.err")"
"$GRPO" "${S[@]}" --output_dir "$TMP/s16" --bf16 2>"$TMP/s.err" || fail "sft bf16: $(tail -2 "$TMP/s.err")"
same "LoRA SFT" "$TMP/s32" "$TMP/s16" adapter_model.safetensors
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 3 --learning_rate 1e-2)
"$GRPO" "${S[@]}" --output_dir "$TMP/sf32" --quiet --bf16 false 2>"$TMP/s.err" || fail "full sft fp32: $(tail -2 "$TMP/s.err")"
"$GRPO" "${S[@]}" --output_dir "$TMP/sf16" --bf16 2>"$TMP/s.err" || fail "full sft bf16: $(tail -2 "$TMP/s.err")"
cmp -s "$TMP/sf32/model.safetensors" "$TMP/sf16/model.safetensors" && fail "full sft bf16: the same weights as fp32"
grep -q "products in bf16" "$TMP/s.err" || fail "sft's plan does not say the products run in bf16: $(head -3 "$TMP/s.err")"

# generate, eval and score with --bf16: the same output on the bf16 model; --adapter refused
Gn=(generate --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 3 --max_completion_length 8 --json)
"$GRPO" "${Gn[@]}" --bf16 false >"$TMP/g32.jsonl" 2>/dev/null && "$GRPO" "${Gn[@]}" --bf16 >"$TMP/g16.jsonl" 2>"$TMP/g.err" \
    || fail "generate --bf16: $(tail -2 "$TMP/g.err")"
[ -s "$TMP/g32.jsonl" ] && cmp -s "$TMP/g32.jsonl" "$TMP/g16.jsonl" || fail "generate: completions differ with --bf16"
E=(eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --max_completion_length 8 --json)
"$GRPO" "${E[@]}" --bf16 false >"$TMP/e32.json" 2>/dev/null && "$GRPO" "${E[@]}" --bf16 >"$TMP/e16.json" 2>"$TMP/e.err" \
    || fail "eval --bf16: $(tail -2 "$TMP/e.err")"
[ -s "$TMP/e32.json" ] && cmp -s "$TMP/e32.json" "$TMP/e16.json" || fail "eval: the report differs with --bf16"
printf '%s\n' '{"prompt_ids": [97, 98], "completion_ids": [99, 100, 101]}' '{"prompt_ids": [102], "completion_ids": [103]}' \
    > "$TMP/sc.jsonl"
"$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16 false >"$TMP/sc32" 2>/dev/null \
    && "$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16 >"$TMP/sc16" 2>"$TMP/sc.err" \
    || fail "score --bf16: $(tail -2 "$TMP/sc.err")"
[ "$(wc -l < "$TMP/sc32")" -eq 2 ] && cmp -s "$TMP/sc32" "$TMP/sc16" || fail "score: log-probs differ with --bf16"
for c in "generate --prompt ab" "eval --dataset $TMP/d.jsonl --reward_funcs length:5" "score --data $TMP/sc.jsonl"; do
    # shellcheck disable=SC2086
    "$GRPO" $c --model "$TMP/m" --bf16 --adapter "$TMP/l16" >/dev/null 2>"$TMP/c.err"
    rc=$?
    [ $rc -eq 2 ] && grep -q -- "--bf16 holds the weights in bf16 and --adapter" "$TMP/c.err" \
        || fail "${c%% *} --bf16 --adapter: exit $rc, $(cat "$TMP/c.err")"
done

# an fp32 model held in bf16 is rounded: it runs, and (being another model) trains otherwise
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 4 --output_dir "$TMP/m32" 2>/dev/null
R=("${L[@]}" --model "$TMP/m32")
"$GRPO" "${R[@]}" --output_dir "$TMP/q32" --quiet --bf16 false 2>/dev/null && "$GRPO" "${R[@]}" --output_dir "$TMP/q16" --quiet --bf16 \
    2>"$TMP/q.err" || fail "fp32 model with --bf16: $(tail -2 "$TMP/q.err")"
cmp -s "$TMP/q32/adapter_model.safetensors" "$TMP/q16/adapter_model.safetensors" \
    && fail "rounding an fp32 base to bf16 changed nothing: the bf16 path was not taken"
finish

#!/usr/bin/env bash
# bench/lora_rss.sh — peak RSS of `grpo train` with LoRA for one GRPO step: r 16 on
# all linear layers, G = 16 completions of 256 tokens (the 64-token prompt of
# bench/bench_grpo_step.c), micro-batch 2 x 8 accumulation steps, gradient
# checkpointing (the default); random fp32 weights of the Qwen2.5-1.5B and
# Qwen2.5-3B shapes with the Qwen vocabulary (151936), written by
# `bench_grpo_step --shape S --write_dir`. "Maximum resident set size" from
# /usr/bin/time -v, next to the memory plan the run printed. The frozen base is held
# in bf16 (--bf16; BF16=0 holds it in fp32). SHAPES (default "qwen2.5-1.5b
# qwen2.5-3b") picks the shapes.
#   BUILD=build bench/lora_rss.sh
# prints per shape
#   lora_rss shape=S bf16=0|1 kb=N plan_mb=M step_s=T
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/lora_rss.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
for shape in ${SHAPES:-qwen2.5-1.5b qwen2.5-3b}; do
    "$BUILD/bench/bench_grpo_step" --shape "$shape" --write_dir "$tmp/model" || { echo "lora_rss: $shape model directory failed"; continue; }
    /usr/bin/time -v "$BUILD/grpo" train --model "$tmp/model" --dataset "$tmp/model/data.jsonl" \
        --output_dir "$tmp/out" --reward_funcs length:50 --num_generations 16 \
        --per_device_train_batch_size 2 --gradient_accumulation_steps 8 --max_completion_length 256 \
        --max_steps 1 --save_steps 0 --logging_steps 1 --use_peft --lora_r 16 --lora_alpha 32 \
        --lora_target_modules all-linear --bf16 "${BF16:-1}" > "$tmp/log" 2>&1 || { echo "lora_rss: grpo train $shape failed:"; tail -5 "$tmp/log"; }
    kb=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/log")
    plan=$(sed -n 's/.*memory plan \([0-9]*\) MB.*/\1/p' "$tmp/log")
    step=$(python3 -c "import json,sys; print(json.loads(open(sys.argv[1]).readline())['step_time'])" "$tmp/out/metrics.jsonl" 2>/dev/null)
    echo "lora_rss shape=$shape bf16=${BF16:-1} kb=$kb plan_mb=$plan step_s=${step:--}"
    rm -rf "$tmp/model" "$tmp/out"
done

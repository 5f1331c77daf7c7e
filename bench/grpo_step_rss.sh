#!/usr/bin/env bash
# bench/grpo_step_rss.sh — peak RSS of `grpo train` for one GRPO step at G = 8 and
# G = 64 (micro-batch 4, gradient_accumulation_steps G/4: one prompt's group per
# step; 64-token prompt, 128-token completions, reward length:50) on the small shape
# of bench/bench_grpo_step.c (hidden 256, 4 layers, 8/4 heads, intermediate 768,
# vocab 32000; its model directory, written by `bench_grpo_step --write_dir`).
# The same --kv_cache_mb for both (KV_MB, default 8: the generation chunk then holds
# 8 completions of 192 tokens at this shape, so generation memory is the same at
# both G). "Maximum resident set size" from /usr/bin/time -v. Target: ratio <= 1.1.
#   BUILD=build bench/grpo_step_rss.sh
# prints
#   rss G=8 kb=N plan_mb=M chunk=C
#   rss G=64 kb=N plan_mb=M chunk=C
#   rss ratio=R
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
KV_MB=${KV_MB:-8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
"$BUILD/bench/bench_grpo_step" --shape small --write_dir "$tmp/model" || { echo "rss: model directory failed"; exit 1; }
declare -A kb
for G in 8 64; do
    /usr/bin/time -v "$BUILD/grpo" train --model "$tmp/model" --dataset "$tmp/model/data.jsonl" \
        --output_dir "$tmp/out$G" --reward_funcs length:50 --num_generations $G \
        --per_device_train_batch_size 4 --gradient_accumulation_steps $((G / 4)) \
        --max_completion_length 128 --max_steps 1 --save_steps 0 --kv_cache_mb "$KV_MB" \
        > "$tmp/log$G" 2>&1 || { echo "rss: grpo train G=$G failed:"; tail -5 "$tmp/log$G"; exit 1; }
    kb[$G]=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$tmp/log$G")
    plan=$(sed -n 's/.*memory plan \([0-9]*\) MB.*(\([0-9]*\) completions at a time).*/plan_mb=\1 chunk=\2/p' "$tmp/log$G")
    echo "rss G=$G kb=${kb[$G]} $plan"
done
awk -v a="${kb[8]}" -v b="${kb[64]}" 'BEGIN { printf "rss ratio=%.3f\n", b / a }'

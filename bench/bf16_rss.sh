#!/usr/bin/env bash
# bench/bf16_rss.sh — peak RSS of one GRPO step in fp32 and with --bf16 (mixed
# precision: fp32 master weights held as their bf16 values and low halves, fp32
# gradients and AdamW state; a KL reference held in bf16), bench_grpo_step at the Qwen2-0.5B shape,
# G = 8 (two micro-batches of 4), no warm-up, with beta 0 (no reference) and beta
# 0.04. "Maximum resident set size" from /usr/bin/time -v. Issue 14's target: the
# bf16 run's peak <= the fp32 run's.
#   BUILD=build bench/bf16_rss.sh
# prints per beta
#   bf16_rss beta=B fp32_kb=N bf16_kb=M ratio=R
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
for beta in 0 0.04; do
    declare -A kb=()
    for bf in fp32 bf16; do
        flag=; [ "$bf" = bf16 ] && flag=--bf16
        /usr/bin/time -v "$BUILD/bench/bench_grpo_step" --shape qwen2-0.5b --G 8 --warmup 0 --beta "$beta" $flag \
            > "$out" 2>&1 || { echo "bf16_rss: bench_grpo_step beta=$beta $bf failed:"; tail -3 "$out"; continue 2; }
        kb[$bf]=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$out")
    done
    awk -v b="$beta" -v f="${kb[fp32]}" -v h="${kb[bf16]}" \
        'BEGIN { printf "bf16_rss beta=%s fp32_kb=%d bf16_kb=%d ratio=%.3f\n", b, f, h, h / f }'
done

#!/usr/bin/env bash
# tools/gpu_check/memory.sh — issue 35's memory targets on the device: "Qwen2.5-1.5B full
# fine-tuning with G = 64 x 1024 and Qwen2.5-7B LoRA with G = 16 x 1024 fit in 80 GB (the
# plan says so before the first step, and the run confirms it)". Each is one `grpo train`
# step with the options a user would give (every other option TRL's default: selective
# checkpointing, beta 0, the rollout's chunk planned from kv_cache_mb), micro-batch 8,
# one 64-token prompt a step, the completions at full length: zero weights (tools/
# gpu_check/sparse_model.py: the published shapes in a sparse file, made in a moment)
# sample uniformly over the vocabulary and the tokenizer has no eos.
#
# For each it prints the memory plan, what of it is the GPU's (the plan's device figures:
# weights and AdamW, reference, activations, the rollout's KV caches and buffers), and the
# most device memory nvidia-smi saw in use during the run (GPU 0, read every 0.1 s; the CUDA
# context and cuBLASLt's workspace included), against an H100 80GB's 81,559 MiB: met when
# both are under it and the step ran on the GPU. A missed target is reported, not a
# failure; a run that failed or did not train on the GPU fails the section.
#
# Not in the default list (the budget goes to the checks and the benchmark): run it as
# GPU_CHECK_SECTIONS="memory:150 bench" OUT=$OUT tools/gpu-check.sh. A section of
# tools/gpu-check.sh (BUILD, OUT, GPU_CHECK_LEFT, PYTHON; GPU_CHECK_DRY=1: tiny widths on
# the CPU, the paths only).
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
. tools/gpu_check/run_step.sh
DRY=${GPU_CHECK_DRY:-0}
W=$(mktemp -d)  # the models are sparse, their runs' outputs are not: never into OUT
trap 'kill $SMI 2> /dev/null; rm -rf "$W"' EXIT
E=$OUT/memory
mkdir -p "$E"
SMI=""
BOUND_MIB=81559  # an H100 80GB's memory as nvidia-smi reports it
status=0
printf '{"prompt": "Write a short story about a robot who learns to paint at night.\\n"}\n' > "$W/prompt.jsonl"

# target NAME LIMIT_S WHAT G NEW "HIDDEN LAYERS HEADS KV_HEADS INTERMEDIATE VOCAB TIED" ARGS...
target() {
    local name=$1 limit=$2 what=$3 G=$4 new=$5 shape=$6 mb=8
    shift 6
    [ "$DRY" = 1 ] && mb=2
    echo "== $what: G = $G x $new, micro-batch $mb"
    # shellcheck disable=SC2086
    "$PY" tools/gpu_check/sparse_model.py "$W/$name" $shape || { echo "FAILED: the model"; status=1; return; }
    : > "$W/$name.smi"
    if [ "$DRY" != 1 ] && command -v nvidia-smi > /dev/null; then
        nvidia-smi -i 0 --query-gpu=memory.used,memory.total --format=csv,noheader,nounits -lms 100 > "$W/$name.smi" &
        SMI=$!
    fi
    run_step "$name" "$limit" "$W/$name.out" "$E/$name.err" "$BUILD/grpo" train --model "$W/$name" \
        --dataset "$W/prompt.jsonl" --reward_funcs length:50 --num_generations "$G" --max_completion_length "$new" \
        --per_device_train_batch_size $mb --gradient_accumulation_steps $((G / mb)) --max_steps 1 \
        --logging_steps 1 --save_strategy no --seed 1 --output_dir "$W/$name.run" "$@"
    local rc=$?
    [ -n "$SMI" ] && { kill "$SMI" 2> /dev/null; wait "$SMI" 2> /dev/null; SMI=""; }
    cp "$W/$name.smi" "$E/$name.smi" 2> /dev/null
    [ -s "$W/$name.run/metrics.jsonl" ] && cp "$W/$name.run/metrics.jsonl" "$E/$name.metrics.jsonl"
    ran_on_gpu "$name" "$E/$name.err" || rc=1
    [ $rc = 0 ] || status=1
    "$PY" tools/gpu_check/memory_verdict.py --plan "$E/$name.err" --smi "$W/$name.smi" --bound-mib $BOUND_MIB \
        --rc $rc --dry "$DRY" || status=1
}

if [ "$DRY" = 1 ]; then
    target m15 600 "qwen2.5-1.5b full fine-tuning (dry run: 2 layers of 64)" 4 8 "64 2 4 2 128 4096 1"
    target m7 600 "qwen2.5-7b LoRA (dry run: 2 layers of 64)" 4 8 "64 2 4 2 128 4096 0" --use_peft true
else
    # the first run takes at most half of the section, so that the second has its turn
    target m15 $((${GPU_CHECK_LEFT:-600} / 2)) "qwen2.5-1.5b full fine-tuning" 64 1024 "1536 28 12 2 8960 151936 1"
    target m7 600 "qwen2.5-7b LoRA (PEFT's default modules)" 16 1024 "3584 28 28 4 18944 152064 0" --use_peft true
fi
echo "memory: done in ${SECONDS} s, status $status"
exit $status

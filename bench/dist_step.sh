#!/usr/bin/env bash
# bench/dist_step.sh — data parallelism on one machine: one GRPO step of `grpo train`
# at the Qwen2-0.5B shape (random fp32 weights, Qwen vocabulary, written by
# `bench_grpo_step --write_dir`), G = 16 completions of 128 tokens of the 64-token
# prompt, dapo, 4 global micro-batches of 4, checkpointing on — run as
#   1 process  x 2 threads  (per_device_train_batch_size 4), and
#   2 processes x 1 thread  (mpirun -np 2, per_device_train_batch_size 2),
# the same global batch. Figures from the run's own metrics.jsonl: step_time, its
# generation and training parts, num_tokens, and step_time/allreduce (the gradient
# sum across processes); the bytes all-reduced are the fp32 gradient, 4 bytes per
# trained parameter. The first step is the timed one (no warm-up: minutes on 2 cores).
#   BUILD=build bench/dist_step.sh
# prints
#   dist_step procs=P threads=T step_s= gen_s= train_s= tokens= allreduce_s= grad_bytes=
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
tmp=$(mktemp -d "${TMPDIR:-/tmp}/dist_step.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
command -v mpirun >/dev/null || { echo "dist_step: mpirun not found (tools/install-deps.sh installs openmpi-bin)"; exit 0; }
[ "$(id -u)" -eq 0 ] && export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_btl_vader_single_copy_mechanism=none
"$BUILD/bench/bench_grpo_step" --shape qwen2-0.5b --write_dir "$tmp/model" || { echo "dist_step: model directory failed"; exit 0; }
run() { # procs threads micro-batch
    local out="$tmp/out$1"
    local args=(train --model "$tmp/model" --dataset "$tmp/model/data.jsonl" --output_dir "$out" --reward_funcs length:50
                --num_generations 16 --per_device_train_batch_size "$3" --gradient_accumulation_steps 4
                --max_completion_length 128 --max_steps 1 --save_steps 0 --logging_steps 1 --loss_type dapo --quiet)
    if [ "$1" -eq 1 ]; then
        GRPO_THREADS=$2 "$BUILD/grpo" "${args[@]}" > "$tmp/log$1" 2>&1
    else
        mpirun -np "$1" --bind-to core -x GRPO_THREADS="$2" "$BUILD/grpo" "${args[@]}" > "$tmp/log$1" 2>&1
    fi || { echo "dist_step: $1 process(es) failed:"; tail -5 "$tmp/log$1"; return; }
    python3 - "$out/metrics.jsonl" "$tmp/model/model.safetensors" "$1" "$2" <<'PY'
import json, struct, sys
m = json.loads(open(sys.argv[1]).readline())
with open(sys.argv[2], "rb") as f:
    h = json.loads(f.read(struct.unpack("<Q", f.read(8))[0]))
params = sum(v["data_offsets"][1] - v["data_offsets"][0] for k, v in h.items() if k != "__metadata__") // 4
print("dist_step procs=%s threads=%s step_s=%.3f gen_s=%.3f train_s=%.3f tokens=%d allreduce_s=%.3f grad_bytes=%d" % (
    sys.argv[3], sys.argv[4], m["step_time"], m["step_time/generation"], m["step_time/training"], m["num_tokens"],
    m.get("step_time/allreduce", 0.0), 4 * params))
PY
}
run 1 2 4
run 2 1 2

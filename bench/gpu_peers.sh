#!/usr/bin/env bash
# bench/gpu_peers.sh — the PyTorch side of issue 35's targets on one GPU, in one command
# of about 4 minutes, each figure printed as soon as it is measured (a run cut short still
# leaves what it finished). tools/gpu_check/bench.sh, the device check's section, runs
# grpo.c's own GPU figures next to these peers in one run; docs/gpu.md ("Benchmarks on
# the GPU") says how to run either.
#
#   OUT=$OUT bench/gpu_peers.sh          on the GPU machine (the device tool's run)
#   DEVICE=cpu TINY=1 bench/gpu_peers.sh  every line on a 1-layer model with a few tokens:
#                                        checks the code paths on a machine without a GPU
# PYTHON picks the interpreter (default python3: the GPU image's, with torch and
# transformers). The lines, in order:
#   train   forward + backward, bf16 autocast over fp32 weights, 8 sequences of
#           64 prompt + 512 completion tokens, logits for the completion positions only;
#           median and range of 5 passes after 2 warm-ups, TFLOP/s and MFU (torch_model.py)
#   decode  transformers' generate, bf16 weights, its KV cache: G = 64 and G = 8
#           completions of 512 new tokens; at G = 8 the bandwidth-bound line (torch_generate.py)
#   grpo    one GRPO step, 1.5B shape, G = 64 x 512, micro-batch 8: transformers generate
#           (bf16 copy, re-synced) + the eager bf16 training step (torch_grpo_step.py)
#   decode  the same decode by this repository's hand-written torch Qwen2 (a second peer)
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
PY=${PYTHON:-python3}
DEVICE=${DEVICE:-cuda}
TINY=${TINY:-0}
LOG=/dev/null
[ -n "${OUT:-}" ] && LOG="$OUT/gpu_peers.txt"

if [ "$TINY" = 1 ]; then  # the paths, not the figures
    L="--layers 1" NEW=4 WT=4 GSIZES=4,2 G=4 MB=2 PT=8 CT=8 ITERS="--warmup 1 --iters 2" LONG=--long LIMIT=600
else
    L="" NEW=512 WT=16 GSIZES=64,8 G=64 MB=8 PT=64 CT=512 ITERS="--warmup 2 --iters 5" LONG="" LIMIT=0
fi

# One peer under its time limit (bench/gpu_peer.sh); a peer that fails or runs out of
# time says so and the next one runs; the script then exits 1. The limits add up to
# 9.5 minutes: the device tool's timeout_s 600 lets every peer use its own.
. "$ROOT/bench/gpu_peer.sh"
failed=0
peer() {
    local limit=$1
    shift
    [ "$LIMIT" != 0 ] && limit=$LIMIT
    gpu_peer "$limit" "$LOG" "$@" || failed=$((failed + 1))
}

{
    echo "gpu_peers: $(date -u +%FT%TZ) device=$DEVICE tiny=$TINY"
    gpu_peer_versions
} | tee -a "$LOG"

for shape in qwen2.5-0.5b qwen2.5-1.5b; do
    peer 60 bench/torch_model.py --shape $shape $L --mode bf16 --batch $MB \
        --prompt-tokens $PT --completion-tokens $CT $ITERS
done
for shape in qwen2.5-0.5b qwen2.5-1.5b; do
    peer 120 bench/torch_generate.py --impl transformers --dtype bf16 --shape $shape $L \
        --G $GSIZES --new-tokens $NEW --reps 1
done
peer 150 bench/torch_grpo_step.py --shape qwen2.5-1.5b $L --G $G --completion-tokens $NEW \
    --micro-batch $MB --bf16 --gen transformers --warmup 1 --warmup-tokens $WT
for shape in qwen2.5-0.5b qwen2.5-1.5b; do
    peer 30 bench/torch_generate.py --impl ours --dtype bf16 --shape $shape $L \
        --G $GSIZES --new-tokens $NEW --reps 1
done
echo "gpu_peers: done $(date -u +%FT%TZ), $failed peer(s) failed or timed out" | tee -a "$LOG"
[ "$failed" = 0 ]

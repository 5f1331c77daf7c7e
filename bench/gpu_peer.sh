# bench/gpu_peer.sh — sourced by bench/gpu_peers.sh and tools/gpu_check/bench.sh: how a
# PyTorch peer of issue 35's GPU targets is run, so that the peers' own command and
# grpo.c's benchmark section call the same Python files the same way.
# Uses PY (the interpreter), DEVICE (cuda or cpu) and LONG ("--long" prints the GPU
# run's lines on the CPU too, or empty).

# gpu_peer_versions: the interpreter's torch, CUDA, GPU and transformers, one line each.
gpu_peer_versions() {
    "$PY" -c 'import torch; print("torch", torch.__version__, "cuda", torch.version.cuda,
              torch.cuda.get_device_name(0) if torch.cuda.is_available() else "no GPU")' 2>&1
    "$PY" -c 'import transformers; print("transformers", transformers.__version__)' 2> /dev/null ||
        echo "transformers: none (its peers are skipped: no transformers)"
}

# gpu_peer LIMIT_S LOG SCRIPT ARGS...: runs one peer under a time limit; its lines (and
# any error) go to the screen and are appended to LOG as they come. A peer that fails
# or runs out of time says so. Returns the peer's exit status (124: timed out).
gpu_peer() {
    local limit=$1 log=$2
    shift 2
    echo "# $*" | tee -a "$log"
    timeout -k 10 "$limit" "$PY" "$@" --device "$DEVICE" $LONG 2>&1 | tee -a "$log"
    local rc=${PIPESTATUS[0]}
    if [ "$rc" = 124 ]; then
        echo "peer: timed out after ${limit} s: $*" | tee -a "$log"
    elif [ "$rc" != 0 ]; then
        echo "peer: failed (exit $rc): $*" | tee -a "$log"
    fi
    return "$rc"
}

#!/usr/bin/env bash
# tools/gpu_check/bench.sh — the device check's benchmark section (issue 35's targets):
# grpo.c's own figures on the GPU next to its PyTorch peers, measured in this one run,
# each printed as a ratio against the target with "met" or "missed" as soon as both
# sides are in. Run by tools/gpu-check.sh's driver from the repository root with BUILD,
# OUT, GPU_CHECK_LEFT (seconds it may use), PYTHON and, in a dry run on a machine
# without a GPU, GPU_CHECK_DRY=1 (every path on the CPU, 1-layer models, a few tokens).
#
# grpo.c runs through its commands on random-weight models `grpo init` makes here at
# Qwen2.5-0.5B's and 1.5B's published widths, with a tokenizer without eos so that every
# completion runs its full length, as the peers' do: decode by `grpo generate` (its
# tokens/s line), the training pass by `grpo train`'s step_time/training (forward +
# backward of its micro-batches, generation and the optimizer outside it), the GRPO
# step by `grpo train`'s step_time. The peers are bench/gpu_peers.sh's Python files,
# called the same way (bench/gpu_peer.sh). Lines in order of importance, so a run cut
# short keeps the first: decode 0.5B, training 0.5B, GRPO step 1.5B, decode 1.5B,
# training 1.5B. A line that does not fit what is left runs cut (fewer tokens or
# passes: it says so) or not at all (it says so); every command's time limit is clamped
# to what is left, so nothing outlives the section. Exits 1 when a command failed, a
# figure of grpo.c's is missing, or (not in a dry run) grpo.c did not run on the GPU;
# a missed target is reported, not a failure. docs/gpu.md "Benchmarks on the GPU".
set -u
ROOT=$(cd "$(dirname "$0")/../.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
PY=${PYTHON:-python3}
DRY=${GPU_CHECK_DRY:-0}
LIMIT_S=${GPU_CHECK_LEFT:-240}
GRPO=$BUILD/grpo
W=$(mktemp -d)  # models and completions: never into OUT
trap 'rm -rf "$W"' EXIT
E=$OUT/bench    # grpo.c's stderr, the peers' logs, metrics: small, and kept by a run cut short
mkdir -p "$E"
. bench/gpu_peer.sh
status=0
# bench/torch_grpo_step.py's prompt: 64 bytes, 64 tokens of the byte tokenizer (no
# merges, no bos), as the peers' 64-token prompts
PROMPT=$'Write a short story about a robot who learns to paint at night.\n'
PT=64
if [ "$DRY" = 1 ]; then  # the paths, not the figures
    # the CPU's times read against an H100's bandwidth: the arithmetic runs, its figure means nothing
    DEVICE=cpu LONG=--long GPU="dry run, read as an H100" HAVE_GPU_WORDS=""
    NEW=4 CUT_NEW=4 GBIG=4 GSMALL=2 MB=2 L05=1 L15=1 STEPS=2 ITERS="--warmup 0 --iters 1" CUT_ITERS=$ITERS
else
    DEVICE=cuda LONG="" GPU=$(nvidia-smi --query-gpu=name --format=csv,noheader 2> /dev/null | head -1)
    [ -n "$GPU" ] || GPU=$("$PY" -c 'import torch; print(torch.cuda.get_device_name(0))' 2> /dev/null)
    HAVE_GPU_WORDS="on the GPU"
    NEW=512 CUT_NEW=128 GBIG=64 GSMALL=8 MB=8 L05=24 L15=28 STEPS=3
    ITERS="--warmup 2 --iters 5" CUT_ITERS="--warmup 1 --iters 3"
fi
echo "bench: $(date -u +%FT%TZ) gpu=${GPU:-unknown} dry=$DRY limit ${LIMIT_S} s"
gpu_peer_versions
HAVE_TF=1
"$PY" -c 'import transformers' 2> /dev/null || HAVE_TF=0
if [ $HAVE_TF = 0 ] && [ "$DRY" != 1 ]; then
    echo "FAILED: $PY has no transformers: the generate and GRPO-step peers cannot run"; status=1
fi

left() { echo $((LIMIT_S - SECONDS)); }

# plan NAME FULL_S CUT_S: sets MODE to full, cut or skip by the seconds left against the
# line's estimated cost (a guess until a GPU run times it; the lines print their times)
plan() {
    local l; l=$(left)
    if [ "$DRY" = 1 ] || [ "$l" -ge "$2" ]; then MODE=full
    elif [ "$l" -ge "$3" ]; then MODE=cut
    else MODE=skip; echo "== $1: not run: ${l} s left, it needs about $3 s"; return; fi
    echo "== $1 ($MODE sizes, ${l} s left)"
}

# ours NAME LIMIT_S CMD...: one grpo command under timeout (never past what is left),
# stdout to $W/NAME.out, stderr to $E/NAME.err; says its rc and time, and on failure its
# stderr's last lines; under 5 s left it is not started (and says so). Not on the GPU where one is expected: a failure too (set
# HAVE_GPU_WORDS empty for a command that runs on the CPU anyway: grpo init).
ours() {
    local name=$1 lim=$2 l; shift 2
    l=$(($(left) - 5)); [ "$l" -lt "$lim" ] && lim=$l
    if [ "$lim" -lt 5 ]; then echo "grpo.c $name: not run: no time left"; return 1; fi
    local t0=$SECONDS
    timeout -k 5 "$lim" "$@" > "$W/$name.out" 2> "$E/$name.err"
    local rc=$?
    echo "grpo.c $name: rc $rc in $((SECONDS - t0)) s$([ $rc = 124 ] && echo " (timed out at $lim s)")"
    if [ $rc != 0 ]; then tail -4 "$E/$name.err"; status=1; return 1; fi
    if [ -n "$HAVE_GPU_WORDS" ] && ! grep -q "$HAVE_GPU_WORDS" "$E/$name.err"; then
        echo "FAILED: $name did not say it ran $HAVE_GPU_WORDS:"; grep -m3 -i "cpu\|plan" "$E/$name.err"; status=1; return 1
    fi
}

# peer NAME LIMIT_S SCRIPT ARGS...: a PyTorch peer, its lines on the screen as they come
# and in $E/NAME.txt; a transformers peer without transformers is skipped (a dry run's
# case) and says so. In a dry run only what is left limits it (the CPU is slow at it).
peer() {
    local name=$1 lim=$2 l; shift 2
    l=$(($(left) - 5)); { [ "$l" -lt "$lim" ] || [ "$DRY" = 1 ]; } && lim=$l
    : > "$E/$name.txt"
    if [ $HAVE_TF = 0 ] && [[ " $* " == *" transformers "* ]]; then
        echo "skipped: no transformers" | tee "$E/$name.txt"; return 0
    fi
    if [ "$lim" -lt 5 ]; then echo "not run: no time left" | tee "$E/$name.txt"; return 0; fi
    gpu_peer "$lim" "$E/$name.txt" "$@" || status=1
}

# lines WHAT ARGS...: the comparison lines (bench_lines.py); grpo.c's figure missing fails
lines() { "$PY" tools/gpu_check/bench_lines.py "$@" --verdicts "$W/verdicts" --gpu "$GPU" || status=1; }

# The tokenizer without eos (assets/byte-tokenizer's, eos_token null): `grpo init` then
# writes no eos into config.json and generation_config.json, and no completion stops
# early (the peers forbid eos the same way); the GRPO dataset of the peer's prompt.
PROMPT="$PROMPT" "$PY" - "$W" <<'EOF' || { echo "FAILED: the tokenizer copy"; exit 1; }
import json, os, shutil, sys
w = sys.argv[1]
shutil.copytree("assets/byte-tokenizer", w + "/tok")
p = w + "/tok/tokenizer_config.json"
c = json.load(open(p))
c["eos_token"] = None
json.dump(c, open(p, "w"), indent=2)
with open(w + "/prompt.jsonl", "w") as f:
    f.write(json.dumps({"prompt": os.environ["PROMPT"]}) + "\n")
EOF

# model NAME HIDDEN LAYERS HEADS KV_HEADS INTERMEDIATE: random bf16 weights of that
# Qwen2.5 shape (q/k/v biases, tied head, the published vocabulary) in $W/NAME, by
# `grpo init` (on the CPU: its time is in no figure). BG=1: in the background, niced, on
# half the cores, while the first lines run on the GPU; model_wait NAME waits for it.
model() {
    "$PY" - "$W/$1.json" "$2" "$3" "$4" "$5" "$6" <<'EOF'
import json, sys
p, C, L, H, Hkv, F = sys.argv[1], *map(int, sys.argv[2:])
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": C,
           "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": Hkv, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": True, "max_position_embeddings": 32768, "vocab_size": 151936,
           "bos_token_id": None, "eos_token_id": None, "initializer_range": 0.02, "torch_dtype": "bfloat16"},
          open(p, "w"))
EOF
    local cmd=("$GRPO" init --config "$W/$1.json" --tokenizer "$W/tok" --seed 1 --output_dir "$W/$1")
    if [ "${BG:-0}" = 1 ]; then
        local half=$(($(nproc) / 2)) lim=$(($(left) - 10))
        [ $half -gt 0 ] || half=1
        [ $lim -gt 1 ] || lim=1
        echo "grpo.c init_$1: in the background (nice 19, $half threads) while the lines before it run"
        OMP_NUM_THREADS=$half nice -n 19 timeout -k 5 "$lim" "${cmd[@]}" > "$E/init_$1.err" 2>&1 &
        eval "INIT_PID_$1=$! INIT_T0_$1=$SECONDS"
    else
        HAVE_GPU_WORDS="" ours "init_$1" 240 "${cmd[@]}"
    fi
}
# model_wait NAME: waits for NAME's background init (its timeout ends with the section's time)
model_wait() {
    local pid t0 t1=$SECONDS
    eval "pid=\$INIT_PID_$1 t0=\$INIT_T0_$1"
    wait "$pid"
    local rc=$?
    echo "grpo.c init_$1: rc $rc, $((SECONDS - t0)) s since it started, $((SECONDS - t1)) s of it waited for here"
    [ "$rc" = 0 ] || { tail -3 "$E/init_$1.err"; status=1; return 1; }
}

# train_run NAME LIMIT_S STEPS ARGS...: `grpo train` for STEPS steps, a metrics line each,
# killed (SIGKILL) once the last step's line is in: the final save (a whole model
# written to disk) is in no figure. Not `timeout`: grpo train answers SIGTERM by
# finishing its step and writing a checkpoint (model and AdamW state), seconds to
# minutes on the GPU machine's disk; the time limit is kept by this loop instead.
train_run() {
    local name=$1 lim=$2 steps=$3 l; shift 3
    l=$(($(left) - 5)); [ "$l" -lt "$lim" ] && lim=$l
    if [ "$lim" -lt 5 ]; then echo "grpo.c $name: not run: no time left"; return 1; fi
    local t0=$SECONDS stopped=0 late=0
    "$GRPO" train --output_dir "$W/$name" --max_steps "$steps" --logging_steps 1 \
        --dataset "$W/prompt.jsonl" --reward_funcs length:50 --loss_type dapo --beta 0 --learning_rate 1e-6 \
        --temperature 1 --gradient_checkpointing false --save_strategy no --seed 1 "$@" \
        > "$W/$name.out" 2> "$E/$name.err" &
    local pid=$!
    while kill -0 $pid 2> /dev/null; do
        if [ "$(grep -c '"step_time"' "$W/$name/metrics.jsonl" 2> /dev/null)" -ge "$steps" ] 2> /dev/null; then
            kill -KILL $pid 2> /dev/null; stopped=1; break
        fi
        if [ $((SECONDS - t0)) -ge "$lim" ]; then kill -KILL $pid 2> /dev/null; late=1; break; fi
        sleep 0.5
    done
    wait $pid 2> /dev/null
    local rc=$?
    [ $late = 1 ] && rc=124
    [ $stopped = 1 ] && rc=0
    cp "$W/$name/metrics.jsonl" "$E/$name.metrics.jsonl" 2> /dev/null
    echo "grpo.c $name: rc $rc in $((SECONDS - t0)) s$([ $stopped = 1 ] && echo ", stopped after step $steps's metrics")$(
        [ $late = 1 ] && echo " (killed at its $lim s limit)")"
    grep -m2 -E "memory plan|on the GPU|on the CPU" "$E/$name.err"
    if [ $rc != 0 ]; then tail -4 "$E/$name.err"; status=1; return 1; fi
    if [ -n "$HAVE_GPU_WORDS" ] && ! grep -q "$HAVE_GPU_WORDS" "$E/$name.err"; then
        echo "FAILED: $name did not say it ran $HAVE_GPU_WORDS"; status=1; return 1
    fi
}

# decode_line MODEL SHAPE LAYERS FULL_S CUT_S: `grpo generate` at G = GBIG and GSMALL, each
# group decoded in one chunk as transformers' generate batches it, then transformers'
# generate (and the hand-written torch peer when time allows)
decode_line() {
    local m=$1 shape=$2 layers=$3 n=$NEW
    plan "decode $shape ($layers layers)" "$4" "$5"
    [ $MODE = skip ] && return
    [ $MODE = cut ] && { n=$CUT_NEW; echo "cut: $n new tokens instead of $NEW"; }
    for g in $GBIG $GSMALL; do
        ours "gen_${shape}_$g" 150 "$GRPO" generate --model "$W/$m" --prompt "$PROMPT" --num_generations "$g" \
            --max_completion_length "$n" --temperature 1 --seed 1 --json --generation_chunk_size "$g" &&
            grep -h "tokens/s" "$E/gen_${shape}_$g.err"
    done
    peer "tf_gen_$shape" 150 bench/torch_generate.py --impl transformers --dtype bf16 --shape "$shape" \
        --layers "$layers" --G "$GBIG,$GSMALL" --new-tokens "$n" --reps 1
    if [ $MODE = full ] && { [ "$DRY" = 1 ] || [ "$(left)" -ge "$LEAN_S" ]; }; then
        peer "lean_gen_$shape" 60 bench/torch_generate.py --impl ours --dtype bf16 --shape "$shape" \
            --layers "$layers" --G "$GBIG,$GSMALL" --new-tokens "$n" --reps 1
    else
        echo "cut: the hand-written torch peer (it runs with $LEAN_S s or more left)"
    fi
    for g in $GBIG $GSMALL; do
        [ -s "$W/gen_${shape}_$g.out" ] || continue
        lines decode --model "$W/$m" --G "$g" --new "$n" --ours "$E/gen_${shape}_$g.err" \
            --ours-json "$W/gen_${shape}_$g.out" --peer "$E/tf_gen_$shape.txt" --lean "$E/lean_gen_$shape.txt"
    done
}

# 1. decode at the 0.5B shape; the 1.5B model is made meanwhile
model m05 896 "$L05" 14 2 4864 || exit 1
BG=1 model m15 1536 "$L15" 12 2 8960
LEAN_S=${BENCH_LEAN_S:-200}
decode_line m05 qwen2.5-0.5b "$L05" 80 40

# 2. the training pass at the 0.5B shape: one micro-batch of MB sequences of PT + NEW
plan "train qwen2.5-0.5b ($L05 layers)" 60 35
if [ $MODE != skip ]; then
    steps=$STEPS iters=$ITERS
    [ $MODE = cut ] && { steps=2 iters=$CUT_ITERS; echo "cut: 2 steps (1 timed) and the peer's $iters"; }
    train_run t05 150 "$steps" --model "$W/m05" --num_generations "$MB" --generation_chunk_size "$MB" \
        --per_device_train_batch_size "$MB" --gradient_accumulation_steps 1 --max_completion_length "$NEW"
    peer model05 90 bench/torch_model.py --shape qwen2.5-0.5b --layers "$L05" --mode bf16 --batch "$MB" \
        --prompt-tokens $PT --completion-tokens "$NEW" $iters
    [ -f "$W/t05/metrics.jsonl" ] && lines train --model "$W/m05" --batch "$MB" --prompt $PT --completion "$NEW" \
        --micro-batches 1 --ours "$W/t05/metrics.jsonl" --peer "$E/model05.txt"
fi

# 3. one GRPO step at the 1.5B shape: G = GBIG x NEW, micro-batch MB
model_wait m15 || { echo "bench: no 1.5B model; status 1"; exit 1; }
plan "grpo step qwen2.5-1.5b ($L15 layers)" 100 60
N15=$NEW
if [ $MODE != skip ]; then
    [ $MODE = cut ] && { N15=$CUT_NEW; echo "cut: $N15 completion tokens instead of $NEW"; }
    train_run g15 200 2 --model "$W/m15" --num_generations "$GBIG" --generation_chunk_size "$GBIG" \
        --per_device_train_batch_size "$MB" --gradient_accumulation_steps $((GBIG / MB)) --max_completion_length "$N15"
    peer grpo15 200 bench/torch_grpo_step.py --shape qwen2.5-1.5b --layers "$L15" --G "$GBIG" \
        --completion-tokens "$N15" --micro-batch "$MB" --bf16 --gen transformers --warmup 1 \
        --warmup-tokens $((N15 < 16 ? N15 : 16))
    [ -f "$W/g15/metrics.jsonl" ] && lines grpo --model "$W/m15" --G "$GBIG" --prompt $PT --completion "$N15" \
        --ours "$W/g15/metrics.jsonl" --peer "$E/grpo15.txt"
fi

# 4. decode at the 1.5B shape
decode_line m15 qwen2.5-1.5b "$L15" 90 45

# 5. the training pass at the 1.5B shape: step 3's step_time/training over its GBIG / MB
# micro-batches (one timed step: its passes' mean, no spread)
plan "train qwen2.5-1.5b ($L15 layers)" 40 25
if [ $MODE != skip ]; then
    if [ -f "$W/g15/metrics.jsonl" ]; then
        peer model15 90 bench/torch_model.py --shape qwen2.5-1.5b --layers "$L15" --mode bf16 --batch "$MB" \
            --prompt-tokens $PT --completion-tokens "$N15" $ITERS
        lines train --model "$W/m15" --batch "$MB" --prompt $PT --completion "$N15" \
            --micro-batches $((GBIG / MB)) --ours "$W/g15/metrics.jsonl" --peer "$E/model15.txt"
    else
        echo "not run: no GRPO step at the 1.5B shape to read the passes from"
    fi
fi

v() { grep -cx "$1" "$W/verdicts" 2> /dev/null || true; }
echo "bench: done in ${SECONDS} s: targets met $(v met), missed $(v missed), without a peer figure $(v no-peer)$(
    [ "$DRY" = 1 ] && echo " (a dry run: CPU figures, no verdict means anything)"); status $status"
exit $status

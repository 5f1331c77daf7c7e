#!/usr/bin/env bash
# tools/gpu_check/demo.sh — the device check's demo section (issue 35: "the demo's GRPO
# stage learns on the GPU as on the CPU"). Runs `make demo`'s GRPO stage as it is
# (examples/demo/grpo_length.yaml: G = 64, micro-batches of 4 x 16, the length reward)
# on the GPU and prints its reward curve beside the CPU's, recorded in demo_cpu.json
# (the same stage on this project's 2-core CPU machine, deterministic: how it was made is
# written in the file). Passes when the GPU's run learns — the mean reward of its last
# fifth of the steps minus that of its first fifth is at least half the CPU's over the
# same steps, and positive — and its plan says it trained on the GPU.
#
# The base model: the CPU's own (`make demo`'s first stage, 3.2 MB, packed by
# tools/gpu-bundle.sh into .gpu-bundle/demo-base), so the GPU's curve starts from the
# base the recorded one started from and the comparison is of the GRPO stage alone.
# Without the bundle the section makes the base there (grpo sft, 400 steps, on the GPU:
# a different base, said so) — $BUILD/demo/base is used when it is there (a dry run).
#
# Steps: 60, as the demo. An estimate, not a measurement: at this size (4 layers of 128)
# a step is bound by kernel launches — a decoding step is ~13 launches a layer plus the
# head and the sampler (~60), 64 of them a rollout; a micro-batch's forward and backward
# ~45 a layer plus the head (~200), 16 of them; ~7,000 launches and ~100 synchronous
# copies a step, some 0.05-0.1 s, 60 steps well under a minute. Should the run still be cut
# off (grpo train is given what is left of GPU_CHECK_LEFT), the steps it logged are judged
# and the number said. DEMO_GPU_STEPS sets the steps; a dry run (GPU_CHECK_DRY=1) takes 15.
#
# Environment (the driver's): BUILD, OUT, GPU_CHECK_LEFT, PYTHON, GPU_CHECK_DRY.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
PYTHON=${PYTHON:-python3}
. tools/gpu_check/run_step.sh
mkdir -p "$OUT"
DRY=${GPU_CHECK_DRY:-0}
if [ "$DRY" = 1 ]; then steps=${DEMO_GPU_STEPS:-15}; else steps=${DEMO_GPU_STEPS:-60}; fi
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== demo: the demo's GRPO stage ($steps steps of examples/demo/grpo_length.yaml)$([ "$DRY" = 1 ] && echo ", dry run on the CPU")"

if [ -f .gpu-bundle/demo-base/model.safetensors ]; then
    base=.gpu-bundle/demo-base
    echo "base model: the CPU's (make demo's first stage, $(cat $base/.sft_steps 2>/dev/null) sft steps), carried in $base"
elif [ -f "$BUILD/demo/base/model.safetensors" ] && [ "$(cat "$BUILD/demo/base/.sft_steps" 2>/dev/null)" = 400 ]; then
    base=$BUILD/demo/base
    echo "base model: the CPU's, $base (no .gpu-bundle/demo-base)"
else
    echo "base model: no .gpu-bundle/demo-base (tools/gpu-bundle.sh packs it): made here by make demo's first stage"
    # 400 steps: ~1-3.5 min on the 2-core CPU (a dry run), seconds on a GPU (launch-bound)
    DEMO_BASE_ONLY=1 DEMO_OUT="$work" GRPO="$BUILD/grpo" run_step "grpo init + grpo sft (400 steps)" 400 \
        "$work/sft.out" "$work/sft.err" bash tools/demo.sh || { cat "$work/sft.out"; exit 1; }
    grep -h "^step 400/" "$work/sft.out" "$work/sft.err" | head -1
    ran_on_gpu "grpo sft" "$work/sft.err" || exit 1
    base=$work/base
fi

status=0
# save_steps 0: the demo's checkpoints at 30 and 60 change no step; the device's time is spent on steps
run_step "grpo train, $steps steps" 420 "$work/train.out" "$work/train.err" "$BUILD/grpo" train \
    --config examples/demo/grpo_length.yaml --model "$base" --output_dir "$work/grpo" --max_steps "$steps" \
    --save_steps 0
rc=$?
# cut off by the time left: judged on the steps it logged (the curve's script says how many)
[ $rc = 0 ] || [ $rc = 124 ] || status=1
grep -m1 "generation batch" "$work/train.err" | cut -c1-400
ran_on_gpu "grpo train" "$work/train.err" || status=1
metrics=$work/grpo/metrics.jsonl
if [ -s "$metrics" ]; then
    # the per-step figures come back (a few KB); the model stays here
    grep '"reward"' "$metrics" | "$PYTHON" -c '
import json, sys
for l in sys.stdin:
    r = json.loads(l)
    print(json.dumps({k: r.get(k) for k in ("step", "reward", "completions/mean_length", "step_time",
                                            "step_time/generation", "step_time/training", "num_tokens")}))
' > "$OUT/demo_metrics.jsonl"
    "$PYTHON" -u tools/gpu_check/demo_curve.py "$metrics" tools/gpu_check/demo_cpu.json "$base" || status=1
else
    echo "FAILED: no metrics from grpo train ($metrics)"
    status=1
fi
echo "== demo: $([ $status = 0 ] && echo passed || echo FAILED) in $SECONDS s"
exit $status

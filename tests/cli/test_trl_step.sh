#!/usr/bin/env bash
# Whole GRPO steps against TRL's, in float64: tests/fixtures/trl_step/ holds a tiny
# qwen2 model (committed, so init's RNG never matters), its prompts and options (two
# optimizer steps of 4 prompts x 4 completions, beta 0.04, mask_truncated_completions,
# clipping that bites on step 1 only, weight decay, a linear schedule), the completions
# an earlier run drew and the weights tools/trl_step_reference.py computed from them
# with TRL's formulas in float64 (rollout -> advantages -> loss -> backward -> clipping
# -> AdamW). grpo train here must draw the same completions and land on those weights:
#   fp32 (--bf16 false), one micro-batch and 4 x 4 accumulated: per tensor max|d - d_ref|
#     / max|d_ref| beyond fp32 rounding <= 5e-5 (measured 2.0e-5), all tensors' norm
#     ratio <= 1e-5 (measured 1.5e-6);
#   mixed precision (--bf16 true, bf16 products; its own completions and reference):
#     <= 0.3 (measured 1.6e-1) and <= 0.04 (measured 1.2e-2).
# A changed sampler is said in one line (regenerate with --make_fixture); so are step 2's
# completions drawn from other weights than the reference's step 1 gave.
set -u
. "$ROOT/tests/cli/lib.sh"
F=$ROOT/tests/fixtures/trl_step
CMP=(python3 "$ROOT/tests/cli/trl_step_compare.py" "$F/model")
train() { # OUT BF16 [options...]
    local out=$1 bf16=$2; shift 2
    "$GRPO" train --config "$F/run.yaml" --model "$F/model" --dataset "$F/data.jsonl" --output_dir "$out" \
        --bf16 "$bf16" "$@" 2>"$out.err" || fail "train --bf16 $bf16 $*: $(tail -2 "$out.err")"
}
train "$TMP/fp32" false
train "$TMP/fp32_split" false --per_device_train_batch_size 4 --gradient_accumulation_steps 4
train "$TMP/bf16" true
train "$TMP/bf16_split" true --per_device_train_batch_size 4 --gradient_accumulation_steps 4
grep -q "micro-batch 4, 4 accumulation steps" "$TMP/fp32_split.err" ||
    fail "the split run is not 4 x 4: $(grep 'micro-batch' "$TMP/fp32_split.err")"
for run in fp32 fp32_split; do
    out=$("${CMP[@]}" "$TMP/$run" "$F/expected.safetensors" 5e-5 1e-5) || fail "$run: $out"
    echo "$run: $out"
done
for run in bf16 bf16_split; do
    out=$("${CMP[@]}" "$TMP/$run" "$F/expected_bf16.safetensors" 0.3 0.04) || fail "$run: $out"
    echo "$run: $out"
done
# the comparison can fail: bf16's completions are not fp32's (one line, exit 1)
out=$("${CMP[@]}" "$TMP/bf16" "$F/expected.safetensors" 5e-5 1e-5) && fail "bf16's completions passed as fp32's"
echo "$out" | grep -q "the sampler changed; regenerate the fixture" || fail "no sampler line: $out"
finish

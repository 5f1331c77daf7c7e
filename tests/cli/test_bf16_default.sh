#!/usr/bin/env bash
# --bf16's default, auto, as TRL's GRPOConfig defaults to bf16: true where the CPU has
# bf16 matrix instructions (oneDNN's bf16 matmul: AVX512_BF16 or AMX), else false,
# and the plan line of train and sft says which it chose and how to choose otherwise.
# `--bf16 auto` is the same as no flag; `--bf16 false` is fp32 without a note; a
# value that is none of these is refused with the accepted ones. generate, eval and
# score compute in bf16 by default on such CPUs (the same meaning), but auto never
# with --adapter on the CPU: it folds the adapter into fp32 weights there (an explicit
# --bf16 true runs it unmerged beside the bf16 base: test_bf16_frozen.sh).
set -u
. "$ROOT/tests/cli/lib.sh"
if grep -q -w -E 'avx512_bf16|amx_bf16' /proc/cpuinfo; then native=1; else native=0; fi
native=${GRPO_TEST_BF16_MATMUL:-$native} # make test-isa's build takes the CPU for the other kind
echo "this CPU has bf16 matrix instructions: $native${GRPO_TEST_BF16_MATMUL:+ (emulated)}"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 4 --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --num_generations 2
   --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 2 --save_steps 0 --learning_rate 1e-3
   --adam_epsilon 1e-2) # Adam's first steps move by ~lr sign(g) unless epsilon weighs |g|: bf16's gradients must show

plan_says() { # LABEL FILE: the plan matches this CPU's default
    if [ $native = 1 ]; then
        grep -q "bf16 by default on this CPU (--bf16 false: fp32 throughout)" "$2" || fail "$1: no bf16-default note: $(head -3 "$2")"
    else
        grep -q "fp32 by default: this CPU has no bf16 matrix instructions (--bf16 true" "$2" \
            || fail "$1: no fp32-default note: $(head -3 "$2")"
    fi
}
"$GRPO" "${T[@]}" --output_dir "$TMP/a" --save_steps 1 2>"$TMP/a.err" || fail "train: $(tail -2 "$TMP/a.err")"
plan_says "train, no --bf16" "$TMP/a.err"
want=$([ $native = 1 ] && echo true || echo false) # the checkpoint records what auto chose
grep -q "\"bf16\": $want" "$TMP/a/checkpoint-2/trainer_state.json" \
    || fail "trainer_state.json does not record bf16 $want: $(grep -o '"bf16": [a-z"]*' "$TMP/a/checkpoint-2/trainer_state.json")"
if [ $native = 1 ]; then
    grep -q -E "products in bf16 on (oneDNN|a bf16 matmul emulated for tests)" "$TMP/a.err" \
        || fail "the default does not compute in bf16 here: $(head -3 "$TMP/a.err")"
else
    grep -q "products in bf16" "$TMP/a.err" && fail "the default computes in bf16 on a CPU without bf16 instructions"
fi
# a resume under the other precision says so (auto follows the CPU; a run may move between CPUs)
other=$([ $native = 1 ] && echo false || echo true)
mkdir -p "$TMP/r" && cp -r "$TMP/a/checkpoint-1" "$TMP/r/"
"$GRPO" "${T[@]}" --output_dir "$TMP/r" --resume_from_checkpoint "$TMP/r/checkpoint-1" --bf16 $other 2>"$TMP/r.err" \
    || fail "resume --bf16 $other: $(tail -2 "$TMP/r.err")"
grep -q "the checkpoint was trained with bf16 $want, this run has bf16 $other" "$TMP/r.err" \
    || fail "a resume under the other precision is not told: $(grep -i warn "$TMP/r.err")"
rm -rf "$TMP/r" && mkdir -p "$TMP/r" && cp -r "$TMP/a/checkpoint-1" "$TMP/r/"
"$GRPO" "${T[@]}" --output_dir "$TMP/r" --resume_from_checkpoint "$TMP/r/checkpoint-1" 2>"$TMP/r.err" \
    || fail "resume: $(tail -2 "$TMP/r.err")"
grep -q "trained with bf16" "$TMP/r.err" && fail "a resume under the same precision warns: $(cat "$TMP/r.err")"
cmp -s "$TMP/a/model.safetensors" "$TMP/r/model.safetensors" || fail "the resume differs from the uninterrupted run"

"$GRPO" "${T[@]}" --output_dir "$TMP/b" --bf16 auto 2>"$TMP/b.err" || fail "train --bf16 auto: $(tail -2 "$TMP/b.err")"
plan_says "train --bf16 auto" "$TMP/b.err"
cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" || fail "--bf16 auto trains otherwise than no flag"
"$GRPO" "${T[@]}" --output_dir "$TMP/c" --bf16 false 2>"$TMP/c.err" || fail "train --bf16 false: $(tail -2 "$TMP/c.err")"
grep -q -E "by default|products in bf16" "$TMP/c.err" && fail "--bf16 false: the plan notes bf16: $(head -3 "$TMP/c.err")"
[ $native = 1 ] && cmp -s "$TMP/a/model.safetensors" "$TMP/c/model.safetensors" && fail "bf16 by default trains as fp32"
[ $native = 0 ] && ! cmp -s "$TMP/a/model.safetensors" "$TMP/c/model.safetensors" && fail "fp32 by default differs from --bf16 false"
expect_error 2 "bf16 takes true or false or auto, not 'maybe'" "$GRPO" "${T[@]}" --output_dir "$TMP/x" --bf16=maybe

# sft: the same note
printf '%s\n' '{"prompt": "1+1=", "completion": "2"}' '{"text": "abc abc"}' > "$TMP/s.jsonl"
"$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 1 \
    --output_dir "$TMP/s" 2>"$TMP/s.err" || fail "sft: $(tail -2 "$TMP/s.err")"
plan_says "sft, no --bf16" "$TMP/s.err"

# generate with an adapter and no --bf16: auto never holds the base in bf16 under an adapter
"$GRPO" "${T[@]}" --output_dir "$TMP/l" --use_peft --lora_target_modules all-linear 2>"$TMP/l.err" \
    || fail "lora: $(tail -2 "$TMP/l.err")"
"$GRPO" generate --model "$TMP/m" --adapter "$TMP/l" --prompt ab --max_completion_length 4 >"$TMP/g.out" 2>"$TMP/g.err" \
    && [ -s "$TMP/g.out" ] || fail "generate --adapter without --bf16: $(cat "$TMP/g.err")"
"$GRPO" generate --model "$TMP/m" --adapter "$TMP/l" --prompt ab --max_completion_length 4 --bf16 false >"$TMP/g2.out" \
    2>/dev/null && cmp -s "$TMP/g.out" "$TMP/g2.out" || fail "generate --adapter: auto differs from --bf16 false"
finish

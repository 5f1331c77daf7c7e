#!/usr/bin/env bash
# Nothing lost after step 1 (issue 38). What can be checked is checked before
# the first step: every row of the training dataset and of eval_dataset (and
# grpo eval's) holds the columns its built-in rewards read (accuracy's
# `solution`, exact_match's COLUMN), a string, a number or null — one line
# naming FILE:LINE, the column and the reward, nothing trained, nothing written.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
for i in 1 2 3 4 5 6; do printf '{"prompt": "a%d", "solution": "%d"}\n' "$i" "$i"; done > "$TMP/d.jsonl"
R=(train --model "$TMP/m" --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 6
   --max_steps 5 --quiet --seed 3 --adam_epsilon 1e-2 --learning_rate 1e-3)

# ---- checked before step 1 ----
# an eval dataset without the column accuracy reads: refused at setup, not at the first evaluation
printf '{"prompt": "x", "solution": "1"}\n{"prompt": "y"}\n' > "$TMP/ev_bad.jsonl"
expect_error 1 "^grpo train: .*ev_bad.jsonl:2: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d.jsonl" --reward_funcs accuracy --save_steps 1 --output_dir "$TMP/b1" \
    --eval_strategy steps --eval_steps 2 --eval_dataset "$TMP/ev_bad.jsonl"
[ -e "$TMP/b1/checkpoint-1" ] || [ -e "$TMP/b1/model.safetensors" ] && fail "a bad eval dataset still trained"
# a training row (line 5) without it: refused at setup, not when the row is reached
sed '5s/, "solution": "5"//' "$TMP/d.jsonl" > "$TMP/d5.jsonl"
expect_error 1 "d5.jsonl:5: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d5.jsonl" --reward_funcs accuracy --save_steps 1 --output_dir "$TMP/b2"
[ -e "$TMP/b2/checkpoint-1" ] || [ -e "$TMP/b2/model.safetensors" ] && fail "a bad training row still trained"
# exact_match's column, cosine's solution; a column of another type; null is "no value" and passes
expect_error 1 "d.jsonl:1: no 'answer' column, which reward 'exact_match' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d.jsonl" --reward_funcs exact_match:answer --output_dir "$TMP/b3"
expect_error 1 "d5.jsonl:5: no 'solution' column, which reward 'cosine_scaled_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d5.jsonl" --reward_funcs length:3 cosine --output_dir "$TMP/b4"
sed '3s/"solution": "3"/"solution": [3]/' "$TMP/d.jsonl" > "$TMP/d3.jsonl"
expect_error 1 "d3.jsonl:3: column 'solution' must be a string, a number or null, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d3.jsonl" --reward_funcs accuracy --output_dir "$TMP/b5"
sed '5s/"solution": "5"/"solution": null/' "$TMP/d.jsonl" > "$TMP/dnull.jsonl"
"$GRPO" "${R[@]}" --dataset "$TMP/dnull.jsonl" --reward_funcs accuracy --max_steps 1 --output_dir "$TMP/n" \
    || fail "a null solution (no value) refused"
# grpo eval: the same check before the model is read; max_examples limits the rows checked
expect_error 1 "^grpo eval: .*ev_bad.jsonl:2: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" eval --model "$TMP/m" --dataset "$TMP/ev_bad.jsonl" --reward_funcs accuracy
"$GRPO" eval --model "$TMP/m" --dataset "$TMP/ev_bad.jsonl" --reward_funcs accuracy --max_examples 1 --max_completion_length 4 \
    >/dev/null 2>"$TMP/e.err" || fail "grpo eval of the first row alone: $(cat "$TMP/e.err")"

finish

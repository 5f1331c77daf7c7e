#!/usr/bin/env bash
# Evaluation during training (eval_strategy steps, eval/evaluate.h): an eval
# line in metrics.jsonl every eval_steps steps and after the last, with
# eval_reward, eval_reward_std, eval_rewards/NAME/mean, eval_pass@1 and
# eval_completions/mean_length; evaluating changes nothing in the training
# (same final weights as without it); the same numbers on a second run and
# after a resume; TensorBoard gets them as eval/NAME; eval prompts longer than
# the training prompts; bad input.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '{"prompt": "ab"}\n{"prompt": "cd"}\n' > "$TMP/d.jsonl"
# eval prompts longer than any training prompt: the generator is planned again for them
printf '{"prompt": "a much longer prompt than the training ones"}\n{"prompt": "x"}\n{"prompt": "yz"}\n' > "$TMP/ev.jsonl"
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:3 "fmt=format:^a" --num_generations 2
   --per_device_train_batch_size 2 --max_completion_length 6 --max_steps 5 --logging_steps 2 --quiet --seed 3
   --adam_epsilon 1e-2 --learning_rate 1e-3)
E=(--eval_strategy steps --eval_dataset "$TMP/ev.jsonl" --eval_steps 2 --num_generations_eval 3)

"$GRPO" "${R[@]}" --output_dir "$TMP/plain" || fail "train without eval"
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/e1" --report_to tensorboard --save_steps 2 || fail "train with eval"
cmp -s "$TMP/plain/model.safetensors" "$TMP/e1/model.safetensors" || fail "evaluating changed the training"
python3 - "$TMP/e1/metrics.jsonl" <<'PY' || fail "eval lines in metrics.jsonl"
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
ev = [l for l in lines if "eval_reward" in l]
assert [l["step"] for l in ev] == [2, 4, 5], [l["step"] for l in ev]
keys = {"step", "eval_reward", "eval_reward_std", "eval_rewards/length/mean", "eval_rewards/fmt/mean", "eval_pass@1",
        "eval_completions/mean_length"}
for l in ev:
    assert set(l) == keys, set(l) ^ keys
    # one completion in 9 is >= 1 only if the format reward fires with length's -|3 - n| = 0
    assert abs(l["eval_reward"] - (l["eval_rewards/length/mean"] + l["eval_rewards/fmt/mean"])) < 1e-9, l
    assert 0 <= l["eval_pass@1"] <= 1 and 0 <= l["eval_completions/mean_length"] <= 6, l
    assert l["eval_reward_std"] >= 0, l
assert all("eval_reward" not in l for l in lines if "reward" in l)   # separate lines, as TRL logs them
PY
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/e2" || fail "second run"
[ "$(grep eval_ "$TMP/e1/metrics.jsonl")" = "$(grep eval_ "$TMP/e2/metrics.jsonl")" ] || fail "eval numbers differ between runs"
# a resume from step 2 evaluates steps 4 and 5 as the uninterrupted run did
rm -rf "$TMP/e1/checkpoint-4" "$TMP/e1/model.safetensors"
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/e1" --resume_from_checkpoint "$TMP/e1/checkpoint-2" || fail "resume"
[ "$(grep eval_ "$TMP/e1/metrics.jsonl")" = "$(grep eval_ "$TMP/e2/metrics.jsonl")" ] || fail "eval after a resume: $(grep eval_ "$TMP/e1/metrics.jsonl")"
cmp -s "$TMP/plain/model.safetensors" "$TMP/e1/model.safetensors" || fail "resumed weights"
# pass_threshold: every completion passes a threshold below any reward
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/p" --pass_threshold -1000 || fail "pass_threshold"
grep -q '"eval_pass@1": 1,' "$TMP/p/metrics.jsonl" || fail "pass_threshold -1000: $(grep eval_ "$TMP/p/metrics.jsonl")"
# TensorBoard: eval/NAME beside train/NAME (the first run's event file; the resume wrote another)
if /usr/bin/python3 -c "import google.protobuf" 2>/dev/null; then
    first=$(ls -tr "$TMP"/e1/runs/*/events.out.tfevents.* | head -1)
    /usr/bin/python3 tests/log/read_tfevents.py "$first" > "$TMP/tb.json" || fail "reading $first"
    python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['steps']; assert 'eval/reward' in s['2'] and 'eval/pass@1' in s['2'] and 'train/reward' in s['2'], s['2']" \
        "$TMP/tb.json" || fail "eval scalars in TensorBoard"
fi
# TRL's keys
printf 'evaluation_strategy: steps\neval_dataset: %s\nper_device_eval_batch_size: 4\n' "$TMP/ev.jsonl" > "$TMP/e.yaml"
"$GRPO" "${R[@]}" --output_dir "$TMP/y" --config "$TMP/e.yaml" 2>"$TMP/y.err" || fail "TRL eval keys: $(cat "$TMP/y.err")"
grep -q eval_reward "$TMP/y/metrics.jsonl" || fail "eval from YAML"
# bad input
expect_error 2 "eval_strategy steps needs an eval_dataset" "$GRPO" "${R[@]}" --output_dir "$TMP/b1" --eval_strategy steps
printf '{"prompt": "ok"}\n{"nope": 1}\n' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:2" "$GRPO" "${R[@]}" --output_dir "$TMP/b2" --eval_strategy steps --eval_dataset "$TMP/bad.jsonl"
[ -e "$TMP/b2/model.safetensors" ] && fail "a bad eval dataset still trained"
expect_error 1 "missing.jsonl: cannot open" "$GRPO" "${R[@]}" --output_dir "$TMP/b3" --eval_strategy steps --eval_dataset "$TMP/missing.jsonl"
finish

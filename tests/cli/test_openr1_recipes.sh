#!/usr/bin/env bash
# open-r1's GRPO recipes run as they are (tests/fixtures/open-r1, verbatim), with only the
# model, the dataset, the output directory and the run's size on the command line: exit 0,
# at most one line about keys without effect, the system prompt and the user message built
# as open-r1's make_conversation builds them (the DeepSeek recipe's chat_template in use), the
# schedule's learning rates equal to transformers' formulas, the reward names the recipe's,
# save_strategy epoch's checkpoint. Then every bad value of the new keys reported in one run,
# and open-r1's prompt options' bad input.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
# problem/solution as OpenR1-Math-220k has them, and a prompt column that the recipes naming
# dataset_prompt_column problem replace (the 0.5B recipe, naming none, reads it: open-r1's default)
printf '%s\n' '{"problem": "What is 1+1?", "solution": "$2$", "prompt": "Question one"}' \
    '{"problem": "What is 2+2?", "solution": "$4$", "prompt": "Question two"}' \
    '{"problem": "What is 3+1?", "solution": "$4$", "prompt": "Question three"}' > "$TMP/d.jsonl"
SIZE=(--max_steps 4 --num_generations 2 --per_device_train_batch_size 2 --gradient_accumulation_steps 1
      --max_completion_length 8 --quiet)
SYSTEM="You are a helpful AI Assistant that provides well-reasoned and detailed responses."
F=tests/fixtures/open-r1

# recipe  user-column  lr  schedule  min_lr_rate  rewards (logged by open-r1's function names, as TRL logs them)
while read -r recipe column lr sched min_rate rewards; do
    out="$TMP/$recipe"
    "$GRPO" train --config "$F/${recipe}_grpo_config_demo.yaml" --model "$TMP/m" --dataset "$TMP/d.jsonl" \
        --output_dir "$out" "${SIZE[@]}" 2>"$out.err"
    rc=$?
    [ $rc -eq 0 ] || { fail "$recipe: exit $rc: $(cat "$out.err")"; continue; }
    [ "$(grep -c . "$out.err")" -le 1 ] && ! grep -qiE "not supported|ignored" "$out.err" \
        || fail "$recipe: more than one line about keys without effect: $(cat "$out.err")"
    python3 - "$out" "$column" "$lr" "$sched" "$min_rate" "$rewards" "$SYSTEM" <<'PY' || fail "$recipe: see above"
import json, math, os, sys
out, column, lr, sched, min_rate, rewards, system = sys.argv[1:]
lr, min_rate = float(lr), float(min_rate)
user = {"What is 1+1?": "Question one", "What is 2+2?": "Question two", "What is 3+1?": "Question three"}
comps = [json.loads(l) for l in open(os.path.join(out, "completions.jsonl"))]
assert comps, "no completions"
for c in comps:
    p = c["prompt"]
    assert p.count(system) == 1, "the system prompt is not in %r" % p
    asked = [q for q in user if q in p] if column == "problem" else [q for q in user.values() if q in p]
    other = [q for q in user.values() if q in p] if column == "problem" else [q for q in user if q in p]
    assert len(asked) == 1 and not other, "the user message is not the %s column's: %r" % (column, p)
    assert p.index(system) < p.index(asked[0]), "system message after the user's: %r" % p
    if "DeepSeek" in out:  # the recipe's chat_template, not the model's ChatML one
        assert "<\uff5cUser\uff5c>" + asked[0] + "<\uff5cAssistant\uff5c>" in p and "<|im_start|>" not in p, p
    else:
        assert "<|im_start|>system\n" + system in p and "<|im_start|>user\n" + asked[0] in p, p
    assert sorted(c["rewards"]) == sorted(rewards.split(",")), c["rewards"]
steps = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if '"learning_rate"' in l]
assert [m["step"] for m in steps] == [1, 2, 3, 4], [m["step"] for m in steps]
total, warm = 4, math.ceil(4 * 0.1)  # warmup_ratio 0.1
for s, m in enumerate(steps):
    if s < warm:
        f = s / max(1, warm)
    else:
        f = 0.5 * (1 + math.cos(math.pi * (s - warm) / max(1, total - warm)))
        if sched == "cosine_with_min_lr":
            f = f * (1 - min_rate) + min_rate
    assert abs(m["learning_rate"] - lr * f) <= 1e-9 * lr, "step %d: lr %r, the formula %r" % (s + 1, m["learning_rate"], lr * f)
    for r in rewards.split(","):
        assert "rewards/%s/mean" % r in m, "reward %s not logged: %s" % (r, sorted(m))
# save_strategy epoch with save_total_limit 1: the last step's checkpoint, alone
ck = sorted(d for d in os.listdir(out) if d.startswith("checkpoint-"))
assert ck == ["checkpoint-4"], ck
# the recipe's chat_template is saved as the tokenizer's, as open-r1's tokenizer.save_pretrained saves it
for d in (out, os.path.join(out, "checkpoint-4")):
    t = json.load(open(os.path.join(d, "tokenizer_config.json")))["chat_template"]
    assert ("<\uff5cUser\uff5c>" in t) == ("DeepSeek" in out), (d, t[:80])
PY
done <<'EOF'
Qwen2.5-1.5B-Instruct problem 2e-05 cosine 0 accuracy_reward,format_reward,tag_count_reward
DeepSeek-R1-Distill-Qwen-1.5B problem 1e-06 cosine_with_min_lr 0.1 accuracy_reward,format_reward,tag_count_reward
Qwen2.5-0.5B-Instruct prompt 2e-05 cosine 0 accuracy_reward,format_reward
EOF

# every bad value of the new keys, and an unknown key, in one run: each on its own line, exit 2
cat > "$TMP/bad.yaml" <<EOF
save_strategy: sometimes
save_steps: -0.5
lr_scheduler_type: cosine_with_max_lr
lr_scheduler_kwargs: "min_lr_rate 0.1"
system_prompt: [a, b]
dataset_prompt_column: {a: 1}
chat_template: [x]
dataset_mixture: {datasets: [{id: a}]}
wandb_projekt: x
EOF
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/bad" "${SIZE[@]}")
"$GRPO" "${T[@]}" --config "$TMP/bad.yaml" --max_steps x >/dev/null 2>"$TMP/bad.err"
[ $? -eq 2 ] || fail "bad values: exit status: $(cat "$TMP/bad.err")"
for l in "bad.yaml:1: save_strategy 'sometimes' is not one of" "bad.yaml:3: lr_scheduler_type 'cosine_with_max_lr' is not one of" \
    "bad.yaml:4: lr_scheduler_kwargs expects a JSON object" "bad.yaml:5: system_prompt: expected a single value" \
    "bad.yaml:6: dataset_prompt_column: expected a single value" "bad.yaml:7: chat_template: expected a single value" \
    "bad.yaml:8: dataset_mixture '(a list or mapping)' is not supported: open-r1's dataset mixtures" \
    "max_steps expects an integer, not 'x'" "save_steps must be" "unknown option 'wandb_projekt'; did you mean 'wandb_project'?"; do
    [ "$(grep -cF -- "$l" "$TMP/bad.err")" -eq 1 ] || fail "the report lacks the line '$l': $(cat "$TMP/bad.err")"
done
[ "$(wc -l < "$TMP/bad.err")" -eq 10 ] || fail "one line each: $(cat "$TMP/bad.err")"
# the schedule's kwargs and save_steps' rules, refused by name with the unknown keys
expect_error 2 "lr_scheduler_kwargs: 'min_lr_ratio' is not an argument of cosine_with_min_lr (it takes num_cycles, min_lr, min_lr_rate)" \
    "$GRPO" "${T[@]}" --lr_scheduler_type cosine_with_min_lr --lr_scheduler_kwargs '{"min_lr_ratio": 0.1}' --foo 1
grep -qF "unknown option '--foo'" "$TMP/expect.err" || fail "the unknown key beside the kwargs: $(cat "$TMP/expect.err")"
expect_error 2 "lr_scheduler_type cosine_with_min_lr needs lr_scheduler_kwargs min_lr_rate" \
    "$GRPO" "${T[@]}" --lr_scheduler_type cosine_with_min_lr
expect_error 2 "needs lr_scheduler_kwargs num_decay_steps" "$GRPO" "${T[@]}" --lr_scheduler_type warmup_stable_decay
expect_error 2 "save_steps 2.5: a whole number of steps" "$GRPO" "${T[@]}" --save_steps 2.5
# lr_scheduler_kwargs as a JSON string on the command line, as transformers takes it
"$GRPO" "${T[@]}" --output_dir "$TMP/wsd" --logging_steps 1 --learning_rate 1e-3 --lr_scheduler_type warmup_stable_decay \
    --lr_scheduler_kwargs '{"num_decay_steps": 2, "decay_type": "linear", "min_lr_ratio": 0.5}' || fail "wsd from the command line"
[ "$(grep -o '"learning_rate": [0-9.e-]*' "$TMP/wsd/metrics.jsonl" | cut -d' ' -f2 | tr '\n' ' ')" = "0.001 0.001 0.001 0.00075 " ] \
    || fail "wsd: 2 stable steps, then linear to half: $(grep -o '"learning_rate": [0-9.e-]*' "$TMP/wsd/metrics.jsonl")"

# logging_first_step (the recipes' key): a metrics line after step 1 besides every logging_steps
"$GRPO" "${T[@]}" --output_dir "$TMP/first" --logging_steps 3 --logging_first_step || fail "logging_first_step"
[ "$(grep '"learning_rate"' "$TMP/first/metrics.jsonl" | grep -o '"step": [0-9]*' | cut -d' ' -f2 | tr '\n' ' ')" = "1 3 4 " ] \
    || fail "logging_first_step: lines at steps 1, 3, 4: $(grep -o '"step": [0-9]*' "$TMP/first/metrics.jsonl")"

# open-r1's prompt options: a missing column, a column that is not text, a chat template that
# does not parse (exit 1, one line naming it); a row's prompt replaced
expect_error 1 "d.jsonl:1: no 'question' column for the user message (dataset_prompt_column; the row has problem, solution, prompt)" \
    "$GRPO" "${T[@]}" --dataset_prompt_column question
printf '%s\n' '{"prompt": [{"role": "user", "content": "hi"}]}' > "$TMP/conv.jsonl"
expect_error 1 "conv.jsonl:1: 'prompt' must be a string to be the user message (dataset_prompt_column), got an array" \
    "$GRPO" "${T[@]}" --dataset "$TMP/conv.jsonl" --system_prompt "Be brief."
expect_error 1 "chat_template (the option)" "$GRPO" "${T[@]}" --system_prompt S --chat_template '{% if %}'
"$GRPO" "${T[@]}" --output_dir "$TMP/sys" --system_prompt "Be brief." --log_completions || fail "system_prompt alone"
grep -qF '"prompt":"<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nQuestion' "$TMP/sys/completions.jsonl" \
    || fail "system_prompt alone: [system, user from prompt]: $(head -c 300 "$TMP/sys/completions.jsonl")"
finish

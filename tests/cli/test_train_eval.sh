#!/usr/bin/env bash
# Evaluation during training (eval_strategy steps, eval/evaluate.h): an eval
# line in metrics.jsonl every eval_steps steps and after the last, with the
# epoch, eval_reward, eval_reward_std, eval_rewards/NAME/mean, eval_pass@1 and
# eval_completions/mean_length; evaluating changes nothing in the training
# (same final weights as without it); the same numbers on a second run and
# after a resume; TensorBoard gets them as eval/NAME; a console line per
# evaluation saying how its numbers were made (not with --quiet); grpo plot of
# the run draws unbroken curves; eval prompts longer than the training prompts;
# eval_dataset with eval_strategy no warns in one line (nothing evaluated); bad input.
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
        "eval_completions/mean_length", "epoch"}
for l in ev:
    assert set(l) == keys, set(l) ^ keys
    # the epochs done, as in the training line of its step (transformers' log() adds state.epoch
    # to an evaluation's dict): one prompt of two a step
    assert abs(l["epoch"] - l["step"] / 2) < 1e-9, l
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
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/e1" --resume_from_checkpoint "$TMP/e1/checkpoint-2" \
    --overwrite_output_dir true || fail "resume" # checkpoint-5 (the last step's), later than the resume, is removed
[ "$(grep eval_ "$TMP/e1/metrics.jsonl")" = "$(grep eval_ "$TMP/e2/metrics.jsonl")" ] || fail "eval after a resume: $(grep eval_ "$TMP/e1/metrics.jsonl")"
cmp -s "$TMP/plain/model.safetensors" "$TMP/e1/model.safetensors" || fail "resumed weights"
# pass_threshold: every completion passes a threshold below any reward
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/p" --pass_threshold -1000 || fail "pass_threshold"
grep -q '"eval_pass@1": 1,' "$TMP/p/metrics.jsonl" || fail "pass_threshold -1000: $(grep eval_ "$TMP/p/metrics.jsonl")"
# TensorBoard: eval/NAME beside train/NAME (the first run's event file; the resume wrote another)
if /usr/bin/python3 -c "import google.protobuf" 2>/dev/null; then
    first=$(ls -tr "$TMP"/e1/runs/*/events.out.tfevents.* | head -1)
    /usr/bin/python3 tests/log/read_tfevents.py "$first" > "$TMP/tb.json" || fail "reading $first"
    python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['steps']; assert 'eval/reward' in s['2'] and 'eval/pass@1' in s['2'] and 'train/reward' in s['2'] and 'train/epoch' in s['2'] and 'eval/epoch' not in s['2'], s['2']" \
        "$TMP/tb.json" || fail "eval scalars in TensorBoard"
fi
# the console: one line per evaluation with its eval_* values (those of metrics.jsonl)
# and how they were made (sampled as in training, as TRL evaluates); --quiet has none
Q=()
for a in "${R[@]}"; do [ "$a" = --quiet ] || Q+=("$a"); done
"$GRPO" "${Q[@]}" "${E[@]}" --output_dir "$TMP/v" 2>"$TMP/v.err" || fail "train with eval, not quiet"
python3 - "$TMP/v.err" "$TMP/v/metrics.jsonl" <<'PY' || fail "eval lines on the console: $(grep eval "$TMP/v.err")"
import json, re, sys
err = [l for l in open(sys.argv[1]) if " eval at step " in l]
ev = [json.loads(l) for l in open(sys.argv[2]) if "eval_reward" in l]
assert len(err) == len(ev) == 3, (err, len(ev))
for line, rec in zip(err, ev):
    head = "grpo train: eval at step %d (3 prompts x 3 completions sampled at temperature 1): " % rec["step"]
    assert line.startswith(head), line
    got = dict(kv.rsplit(" ", 1) for kv in line[len(head):].strip().split(", "))
    want = {k: v for k, v in rec.items() if k not in ("step", "epoch")}
    assert list(got) == list(want), (list(got), list(want))
    for k, v in want.items():
        assert got[k] == "%.4g" % v, (k, got[k], v)
PY
"$GRPO" "${Q[@]}" "${E[@]}" --output_dir "$TMP/v2" --temperature 0.7 --top_p 0.9 --num_generations_eval 1 \
    2>"$TMP/v2.err" || fail "train with eval at temperature 0.7"
grep -q "^grpo train: eval at step 2 (3 prompts x 1 completion sampled at temperature 0.7, top_p 0.9): eval_reward " \
    "$TMP/v2.err" || fail "the eval line names the sampling: $(grep eval "$TMP/v2.err")"
"$GRPO" "${R[@]}" "${E[@]}" --output_dir "$TMP/v3" 2>"$TMP/v3.err" || fail "quiet run"
[ -s "$TMP/v3.err" ] && fail "--quiet printed: $(cat "$TMP/v3.err")"
# grpo plot of the run: the training and eval curves each one unbroken path (M then L only)
"$GRPO" plot "$TMP/v/metrics.jsonl" --metrics loss,reward,eval_reward,eval_pass@1 -o "$TMP/v.svg" 2>"$TMP/p.err" \
    || fail "plot of a run with eval"
grep -q "(4 panels, 3 logged steps, 3 evaluations)" "$TMP/p.err" || fail "plot's count: $(cat "$TMP/p.err")"
python3 - "$TMP/v.svg" <<'PY' || fail "broken curves in the plot of a run with eval"
import re, sys, xml.etree.ElementTree as ET
NS = "{http://www.w3.org/2000/svg}"
lines = {p.get("data-metric"): p.get("d") for p in ET.parse(sys.argv[1]).getroot().iter(NS + "path") if p.get("class") == "line"}
for name in ("loss", "reward", "eval_reward", "eval_pass@1"):
    cmds = re.findall(r"([A-Za-z])-?[\d.]+,", lines[name])
    assert cmds == ["M", "L", "L"], (name, lines[name])
PY
# TRL's keys
printf 'evaluation_strategy: steps\neval_dataset: %s\nper_device_eval_batch_size: 4\n' "$TMP/ev.jsonl" > "$TMP/e.yaml"
"$GRPO" "${R[@]}" --output_dir "$TMP/y" --config "$TMP/e.yaml" 2>"$TMP/y.err" || fail "TRL eval keys: $(cat "$TMP/y.err")"
grep -q eval_reward "$TMP/y/metrics.jsonl" || fail "eval from YAML"
grep -q "no evaluation will run" "$TMP/y.err" && fail "the eval_dataset warning with eval_strategy steps: $(cat "$TMP/y.err")"
# eval_dataset with eval_strategy no (TRL's default): one warning line, nothing evaluated, training unchanged
W="^grpo train: warning: eval_dataset is set but eval_strategy is 'no': no evaluation will run; set eval_strategy steps (and eval_steps)$"
"$GRPO" "${R[@]}" --output_dir "$TMP/nw" --eval_dataset "$TMP/ev.jsonl" 2>"$TMP/nw.err" || fail "eval_dataset alone: $(cat "$TMP/nw.err")"
grep -q "$W" "$TMP/nw.err" && [ "$(wc -l < "$TMP/nw.err")" -eq 1 ] || fail "eval_dataset without eval_strategy, the warning: $(cat "$TMP/nw.err")"
grep -q '"eval_' "$TMP/nw/metrics.jsonl" && fail "eval_strategy no evaluated"
cmp -s "$TMP/plain/model.safetensors" "$TMP/nw/model.safetensors" || fail "eval_dataset alone changed the training"
printf 'eval_dataset: %s\neval_steps: 2\n' "$TMP/ev.jsonl" > "$TMP/n.yaml"
"$GRPO" "${R[@]}" --output_dir "$TMP/nwy" --config "$TMP/n.yaml" 2>"$TMP/nwy.err"
grep -q "$W" "$TMP/nwy.err" || fail "eval_dataset without eval_strategy in YAML, the warning: $(cat "$TMP/nwy.err")"
"$GRPO" "${R[@]}" --output_dir "$TMP/nw2" --eval_strategy no 2>"$TMP/nw2.err"
[ -s "$TMP/nw2.err" ] && fail "a warning without eval_dataset: $(cat "$TMP/nw2.err")"
# bad input
expect_error 2 "eval_strategy steps needs an eval_dataset" "$GRPO" "${R[@]}" --output_dir "$TMP/b1" --eval_strategy steps
printf '{"prompt": "ok"}\n{"nope": 1}\n' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:2" "$GRPO" "${R[@]}" --output_dir "$TMP/b2" --eval_strategy steps --eval_dataset "$TMP/bad.jsonl"
[ -e "$TMP/b2/model.safetensors" ] && fail "a bad eval dataset still trained"
expect_error 1 "missing.jsonl: cannot open" "$GRPO" "${R[@]}" --output_dir "$TMP/b3" --eval_strategy steps --eval_dataset "$TMP/missing.jsonl"
finish

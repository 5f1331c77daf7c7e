#!/usr/bin/env bash
# filter_groups and max_num_gen_batches (DAPO's dynamic sampling, verl's names) as a
# user meets them: in --help under the batches, from a YAML config, recorded in a
# checkpoint; the plan line says the filter is on; metrics.jsonl and TensorBoard carry
# dynamic_sampling/*; the groups trained are those whose rewards differ; a batch its
# rounds leave short stops the run with one line and the completed steps kept; bad
# values are refused with the option's name. (The batch composition against an
# independent walk over the data, split invariance and resume: tests/grpo/test_dynamic_sampling.c;
# several processes: test_mpi_train.sh.)
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
# "same" prompts score 1 whatever the completion (no signal); the others a number read off the ids
printf '%s\n' '{"prompt": "same 1"}' '{"prompt": "vary 1"}' '{"prompt": "same 2"}' '{"prompt": "vary 2"}' \
    '{"prompt": "vary 3"}' '{"prompt": "same 3"}' > "$TMP/d.jsonl"
cat > "$TMP/by_prompt.py" <<'PY'
import json, sys
for line in sys.stdin:
    q = json.loads(line)
    r = [1.0 if p.startswith("same") else float(sum(ids) % 97) for p, ids in zip(q["prompts"], q["completion_ids"])]
    print(json.dumps({"rewards": r}), flush=True)
PY
cat > "$TMP/run.yaml" <<EOF
model_name_or_path: $TMP/m
dataset_name: $TMP/d.jsonl
reward_funcs: ["cmd:python3 $TMP/by_prompt.py"]
num_generations: 4
per_device_train_batch_size: 4
gradient_accumulation_steps: 2
max_completion_length: 8
max_steps: 3
logging_steps: 1
log_completions: true
save_steps: 3
seed: 5
bf16: false
report_to: tensorboard
filter_groups: true
max_num_gen_batches: 6
EOF

COLUMNS=1000 "$GRPO" train --help | sed -n '/^batches & length of training:$/,/^$/p' > "$TMP/help"
grep -q -- "--filter_groups \[BOOL\] .*DAPO's dynamic sampling.*(default false)" "$TMP/help" || fail "--help: filter_groups"
grep -q -- "--max_num_gen_batches N .*(0 = no bound) (default 0; in \[0, 1048576\])" "$TMP/help" || fail "--help: max_num_gen_batches"

"$GRPO" train --config "$TMP/run.yaml" --output_dir "$TMP/o" 2>"$TMP/o.err" || fail "filter_groups run: $(tail -3 "$TMP/o.err")"
grep -q "dynamic sampling (filter_groups): groups with equal rewards dropped, at most 6 rounds of 2 prompts per generation batch" \
    "$TMP/o.err" || fail "the plan line does not say the filter is on: $(head -5 "$TMP/o.err")"
python3 - "$TMP/o" <<'PY' || fail "filter_groups: what was trained, logged or recorded"
import json, sys
d = sys.argv[1]
recs = [json.loads(l) for l in open(d + "/completions.jsonl")]
assert len(recs) == 24 and all(r["prompt"].startswith("vary") for r in recs), [r["prompt"] for r in recs]
for i in range(0, 24, 4):   # each trained group's rewards differ
    assert len({r["reward"] for r in recs[i:i + 4]}) > 1, recs[i:i + 4]
steps = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"loss"' in l]
assert len(steps) == 3, steps
assert sum(s["dynamic_sampling/groups_dropped"] for s in steps) > 0, steps
assert all(1 <= s["dynamic_sampling/gen_rounds"] <= 6 and s["frac_reward_zero_std"] == 0 for s in steps), steps
args = json.load(open(d + "/checkpoint-3/trainer_state.json"))["stateful_callbacks"]["GrpoTrainer"]["args"]
assert args["filter_groups"] is True and args["max_num_gen_batches"] == 6, args
PY
ev=$(ls "$TMP"/o/runs/*/events.out.tfevents.* 2>/dev/null)
if /usr/bin/python3 -c "import google.protobuf" 2>/dev/null && [ -n "$ev" ]; then
    /usr/bin/python3 tests/log/read_tfevents.py $ev > "$TMP/ev.json" || fail "the event file does not read back"
    python3 -c "import json, sys; s = json.load(open(sys.argv[1]))['steps']['1']; assert 'train/dynamic_sampling/gen_rounds' in s \
        and 'train/dynamic_sampling/groups_dropped' in s, sorted(s)" "$TMP/ev.json" || fail "TensorBoard lacks dynamic_sampling/*"
else
    fail "no TensorBoard event file, or python3-protobuf missing (tools/install-deps.sh)"
fi

# one round per batch cannot fill it when a round holds a "same" prompt: the run stops with one line
expect_error 1 "after max_num_gen_batches (1) rounds of 2 prompts, .* groups with equal rewards dropped" \
    "$GRPO" train --config "$TMP/run.yaml" --output_dir "$TMP/b1" --max_num_gen_batches 1 --quiet
# all "same": no round fills a batch; the steps completed before are kept (here none)
printf '%s\n' '{"prompt": "same 1"}' '{"prompt": "same 2"}' > "$TMP/same.jsonl"
expect_error 1 "0 of the 2 groups of a generation batch have rewards that differ (6 groups with equal rewards dropped)" \
    "$GRPO" train --config "$TMP/run.yaml" --dataset "$TMP/same.jsonl" --output_dir "$TMP/b2" --max_num_gen_batches 3 --quiet
[ -f "$TMP/b2/model.safetensors" ] && fail "a model was saved after the bound stopped the run"

expect_error 2 "max_num_gen_batches must be in \[0, " "$GRPO" train --config "$TMP/run.yaml" --output_dir "$TMP/x" \
    --max_num_gen_batches -1
sed 's/^filter_groups: true/filter_groups: maybe/' "$TMP/run.yaml" > "$TMP/bad.yaml"
expect_error 2 "bad.yaml:15: filter_groups takes true or false, not 'maybe'" "$GRPO" train --config "$TMP/bad.yaml" \
    --output_dir "$TMP/x"
finish

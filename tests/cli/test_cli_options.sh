#!/usr/bin/env bash
# One option table (core/options.h): the same option given on the command line,
# in a YAML file, and both (the command line wins) reaches the run as one value —
# the value the optimizer used (metrics.jsonl) and the value a checkpoint records
# (trainer_state.json's stateful_callbacks.GrpoTrainer.args); --help prints each
# command's default from the same row; out-of-range values are refused with the
# option's name and range.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" \
    2>/dev/null || { fail init; finish; }
printf '%s\n' '{"text": "hello world"}' '{"prompt": "1+1=", "completion": "2"}' > "$TMP/s.jsonl"

# (COLUMNS=1000: each option's help on its one line, for grep)
COLUMNS=1000 "$GRPO" sft --help | grep -q -- "--learning_rate N .*(default 2e-05; >= 0)" || fail "sft --help: learning_rate default"
COLUMNS=1000 "$GRPO" train --help | grep -q -- "--learning_rate N .*(default 1e-06; >= 0)" || fail "train --help: learning_rate default"
COLUMNS=1000 "$GRPO" train --help | grep -q -- "--loss_type VALUE .*(default dapo; dapo, grpo, " || fail "train --help: loss_type choices"
COLUMNS=1000 "$GRPO" eval --help | grep -q -- "--temperature N .*(default 0;" || fail "eval --help: its own temperature default"

# --help a person can scan (issue 39): the options under headings, in this order; related
# rows together; help wrapped to 100 columns off a terminal, or to $COLUMNS
help=$("$GRPO" train --help)
heads=$(printf '%s\n' "$help" | grep -E '^[A-Za-z].*:$' | tr '\n' '|')
[ "$heads" = "model & data:|rewards:|generation:|GRPO loss:|batches & length of training:|optimization:|evaluation during training:|logging & checkpoints:|LoRA:|precision, memory & speed:|" ] ||
    fail "train --help headings: $heads"
printf '%s\n' "$help" | grep -A1 -- '^  --max_prompt_length N' | tail -n 1 | grep -q -- '^  --max_completion_length N' ||
    fail "train --help: max_prompt_length is not beside max_completion_length"
printf '%s\n' "$help" | sed -n '/^LoRA:$/,/^$/p' | grep -q -- '--lora_r N .*(default 16; in \[1, 65536\])' ||
    fail "train --help: lora_r is not under LoRA"
widest() { python3 -c 'import sys; print(max(len(l.rstrip("\n")) for l in sys.stdin))'; }
[ "$(printf '%s\n' "$help" | widest)" -le 100 ] || fail "train --help has lines over 100 columns"
[ "$(COLUMNS=72 "$GRPO" train --help | grep -v "^usage:" | widest)" -le 72 ] || fail "train --help does not wrap to \$COLUMNS"
for c in sft eval generate score; do
    "$GRPO" $c --help | grep -q '^model & data:$' || fail "$c --help has no model & data heading"
done
"$GRPO" init --help | grep -q '^options:$' || fail "init --help: its options under one heading"

RUN=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 1 --save_steps 1
     --logging_steps 1 --lr_scheduler_type constant --quiet)
lr_of() { # the learning rate the run used, and the one its checkpoint recorded
    python3 - "$1" <<'PY'
import json, sys
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if "train_runtime" not in l]  # the closing line aside
s = json.load(open(sys.argv[1] + "/checkpoint-1/trainer_state.json"))
ours = s["stateful_callbacks"]["GrpoTrainer"]
print(m[-1]["learning_rate"], ours["args"]["learning_rate"], ours["attributes"]["algorithm"])
PY
}
"$GRPO" "${RUN[@]}" --learning_rate 0.003 --output_dir "$TMP/cli" || fail "sft from the command line"
printf 'learning_rate: 0.003\nmax_steps: 1\n' > "$TMP/lr.yaml"
"$GRPO" "${RUN[@]}" --config "$TMP/lr.yaml" --output_dir "$TMP/yaml" || fail "sft from YAML"
printf 'learning_rate: 0.5\n' > "$TMP/lr2.yaml"
"$GRPO" "${RUN[@]}" --config "$TMP/lr2.yaml" --learning_rate 0.003 --output_dir "$TMP/both" || fail "sft YAML + CLI"
for d in cli yaml both; do
    [ "$(lr_of "$TMP/$d")" = "0.003 0.003 sft" ] || fail "$d: learning rate used / recorded: $(lr_of "$TMP/$d")"
done
cmp -s "$TMP/cli/model.safetensors" "$TMP/yaml/model.safetensors" || fail "the same option from CLI and YAML trains differently"

# a checkpoint of one algorithm is not resumed by another
printf '{"prompt": "ab"}\n' > "$TMP/d.jsonl"
expect_error 1 "a checkpoint of the sft trainer; this run is grpo" "$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" \
    --reward_funcs length:3 --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --quiet \
    --output_dir "$TMP/cli" --resume_from_checkpoint "$TMP/cli/checkpoint-1"

# ranges and choices, from the command line and from YAML, name the option
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/bad" --reward_funcs length:3 --quiet)
expect_error 2 "per_device_train_batch_size must be in \[1, 1048576\] (got 100000000)" "$GRPO" "${T[@]}" \
    --per_device_train_batch_size 100000000
expect_error 2 "top_k must be >= 0 (got -1)" "$GRPO" "${T[@]}" --top_k -1
# Adam's betas in [0, 1): 1 would divide by 1 - beta^t = 0 (a NaN model)
expect_error 2 "adam_beta1 must be in \[0, 1) (got 1)" "$GRPO" "${T[@]}" --adam_beta1 1
expect_error 2 "adam_beta2 must be in \[0, 1) (got 1)" "$GRPO" "${T[@]}" --adam_beta2 1.0
"$GRPO" train --help 2>&1 | grep -q "AdamW beta2 (default 0.999; in \[0, 1))" || fail "--help does not give beta2's range as [0, 1)"
expect_error 2 "seed expects an integer, not 'x'" "$GRPO" "${T[@]}" --seed x
expect_error 2 "reward_weights: 'heavy' is not a number" "$GRPO" "${T[@]}" --reward_weights heavy
printf 'scale_rewards: sometimes\n' > "$TMP/bad.yaml"
expect_error 2 "bad.yaml:1: scale_rewards 'sometimes' is not one of group, batch or none" "$GRPO" "${T[@]}" --config "$TMP/bad.yaml"
# a --config file is one mapping, each option once under any of its names, core YAML tags only
printf 'learning_rate: 1.0e-5\nseed: 3\nlearning_rate: 1.0e3\n' > "$TMP/dup.yaml"
expect_error 2 "dup.yaml:3: 'learning_rate' is given twice (first at line 1)" "$GRPO" "${T[@]}" --config "$TMP/dup.yaml"
printf 'model: %s\nmodel_name_or_path: /elsewhere\n' "$TMP/m" > "$TMP/alias.yaml"
expect_error 2 "alias.yaml:2: 'model_name_or_path' is the option model, given already as 'model' at line 1" \
    "$GRPO" "${T[@]}" --config "$TMP/alias.yaml"
printf 'seed: 3\n---\nlearning_rate: 5\n' > "$TMP/two.yaml"
expect_error 2 "two.yaml:3: a second YAML document" "$GRPO" "${T[@]}" --config "$TMP/two.yaml"
printf 'seed: !!python/object:os.system 1\n' > "$TMP/tag.yaml"
expect_error 2 "tag.yaml:1: the YAML tag '!!python/object:os.system' is not supported" "$GRPO" "${T[@]}" --config "$TMP/tag.yaml"
printf 'seed: 3\n"lea\\x1brning_rate": 1\n"lea\\x1brning_rate": 2\n' > "$TMP/esc.yaml"
expect_error 2 "esc.yaml:3: 'lea\\\\x1brning_rate' is given twice" "$GRPO" "${T[@]}" --config "$TMP/esc.yaml"
grep -q "$(printf '\033')" "$TMP/expect.err" && fail "an escape character reached the message raw"
# TRL's Python spelling of booleans is accepted where TRL's configs use it
printf 'scale_rewards: False\nlog_completions: True\nmax_steps: 1\nnum_generations: 2\nper_device_train_batch_size: 2\nmax_completion_length: 4\n' > "$TMP/py.yaml"
"$GRPO" "${T[@]}" --config "$TMP/py.yaml" --output_dir "$TMP/py" --save_steps 1 || fail "scale_rewards: False"
python3 -c "import json,sys; a=json.load(open('$TMP/py/checkpoint-1/trainer_state.json'))['stateful_callbacks']['GrpoTrainer']['args']; sys.exit(a['scale_rewards'] != 'none')" \
    || fail "scale_rewards False should record none"
finish

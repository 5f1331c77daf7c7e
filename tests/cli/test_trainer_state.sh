#!/usr/bin/env bash
# trainer_state.json carries transformers' TrainerState fields and nothing else
# at its top level: every field TrainerState declares (transformers 4.5x:
# trainer_callback.py), with its type, so TrainerState.load_from_json's
# cls(**json.loads(text)) loads it (a dataclass with exactly those fields stands in
# for transformers here); log_history is the logged dicts (each training line and
# each evaluation of metrics.jsonl up to the checkpoint, with "epoch" and "step");
# stateful_callbacks as the Trainer writes TrainerControl, and the loop's own fields
# as one more callback in ExportableState's shape (GrpoTrainer: "args", the
# recorded options, and "attributes"). A resumed run's log_history continues the
# checkpoint's (no entry lost or repeated: equal to an uninterrupted run's, timings
# aside); a checkpoint without log_history (written before it was kept) still
# resumes, and so does one in the flat layout (our fields at the top level, written
# before they were moved); a damaged log_history or GrpoTrainer callback is refused
# in one line.
set -u
. "$ROOT/tests/cli/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '{"prompt": "ab"}\n{"prompt": "cd"}\n{"prompt": "ef"}\n' > "$TMP/d.jsonl"
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:3 --num_generations 2
   --per_device_train_batch_size 2 --max_completion_length 6 --max_steps 6 --logging_steps 2 --save_steps 2 --quiet
   --seed 3 --eval_strategy steps --eval_dataset "$TMP/d.jsonl" --eval_steps 3 --num_generations_eval 2)
"$GRPO" "${R[@]}" --output_dir "$TMP/a" || { fail "train"; finish; }

# check_state DIR STEP METRICS [final] — DIR/trainer_state.json against TrainerState and METRICS
# (final: output_dir's, written with the final model as trainer.save_state() writes it,
# without the algorithm's fields of a checkpoint)
check_state() {
    python3 - "$@" <<'PY'
import json, sys
path, step, metrics = sys.argv[1] + "/trainer_state.json", int(sys.argv[2]), sys.argv[3]
final = sys.argv[4:] == ["final"]
s = json.load(open(path))
num = (int, float)
# TrainerState's fields and the types its dataclass declares (None where Optional)
fields = {"epoch": (num, False), "global_step": (int, True), "max_steps": (int, True), "logging_steps": (int, True),
          "eval_steps": (int, True), "save_steps": (int, True), "train_batch_size": (int, False),
          "num_train_epochs": (int, True), "num_input_tokens_seen": (int, True), "total_flos": (num, True),
          "log_history": (list, True), "best_metric": (num, False), "best_global_step": (int, False),
          "best_model_checkpoint": (str, False), "is_local_process_zero": (bool, True),
          "is_world_process_zero": (bool, True), "is_hyper_param_search": (bool, True), "trial_name": (str, False),
          "trial_params": (dict, False), "stateful_callbacks": (dict, False)}
assert set(s) == set(fields), ("not TrainerState's fields", set(s) ^ set(fields))
for k, (t, required) in fields.items():
    assert k in s, ("missing", k)
    v = s[k]
    assert (v is None and not required) or (isinstance(v, t) and not (t != bool and isinstance(v, bool))), (k, v)
assert s["global_step"] == step and s["max_steps"] == 6 and s["logging_steps"] == 2 and s["eval_steps"] == 3
assert s["save_steps"] == 2 and s["train_batch_size"] == 2 and s["num_train_epochs"] == 2, s
# one prompt per step (2 sequences = 1 prompt x 2 completions), 3 prompts: epoch = step / 3
ours = s["stateful_callbacks"]["GrpoTrainer"]
assert set(ours) == {"args", "attributes"} and isinstance(ours["args"], dict), ours
assert abs(s["epoch"] - step / 3) < 1e-9 and s["num_input_tokens_seen"] == ours["attributes"]["num_tokens"], s
assert ours["args"]["max_steps"] == 6 and ours["args"]["eval_steps"] == 3, ours["args"]
assert set(s["stateful_callbacks"]) == {"TrainerControl", "GrpoTrainer"}, s["stateful_callbacks"]
ctl = s["stateful_callbacks"]["TrainerControl"]
assert ctl["attributes"] == {} and ctl["args"]["should_save"] is True, ctl
assert ctl["args"]["should_training_stop"] is (step == 6), ctl
assert set(ctl["args"]) == {"should_training_stop", "should_epoch_stop", "should_save", "should_evaluate", "should_log"}
# the loop's own fields, and GRPO's, are the callback's attributes
for k in ("version", "algorithm", "adam_step", "nonfinite_streak", "num_tokens", "threads", "world_size"):
    assert k in ours["attributes"], k
for k in ("generation_rounds", "data_position", "rng"):
    assert (k in ours["attributes"]) is not final, k
assert ours["attributes"]["algorithm"] == "grpo" and 0 < ours["attributes"]["adam_step"] <= step, ours["attributes"]
# log_history: metrics.jsonl's lines up to the step, in order, each with epoch and step;
# a training line's epoch is state.epoch at its step, as transformers logs it (3 steps an
# epoch: 2/3 at step 2, not the mean 1/2 of steps 1 and 2), in both files; an evaluation's
# line has it too, as transformers' log() adds state.epoch to every dict; the closing
# entry (train_runtime, ...) only in output_dir's, written after the last checkpoint
lines = [json.loads(l) for l in open(metrics)]
want = [l for l in lines if l["step"] <= step and "event" not in l and (final or "train_runtime" not in l)]
h = s["log_history"]
assert len(h) == len(want), (len(h), len(want))
for e, l in zip(h, want):
    assert isinstance(e["step"], int) and isinstance(e["epoch"], float), e
    assert abs(e["epoch"] - e["step"] / 3) < 1e-9, e
    assert abs(l["epoch"] - l["step"] / 3) < 1e-9 and e == l, (e, l)
# num_tokens is state.num_input_tokens_seen at the logging step, as TRL logs it, not the
# mean over the interval (logging_steps 2): a checkpoint's line equals its own count
for l in want:
    if l["step"] == step and "loss" in l:
        assert l["num_tokens"] == s["num_input_tokens_seen"] > 0, (l, s["num_input_tokens_seen"])
steps = [(e["step"], "eval_reward" in e) for e in h]
assert steps == [(st, ev) for st, ev in [(2, False), (3, True), (4, False), (6, False), (6, True)] if st <= step] + \
    [(6, False)] * final, steps
# the closing entry, as transformers' Trainer logs it when training ends: its keys in its
# order, the timings positive, total_flos 0, train_loss the mean of the steps' losses
# (logging_steps 2: the mean of the lines' means), the epoch and step of the last step
if final:
    end = h[-1]
    assert list(end) == ["train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos",
                         "train_loss", "epoch", "step"], end
    # (0 after a resume at the last step: no step run)
    assert end["train_runtime"] >= 0 and end["train_samples_per_second"] >= 0 and end["train_steps_per_second"] >= 0, end
    losses = [l["loss"] for l in lines if "loss" in l]
    assert len(losses) == 3 and abs(end["train_loss"] - sum(losses) / 3) < 1e-9, (end, losses)
    assert end["total_flos"] == 0 and end["epoch"] == 2 and end["step"] == 6, end
PY
}
check_state "$TMP/a/checkpoint-2" 2 "$TMP/a/metrics.jsonl" || fail "checkpoint-2's trainer_state.json"
check_state "$TMP/a/checkpoint-4" 4 "$TMP/a/metrics.jsonl" || fail "checkpoint-4's trainer_state.json"
check_state "$TMP/a/checkpoint-6" 6 "$TMP/a/metrics.jsonl" || fail "checkpoint-6's trainer_state.json"
# output_dir's, beside the final model, as TRL's and open-r1's scripts write it (trainer.save_state())
check_state "$TMP/a" 6 "$TMP/a/metrics.jsonl" final || fail "output_dir's trainer_state.json (trainer.save_state())"
ls "$TMP"/a/trainer_state.json.tmp* 2>/dev/null && fail "a temporary trainer_state.json was left"
python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["log_history"][-1]; assert e["train_runtime"] > 0 and e["train_samples_per_second"] > 0 and e["train_steps_per_second"] > 0, e' \
    "$TMP/a/trainer_state.json" || fail "the closing entry's timings"

# load_from_json as transformers does it: cls(**json.loads(text)) on a dataclass
# declaring exactly TrainerState's fields (trainer_callback.py, with its defaults)
hf_load() {
    python3 - "$1" <<'PY'
import dataclasses, json, sys
from typing import Optional

@dataclasses.dataclass
class TrainerState:
    epoch: Optional[float] = None
    global_step: int = 0
    max_steps: int = 0
    logging_steps: int = 500
    eval_steps: int = 500
    save_steps: int = 500
    train_batch_size: Optional[int] = None
    num_train_epochs: int = 0
    num_input_tokens_seen: int = 0
    total_flos: float = 0
    log_history: list = None
    best_metric: Optional[float] = None
    best_global_step: Optional[int] = None
    best_model_checkpoint: Optional[str] = None
    is_local_process_zero: bool = True
    is_world_process_zero: bool = True
    is_hyper_param_search: bool = False
    trial_name: Optional[str] = None
    trial_params: Optional[dict] = None
    stateful_callbacks: Optional[list] = None

with open(sys.argv[1], encoding="utf-8") as f:
    state = TrainerState(**json.loads(f.read()))
assert state.global_step > 0 and state.log_history and "GrpoTrainer" in state.stateful_callbacks, state
PY
}
for n in 2 4 6; do
    hf_load "$TMP/a/checkpoint-$n/trainer_state.json" || fail "checkpoint-$n's trainer_state.json: TrainerState.load_from_json fails"
done
hf_load "$TMP/a/trainer_state.json" || fail "output_dir's trainer_state.json: TrainerState.load_from_json fails"

# a resume from checkpoint-2 after an interrupted run: log_history continues, nothing lost or repeated
cp -r "$TMP/a" "$TMP/b" && rm -rf "$TMP/b/checkpoint-4" "$TMP/b/checkpoint-6" "$TMP/b/model.safetensors"
"$GRPO" "${R[@]}" --output_dir "$TMP/b" --resume_from_checkpoint "$TMP/b/checkpoint-2" || fail "resume"
cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" || fail "resumed weights differ"
check_state "$TMP/b/checkpoint-6" 6 "$TMP/b/metrics.jsonl" || fail "the resumed run's trainer_state.json"
check_state "$TMP/b" 6 "$TMP/b/metrics.jsonl" final || fail "the resumed run's final trainer_state.json"
same_history() {
    python3 - "$1" "$2" <<'PY'
import json, sys
# the timings (step_time, train_runtime, train_*_per_second) differ between identical runs
strip = lambda h: [{k: v for k, v in e.items() if "time" not in k and not k.endswith("_per_second")} for e in h]
a, b = (strip(json.load(open(p))["log_history"]) for p in sys.argv[1:])
assert a == b, (len(a), len(b))
PY
}
same_history "$TMP/a/checkpoint-6/trainer_state.json" "$TMP/b/checkpoint-6/trainer_state.json" \
    || fail "the resumed run's log_history differs from the uninterrupted run's"
# the closing entry too: train_loss over the whole run, the steps before the resume included
same_history "$TMP/a/trainer_state.json" "$TMP/b/trainer_state.json" \
    || fail "the resumed run's final log_history differs from the uninterrupted run's"

# a resume from the finished run's last checkpoint logs the closing line once, as its log_history has it
cp -r "$TMP/a" "$TMP/e"
"$GRPO" "${R[@]}" --output_dir "$TMP/e" --resume_from_checkpoint "$TMP/e/checkpoint-6" || fail "resume at the last step"
check_state "$TMP/e" 6 "$TMP/e/metrics.jsonl" final || fail "a resume at the last step: output_dir's trainer_state.json"
[ "$(grep -c train_runtime "$TMP/e/metrics.jsonl")" = 1 ] || fail "a resume at the last step: not one closing line"

# a checkpoint without log_history (written before it was kept) resumes; its history starts there
cp -r "$TMP/a" "$TMP/c" && rm -rf "$TMP/c/checkpoint-6" "$TMP/c/model.safetensors"
# (nor train_loss's sums: the closing train_loss is then unknown, null)
python3 -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); del s["log_history"]; a = s["stateful_callbacks"]["GrpoTrainer"]["attributes"]; del a["loss_sum"], a["loss_steps"]; json.dump(s, open(p, "w"))' \
    "$TMP/c/checkpoint-4/trainer_state.json"
"$GRPO" "${R[@]}" --output_dir "$TMP/c" --resume_from_checkpoint "$TMP/c/checkpoint-4" || fail "resume without log_history"
python3 -c 'import json, sys; h = json.load(open(sys.argv[1]))["log_history"]; assert [(e["step"], "eval_reward" in e) for e in h] == [(6, False), (6, True)], h' \
    "$TMP/c/checkpoint-6/trainer_state.json" || fail "log_history after a checkpoint without one"
python3 -c 'import json, sys; e = json.load(open(sys.argv[1]))["log_history"][-1]; assert "train_runtime" in e and e["train_loss"] is None, e' \
    "$TMP/c/trainer_state.json" || fail "train_loss after a checkpoint without its sums"

# a checkpoint in the flat layout (our fields at the top level, as the previous
# version wrote them) resumes, bit-identical to the uninterrupted run
cp -r "$TMP/a" "$TMP/f" && rm -rf "$TMP/f/checkpoint-4" "$TMP/f/checkpoint-6" "$TMP/f/model.safetensors"
python3 - "$TMP/f/checkpoint-2/trainer_state.json" <<'PY' || fail "flattening checkpoint-2"
import json, sys
p = sys.argv[1]
s = json.load(open(p))
ours = s["stateful_callbacks"].pop("GrpoTrainer")
s.update(ours["attributes"], args=ours["args"])
json.dump(s, open(p, "w"))
PY
"$GRPO" "${R[@]}" --output_dir "$TMP/f" --resume_from_checkpoint "$TMP/f/checkpoint-2" || fail "resume from the flat layout"
cmp -s "$TMP/a/model.safetensors" "$TMP/f/model.safetensors" || fail "a resume from the flat layout differs"
check_state "$TMP/f/checkpoint-6" 6 "$TMP/f/metrics.jsonl" || fail "the checkpoint after a flat one is not nested"

# a damaged GrpoTrainer callback: one line naming the file and the field
ours() {
    rm -rf "$TMP/o" && cp -r "$TMP/a" "$TMP/o" && rm -rf "$TMP/o/checkpoint-6"
    python3 -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); exec(sys.argv[2]); json.dump(s, open(p, "w"))' \
        "$TMP/o/checkpoint-4/trainer_state.json" "$1"
}
ours 's["stateful_callbacks"]["GrpoTrainer"]["attributes"] = []'
expect_error 1 "checkpoint-4/trainer_state.json: stateful_callbacks.GrpoTrainer is malformed (expected {\"args\": {...}, \"attributes\": {...}})" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/o" --resume_from_checkpoint "$TMP/o/checkpoint-4"
ours 's["adam_step"] = 1'
expect_error 1 "checkpoint-4/trainer_state.json: adam_step is both at the top level and in stateful_callbacks.GrpoTrainer (expected it once)" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/o" --resume_from_checkpoint "$TMP/o/checkpoint-4"
ours 'del s["stateful_callbacks"]["GrpoTrainer"]["attributes"]["version"]'
expect_error 1 "checkpoint-4/trainer_state.json: malformed (expected global_step, and stateful_callbacks.GrpoTrainer.attributes with version 2, algorithm" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/o" --resume_from_checkpoint "$TMP/o/checkpoint-4"

# a damaged log_history: one line naming the file
damage() {
    rm -rf "$TMP/d" && cp -r "$TMP/a" "$TMP/d" && rm -rf "$TMP/d/checkpoint-6"
    python3 -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); s["log_history"] = json.loads(sys.argv[2]); json.dump(s, open(p, "w"))' \
        "$TMP/d/checkpoint-4/trainer_state.json" "$1"
}
damage '"x"'
expect_error 1 "checkpoint-4/trainer_state.json: log_history is not a list" "$GRPO" "${R[@]}" --output_dir "$TMP/d" \
    --resume_from_checkpoint "$TMP/d/checkpoint-4"
damage '[{"step": 2}, {"loss": 1}]'
expect_error 1 "checkpoint-4/trainer_state.json: log_history entry 1: an entry without an integer \"step\"" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/d" --resume_from_checkpoint "$TMP/d/checkpoint-4"
damage '[{"step": 2}, {"step": 5}]'
expect_error 1 "log_history entry 1: steps out of order or past global_step" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/d" --resume_from_checkpoint "$TMP/d/checkpoint-4"
finish

#!/usr/bin/env bash
# report_to tensorboard (log/tensorboard.c): event files under output_dir/runs/
# (or logging_dir) that an independent reader (tests/log/read_tfevents.py:
# TFRecord framing and CRC-32C checked bit by bit, Events parsed with Debian's
# python3-protobuf by TensorBoard's field numbers) reads back: file_version
# first, then one Event per logging step holding every finite metric of that
# metrics.jsonl line as "train/NAME", and one for the closing line (train_runtime,
# ..., train_loss, as transformers' callback gets the end of training). report_to none writes none; an integration
# we do not have is a warning; a logging_dir that cannot be made is an error.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '{"prompt": "ab"}\n{"prompt": "cd"}\n' > "$TMP/d.jsonl"
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --max_steps 5 --logging_steps 2 --quiet)
/usr/bin/python3 -c "import google.protobuf" 2>/dev/null || { fail "python3-protobuf is missing (tools/install-deps.sh)"; finish; }

"$GRPO" "${R[@]}" --output_dir "$TMP/o" --report_to tensorboard || fail "train with report_to tensorboard"
ev=$(ls "$TMP"/o/runs/*_"$(hostname)"/events.out.tfevents.*."$(hostname)".* 2>/dev/null)
[ "$(echo "$ev" | wc -w)" -eq 1 ] || fail "one event file under output_dir/runs/DATE_HOST: $(find "$TMP/o/runs" 2>&1)"
/usr/bin/python3 tests/log/read_tfevents.py $ev > "$TMP/ev.json" || fail "the event file does not read back"
python3 - "$TMP/ev.json" "$TMP/o/metrics.jsonl" <<'PY' || fail "TensorBoard scalars differ from metrics.jsonl"
import json, struct, sys
ev = json.load(open(sys.argv[1]))
lines = [json.loads(l) for l in open(sys.argv[2])]
assert ev["file_version"] == "brain.Event:2", ev["file_version"]
# the last step's twice: its line and the closing one (train_runtime, ..., train_loss)
assert sorted(ev["steps"], key=int) == ["2", "4", "5"] and [l["step"] for l in lines] == [2, 4, 5, 5], ev["steps"].keys()
assert "train_runtime" in lines[-1] and "train/train_loss" in ev["steps"]["5"], lines[-1]
f32 = lambda x: struct.unpack("<f", struct.pack("<f", x))[0]
for step in ("2", "4", "5"):
    got = ev["steps"][step]
    want = {"train/" + k: v for l in lines if str(l["step"]) == step for k, v in l.items() if k != "step" and v is not None}
    assert set(got) == set(want), set(got) ^ set(want)
    for k, v in want.items():   # metrics.jsonl has 10 digits, TensorBoard a float32
        assert abs(got[k] - f32(v)) <= 1e-6 * max(1.0, abs(v)), (k, got[k], v)
assert "train/kl" not in ev["steps"]["2"]          # null (beta 0) is left out
assert all(t > 1.7e9 for t in ev["wall_times"])    # seconds since the epoch
PY

# logging_dir, TRL's YAML spelling, another integration named in a warning
printf 'report_to:\n  - tensorboard\n  - wandb\nlogging_dir: %s\n' "$TMP/tblogs" > "$TMP/tb.yaml"
"$GRPO" "${R[@]}" --output_dir "$TMP/y" --config "$TMP/tb.yaml" --quiet false 2>"$TMP/y.err" || fail "report_to from YAML"
ls "$TMP"/tblogs/events.out.tfevents.* >/dev/null 2>&1 || fail "logging_dir holds the event file"
[ -e "$TMP/y/runs" ] && fail "with logging_dir nothing goes to output_dir/runs"
# (the integration is listed with the keys without effect, in their one warning line)
grep -q "warning: TRL options without effect here: .*report_to wandb (metrics go to output_dir/metrics.jsonl" "$TMP/y.err" \
    || fail "wandb warning: $(cat "$TMP/y.err")"
"$GRPO" "${R[@]}" --output_dir "$TMP/n" --report_to none || fail "report_to none"
[ -e "$TMP/n/runs" ] && fail "report_to none wrote TensorBoard files"
: > "$TMP/afile"
expect_error 1 "afile" "$GRPO" "${R[@]}" --output_dir "$TMP/e" --report_to tensorboard --logging_dir "$TMP/afile/tb"
finish

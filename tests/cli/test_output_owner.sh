#!/usr/bin/env bash
# A run owns its output directory (issue 38): a second run on a directory in use is
# refused with one line naming the holder's pid — `grpo train` and `grpo sft` alike,
# --overwrite_output_dir or not — and the first run goes on to a clean end; a lock
# file left by a run that died is taken over; the lock file is gone when the run
# ends. An output_dir that is, lies inside or holds an input (model, adapter,
# dataset, eval_dataset, config; through "./", a trailing slash or a symlink) is
# refused before anything is written, and so is one inside the checkpoint resumed
# from; the inputs are left as they were.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"text": "hello world"}' '{"prompt": "1+1=", "completion": "2"}' > "$TMP/s.jsonl"
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/p.jsonl"
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --logging_steps 1 --quiet)
T=(train --model "$TMP/m" --dataset "$TMP/p.jsonl" --reward_funcs length:5 --num_generations 2
   --per_device_train_batch_size 2 --max_completion_length 4 --logging_steps 1 --quiet)
sums() { (cd "$1" && find . -type f | sort | xargs md5sum); }
sums "$TMP/m" > "$TMP/m.sums"

# ---- two runs, one directory ----
"$GRPO" "${S[@]}" --max_steps 1000000 --save_steps 1000000 --learning_rate 1e-4 --output_dir "$TMP/busy" 2>"$TMP/a.err" &
pid=$!
for _ in $(seq 400); do [ "$(cat "$TMP/busy/metrics.jsonl" 2>/dev/null | wc -l)" -ge 2 ] && break; sleep 0.05; done
[ -f "$TMP/busy/.grpo-run.lock" ] || fail "no lock file while the run is on"
expect_error 1 "busy is in use by another grpo run (pid $pid on " "$GRPO" "${S[@]}" --max_steps 1 --output_dir "$TMP/busy"
expect_error 1 "is in use by another grpo run (pid $pid " "$GRPO" "${S[@]}" --max_steps 1 --output_dir "$TMP/busy" \
    --overwrite_output_dir true
expect_error 1 "is in use by another grpo run (pid $pid " "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/busy/"
ln -s "$TMP/busy" "$TMP/busy-link"
expect_error 1 "is in use by another grpo run (pid $pid " "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$TMP/busy-link" \
    --overwrite_output_dir true
kill -0 $pid 2>/dev/null || fail "the first run did not survive the second's attempts: $(cat "$TMP/a.err")"
kill -TERM $pid
wait $pid
[ $? -eq 143 ] || fail "the first run did not stop cleanly on SIGTERM: $(cat "$TMP/a.err")"
python3 -c '
import json, sys
lines = open(sys.argv[1]).read().splitlines()
steps = [json.loads(l)["step"] for l in lines]
assert steps == list(range(1, len(steps) + 1)), steps
' "$TMP/busy/metrics.jsonl" || fail "the first run's metrics.jsonl was disturbed"
ls -d "$TMP"/busy/checkpoint-* >/dev/null 2>&1 || fail "the first run's stop checkpoint is missing"
[ ! -e "$TMP/busy/.grpo-run.lock" ] || fail "the lock file outlived the run"
# a lock file whose process is gone (a killed run's) is no obstacle
mkdir -p "$TMP/stale" && echo "pid 1 on elsewhere since long ago" > "$TMP/stale/.grpo-run.lock"
"$GRPO" "${S[@]}" --max_steps 1 --save_steps 0 --output_dir "$TMP/stale" || fail "a stale lock file stopped the run"
[ -f "$TMP/stale/model.safetensors" ] && [ ! -e "$TMP/stale/.grpo-run.lock" ] || fail "stale lock: no model, or the lock file left"
"$GRPO" "${T[@]}" --max_steps 1 --save_steps 0 --output_dir "$TMP/tr" || fail "grpo train"
[ ! -e "$TMP/tr/.grpo-run.lock" ] || fail "grpo train left its lock file"

# ---- an output_dir that is, lies inside or holds an input ----
ln -s "$TMP/m" "$TMP/mlink"
for out in "$TMP/m" "$TMP/m/" "$TMP/mlink" "$TMP/m/sub" "$TMP/m/./x/../y"; do
    expect_error 1 "output_dir .* the model given" "$GRPO" "${S[@]}" --max_steps 1 --output_dir "$out"
    expect_error 1 "output_dir .* the model given" "$GRPO" "${T[@]}" --max_steps 1 --output_dir "$out" --overwrite_output_dir true
done
(cd "$TMP" && expect_error 1 "output_dir ./m is the model given (m)" "$GRPO" sft --model m --dataset s.jsonl \
    --per_device_train_batch_size 2 --quiet --max_steps 1 --output_dir ./m; exit $FAILED) || FAILED=$((FAILED + 1))
sums "$TMP/m" | cmp -s - "$TMP/m.sums" || fail "a refused run changed the model directory"
[ ! -e "$TMP/m/sub" ] && [ ! -e "$TMP/m/y" ] || fail "a refused run made a directory inside the model"
mkdir -p "$TMP/o" && cp "$TMP/s.jsonl" "$TMP/o/s.jsonl"
expect_error 1 "output_dir .*/o holds the dataset given (.*/o/s.jsonl)" "$GRPO" sft --model "$TMP/m" \
    --dataset "$TMP/o/s.jsonl" --per_device_train_batch_size 2 --quiet --max_steps 1 --output_dir "$TMP/o"
printf 'learning_rate: 1.0e-4\n' > "$TMP/o/c.yaml"
expect_error 1 "holds the config given" "$GRPO" "${S[@]}" --config "$TMP/o/c.yaml" --max_steps 1 --output_dir "$TMP/o"
cp "$TMP/p.jsonl" "$TMP/o/e.jsonl"
expect_error 1 "holds the eval_dataset given" "$GRPO" "${T[@]}" --eval_dataset "$TMP/o/e.jsonl" --eval_strategy steps \
    --max_steps 1 --output_dir "$TMP/o"
[ "$(ls "$TMP/o" | sort | tr '\n' ' ')" = "c.yaml e.jsonl s.jsonl " ] || fail "a refused run wrote into the inputs' directory: $(ls -a "$TMP/o")"
"$GRPO" "${S[@]}" --use_peft true --lora_r 2 --max_steps 1 --save_steps 0 --output_dir "$TMP/ad" || fail "LoRA run"
expect_error 1 "output_dir .* is the adapter given" "$GRPO" "${S[@]}" --adapter "$TMP/ad" --max_steps 1 \
    --output_dir "$TMP/ad" --overwrite_output_dir true
# resuming: the checkpoint lies inside output_dir as a rule; output_dir inside the checkpoint is refused
"$GRPO" "${S[@]}" --max_steps 1 --save_steps 1 --output_dir "$TMP/r" || fail "run with a checkpoint"
expect_error 1 "lies inside the checkpoint resumed from" "$GRPO" "${S[@]}" --max_steps 2 \
    --resume_from_checkpoint "$TMP/r/checkpoint-1" --output_dir "$TMP/r/checkpoint-1/more"
expect_error 1 "is the checkpoint resumed from" "$GRPO" "${S[@]}" --max_steps 2 \
    --resume_from_checkpoint "$TMP/r/checkpoint-1" --output_dir "$TMP/r/checkpoint-1"
"$GRPO" "${S[@]}" --max_steps 2 --resume_from_checkpoint "$TMP/r/checkpoint-1" --output_dir "$TMP/r" || fail "a plain resume"
finish

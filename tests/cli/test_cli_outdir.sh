#!/usr/bin/env bash
# The output directory of a training run: an earlier run's metrics and checkpoints
# are never emptied by a new run (refused unless --overwrite_output_dir), dead
# temporary directories of killed saves are removed at start (only those whose
# process is gone), a symlinked output_dir works, a failed metrics write stops the
# run, and a resume on another thread count says it cannot be bit-exact.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"text": "hello world"}' '{"prompt": "1+1=", "completion": "2"}' > "$TMP/s.jsonl"
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --logging_steps 1 --quiet)

"$GRPO" "${S[@]}" --max_steps 2 --save_steps 1 --output_dir "$TMP/out" || fail "first run"
cp "$TMP/out/metrics.jsonl" "$TMP/metrics.before"
expect_error 1 "holds an earlier run" "$GRPO" "${S[@]}" --max_steps 1 --output_dir "$TMP/out"
cmp -s "$TMP/out/metrics.jsonl" "$TMP/metrics.before" || fail "a refused run changed the earlier metrics.jsonl"
"$GRPO" "${S[@]}" --max_steps 1 --save_steps 0 --output_dir "$TMP/out" --overwrite_output_dir || fail "overwrite"
[ ! -d "$TMP/out/checkpoint-1" ] || fail "--overwrite_output_dir left the earlier run's checkpoints for 'latest' to find"
[ "$(grep -c '"loss"' "$TMP/out/metrics.jsonl")" -eq 1 ] || fail "overwritten metrics.jsonl should hold the new run's line"

# leftovers of killed saves: removed when their process is gone, kept when it runs
"$GRPO" "${S[@]}" --max_steps 2 --save_steps 1 --output_dir "$TMP/r" || fail "run with checkpoints"
dead=4194000; while kill -0 $dead 2>/dev/null; do dead=$((dead + 1)); done
mkdir -p "$TMP/r/checkpoint-3.tmp-$dead-0" "$TMP/r/checkpoint-3.tmp-$dead-0.tmp-$dead-1" "$TMP/r.tmp-$dead-7" "$TMP/r/checkpoint-4.tmp-$$-0" "$TMP/r/notes.tmp-$dead-0"
"$GRPO" "${S[@]}" --max_steps 3 --save_steps 1 --output_dir "$TMP/r" --resume_from_checkpoint latest || fail "resume"
[ ! -e "$TMP/r/checkpoint-3.tmp-$dead-0" ] || fail "a dead checkpoint temporary directory was left"
[ ! -e "$TMP/r/checkpoint-3.tmp-$dead-0.tmp-$dead-1" ] || fail "a dead nested temporary directory (model_save's) was left"
[ ! -e "$TMP/r.tmp-$dead-7" ] || fail "a dead final-save temporary directory beside output_dir was left"
[ -d "$TMP/r/checkpoint-4.tmp-$$-0" ] || fail "a live process's temporary directory was removed"
[ -d "$TMP/r/notes.tmp-$dead-0" ] || fail "a directory that is not a checkpoint's was removed"

# a symlinked output_dir is used through the link, to the end
mkdir "$TMP/real" && ln -s "$TMP/real" "$TMP/link"
"$GRPO" "${S[@]}" --max_steps 2 --save_steps 1 --output_dir "$TMP/link" || fail "symlinked output_dir"
[ -f "$TMP/real/model.safetensors" ] && [ -d "$TMP/real/checkpoint-2" ] || fail "symlinked output_dir: files not in the target"

# a metrics.jsonl write that fails (file size limit) stops the run with the reason
( ulimit -f 1; trap '' XFSZ; exec "$GRPO" "${S[@]}" --max_steps 40 --save_steps 0 --output_dir "$TMP/full" ) 2>"$TMP/full.err"
[ $? -eq 1 ] || fail "a failed metrics write should exit 1: $(cat "$TMP/full.err")"
grep -q "metrics.jsonl: write failed" "$TMP/full.err" || fail "no write-failure message: $(cat "$TMP/full.err")"
[ ! -f "$TMP/full/model.safetensors" ] || fail "a run stopped by a failed write must not save a final model"

# resume on another thread count: said, not silent
OMP_NUM_THREADS=1 "$GRPO" "${S[@]}" --max_steps 2 --save_steps 1 --output_dir "$TMP/t" || fail "1-thread run"
OMP_NUM_THREADS=2 "$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 2 \
    --output_dir "$TMP/t" --resume_from_checkpoint "$TMP/t/checkpoint-1" --overwrite_output_dir true 2>"$TMP/t.err" \
    || fail "2-thread resume"
grep -q "warning: the checkpoint was written with 1 thread(s), this run has 2" "$TMP/t.err" || fail "no thread-count warning: $(cat "$TMP/t.err")"

# SIGTERM stops after the current step with a checkpoint (save_steps > 0), and the
# resumed run ends where an uninterrupted one does (constant learning rate, so the
# length of the run does not change the schedule)
L=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --save_steps 1000000
   --logging_steps 1 --learning_rate 1e-3 --lr_scheduler_type constant --quiet)
"$GRPO" "${L[@]}" --max_steps 1000000 --output_dir "$TMP/sig" 2>"$TMP/sig.err" &
pid=$!
for _ in $(seq 400); do [ "$(cat "$TMP/sig/metrics.jsonl" 2>/dev/null | wc -l)" -ge 3 ] && break; sleep 0.05; done
kill -TERM $pid
wait $pid
st=$?
[ $st -eq 143 ] || fail "SIGTERM: exit $st (want 143): $(cat "$TMP/sig.err")"
grep -q "stopped at step [0-9]* of 1000000; resume with --resume_from_checkpoint .*/checkpoint-[0-9]*" "$TMP/sig.err" \
    || fail "no resume hint: $(cat "$TMP/sig.err")"
ck=$(ls -d "$TMP"/sig/checkpoint-* 2>/dev/null | head -1)
[ -n "$ck" ] || fail "no checkpoint written at the stop"
[ ! -f "$TMP/sig/model.safetensors" ] || fail "a stopped run must not write a final model"
n=${ck##*checkpoint-}
"$GRPO" "${L[@]}" --max_steps $((n + 5)) --output_dir "$TMP/sig" --resume_from_checkpoint latest || fail "resume after SIGTERM"
"$GRPO" "${L[@]}" --max_steps $((n + 5)) --output_dir "$TMP/whole" || fail "uninterrupted run"
cmp -s "$TMP/whole/model.safetensors" "$TMP/sig/model.safetensors" || fail "stopped + resumed differs from uninterrupted"
finish

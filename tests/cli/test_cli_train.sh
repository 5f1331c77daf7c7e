#!/usr/bin/env bash
# `grpo train` and `grpo sft` from outside, on a tiny model with the byte tokenizer:
# a YAML config with a command-line override; the output directory (metrics with
# TRL's names, completions, checkpoints, final model); sft with resume equal to an
# uninterrupted run; and bad input: invalid batch settings, unknown YAML keys, a bad
# dataset line, a reward process that dies, NaN rewards stopping the run.
set -u
. "$ROOT/tests/cli/lib.sh"
# vocab 300 > the tokenizer's 259 ids, like real models' padded vocabularies: generated ids
# the tokenizer lacks are left out of the decoded text, as HF does
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab", "answer": "1"}' '{"prompt": "cd", "answer": "2"}' > "$TMP/d.jsonl"
cat > "$TMP/run.yaml" <<'Y'
dataset: PLACEHOLDER
reward_funcs: [length:5, "format:^a"]
reward_weights: [1.0, 0.5]
num_generations: 4
per_device_train_batch_size: 2
gradient_accumulation_steps: 4
max_completion_length: 8
max_steps: 5
learning_rate: 1.0e-4
logging_steps: 1
save_steps: 2
save_total_limit: 1
log_completions: true
Y
sed -i "s|PLACEHOLDER|$TMP/d.jsonl|" "$TMP/run.yaml"
"$GRPO" train --config "$TMP/run.yaml" --model "$TMP/m" --output_dir "$TMP/out" --max_steps 3 2>"$TMP/err" || fail "train: $(tail -3 "$TMP/err")"
grep -q "memory plan" "$TMP/err" || fail "no memory plan printed"
[ "$(grep -c '"loss"' "$TMP/out/metrics.jsonl")" -eq 3 ] || fail "--max_steps 3 should override the YAML's 5"
python3 - "$TMP/out" <<'PY' || fail "metrics.jsonl / completions.jsonl content"
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl")]
# the last, the closing line as transformers logs the end of training
end = rows.pop()
assert list(end) == ["step", "train_runtime", "train_samples_per_second", "train_steps_per_second", "total_flos",
                     "train_loss", "epoch"] and end["step"] == 3, end
assert abs(end["train_loss"] - sum(r["loss"] for r in rows) / 3) < 1e-9, (end, [r["loss"] for r in rows])
need = ["reward", "reward_std", "rewards/length/mean", "rewards/length/std", "rewards/format/mean",
        "frac_reward_zero_std", "completions/mean_length", "completions/min_length", "completions/max_length",
        "completions/clipped_ratio", "kl", "entropy", "clip_ratio/low_mean", "clip_ratio/high_mean",
        "clip_ratio/region_mean", "loss", "grad_norm", "learning_rate", "num_tokens", "epoch", "step_time",
        "step_time/generation", "step_time/scoring", "step_time/reference", "step_time/training"]
for r in rows:
    missing = [k for k in need if k not in r]
    assert not missing, missing
c = [json.loads(l) for l in open(sys.argv[1] + "/completions.jsonl")]
assert len(c) == 3 * 8 and set(c[0]) >= {"step", "prompt", "completion", "completion_ids", "rewards", "advantage"}
# the weighted sum: reward = length + 0.5 * format
for x in c:
    assert abs(x["reward"] - (x["rewards"]["length"] + 0.5 * x["rewards"]["format"])) < 1e-9
PY
# save_steps 2 of 3 steps: checkpoint-2, and checkpoint-3 at the last step as transformers saves
# when training stops; save_total_limit 1 keeps the newest (it was checkpoint-2 before the last
# step saved: a deliberate change)
[ -d "$TMP/out/checkpoint-3" ] && [ ! -e "$TMP/out/checkpoint-2" ] || fail "not checkpoint-3 alone: $(ls "$TMP/out")"
for f in model.safetensors optimizer.safetensors trainer_state.json config.json tokenizer.json; do
    [ -f "$TMP/out/checkpoint-3/$f" ] || fail "checkpoint-3 lacks $f"
done
ls -d "$TMP"/out/checkpoint-*.tmp* 2>/dev/null && fail "a temporary checkpoint directory was left"
"$GRPO" score --model "$TMP/out" --data - <<< '{"prompt_ids": [97, 98], "completion_ids": [99]}' >/dev/null || fail "the trained model does not load"

# sft: resume from a checkpoint equals the uninterrupted run
printf '%s\n' '{"text": "hello world"}' '{"prompt": "1+1=", "completion": "2"}' \
    '{"messages": [{"role": "user", "content": "hi"}, {"role": "assistant", "content": "hello"}]}' > "$TMP/s.jsonl"
SFT=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 4 --learning_rate 1e-3 --quiet)
"$GRPO" "${SFT[@]}" --output_dir "$TMP/sa" || fail "sft"
"$GRPO" "${SFT[@]}" --output_dir "$TMP/sb" --save_steps 2 || fail "sft with checkpoints"
rm "$TMP/sb/model.safetensors"
"$GRPO" "${SFT[@]}" --output_dir "$TMP/sb" --resume_from_checkpoint "$TMP/sb/checkpoint-2" --overwrite_output_dir true \
    || fail "sft resume" # checkpoint-4, later than the resume, is removed
cmp -s "$TMP/sa/model.safetensors" "$TMP/sb/model.safetensors" || fail "resumed sft differs from the uninterrupted run"
printf '{"text": "ok"}\n{"nothing": 1}\n' > "$TMP/bad_sft.jsonl"
expect_error 1 "bad_sft.jsonl:2: expected a 'text' string" "$GRPO" sft --model "$TMP/m" --dataset "$TMP/bad_sft.jsonl" --output_dir "$TMP/x"

# sft --chat_template (open-r1's SFTConfig option): it renders the messages (one that raises
# says so, from the command line or YAML) and is saved as the trained model's tokenizer's
TPL='{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}'
"$GRPO" "${SFT[@]}" --max_steps 1 --chat_template "$TPL" --output_dir "$TMP/st" || fail "sft --chat_template"
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["chat_template"] != sys.argv[2])' \
    "$TMP/st/tokenizer_config.json" "$TPL" || fail "sft's chat_template is not saved as the tokenizer's"
expect_error 1 "the sft template renders" "$GRPO" "${SFT[@]}" --output_dir "$TMP/x" \
    --chat_template "{{ raise_exception('the sft template renders') }}"
printf 'chat_template: "{{ raise_exception(\x27from yaml\x27) }}"\n' > "$TMP/sft_tpl.yaml"
expect_error 1 "from yaml" "$GRPO" "${SFT[@]}" --output_dir "$TMP/x" --config "$TMP/sft_tpl.yaml"

# progress: one line per logging step when stderr is not a terminal, a bar redrawn
# in place at every step on a terminal (script(1) gives the run one)
P=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --max_steps 5 --logging_steps 2)
"$GRPO" "${P[@]}" --output_dir "$TMP/p1" 2>"$TMP/p1.err" || fail "progress run"
got=$(grep -o '^step [0-9]*/5 ([0-9]*%)' "$TMP/p1.err" | tr '\n' ,)
[ "$got" = "step 2/5 (40%),step 4/5 (80%),step 5/5 (100%)," ] || fail "one progress line per logging step: $got"
grep -q '^step 4/5 (80%)  reward -[0-9.]*  loss [-0-9.e]*  [0-9]* tok/s  elapsed [0-9]*s  ETA [0-9]*s$' "$TMP/p1.err" \
    || fail "progress line: $(cat "$TMP/p1.err")"
if command -v script >/dev/null; then
    script -qec "'$GRPO' ${P[*]} --output_dir '$TMP/p2'" /dev/null > "$TMP/p2.out" 2>&1 || fail "progress run on a terminal"
    [ "$(grep -o '\[[#.]*\] *[0-9]*%  [0-9]/5' "$TMP/p2.out" | tr '\n' ,)" = \
      "[####................]  20%  1/5,[########............]  40%  2/5,[############........]  60%  3/5,[################....]  80%  4/5,[####################] 100%  5/5," ] \
        || fail "progress bar on a terminal: $(tr '\r' '\n' < "$TMP/p2.out" | tail -4)"
fi

# a reward process's stderr reaches ours line by line, prefixed with its name; what
# it wrote before failing comes before the trainer's error
cat > "$TMP/noisy.py" <<'PY'
import json, sys
sys.stderr.write("starting up\n"); sys.stderr.flush()
for line in sys.stdin:
    n = len(json.loads(line)["completions"])
    sys.stderr.write("scored %d\nhalf a " % n); sys.stderr.flush()
    sys.stderr.write("line\n"); sys.stderr.flush()
    print(json.dumps({"rewards": [1.0] * n}), flush=True)
sys.stderr.write("no newline at the end")
PY
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs "judge=cmd:python3 $TMP/noisy.py" --output_dir "$TMP/nz" \
    --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 2 --quiet 2>"$TMP/nz.err" \
    || fail "noisy reward: $(cat "$TMP/nz.err")"
[ "$(grep -c '^\[reward judge\] scored 2$' "$TMP/nz.err")" -eq 2 ] && [ "$(grep -c '^\[reward judge\] half a line$' "$TMP/nz.err")" -eq 2 ] \
    && grep -qx '\[reward judge\] starting up' "$TMP/nz.err" && grep -qx '\[reward judge\] no newline at the end' "$TMP/nz.err" \
    && [ "$(grep -vc '^\[reward judge\] ' "$TMP/nz.err")" -eq 0 ] || fail "reward stderr relayed with its name: $(cat "$TMP/nz.err")"
printf 'import sys\nsys.stdin.readline()\nsys.stderr.write("Traceback: boom\\n")\nsys.exit(3)\n' > "$TMP/boom.py"
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs "cmd:python3 $TMP/boom.py" --output_dir "$TMP/bm" \
    --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 1 --quiet 2>"$TMP/bm.err"
[ "$(head -1 "$TMP/bm.err")" = "[reward boom] Traceback: boom" ] && tail -1 "$TMP/bm.err" | grep -q "exited with status 3" \
    || fail "the reward's last words before the trainer's error: $(cat "$TMP/bm.err")"

# the relay never keeps the guard from its duty: with the trainer's stderr a full pipe that
# nobody reads, a killed trainer's reward process still dies with it
printf 'import os, sys\nopen(sys.argv[1], "w").write(str(os.getpid()))\nfor i in range(3000):\n    sys.stderr.write("x" * 999 + "\\n")\nsys.stderr.flush()\nsys.stdin.readline()\n' > "$TMP/flood.py"
mkfifo "$TMP/errpipe"
sleep 60 < "$TMP/errpipe" & holder=$!
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs "cmd:python3 $TMP/flood.py $TMP/flood.pid" \
    --output_dir "$TMP/fl" --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 1 \
    --quiet 2>"$TMP/errpipe" & trainer=$!
for i in $(seq 300); do [ -s "$TMP/flood.pid" ] && break; sleep 0.1; done
sleep 1
kill -9 "$trainer" 2>/dev/null; wait "$trainer" 2>/dev/null
gone=0
for i in $(seq 50); do kill -0 "$(cat "$TMP/flood.pid" 2>/dev/null || echo 1)" 2>/dev/null || { gone=1; break; }; sleep 0.1; done
[ "$gone" -eq 1 ] || { fail "the reward outlived its trainer while stderr was full"; kill -9 "$(cat "$TMP/flood.pid")" 2>/dev/null; }
kill "$holder" 2>/dev/null; wait "$holder" 2>/dev/null

# bad input
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/bad" --reward_funcs length:5 --max_completion_length 4 --max_steps 1 --quiet)
expect_error 2 "must be divisible by num_generations (8)" "$GRPO" "${T[@]}" --per_device_train_batch_size 4 --num_generations 8 --gradient_accumulation_steps 1
expect_error 2 "cannot both be set" "$GRPO" "${T[@]}" --steps_per_generation 2 --generation_batch_size 16
expect_error 2 "reward_weights has 2 values but reward_funcs has 1" "$GRPO" "${T[@]}" --reward_weights 1 2
expect_error 2 "loss_type 'ppo' is not one of" "$GRPO" "${T[@]}" --loss_type ppo
printf 'nonsense_option: 3\n' > "$TMP/bad.yaml"
expect_error 2 "bad.yaml:1: unknown option 'nonsense_option'" "$GRPO" "${T[@]}" --config "$TMP/bad.yaml"
printf '{"prompt": "ok"}\n{"prompt": 5}\n' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:2" "$GRPO" train --model "$TMP/m" --dataset "$TMP/bad.jsonl" --output_dir "$TMP/bad" --reward_funcs length:5 --max_steps 1 --quiet
expect_error 1 "exited" "$GRPO" "${T[@]}" --reward_funcs "cmd:exit 3" --num_generations 2 --per_device_train_batch_size 2
# a reward of +inf makes the loss NaN: the step is skipped and logged, three in a row stop the run
cat > "$TMP/inf.c" <<'C'
#include <math.h>
#include "reward/reward_plugin.h"
int grpo_reward(const GrpoRewardItem *items, int n, double *out, char *err, size_t err_size) {
    for (int i = 0; i < n; i++) out[i] = i % 2 ? INFINITY : 0.0;
    return 0;
}
C
cc -shared -fPIC -I src "$TMP/inf.c" -o "$TMP/inf.so" || fail "building the plugin"
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/nan" --reward_funcs "plugin:$TMP/inf.so" \
    --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 5 2>"$TMP/nan.err"
[ $? -eq 1 ] || fail "NaN rewards: exit status should be 1"
[ "$(grep -c 'the update was not applied' "$TMP/nan.err")" -eq 3 ] || fail "each skipped step is reported: $(cat "$TMP/nan.err")"
# the error, then where the 3 steps done are kept (issue 38: nothing lost after step 1)
tail -2 "$TMP/nan.err" | head -1 | grep -q "NaN/Inf in 3 consecutive steps" || fail "the run should stop after 3 NaN steps: $(cat "$TMP/nan.err")"
tail -1 "$TMP/nan.err" | grep -q "kept in .*/nan/checkpoint-3: continue with --resume_from_checkpoint latest$" \
    || fail "a NaN stop keeps its steps: $(cat "$TMP/nan.err")"
[ "$(grep -c '"event": "nonfinite"' "$TMP/nan/metrics.jsonl")" -eq 3 ] || fail "skipped steps are not logged"
# --quiet silences every event: only the error and where the steps are kept are left
"$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/nanq" --reward_funcs "plugin:$TMP/inf.so" \
    --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 4 --max_steps 5 --quiet 2>"$TMP/nanq.err"
[ $? -eq 1 ] && [ "$(wc -l < "$TMP/nanq.err")" -eq 2 ] && head -1 "$TMP/nanq.err" | grep -q "NaN/Inf in 3 consecutive steps" \
    && tail -1 "$TMP/nanq.err" | grep -q "kept in .*/nanq/checkpoint-3" || fail "--quiet NaN stop: $(cat "$TMP/nanq.err")"

# sft has the same non-finite policy (one loop): a learning rate that blows the weights up
"$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --output_dir "$TMP/sftnan" --per_device_train_batch_size 2 \
    --learning_rate 1e30 --max_grad_norm 0 --max_steps 8 --logging_steps 1 2>"$TMP/sftnan.err"
[ $? -eq 1 ] || fail "sft NaN: exit status should be 1: $(tail -3 "$TMP/sftnan.err")"
[ "$(grep -c 'grpo sft: step .*the update was not applied' "$TMP/sftnan.err")" -eq 3 ] || fail "sft skipped steps reported: $(cat "$TMP/sftnan.err")"
tail -2 "$TMP/sftnan.err" | head -1 | grep -q "grpo sft: the loss or gradient was NaN/Inf in 3 consecutive steps" || fail "sft stops after 3 NaN steps"
tail -1 "$TMP/sftnan.err" | grep -q "^grpo sft: the [0-9]* completed step(s) are kept in .*/sftnan/checkpoint-" || fail "sft keeps its steps: $(tail -2 "$TMP/sftnan.err")"
[ "$(grep -c '"event": "nonfinite"' "$TMP/sftnan/metrics.jsonl")" -eq 3 ] || fail "sft skipped steps are not logged"
[ ! -f "$TMP/sftnan/model.safetensors" ] || fail "a run stopped for NaN must not write a final model"
# a checkpoint's saved generation batch that was tampered with is refused with one line
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:3 --num_generations 2 --per_device_train_batch_size 2
   --gradient_accumulation_steps 1 --steps_per_generation 2 --max_completion_length 4 --max_steps 2 --quiet)
"$GRPO" "${R[@]}" --output_dir "$TMP/mid" --save_steps 1 || fail "mid-round checkpoint run"
[ -f "$TMP/mid/checkpoint-1/rollout.json" ] || fail "checkpoint-1 should hold the generation batch in use"
for edit in 'c["completions"][0]["ids"][0] = 99999' 'c["order"][0] = 7' 'c["uses"] = 9'; do
    rm -rf "$TMP/tam" && cp -r "$TMP/mid" "$TMP/tam"
    python3 -c "import json,sys; p='$TMP/tam/checkpoint-1/rollout.json'; c=json.load(open(p)); $edit; json.dump(c, open(p, 'w'))"
    expect_error 1 "rollout.json: malformed or from another dataset" "$GRPO" "${R[@]}" --output_dir "$TMP/tam" \
        --resume_from_checkpoint "$TMP/tam/checkpoint-1"
done
# a memory plan that cannot fit is refused at start with the plan and the numbers (no abort on an allocation)
expect_error 1 "the memory plan does not fit: activations .* MB (micro-batch of 1048576 x" "$GRPO" train --model "$TMP/m" \
    --dataset "$TMP/d.jsonl" --output_dir "$TMP/huge" --reward_funcs length:3 --num_generations 2 \
    --per_device_train_batch_size 1048576 --max_completion_length 64 --quiet
GRPO_MEMORY_LIMIT_MB=1 expect_error 1 "with 1 MB available; lower per_device_train_batch_size or max_length" "$GRPO" sft \
    --model "$TMP/m" --dataset "$TMP/s.jsonl" --output_dir "$TMP/small" --per_device_train_batch_size 64 --quiet
finish

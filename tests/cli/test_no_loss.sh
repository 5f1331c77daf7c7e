#!/usr/bin/env bash
# Nothing lost after step 1 (issue 38). What can be checked is checked before
# the first step: every row of the training dataset and of eval_dataset (and
# grpo eval's) holds the columns its built-in rewards read (accuracy's
# `solution`, exact_match's COLUMN), a string, a number or null — one line
# naming FILE:LINE, the column and the reward, nothing trained, nothing written.
# A failure after completed steps (a reward process that dies at step 3, an
# evaluation whose reward dies after step 2) writes a checkpoint of the last
# completed step and says how to resume; resuming from it with a working reward
# ends with the weights of a run never interrupted — also when the failure comes
# inside a step's rollouts (GRPO's state put back as the step found it), and under
# mpirun when one rank's reward dies (every rank keeps the steps, none hangs).
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
for i in 1 2 3 4 5 6; do printf '{"prompt": "a%d", "solution": "%d"}\n' "$i" "$i"; done > "$TMP/d.jsonl"
R=(train --model "$TMP/m" --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 6
   --max_steps 5 --quiet --seed 3 --adam_epsilon 1e-2 --learning_rate 1e-3)

# ---- checked before step 1 ----
# an eval dataset without the column accuracy reads: refused at setup, not at the first evaluation
printf '{"prompt": "x", "solution": "1"}\n{"prompt": "y"}\n' > "$TMP/ev_bad.jsonl"
expect_error 1 "^grpo train: .*ev_bad.jsonl:2: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d.jsonl" --reward_funcs accuracy --save_steps 1 --output_dir "$TMP/b1" \
    --eval_strategy steps --eval_steps 2 --eval_dataset "$TMP/ev_bad.jsonl"
[ -e "$TMP/b1/checkpoint-1" ] || [ -e "$TMP/b1/model.safetensors" ] && fail "a bad eval dataset still trained"
# a training row (line 5) without it: refused at setup, not when the row is reached
sed '5s/, "solution": "5"//' "$TMP/d.jsonl" > "$TMP/d5.jsonl"
expect_error 1 "d5.jsonl:5: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d5.jsonl" --reward_funcs accuracy --save_steps 1 --output_dir "$TMP/b2"
[ -e "$TMP/b2/checkpoint-1" ] || [ -e "$TMP/b2/model.safetensors" ] && fail "a bad training row still trained"
# exact_match's column, cosine's solution; a column of another type; null is "no value" and passes
expect_error 1 "d.jsonl:1: no 'answer' column, which reward 'exact_match' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d.jsonl" --reward_funcs exact_match:answer --output_dir "$TMP/b3"
expect_error 1 "d5.jsonl:5: no 'solution' column, which reward 'cosine_scaled_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d5.jsonl" --reward_funcs length:3 cosine --output_dir "$TMP/b4"
sed '3s/"solution": "3"/"solution": [3]/' "$TMP/d.jsonl" > "$TMP/d3.jsonl"
expect_error 1 "d3.jsonl:3: column 'solution' must be a string, a number or null, which reward 'accuracy_reward' reads$" \
    "$GRPO" "${R[@]}" --dataset "$TMP/d3.jsonl" --reward_funcs accuracy --output_dir "$TMP/b5"
sed '5s/"solution": "5"/"solution": null/' "$TMP/d.jsonl" > "$TMP/dnull.jsonl"
"$GRPO" "${R[@]}" --dataset "$TMP/dnull.jsonl" --reward_funcs accuracy --max_steps 1 --output_dir "$TMP/n" \
    || fail "a null solution (no value) refused"
# grpo eval: the same check before the model is read; max_examples limits the rows checked
expect_error 1 "^grpo eval: .*ev_bad.jsonl:2: no 'solution' column, which reward 'accuracy_reward' reads$" \
    "$GRPO" eval --model "$TMP/m" --dataset "$TMP/ev_bad.jsonl" --reward_funcs accuracy
"$GRPO" eval --model "$TMP/m" --dataset "$TMP/ev_bad.jsonl" --reward_funcs accuracy --max_examples 1 --max_completion_length 4 \
    >/dev/null 2>"$TMP/e.err" || fail "grpo eval of the first row alone: $(cat "$TMP/e.err")"

# ---- nothing lost after step 1 ----
# a cmd: reward, -|3 - len|, that dies at global_step DIE (none: never), after answering SKIP requests there
cat > "$TMP/len.py" <<'PY'
import json, sys
die = int(sys.argv[1]) if len(sys.argv) > 1 else -1
skip = int(sys.argv[2]) if len(sys.argv) > 2 else 0
for line in sys.stdin:
    req = json.loads(line)
    if req["trainer_state"]["global_step"] == die:
        if skip == 0:
            sys.exit(3)
        skip -= 1
    print(json.dumps({"rewards": [-abs(3 - len(c)) for c in req["completions"]]}), flush=True)
PY
T=("${R[@]}" --dataset "$TMP/d.jsonl")
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/whole" || fail "uninterrupted run"
# the reward dies scoring step 3's completions: steps 1 and 2 are kept, step 3's update never happened
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py 2" --output_dir "$TMP/r" 2>"$TMP/r.err"
rc=$?
[ "$rc" -eq 1 ] || fail "a dying reward: exit $rc (want 1): $(cat "$TMP/r.err")"
[ -e "$TMP/r/model.safetensors" ] && fail "a failed run saved a final model"
grep -q "exit" "$TMP/r.err" || fail "the reward's failure not said: $(cat "$TMP/r.err")"
tail -1 "$TMP/r.err" | grep -q "^grpo train: the 2 completed step(s) are kept in .*/r/checkpoint-2: continue with --resume_from_checkpoint latest$" \
    || fail "where the steps are kept: $(cat "$TMP/r.err")"
[ "$(wc -l < "$TMP/r.err")" -eq 2 ] || fail "the error and one more line: $(cat "$TMP/r.err")"
[ -d "$TMP/r/checkpoint-2" ] && [ ! -e "$TMP/r/checkpoint-3" ] || fail "checkpoints: $(ls "$TMP/r")"
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/r" --resume_from_checkpoint latest \
    || fail "resume after the reward died"
cmp -s "$TMP/whole/model.safetensors" "$TMP/r/model.safetensors" || fail "resumed weights differ from an uninterrupted run's"
# the same under save_steps 2: checkpoint-2 exists already, nothing written twice, the same line
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py 2" --save_steps 2 --output_dir "$TMP/s" 2>"$TMP/s.err"
tail -1 "$TMP/s.err" | grep -q "kept in .*/s/checkpoint-2: continue" || fail "with save_steps 2: $(cat "$TMP/s.err")"
# an evaluation whose reward dies after step 2: step 2's update is kept, resuming ends as the run never stopped
printf '{"prompt": "x"}\n{"prompt": "yz"}\n' > "$TMP/ev.jsonl"
E=(--eval_strategy steps --eval_steps 2 --eval_dataset "$TMP/ev.jsonl")
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py 2" --output_dir "$TMP/e" 2>"$TMP/e.err"
rc=$?
[ "$rc" -eq 1 ] && [ -d "$TMP/e/checkpoint-2" ] || fail "a dying eval reward: exit $rc, $(ls "$TMP/e"): $(cat "$TMP/e.err")"
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/e" --resume_from_checkpoint latest \
    || fail "resume after the eval reward died"
cmp -s "$TMP/whole/model.safetensors" "$TMP/e/model.safetensors" || fail "weights after an eval failure and resume"
# a failure inside a step's rollouts leaves GRPO's state as the step found it: the generation
# batch still in use (3 micro-batches per generation, 2 per step: 1 used by step 2 when step 2's
# second round fails) and the rounds made (1 per generation, 2 per step: the second one fails)
for case in "3 1 0" "1 1 1"; do
    set -- $case
    G=(--gradient_accumulation_steps 2 --steps_per_generation "$1")
    "$GRPO" "${T[@]}" "${G[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/w$1" || fail "uninterrupted, spg $1"
    "$GRPO" "${T[@]}" "${G[@]}" --reward_funcs "cmd:python3 $TMP/len.py $2 $3" --output_dir "$TMP/g$1" 2>/dev/null
    [ -d "$TMP/g$1/checkpoint-1" ] || fail "spg $1: no checkpoint-1: $(ls "$TMP/g$1")"
    "$GRPO" "${T[@]}" "${G[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/g$1" --resume_from_checkpoint latest \
        || fail "spg $1: resume"
    cmp -s "$TMP/w$1/model.safetensors" "$TMP/g$1/model.safetensors" || fail "spg $1: resumed weights differ"
done
# under mpirun: rank 1's reward dies at step 3; every rank keeps steps 1 and 2 together (no hang,
# the same line), and resuming on 2 processes ends as an uninterrupted 2-process run
if command -v mpirun >/dev/null; then
    mpi_env
    cat > "$TMP/rank1.sh" <<SH
#!/bin/sh
[ "\$OMPI_COMM_WORLD_RANK" = 1 ] && exec python3 $TMP/len.py 2
exec python3 $TMP/len.py
SH
    M=("${T[@]}" --max_steps 4)
    timeout 300 "${MPI[@]}" -np 2 "$GRPO" "${M[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/mw" \
        || fail "2 processes, uninterrupted"
    timeout 300 "${MPI[@]}" -np 2 "$GRPO" "${M[@]}" --reward_funcs "cmd:sh $TMP/rank1.sh" --output_dir "$TMP/mr" 2>"$TMP/mr.err"
    rc=$?
    [ "$rc" -ne 124 ] && [ -d "$TMP/mr/checkpoint-2" ] && grep -q "^grpo train: the 2 completed step(s) are kept in .*/mr/checkpoint-2" \
        "$TMP/mr.err" || fail "2 processes, rank 1's reward dies: exit $rc, $(ls "$TMP/mr"): $(head -3 "$TMP/mr.err")"
    timeout 300 "${MPI[@]}" -np 2 "$GRPO" "${M[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/mr" \
        --resume_from_checkpoint latest || fail "2 processes, resume"
    cmp -s "$TMP/mw/model.safetensors" "$TMP/mr/model.safetensors" || fail "2 processes: resumed weights differ"
fi
# a failure before any step completed writes nothing
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py 0" --output_dir "$TMP/z" 2>"$TMP/z.err"
[ "$(ls "$TMP/z" | grep -c checkpoint)" -eq 0 ] && [ "$(wc -l < "$TMP/z.err")" -eq 1 ] || fail "a failure at step 1: $(ls "$TMP/z"): $(cat "$TMP/z.err")"
finish

#!/usr/bin/env bash
# A stop that a reward does not hold up, and an evaluation that a failure does not
# lose (issue 38). SIGTERM while a cmd: reward never answers ends the run within
# a few seconds (the reward's grace, REWARD_STOP_GRACE_S), as a stop: exit 143,
# the step in progress abandoned, the completed one kept in checkpoint-1, the
# reward's processes gone, and resuming from it ends with the weights of a run
# never interrupted; a stop while the reward answers within its grace is the
# ordinary stop after the step. An evaluation whose reward dies after step 2 (checkpoint-2
# kept) is run again by the resume from checkpoint-2: metrics.jsonl ends with the
# eval line at step 2, the same values as an uninterrupted run's; a resume from a
# checkpoint whose evaluation ran does not run it twice.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
for i in 1 2 3 4 5 6; do printf '{"prompt": "a%d", "solution": "%d"}\n' "$i" "$i"; done > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --num_generations 2 --per_device_train_batch_size 2 --max_completion_length 6
   --max_steps 4 --quiet --seed 3 --adam_epsilon 1e-2 --learning_rate 1e-3 --dataset "$TMP/d.jsonl")
# a cmd: reward, -|3 - len|, that at global_step HANG (none: never) touches MARK and sleeps
# for good, or at global_step DIE exits
cat > "$TMP/len.py" <<'PY'
import json, os, sys, time
hang = int(sys.argv[1]) if len(sys.argv) > 1 else -1
mark = sys.argv[2] if len(sys.argv) > 2 else ""
die = int(sys.argv[3]) if len(sys.argv) > 3 else -1
for line in sys.stdin:
    req = json.loads(line)
    if req["trainer_state"]["global_step"] == hang:
        open(mark, "w").close()
        time.sleep(100000)
    if req["trainer_state"]["global_step"] == die:
        sys.exit(3)
    print(json.dumps({"rewards": [-abs(3 - len(c)) for c in req["completions"]]}), flush=True)
PY
"$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/whole" || fail "uninterrupted run"

# ---- a first SIGTERM while the reward of step 2 never answers ----
timeout 120 "$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py 1 $TMP/hung" --reward_timeout 60 \
    --output_dir "$TMP/h" 2>"$TMP/h.err" &
pid=$!
for _ in $(seq 600); do [ -e "$TMP/hung" ] && break; sleep 0.1; done
[ -e "$TMP/hung" ] || fail "the reward never reached step 2"
grpo_pid=$(pgrep -P "$pid" -x grpo || echo "$pid")
t0=$(date +%s.%N)
kill -TERM "$grpo_pid"
wait "$pid"
rc=$?
took=$(echo "$(date +%s.%N) - $t0" | bc)
[ "$(echo "$took < 10" | bc)" -eq 1 ] || fail "one SIGTERM while the reward hangs: the run ended after ${took} s (want < 10)"
[ "$rc" -eq 143 ] || fail "one SIGTERM while the reward hangs: exit $rc (want 143, a stop): $(cat "$TMP/h.err")"
grep -q "^grpo train: stopped while waiting for reward command 'python3 .*len.py 1 .*hung' (no reply within 3 s of the stop request; the process was stopped)$" \
    "$TMP/h.err" || fail "what stopped: $(cat "$TMP/h.err")"
tail -1 "$TMP/h.err" | grep -q "^grpo train: the 1 completed step(s) are kept in .*/h/checkpoint-1: continue with --resume_from_checkpoint latest$" \
    || fail "where the completed step is kept: $(cat "$TMP/h.err")"
[ -d "$TMP/h/checkpoint-1" ] && [ ! -e "$TMP/h/checkpoint-2" ] && [ ! -e "$TMP/h/model.safetensors" ] \
    || fail "after the stop: $(ls "$TMP/h")"
sleep 1
pgrep -f "len.py 1 $TMP/hung" >/dev/null && fail "the hung reward outlived the run"
timeout 120 "$GRPO" "${T[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/h" --resume_from_checkpoint latest \
    || fail "resume after the stop"
cmp -s "$TMP/whole/model.safetensors" "$TMP/h/model.safetensors" || fail "resumed weights differ from an uninterrupted run's"
# a stop while the reward answers within its grace is an ordinary stop after the step
cat > "$TMP/slow.sh" <<SH
#!/bin/sh
touch "$TMP/slow"
sleep 1
exec python3 $TMP/len.py
SH
timeout 120 "$GRPO" "${T[@]}" --reward_funcs "cmd:sh $TMP/slow.sh" --output_dir "$TMP/g" 2>"$TMP/g.err" &
pid=$!
for _ in $(seq 600); do [ -e "$TMP/slow" ] && break; sleep 0.1; done
kill -TERM "$(pgrep -P "$pid" -x grpo || echo "$pid")"
wait "$pid"
rc=$?
[ "$rc" -eq 143 ] && grep -q "^grpo train: stopped at step 1 of 4; resume with --resume_from_checkpoint .*/g/checkpoint-1$" "$TMP/g.err" \
    && ! grep -q "waiting for" "$TMP/g.err" || fail "a stop within the reward's grace: exit $rc: $(cat "$TMP/g.err")"

# ---- an evaluation that failed runs again on resume ----
printf '{"prompt": "x"}\n{"prompt": "yz"}\n' > "$TMP/ev.jsonl"
E=(--eval_strategy steps --eval_steps 2 --eval_dataset "$TMP/ev.jsonl")
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/ew" || fail "uninterrupted run with evaluations"
# the evaluation after step 2 (global_step 2, before step 3's rollouts) loses its reward
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py -1 - 2" --output_dir "$TMP/e" 2>"$TMP/e.err"
rc=$?
[ "$rc" -eq 1 ] && [ -d "$TMP/e/checkpoint-2" ] && ! grep -q '"eval_' "$TMP/e/metrics.jsonl" \
    || fail "a dying eval reward: exit $rc, $(ls "$TMP/e"): $(cat "$TMP/e.err")"
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/e" --resume_from_checkpoint latest \
    2>"$TMP/e2.err" || fail "resume after the eval reward died: $(cat "$TMP/e2.err")"
evals() { grep '"eval_' "$1" | sed 's/"eval_runtime": [^,}]*//; s/"eval_[a-z_]*per_second": [^,}]*//g'; }
[ "$(evals "$TMP/e/metrics.jsonl" | grep -c '"step": 2[,}]')" -eq 1 ] || fail "no eval line at step 2 after the resume: $(cat "$TMP/e/metrics.jsonl")"
[ "$(evals "$TMP/e/metrics.jsonl")" = "$(evals "$TMP/ew/metrics.jsonl")" ] \
    || fail "eval lines after the resume differ from an uninterrupted run's: $(evals "$TMP/e/metrics.jsonl") vs $(evals "$TMP/ew/metrics.jsonl")"
cmp -s "$TMP/ew/model.safetensors" "$TMP/e/model.safetensors" || fail "weights after an eval failure and resume"
python3 - "$TMP/e/trainer_state.json" "$TMP/ew/trainer_state.json" <<'PY' || fail "log_history's eval entries differ"
import json, sys
ev = lambda p: [(e["step"], sorted((k, v) for k, v in e.items() if k.startswith("eval_") and "runtime" not in k and "per_second" not in k))
                for e in json.load(open(p))["log_history"] if any(k.startswith("eval_") for k in e)]
a, b = ev(sys.argv[1]), ev(sys.argv[2])
sys.exit(0 if a == b and [s for s, _ in a] == [2, 4] else 1)
PY
# a resume from a checkpoint whose evaluation ran does not run it again
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --max_steps 2 --output_dir "$TMP/e4" || fail "2 steps"
"$GRPO" "${T[@]}" "${E[@]}" --reward_funcs "cmd:python3 $TMP/len.py" --output_dir "$TMP/e4" --save_steps 2 \
    --resume_from_checkpoint "$TMP/e4/checkpoint-2" 2>/dev/null
[ "$(grep -c '"eval_' "$TMP/e4/metrics.jsonl")" -eq 2 ] || fail "an evaluation run twice: $(cat "$TMP/e4/metrics.jsonl")"
finish

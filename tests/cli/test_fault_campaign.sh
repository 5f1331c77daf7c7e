#!/usr/bin/env bash
# The fault campaign: GRPO training with a `cmd:` reward (a Python process that
# starts a grandchild of its own) is killed at random points — kill -9, SIGTERM,
# and SIGTERM twice — and resumed until it finishes, as many times as it takes
# to land the kills. After every kill: no process of the reward's family is
# left, every checkpoint-N directory is complete; after each finished run no
# temporary directory is left, and the final model and optimizer state are
# byte-identical to an uninterrupted run's.
#
#   tests/cli/test_fault_campaign.sh            # short (the test suite): 6 kills
#   tests/cli/test_fault_campaign.sh --long     # 100 kills
#   FAULT_KILLS=N FAULT_SEED=S tests/cli/test_fault_campaign.sh
# Outside tests/run.sh, set GRPO (the binary) and ROOT (the repository).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
GRPO=${GRPO:-$ROOT/build/grpo}
cd "$ROOT"
. "$ROOT/tests/cli/lib.sh"
KILLS=${FAULT_KILLS:-6}
[ "${1:-}" = "--long" ] && KILLS=${FAULT_KILLS:-100}
RANDOM=${FAULT_SEED:-$$}
echo "fault campaign: $KILLS kills, seed ${FAULT_SEED:-$$}"

sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' > "$TMP/d.jsonl"

# the reward process: its own grandchild (a copy of sleep under $TMP, so that
# every process of this family has $TMP in its command line) must die with it
cp "$(command -v sleep)" "$TMP/fault-sleep"
cat > "$TMP/reward.py" <<PY
import json, subprocess, sys
subprocess.Popen(["$TMP/fault-sleep", "3600"])
for line in sys.stdin:
    req = json.loads(line)
    print(json.dumps({"rewards": [float(len(c) % 5) for c in req["completions"]]}), flush=True)
PY
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs "cmd:python3 $TMP/reward.py"
   --num_generations 4 --per_device_train_batch_size 4 --gradient_accumulation_steps 2
   --max_completion_length 6 --max_steps 10 --learning_rate 1e-3 --lr_scheduler_type cosine
   --beta 0.04 --num_iterations 2 --save_steps 1 --logging_steps 1 --seed 3 --quiet)

family_left() { pgrep -f "$TMP/" >/dev/null; }
wait_family_gone() { # up to 5 s
    for _ in $(seq 100); do family_left || return 0; sleep 0.05; done
    return 1
}
check_checkpoints() { # every checkpoint-N directory is whole and says step N
    local d n
    for d in "$TMP"/run/checkpoint-*; do
        [ -d "$d" ] || continue
        case "$d" in *.tmp-*) continue ;; esac
        n=${d##*checkpoint-}
        for f in model.safetensors optimizer.safetensors trainer_state.json config.json tokenizer.json; do
            [ -s "$d/$f" ] || { fail "kill $1: $d lacks $f"; return; }
        done
        # with num_iterations 2 a generation batch serves two optimizer steps:
        # after an odd step it is in the checkpoint
        [ $((n % 2)) -eq 0 ] || [ -s "$d/rollout.json" ] || fail "kill $1: $d lacks rollout.json"
        python3 -c 'import json,sys; s=json.load(open(sys.argv[1])); assert s["global_step"]==int(sys.argv[2])' \
            "$d/trainer_state.json" "$n" 2>/dev/null || fail "kill $1: $d/trainer_state.json is not step $n"
    done
}

"$GRPO" "${T[@]}" --output_dir "$TMP/whole" || { fail "uninterrupted run"; finish; }
wait_family_gone || fail "reward processes outlived a normal run: $(pgrep -af "$TMP/")"
t0=$(date +%s%N)
"$GRPO" "${T[@]}" --output_dir "$TMP/timing" --overwrite_output_dir --save_steps 0 || fail "timing run"
run_ms=$(( ($(date +%s%N) - t0) / 1000000 ))
rm -rf "$TMP/timing"

# Campaigns: each starts afresh and runs, killed and resumed, until a run ends
# by itself; then its result is compared with the uninterrupted run's. Kills
# land at a random point of the time the remaining steps take.
latest_step() { ls -d "$TMP"/run/checkpoint-[0-9]* 2>/dev/null | grep -v '\.tmp-' | sed 's/.*checkpoint-//' | sort -n | tail -1; }
kills=0 runs=0 campaigns=0
while [ $kills -lt "$KILLS" ] && [ $FAILED -eq 0 ]; do
    campaigns=$((campaigns + 1))
    rm -rf "$TMP/run"
    done=0 cruns=0
    while [ $done -eq 0 ] && [ $cruns -lt 100 ]; do
        runs=$((runs + 1)) cruns=$((cruns + 1))
        step=$(latest_step)
        if [ -n "$step" ]; then from=(--resume_from_checkpoint latest); else from=(--overwrite_output_dir); fi
        "$GRPO" "${T[@]}" --output_dir "$TMP/run" "${from[@]}" 2>"$TMP/run.err" &
        pid=$!
        if [ $kills -lt "$KILLS" ]; then
            left_ms=$(( run_ms * (10 - ${step:-0}) / 10 ))
            sleep "$(awk -v r=$RANDOM -v ms="$left_ms" 'BEGIN { printf "%.3f", (r / 32768.0) * ms / 1000.0 }')"
            case $((RANDOM % 3)) in
                0) kill -KILL $pid 2>/dev/null ;;
                1) kill -TERM $pid 2>/dev/null ;;
                2) kill -TERM $pid 2>/dev/null; sleep 0.0$((RANDOM % 10)); kill -TERM $pid 2>/dev/null ;;
            esac
            kills=$((kills + 1))
        fi
        { wait $pid; } 2>/dev/null
        st=$?
        case $st in
            0) done=1 ;;
            137 | 143) ;;
            *) fail "run $runs: exit $st: $(tail -3 "$TMP/run.err")"; break ;;
        esac
        if grep -qiE "AddressSanitizer|runtime error|check failed" "$TMP/run.err"; then fail "run $runs: $(cat "$TMP/run.err")"; fi
        wait_family_gone || { fail "kill $kills (exit $st): reward processes left: $(pgrep -af "$TMP/")"; pkill -9 -f "$TMP/"; }
        check_checkpoints $kills
        # a graceful stop leaves no temporary directory behind
        if [ $st -eq 143 ] && ls -d "$TMP"/run/*.tmp-* "$TMP"/run.tmp-* >/dev/null 2>&1; then
            fail "SIGTERM left a temporary directory: $(ls -d "$TMP"/run/*.tmp-* "$TMP"/run.tmp-* 2>/dev/null)"
        fi
    done
    [ $done -eq 1 ] || { fail "campaign $campaigns never finished ($cruns runs)"; break; }
    ls -d "$TMP"/run/*.tmp-* "$TMP"/run.tmp-* 2>/dev/null && fail "campaign $campaigns: temporary directories left after the last run"
    cmp -s "$TMP/whole/model.safetensors" "$TMP/run/model.safetensors" \
        || fail "campaign $campaigns: final model differs from the uninterrupted run"
    last=$(ls -d "$TMP"/whole/checkpoint-* | sort -t- -k2 -n | tail -1)
    cmp -s "$last/optimizer.safetensors" "$TMP/run/${last##*/}/optimizer.safetensors" \
        || fail "campaign $campaigns: last checkpoint's optimizer state differs from the uninterrupted run"
done
echo "$kills kills in $runs runs, $campaigns campaigns, every resumed result byte-identical: $([ $FAILED -eq 0 ] && echo yes || echo no)"
finish

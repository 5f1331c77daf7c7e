#!/usr/bin/env bash
# `mpirun -np N grpo train`: the same global batch on 1, 2 and 4 processes gives the
# same completions (byte for byte) and the same final weights (1e-6 relative; AdamW
# epsilon 1e-2 so rounding of near-zero gradients is not amplified) — for dapo, grpo
# with a KL reference (beta), num_iterations 2, a group split between processes, the
# sampler/trainer correction (its metrics gathered as TRL's), and filter_groups (dynamic
# sampling: every process keeps the same groups), and for sft;
# a resume under N = 2 equals the uninterrupted N = 2 run bit for bit (log_history
# included); an evaluation's console line comes once, from rank 0; and bad usage
# and one rank's failure stop the whole job with one line; a rank killed mid-run
# leaves only whole checkpoints, and resuming from the last equals the uninterrupted run.
set -u
. "$ROOT/tests/cli/lib.sh"
command -v mpirun >/dev/null || { fail "mpirun not found (tools/install-deps.sh installs openmpi-bin)"; finish; }
mpi_env

sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' '{"prompt": "gh"}' > "$TMP/d.jsonl"
BASE=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 "format:^a" --max_completion_length 8
      --max_steps 3 --learning_rate 1e-3 --adam_epsilon 1e-2 --logging_steps 1 --log_completions true --seed 3 --quiet
      --bf16 false) # the fp32 bound; in bf16 (auto's choice on CPUs with bf16 instructions) sums differ by ~1e-5

# compare DIR1 DIR2 LABEL: completions identical, weights within 1e-6 relative
compare() {
    cmp -s "$1/completions.jsonl" "$2/completions.jsonl" || { fail "$3: completions differ"; return; }
    python3 - "$1/model.safetensors" "$2/model.safetensors" "$TMP/m/model.safetensors" <<'PY' || fail "$3: weights differ"
import json, struct, sys, array
def load(p):
    b = open(p, "rb").read(); n = struct.unpack("<Q", b[:8])[0]; h = json.loads(b[8:8 + n]); d = b[8 + n:]
    return {k: array.array("f", d[v["data_offsets"][0]:v["data_offsets"][1]]) for k, v in h.items() if k != "__metadata__"}
a, b, base = load(sys.argv[1]), load(sys.argv[2]), load(sys.argv[3])
moved = max(abs(x - y) for k in a for x, y in zip(a[k], base[k]))
assert moved > 1e-4, "training did not move the weights (%g): the comparison would prove nothing" % moved
for k in a:
    scale = max(abs(x) for x in a[k]) or 1.0
    worst = max(abs(x - y) for x, y in zip(a[k], b[k])) / scale
    assert worst <= 1e-6, "%s: %g relative" % (k, worst)
PY
}

# name, options: one process with micro-batch 4, two with 2, four with 1 (same global batch)
run_case() {
    local name=$1; shift
    "$GRPO" "${BASE[@]}" "$@" --per_device_train_batch_size 4 --output_dir "$TMP/$name.1" 2>"$TMP/$name.1.err" \
        || { fail "$name, 1 process: $(tail -2 "$TMP/$name.1.err")"; return; }
    for n in 2 4; do
        "${MPI[@]}" -np $n "$GRPO" "${BASE[@]}" "$@" --per_device_train_batch_size $((4 / n)) --output_dir "$TMP/$name.$n" \
            2>"$TMP/$name.$n.err" >/dev/null || { fail "$name, $n processes: $(tail -2 "$TMP/$name.$n.err")"; continue; }
        compare "$TMP/$name.1" "$TMP/$name.$n" "$name, 1 vs $n processes"
    done
}
run_case dapo --loss_type dapo --num_generations 4 --gradient_accumulation_steps 2
run_case beta --loss_type grpo --beta 0.1 --num_generations 4 --gradient_accumulation_steps 2
run_case iter2 --loss_type dapo --num_iterations 2 --num_generations 4 --gradient_accumulation_steps 2
# one group of 8 completions split between the processes that generate it
run_case span --loss_type dapo --num_generations 8 --gradient_accumulation_steps 2 --beta 0.05
# the sampler/trainer correction: sampling log-probs shared with the completions, ratios away from 1 (top_k);
# TRL's gathered metrics: the extremes equal the one process's, the means are means of the processes'
run_case iscorr --loss_type dapo --num_generations 4 --gradient_accumulation_steps 2 --top_k 100 \
    --vllm_importance_sampling_correction true --vllm_importance_sampling_mode token_truncate
python3 - "$TMP/iscorr.1/metrics.jsonl" "$TMP/iscorr.2/metrics.jsonl" <<'PY' || fail "sampling metrics, 1 vs 2 processes"
import json, sys
one, two = ([json.loads(l) for l in open(p) if '"loss"' in l] for p in sys.argv[1:])
assert len(one) == len(two) == 3
for a, b in zip(one, two):
    for k in ("sampling_logp_difference/max", "importance_sampling_ratio/min", "importance_sampling_ratio/max"):
        assert abs(a["sampling/" + k] - b["sampling/" + k]) <= 1e-6 * abs(a["sampling/" + k]), (k, a, b)
    assert a["sampling/importance_sampling_ratio/max"] < 1 and a["sampling/sampling_logp_difference/mean"] > 0.01, a
PY

# dynamic sampling (filter_groups): the processes keep the same groups, those of "ab" and "ef" (a reward read off
# the ids); "cd" and "gh" score 1 whatever the completion, and their groups are dropped on every process
cat > "$TMP/prompt_reward.py" <<'PY'
import json, sys
for line in sys.stdin:
    q = json.loads(line)
    r = [1.0 if p in ("cd", "gh") else float(sum(ids) % 97) for p, ids in zip(q["prompts"], q["completion_ids"])]
    print(json.dumps({"rewards": r}), flush=True)
PY
run_case filter --loss_type dapo --num_generations 4 --gradient_accumulation_steps 2 --filter_groups true \
    --reward_funcs "cmd:python3 $TMP/prompt_reward.py"
for n in 1 2 4; do
    python3 - "$TMP/filter.$n" <<'PY' || fail "filter_groups on $n process(es): a group without signal was trained on, or none dropped"
import json, sys
d = sys.argv[1]
prompts = [json.loads(l)["prompt"] for l in open(d + "/completions.jsonl")]
assert len(prompts) == 24 and set(prompts) == {"ab", "ef"}, prompts
steps = [json.loads(l) for l in open(d + "/metrics.jsonl") if '"loss"' in l]
assert len(steps) == 3 and sum(s["dynamic_sampling/groups_dropped"] for s in steps) > 0, steps
PY
done

# rank 0 alone writes: one metrics line per step and the closing one, every completion once, in global order
[ "$(grep -c '"loss"' "$TMP/dapo.2/metrics.jsonl")" -eq 3 ] && [ "$(grep -c '"train_runtime"' "$TMP/dapo.2/metrics.jsonl")" -eq 1 ] \
    || fail "metrics.jsonl of the 2-process run: $(wc -l < "$TMP/dapo.2/metrics.jsonl") lines"
[ "$(wc -l < "$TMP/dapo.4/completions.jsonl")" -eq 24 ] || fail "completions.jsonl of the 4-process run"

# an epoch is the same number of steps whatever N: 4 prompts x 2 epochs, 2 prompts per global step
for n in 1 2; do
    "${MPI[@]}" -np $n "$GRPO" "${BASE[@]}" --max_steps 0 --num_train_epochs 2 --num_generations 4 \
        --per_device_train_batch_size $((4 / n)) --gradient_accumulation_steps 2 --output_dir "$TMP/ep$n" >/dev/null 2>&1
    [ "$(grep -c '"loss"' "$TMP/ep$n/metrics.jsonl" 2>/dev/null)" = 4 ] || fail "2 epochs on $n process(es): not 4 steps"
done

# resume under N = 2 equals the uninterrupted N = 2 run
R=("${BASE[@]}" --per_device_train_batch_size 2 --num_generations 4 --gradient_accumulation_steps 2 --num_iterations 2
   --beta 0.1 --max_steps 4 --save_steps 2)
"${MPI[@]}" -np 2 "$GRPO" "${R[@]}" --output_dir "$TMP/full" 2>"$TMP/full.err" >/dev/null || fail "uninterrupted: $(tail -2 "$TMP/full.err")"
# the resumed run continues from a copy of the checkpoint (metrics and completions truncated to it)
mkdir -p "$TMP/part" && cp -r "$TMP/full/checkpoint-2" "$TMP/full/metrics.jsonl" "$TMP/full/completions.jsonl" "$TMP/part/"
[ "$(python3 -c "import json; print(json.load(open('$TMP/part/checkpoint-2/trainer_state.json'))['stateful_callbacks']['GrpoTrainer']['attributes']['world_size'])" 2>/dev/null)" = 2 ] \
    || fail "the checkpoint does not record world_size 2"
"${MPI[@]}" -np 2 "$GRPO" "${R[@]}" --output_dir "$TMP/part" --resume_from_checkpoint "$TMP/part/checkpoint-2" \
    2>"$TMP/res.err" >/dev/null || fail "resume: $(tail -2 "$TMP/res.err")"
cmp -s "$TMP/full/model.safetensors" "$TMP/part/model.safetensors" || fail "resumed N = 2 run differs from the uninterrupted one"
cmp -s "$TMP/full/completions.jsonl" "$TMP/part/completions.jsonl" || fail "resumed completions differ"
# (output_dir's too: the closing entry, train_loss over the whole run; timings aside)
python3 - "$TMP/full" "$TMP/part" <<'PY' || fail "the resumed N = 2 run's log_history differs from the uninterrupted one's"
import json, sys
strip = lambda h: [{k: v for k, v in e.items() if "time" not in k and not k.endswith("_per_second")} for e in h]
for f, steps in (("/checkpoint-4/trainer_state.json", [1, 2, 3, 4]), ("/trainer_state.json", [1, 2, 3, 4, 4])):
    a, b = (strip(json.load(open(d + f))["log_history"]) for d in sys.argv[1:])
    assert a == b and [e["step"] for e in a] == steps, (f, a, b)
assert "train_loss" in a[-1], a[-1]
PY
# an evaluation under N = 2 is printed once (by rank 0)
Q=()
for a in "${BASE[@]}"; do [ "$a" = --quiet ] || Q+=("$a"); done
"${MPI[@]}" -np 2 "$GRPO" "${Q[@]}" --per_device_train_batch_size 2 --num_generations 4 --max_steps 2 --eval_strategy steps \
    --eval_dataset "$TMP/d.jsonl" --eval_steps 1 --num_generations_eval 1 --output_dir "$TMP/ev" 2>"$TMP/ev.err" >/dev/null \
    || fail "eval under N = 2: $(tail -2 "$TMP/ev.err")"
[ "$(grep -c '^grpo train: eval at step [12] (4 prompts x 1 completion sampled at temperature 1): eval_reward ' "$TMP/ev.err")" = 2 ] \
    || fail "eval lines under N = 2: $(grep eval "$TMP/ev.err")"
# ... and a different process count is refused, naming both
expect_error 1 "written by a run of 2 process(es), this one has 1" "$GRPO" "${R[@]}" --output_dir "$TMP/part" \
    --resume_from_checkpoint "$TMP/part/checkpoint-2"

# sft: the same global batch on 1, 2 and 4 processes gives the same weights
for i in 1 2 3 4 5 6 7 8; do printf '{"prompt": "q%s=", "completion": "%s"}\n' "$i" "$(printf 'ab%.0s' $(seq $i))"; done > "$TMP/s.jsonl"
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --bf16 false --gradient_accumulation_steps 2 --max_steps 3 --learning_rate 1e-3
   --adam_epsilon 1e-2 --seed 5 --quiet)
"$GRPO" "${S[@]}" --per_device_train_batch_size 4 --output_dir "$TMP/sft.1" 2>"$TMP/sft.err" || fail "sft, 1 process: $(tail -2 "$TMP/sft.err")"
for n in 2 4; do
    "${MPI[@]}" -np $n "$GRPO" "${S[@]}" --per_device_train_batch_size $((4 / n)) --output_dir "$TMP/sft.$n" 2>"$TMP/sft.err" \
        >/dev/null || { fail "sft, $n processes: $(tail -2 "$TMP/sft.err")"; continue; }
    touch "$TMP/sft.1/completions.jsonl" "$TMP/sft.$n/completions.jsonl"
    compare "$TMP/sft.1" "$TMP/sft.$n" "sft, 1 vs $n processes"
done

# bad usage: the rule and the numbers, once (not once per process)
"${MPI[@]}" -np 2 "$GRPO" "${BASE[@]}" --per_device_train_batch_size 1 --num_generations 4 --gradient_accumulation_steps 1 \
    --output_dir "$TMP/bad" >/dev/null 2>"$TMP/bad.err" && fail "an indivisible global batch was accepted"
[ "$(grep -c 'per_device_train_batch_size 1 x processes 2 x steps_per_generation 1) must be divisible by num_generations (4)' "$TMP/bad.err")" -eq 1 ] \
    || fail "indivisible global batch: $(cat "$TMP/bad.err")"
"${MPI[@]}" -np 2 "$GRPO" generate --model "$TMP/m" --prompt ab >/dev/null 2>"$TMP/gen.err" && fail "generate ran under mpirun"
grep -q "runs as one process; start it without mpirun" "$TMP/gen.err" || fail "generate under mpirun: $(cat "$TMP/gen.err")"

# one rank's reward process fails: the job stops with that rank named, nothing saved
cat > "$TMP/rank_reward.py" <<'PY'
import json, os, sys
if os.environ.get("OMPI_COMM_WORLD_RANK") == "1":
    sys.exit(3)
for line in sys.stdin:
    print(json.dumps({"rewards": [1.0] * len(json.loads(line)["completions"])}), flush=True)
PY
"${MPI[@]}" -np 2 "$GRPO" "${BASE[@]}" --reward_funcs "cmd:python3 $TMP/rank_reward.py" --per_device_train_batch_size 2 \
    --num_generations 4 --gradient_accumulation_steps 2 --output_dir "$TMP/rf" >/dev/null 2>"$TMP/rf.err" && fail "a failing rank went unnoticed"
[ "$(grep -c '^grpo train: rank 1: .*exited' "$TMP/rf.err")" -eq 1 ] || fail "failing reward on rank 1: $(cat "$TMP/rf.err")"
[ -f "$TMP/rf/model.safetensors" ] && fail "a model was saved after a failed run"
# a rank that cannot read the dataset (the same --dataset d.jsonl; rank 1 runs in /, where there is none)
"${MPI[@]}" -np 2 -wdir "$TMP" sh -c 'if [ "$OMPI_COMM_WORLD_RANK" = 1 ]; then cd /; fi; exec "$@" --dataset d.jsonl' \
    sh "$GRPO" "${BASE[@]}" --per_device_train_batch_size 2 --num_generations 4 --gradient_accumulation_steps 2 \
    --output_dir "$TMP/nd" >/dev/null 2>"$TMP/nd.err" && fail "a rank without its dataset went unnoticed"
[ "$(grep -c '^grpo train: rank 1: d.jsonl' "$TMP/nd.err")" -eq 1 ] || fail "missing dataset on rank 1: $(cat "$TMP/nd.err")"

# a process that dies (kill -9 of rank 1 during step 2): mpirun stops the job, only whole
# checkpoints remain, and resuming from the last one equals the uninterrupted run
cat > "$TMP/killer.py" <<'PY'
import json, os, signal, sys
calls = 0
for line in sys.stdin:
    calls += 1
    if os.environ.get("OMPI_COMM_WORLD_RANK") == "1" and calls == 2 and sys.argv[1] == "kill":
        pid = os.getppid()  # the first ancestor running grpo is this rank's trainer
        while pid > 1 and b"grpo" not in open("/proc/%d/cmdline" % pid, "rb").read():
            pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        os.kill(pid, signal.SIGKILL)
        sys.exit(0)
    req = json.loads(line)
    print(json.dumps({"rewards": [len(c) / 8.0 for c in req["completions"]]}), flush=True)
PY
K=("${BASE[@]}" --per_device_train_batch_size 2 --num_generations 4 --gradient_accumulation_steps 2 --max_steps 3 --save_steps 1)
"${MPI[@]}" -np 2 "$GRPO" "${K[@]}" --reward_funcs "cmd:python3 $TMP/killer.py keep" --output_dir "$TMP/kfull" \
    >/dev/null 2>"$TMP/kfull.err" || fail "uninterrupted run for the kill test: $(tail -2 "$TMP/kfull.err")"
"${MPI[@]}" -np 2 "$GRPO" "${K[@]}" --reward_funcs "cmd:python3 $TMP/killer.py kill" --output_dir "$TMP/kill" \
    >/dev/null 2>"$TMP/kill.err" && fail "a killed rank went unnoticed"
[ -d "$TMP/kill/checkpoint-1" ] && [ ! -d "$TMP/kill/checkpoint-2" ] || fail "after the kill: $(ls "$TMP/kill")"
ls -d "$TMP"/kill/*.tmp* 2>/dev/null && fail "a temporary checkpoint directory was left"
[ -f "$TMP/kill/model.safetensors" ] && fail "a final model was saved by a killed run"
"${MPI[@]}" -np 2 "$GRPO" "${K[@]}" --reward_funcs "cmd:python3 $TMP/killer.py keep" --output_dir "$TMP/kill" \
    --resume_from_checkpoint "$TMP/kill/checkpoint-1" >/dev/null 2>"$TMP/kres.err" || fail "resume after the kill: $(tail -2 "$TMP/kres.err")"
cmp -s "$TMP/kfull/model.safetensors" "$TMP/kill/model.safetensors" || fail "the resumed run differs from the uninterrupted one"
cmp -s "$TMP/kfull/completions.jsonl" "$TMP/kill/completions.jsonl" || fail "the resumed run's completions differ"
finish

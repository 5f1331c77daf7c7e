#!/usr/bin/env bash
# Ranks agree or stop (issue 38). Ranks started with other options or other
# files (`mpirun -np 1 grpo train A : -np 1 grpo train B`) stop at start-up,
# before loading anything, with exit 2 and one line naming the first option or
# input that differs and the ranks: another model shape (same path, other
# files), use_peft, beta, seed, a dataset's contents, reward_funcs,
# num_generations, loss_type, temperature, a --config (its path, or its values),
# output_dir, a resume against a fresh start, latest naming other checkpoints, a
# checkpoint's contents, another command, grpo sft's seed; a rank that refuses
# its command line stops the others too. Collectives carry transformers'
# ddp_timeout: a rank stopped (SIGSTOP) or busy past it in the middle of a run
# ends the job within the timeout with one line naming it, and nothing is left
# running. Every run is bounded by `timeout 120` (a hang is a failure).
set -u
. "$ROOT/tests/cli/lib.sh"
command -v mpirun >/dev/null || { fail "mpirun not found (tools/install-deps.sh installs openmpi-bin)"; finish; }
mpi_env

sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
sed 's/"hidden_size": \([0-9]*\)/"hidden_size": 48/' "$TMP/config.json" > "$TMP/config2.json"
"$GRPO" init --config "$TMP/config2.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m2" 2>/dev/null || { fail init m2; finish; }
cmp -s "$TMP/m/config.json" "$TMP/m2/config.json" && { fail "the second model has the same shape"; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' '{"prompt": "gh"}' > "$TMP/d.jsonl"
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' '{"prompt": "gX"}' > "$TMP/d2.jsonl"
# working directories of the ranks: the same relative paths naming other files
mkdir -p "$TMP/a" "$TMP/b" "$TMP/shape" "$TMP/data"
for w in a b shape data; do ln -s "$TMP/m" "$TMP/$w/m"; cp "$TMP/d.jsonl" "$TMP/$w/d.jsonl"; done
rm "$TMP/shape/m" && ln -s "$TMP/m2" "$TMP/shape/m"
cp "$TMP/d2.jsonl" "$TMP/data/d.jsonl"
BASE=(--model m --dataset d.jsonl --reward_funcs length:5 --max_completion_length 8 --max_steps 2 --learning_rate 1e-3
      --per_device_train_batch_size 2 --num_generations 4 --seed 3 --quiet --bf16 false)
T=(train "${BASE[@]}")

# run LABEL: rank 0 runs "${R0[@]}" in $W0, rank 1 "${R1[@]}" in $W1; sets $rc and $TMP/err
run() {
    timeout 120 "${MPI[@]}" -np 1 -wdir "$W0" "$GRPO" "${R0[@]}" : -np 1 -wdir "$W1" "$GRPO" "${R1[@]}" \
        >"$TMP/out" 2>"$TMP/err"
    rc=$?
}
# disagree LABEL PATTERN: the job stops with exit 2 and one line, "grpo CMD: ranks disagree: PATTERN"
disagree() {
    run
    if [ "$rc" -eq 124 ]; then fail "$1: hung (killed after 120 s)"; return; fi
    if [ "$rc" -ne 2 ]; then fail "$1: exit $rc (want 2): $(grep -v '^-*$' "$TMP/err" | head -4)"; return; fi
    [ "$(grep -c '^grpo' "$TMP/err")" -eq 1 ] && grep -q "^grpo [a-z]*: ranks disagree: $2\$" "$TMP/err" \
        || fail "$1: $(grep -v '^-*$' "$TMP/err" | head -4)"
    grep -qE "MPI_ERR|MPI_ABORT|CHECK failed|Segmentation" "$TMP/err" && fail "$1: crashed: $(head -3 "$TMP/err")"
}
W0=$TMP/a W1=$TMP/a
# fresh: R0 = a grpo train of BASE into an output_dir of its own (so an earlier case's run is no reason to stop)
k=0
fresh() { k=$((k + 1)); R0=("${T[@]}" --output_dir "$TMP/o$k"); }

# the same command line on both: it runs (and the check costs nothing visible)
R0=("${T[@]}" --output_dir "$TMP/same") R1=("${R0[@]}")
run
[ "$rc" -eq 0 ] && [ -f "$TMP/same/model.safetensors" ] || fail "agreeing ranks: exit $rc: $(head -3 "$TMP/err")"

fresh; W1=$TMP/shape R1=("${R0[@]}")
disagree "model shape" "model m differs between rank 0 and rank 1"
fresh; W1=$TMP/data R1=("${R0[@]}")
disagree "dataset contents" "dataset d.jsonl differs between rank 0 and rank 1"
W1=$TMP/a
fresh; R1=("${R0[@]}" --use_peft)
disagree use_peft "--use_peft is false on rank 0 and true on rank 1"
fresh; R1=("${R0[@]}" --beta 0.1)
disagree beta "--beta is 0 on rank 0 and 0.1 on rank 1"
fresh; R1=("${R0[@]}" --seed 4)
disagree seed "--seed is 3 on rank 0 and 4 on rank 1"
fresh; R1=("${R0[@]}" --reward_funcs "format:^a")
disagree reward_funcs "--reward_funcs is length:5 on rank 0 and format:^a on rank 1"
fresh; R1=("${R0[@]}" --num_generations 2)
disagree num_generations "--num_generations is 4 on rank 0 and 2 on rank 1"
fresh; R1=("${R0[@]}" --loss_type grpo)
disagree loss_type "--loss_type is dapo on rank 0 and grpo on rank 1"
fresh; R1=("${R0[@]}" --temperature 0.7)
disagree temperature "--temperature is 1 on rank 0 and 0.7 on rank 1"
fresh; R1=("${R0[@]}" --learning_rate 1.0000001e-3)
disagree "a value alike in 6 digits" "--learning_rate is 0.001 on rank 0 and 0.0010000001 on rank 1"
fresh; R1=("${T[@]}" --output_dir "$TMP/other")
disagree output_dir "--output_dir is $TMP/o$k on rank 0 and $TMP/other on rank 1"
printf 'learning_rate: 1.0e-3\n' > "$TMP/a/run.yaml"
printf 'learning_rate: 1.0e-4\n' > "$TMP/data/run.yaml"
printf 'learning_rate: 1.0e-3  # the same value\n' > "$TMP/b/run.yaml"
# cf: grpo train --config run.yaml with BASE but its learning_rate, into a fresh output_dir
cf() { k=$((k + 1)); R0=(train --config run.yaml "${BASE[@]:0:10}" "${BASE[@]:12}" --output_dir "$TMP/o$k") R1=("${R0[@]}"); }
cf; W1=$TMP/data
disagree "config values" "--learning_rate is 0.001 on rank 0 and 0.0001 on rank 1"
cf; W1=$TMP/b
disagree "config contents" "config run.yaml differs between rank 0 and rank 1"
cf; W1=$TMP/a R1=("${R0[@]/run.yaml/$TMP/a/run.yaml}")
disagree "config path" "--config is run.yaml on rank 0 and $TMP/a/run.yaml on rank 1"

# resuming: a checkpoint of an agreeing run, then a rank that starts fresh
R0=("${T[@]}" --save_steps 1 --output_dir "$TMP/ck") R1=("${R0[@]}")
run
[ "$rc" -eq 0 ] && [ -d "$TMP/ck/checkpoint-2" ] || fail "the run to resume from: exit $rc: $(head -3 "$TMP/err")"
R0=("${T[@]}" --max_steps 3 --output_dir "$TMP/ck" --resume_from_checkpoint "$TMP/ck/checkpoint-1")
R1=("${T[@]}" --max_steps 3 --output_dir "$TMP/ck")
disagree "resume against fresh" "--resume_from_checkpoint is $TMP/ck/checkpoint-1 on rank 0 and unset on rank 1"
# latest names checkpoint-2 on rank 0, checkpoint-1 on rank 1 (output_dirs not shared)
mkdir -p "$TMP/a/o" "$TMP/b/o"
cp -r "$TMP/ck/checkpoint-1" "$TMP/ck/checkpoint-2" "$TMP/ck/metrics.jsonl" "$TMP/a/o/"
cp -r "$TMP/ck/checkpoint-1" "$TMP/ck/metrics.jsonl" "$TMP/b/o/"
R0=("${T[@]}" --max_steps 3 --output_dir o --resume_from_checkpoint latest) R1=("${R0[@]}") W1=$TMP/b
disagree "latest" "--resume_from_checkpoint latest is o/checkpoint-2 on rank 0 and o/checkpoint-1 on rank 1"
# the same checkpoint name, other contents
rm -r "$TMP/a/o/checkpoint-2"
sed -i 's/"global_step": 1/"global_step":  1/' "$TMP/b/o/checkpoint-1/trainer_state.json"
cmp -s "$TMP/a/o/checkpoint-1/trainer_state.json" "$TMP/b/o/checkpoint-1/trainer_state.json" && fail "trainer_state.json not changed"
disagree "checkpoint contents" "checkpoint o/checkpoint-1 differs between rank 0 and rank 1"
W1=$TMP/a

# another command; grpo sft's ranks too
printf '%s\n' '{"prompt": "q1=", "completion": "ab"}' '{"prompt": "q2=", "completion": "abab"}' > "$TMP/a/s.jsonl"
S=(sft --model m --dataset s.jsonl --max_steps 1 --per_device_train_batch_size 1 --quiet --bf16 false)
R0=("${T[@]}" --output_dir "$TMP/sft") R1=("${S[@]}" --output_dir "$TMP/sft")
disagree "train and sft" "the command is grpo train on rank 0 and grpo sft on rank 1"
R0=("${S[@]}" --output_dir "$TMP/sft2" --seed 1) R1=("${S[@]}" --output_dir "$TMP/sft2" --seed 2)
disagree "sft seed" "--seed is 1 on rank 0 and 2 on rank 1"

# a rank that refuses its command line: it says why, every rank stops with its status
R0=("${T[@]}" --output_dir "$TMP/bad") R1=("${R0[@]}" --temperature hot)
run
[ "$rc" -eq 2 ] && [ "$(grep -c '^grpo' "$TMP/err")" -eq 1 ] && grep -q "^grpo train: --temperature expects a number" "$TMP/err" \
    || fail "a refused command line on rank 1: exit $rc: $(grep -v '^-*$' "$TMP/err" | head -3)"

# ---- ddp_timeout ----
# a reward that stops (SIGSTOP) its trainer on rank 1 at the second call, or keeps it busy for 30 s
cat > "$TMP/stopper.py" <<'PY'
import json, os, signal, sys, time
calls = 0
for line in sys.stdin:
    calls += 1
    if os.environ.get("OMPI_COMM_WORLD_RANK") == "1" and calls == 2:
        pid = os.getppid()  # the first ancestor running grpo is this rank's trainer
        while pid > 1 and b"grpo" not in open("/proc/%d/cmdline" % pid, "rb").read():
            pid = int(open("/proc/%d/stat" % pid).read().rsplit(")", 1)[1].split()[1])
        open(sys.argv[2], "w").write(str(pid))
        if sys.argv[1] == "stop":
            os.kill(pid, signal.SIGSTOP)
        else:
            time.sleep(30)
    req = json.loads(line)
    print(json.dumps({"rewards": [len(c) / 8.0 for c in req["completions"]]}), flush=True)
PY
K=("${T[@]}" --max_steps 4 --ddp_timeout 5)
for how in stop busy; do
    R0=("${K[@]}" --reward_funcs "cmd:python3 $TMP/stopper.py $how $TMP/$how.pid" --output_dir "$TMP/$how") R1=("${R0[@]}")
    start=$SECONDS
    run
    took=$((SECONDS - start))
    if [ "$rc" -eq 124 ]; then fail "rank 1 $how: hung (killed after 120 s)"
    elif [ "$rc" -eq 0 ]; then fail "rank 1 $how: exit 0"
    else
        [ "$(grep -c '^grpo' "$TMP/err")" -eq 1 ] \
            && grep -q "^grpo train: rank 1 did not reach .* within ddp_timeout 5 s; stopping the job$" "$TMP/err" \
            || fail "rank 1 $how: $(grep -v '^-*$' "$TMP/err" | head -4)"
        [ "$took" -le 25 ] || fail "rank 1 $how: the job took $took s to end with ddp_timeout 5"
    fi
    pid=$(cat "$TMP/$how.pid" 2>/dev/null)
    if [ -z "$pid" ]; then fail "rank 1 $how: the reward never ran its second call"
    else
        for i in 1 2 3 4 5; do # gone, or a zombie its parent has yet to reap
            case $(ps -o stat= -p "$pid") in ""|Z*) break ;; esac
            sleep 1
        done
        case $(ps -o stat= -p "$pid") in ""|Z*) ;; *) fail "rank 1 $how: its process $pid is left running"; kill -9 "$pid" ;; esac
    fi
done
# the TRL key is an option now (no "without effect" warning), its range checked
printf 'ddp_timeout: 5\n' > "$TMP/a/t.yaml"
(cd "$TMP/a" && "$GRPO" "${T[@]}" --per_device_train_batch_size 4 --config t.yaml --output_dir "$TMP/t1" >/dev/null 2>"$TMP/t1.err") \
    && ! grep -q ddp_timeout "$TMP/t1.err" || fail "ddp_timeout in a TRL config: $(head -3 "$TMP/t1.err")"
expect_error 2 "ddp_timeout" "$GRPO" train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 \
    --output_dir "$TMP/t0" --ddp_timeout 0
# ddp_timeout is an option like any other: a run under it that never waits that long is unchanged
R0=("${T[@]}" --ddp_timeout 5 --output_dir "$TMP/t5") R1=("${R0[@]}")
run
[ "$rc" -eq 0 ] && cmp -s "$TMP/t5/model.safetensors" "$TMP/same/model.safetensors" \
    || fail "--ddp_timeout 5 changed an agreeing run: exit $rc: $(head -3 "$TMP/err")"
finish

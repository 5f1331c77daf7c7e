#!/usr/bin/env bash
# tools/same_outputs.sh OLD_GRPO NEW_GRPO [WORKDIR]
#
# Checks that a refactor changes no output: runs a fixed set of small training
# scenarios (grpo train / grpo sft, each with --bf16 false and --bf16 true) with two
# grpo binaries and compares what they wrote, run by run:
#   - metrics.jsonl: every line, parsed, with the timing keys removed (any key whose
#     name contains "time" or ends in "_per_second", as the closing line's
#     train_runtime and train_samples_per_second, and tokens_per_s), the rest equal
#     exactly (json.loads ==);
#   - completions.jsonl: exact bytes;
#   - every *.safetensors (final model or adapter, checkpoints' model / optimizer /
#     ref_model): exact bytes;
#   - checkpoints' and output_dir's trainer_state.json: parsed, timing keys removed, equal;
#   - every other file (config.json, adapter_config.json, tokenizer files, ...): exact
#     bytes; and the same set of files on both sides;
#   - the exit status (a run that fails with either binary is a difference).
# The "memory plan" line of each run's stderr is printed for information only.
#
# Prints one line per scenario, "same NAME" or "DIFF NAME: what differs", and exits 0
# only when every scenario is the same. Runs go to WORKDIR/old/RUN and WORKDIR/new/RUN
# (RUN = SCENARIO.bf16-false, ...; stderr in RUN.err); the shared inputs (tiny model,
# its SFT'ed base, datasets) are made once with OLD_GRPO in WORKDIR/shared.
# Runs without --quiet, since --quiet also silences the memory plan (stderr is not compared).
set -u

usage() { echo "usage: $0 OLD_GRPO NEW_GRPO [WORKDIR]" >&2; exit 2; }
[ $# -ge 2 ] && [ $# -le 3 ] || usage
OLD=$(realpath "$1") && NEW=$(realpath "$2") || usage
[ -x "$OLD" ] && [ -x "$NEW" ] || { echo "$0: $1 and $2 must be executables" >&2; exit 2; }
WORK=${3:-$(mktemp -d)}
mkdir -p "$WORK" && WORK=$(realpath "$WORK")
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT" || exit 2
export GRPO_THREADS=2 OMP_NUM_THREADS=2
SH=$WORK/shared

# ---- shared inputs, made once with the old binary --------------------------------
setup() {
    rm -rf "$WORK/old" "$WORK/new" "$SH"
    mkdir -p "$WORK/old" "$WORK/new" "$SH"
    sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' \
        tests/fixtures/qwen3/config.json > "$SH/cfg.json"
    "$OLD" init --config "$SH/cfg.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$SH/m" \
        2>"$SH/init.err" || { echo "setup: grpo init failed: $(tail -2 "$SH/init.err")" >&2; exit 2; }
    "$OLD" sft --model "$SH/m" --dataset examples/demo/sft.jsonl --max_steps 20 --per_device_train_batch_size 4 \
        --learning_rate 1e-3 --quiet --output_dir "$SH/base" 2>"$SH/sft.err" \
        || { echo "setup: grpo sft (the base) failed: $(tail -2 "$SH/sft.err")" >&2; exit 2; }
    printf '%s\n' '{"prompt": "Tell me about the cat.\n", "answer": "4"}' '{"prompt": "2+2=", "answer": "4"}' \
        '{"prompt": "Tell me about the dog.\n", "answer": "7"}' '{"prompt": "3+4=", "answer": "7"}' > "$SH/d.jsonl"
    printf '%s\n' '{"prompt": "1+5=", "answer": "6"}' '{"prompt": "Tell me about my brother.\n", "answer": "x"}' \
        > "$SH/eval.jsonl"
    head -40 examples/demo/sft.jsonl > "$SH/s.jsonl"
    cat > "$WORK/compare.py" <<'PY'
# compare.py OLD_ROOT NEW_ROOT RUN...: prints the first difference and exits 1, or exits 0.
import json, os, sys
old_root, new_root, runs = sys.argv[1], sys.argv[2], sys.argv[3:]

def timing(k):
    return "time" in k or k.endswith("_per_second") or k == "tokens_per_s"

def strip(v):
    if isinstance(v, dict):
        return {k: strip(x) for k, x in v.items() if not timing(k)}
    if isinstance(v, list):
        return [strip(x) for x in v]
    return v

def first_diff(a, b, path=""):
    if type(a) != type(b):
        return path or "(top)"
    if isinstance(a, dict):
        for k in sorted(set(a) | set(b)):
            if k not in a or k not in b:
                return "%s%s (only in %s)" % (path, k, "old" if k in a else "new")
            d = first_diff(a[k], b[k], path + k + ".")
            if d:
                return d
        return None
    if isinstance(a, list):
        if len(a) != len(b):
            return "%s(length %d vs %d)" % (path, len(a), len(b))
        for i, (x, y) in enumerate(zip(a, b)):
            d = first_diff(x, y, "%s[%d]." % (path, i))
            if d:
                return d
        return None
    return None if a == b else (path.rstrip(".") or "(top)") + ": old %r new %r" % (a, b)

def files(d):
    out = set()
    for dp, _, fs in os.walk(d):
        out |= {os.path.relpath(os.path.join(dp, f), d) for f in fs}
    return out

def read(p, o, n):
    # the run's own directory name normalised, should a path to it be written anywhere
    return open(p, "rb").read().replace(o.encode(), n.encode())

def compare_metrics(po, pn):
    lo, ln = open(po).read().splitlines(), open(pn).read().splitlines()
    for i, (a, b) in enumerate(zip(lo, ln)):
        ja, jb = strip(json.loads(a)), strip(json.loads(b))
        if ja != jb:
            step = ja.get("step", "?") if isinstance(ja, dict) else "?"
            return "metrics.jsonl line %d (step %s): %s" % (i + 1, step, first_diff(ja, jb))
    if len(lo) != len(ln):
        return "metrics.jsonl: %d lines vs %d" % (len(lo), len(ln))
    return None

def compare_completions(po, pn):
    a, b = open(po, "rb").read(), open(pn, "rb").read()
    if a == b:
        return None
    la, lb = a.split(b"\n"), b.split(b"\n")
    for i, (x, y) in enumerate(zip(la, lb)):
        if x != y:
            try:
                step = json.loads(x).get("step", "?")
            except ValueError:
                step = "?"
            return "completions.jsonl line %d (step %s) differs" % (i + 1, step)
    return "completions.jsonl: %d lines vs %d" % (len(la) - 1, len(lb) - 1)

def compare_run(run):
    o, n = os.path.join(old_root, run), os.path.join(new_root, run)
    rc = [open(d + ".rc").read().strip() if os.path.exists(d + ".rc") else "not run" for d in (o, n)]
    if rc != ["0", "0"]:
        why = ""
        for side, d, r in (("old", o, rc[0]), ("new", n, rc[1])):
            if r != "0" and os.path.exists(d + ".err"):
                lines = [l for l in open(d + ".err", errors="replace").read().splitlines() if l.strip()]
                why = " (%s: %s)" % (side, lines[-1] if lines else "no stderr")
                break
        return "%s: exit status old %s, new %s%s" % (run, rc[0], rc[1], why)
    fo, fn = files(o), files(n)
    if fo != fn:
        return "%s: files only in old: %s; only in new: %s" % (
            run, sorted(fo - fn)[:3] or "-", sorted(fn - fo)[:3] or "-")
    if "metrics.jsonl" not in fo:
        return "%s: no metrics.jsonl written" % run
    # the listed kinds first, in this order, then everything else
    order = lambda f: (0 if f == "metrics.jsonl" else 1 if f == "completions.jsonl" else
                       2 if f.endswith(".safetensors") else 3 if f.endswith("trainer_state.json") else 4, f)
    for f in sorted(fo, key=order):
        po, pn = os.path.join(o, f), os.path.join(n, f)
        if f == "metrics.jsonl":
            d = compare_metrics(po, pn)
        elif f == "completions.jsonl":
            d = compare_completions(po, pn)
        elif os.path.basename(f) == "trainer_state.json":
            ja = strip(json.loads(read(po, o, n)))
            jb = strip(json.loads(open(pn, "rb").read()))
            d = None if ja == jb else "%s: %s" % (f, first_diff(ja, jb))
        elif f.endswith(".safetensors"):
            d = None if open(po, "rb").read() == open(pn, "rb").read() else "%s differs" % f
        else:
            d = None if read(po, o, n) == open(pn, "rb").read() else "%s differs" % f
        if d:
            return "%s: %s" % (run, d)
    return None

for run in runs:
    d = compare_run(run)
    if d:
        print(d)
        sys.exit(1)
PY
}

# ---- running ------------------------------------------------------------------------
# go BIN SIDE RUN [PREFIX... --] ARGS...: BIN ARGS --output_dir WORK/SIDE/RUN, stderr to
# RUN.err, exit status to RUN.rc; "mpirun ... --" before ARGS runs BIN under it.
go() {
    local bin=$1 dir=$WORK/$2/$3; shift 3
    local pre=()
    if [ "${1:-}" = mpirun ]; then
        while [ "$1" != -- ]; do pre+=("$1"); shift; done
        shift
    fi
    "${pre[@]}" "$bin" "$@" --output_dir "$dir" >"$dir.out" 2>"$dir.err"
    echo $? > "$dir.rc"
}

# the GRPO options every train scenario but demo starts from
grpo_common() {
    COMMON=(train --model "$SH/base" --dataset "$SH/d.jsonl" --reward_funcs length:20 'format:^[A-Z]' exact_match:answer
            --num_generations 8 --per_device_train_batch_size 4 --gradient_accumulation_steps 4
            --max_completion_length 16 --max_steps 4 --logging_steps 1 --save_steps 2
            --learning_rate 1e-3 --adam_epsilon 1e-2 --log_completions true --seed 3)
}
REF=(--beta 0.04 --num_iterations 2 --sync_ref_model true --ref_model_sync_steps 1 --ref_model_mixup_alpha 0.5)

# ---- scenarios: scenario_NAME BIN SIDE, writing runs NAME.bf16-{false,true}[.VARIANT] ---
# Each sets RUNS (the run names to compare) as a side effect.

# 1. examples/demo/grpo_length.yaml (its prompts and length:20 reward) shrunk
scenario_demo() {
    local bf; RUNS=()
    for bf in false true; do
        go "$1" "$2" demo.bf16-$bf train --config examples/demo/grpo_length.yaml --model "$SH/base" --bf16 $bf \
            --num_generations 8 --per_device_train_batch_size 4 --gradient_accumulation_steps 4 \
            --max_completion_length 16 --max_steps 4 --logging_steps 1 --save_steps 2 --learning_rate 1e-3 \
            --adam_epsilon 1e-2 --log_completions true --seed 3
        RUNS+=(demo.bf16-$bf)
    done
}

# 2. a KL reference, synced into by mix-up every step; each generation batch used twice
scenario_ref() {
    local bf; RUNS=(); grpo_common
    for bf in false true; do
        go "$1" "$2" ref.bf16-$bf "${COMMON[@]}" "${REF[@]}" --bf16 $bf
        RUNS+=(ref.bf16-$bf)
    done
}

# 3. LoRA on every linear layer, with dropout; the KL reference is the base (adapters off)
scenario_lora() {
    local bf; RUNS=(); grpo_common
    for bf in false true; do
        go "$1" "$2" lora.bf16-$bf "${COMMON[@]}" --use_peft true --lora_r 4 --lora_dropout 0.1 \
            --lora_target_modules all-linear --beta 0.04 --bf16 $bf
        RUNS+=(lora.bf16-$bf)
    done
}

# 4. two processes (as tests/cli/test_mpi_train.sh runs them), micro-batch 2 each
scenario_mpi() {
    local bf; RUNS=(); grpo_common
    for bf in false true; do
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        GRPO_THREADS=1 OMP_NUM_THREADS=1 \
            go "$1" "$2" mpi.bf16-$bf mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -- \
            "${COMMON[@]}" --per_device_train_batch_size 2 --bf16 $bf
        # with a reference and old log-probs, which the processes compute a share of each
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        GRPO_THREADS=1 OMP_NUM_THREADS=1 \
            go "$1" "$2" mpi.bf16-$bf.ref mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -- \
            "${COMMON[@]}" --per_device_train_batch_size 2 --bf16 $bf --beta 0.04 --num_iterations 2
        RUNS+=(mpi.bf16-$bf mpi.bf16-$bf.ref)
    done
}

# 5. grpo sft, full and LoRA
scenario_sft() {
    local bf; RUNS=()
    local S=(sft --model "$SH/m" --dataset "$SH/s.jsonl" --per_device_train_batch_size 2 --gradient_accumulation_steps 2
             --max_steps 4 --logging_steps 1 --save_steps 2 --learning_rate 1e-3 --adam_epsilon 1e-2 --seed 3)
    for bf in false true; do
        go "$1" "$2" sft.bf16-$bf "${S[@]}" --bf16 $bf
        go "$1" "$2" sft.bf16-$bf.lora "${S[@]}" --bf16 $bf --use_peft true --lora_r 4 --lora_dropout 0.1
        RUNS+=(sft.bf16-$bf sft.bf16-$bf.lora)
    done
}

# 6. loss paths: dapo with an entropy bonus (entropy_coef != 0 makes grpo_loss_token_local
#    false: the per-sequence path), bnpo (token-local, the fused path)
scenario_losses() {
    local bf; RUNS=(); grpo_common
    for bf in false true; do
        go "$1" "$2" losses.bf16-$bf.dapo_entropy "${COMMON[@]}" --loss_type dapo --entropy_coef 0.01 --bf16 $bf
        go "$1" "$2" losses.bf16-$bf.bnpo "${COMMON[@]}" --loss_type bnpo --bf16 $bf
        RUNS+=(losses.bf16-$bf.dapo_entropy losses.bf16-$bf.bnpo)
    done
}

# 7. the ref scenario resumed from its checkpoint-2 to step 4 (the run dir holds a copy
#    of ref's checkpoint-2, metrics and completions, as tests/cli/test_mpi_train.sh does);
#    and a midround variant: 4 micro-batches x 8 per generation batch used twice = a
#    4-step round, so checkpoint-2 falls inside it and carries the batch (rollout.json)
resume_from() {  # BIN SIDE RUN FULL_RUN ARGS...: RUN resumes from FULL_RUN's checkpoint-2
    local dir=$WORK/$2/$3 full=$WORK/$2/$4 bin=$1 side=$2 run=$3; shift 4
    mkdir -p "$dir"
    cp -r "$full/checkpoint-2" "$full/metrics.jsonl" "$full/completions.jsonl" "$dir/" 2>/dev/null
    go "$bin" "$side" "$run" "$@" --resume_from_checkpoint "$dir/checkpoint-2"
}
scenario_resume() {
    local bf; RUNS=(); grpo_common
    local MID=("${COMMON[@]}" "${REF[@]}" --steps_per_generation 8)
    for bf in false true; do
        resume_from "$1" "$2" resume.bf16-$bf ref.bf16-$bf "${COMMON[@]}" "${REF[@]}" --bf16 $bf
        go "$1" "$2" resume.bf16-$bf.midround_full "${MID[@]}" --bf16 $bf
        resume_from "$1" "$2" resume.bf16-$bf.midround resume.bf16-$bf.midround_full "${MID[@]}" --bf16 $bf
        RUNS+=(resume.bf16-$bf resume.bf16-$bf.midround_full resume.bf16-$bf.midround)
    done
}

# 8. evaluation on eval_dataset during training, at steps 2 and 4
scenario_eval() {
    local bf; RUNS=(); grpo_common
    for bf in false true; do
        go "$1" "$2" eval.bf16-$bf "${COMMON[@]}" --eval_dataset "$SH/eval.jsonl" --eval_strategy steps --eval_steps 2 \
            --num_generations_eval 4 --bf16 $bf
        RUNS+=(eval.bf16-$bf)
    done
}

# 9. dynamic sampling (filter_groups): rounds of prompts until the batch holds groups with signal
#    (exact_match alone: many groups have equal rewards), and on two processes
scenario_filter() {
    local bf; RUNS=(); grpo_common
    local a F=()
    for a in "${COMMON[@]}"; do [ "$a" = length:20 ] || F+=("$a"); done
    F+=(--filter_groups true --max_num_gen_batches 0)
    for bf in false true; do
        go "$1" "$2" filter.bf16-$bf "${F[@]}" --bf16 $bf
        OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none \
        GRPO_THREADS=1 OMP_NUM_THREADS=1 \
            go "$1" "$2" filter.bf16-$bf.mpi mpirun --allow-run-as-root --oversubscribe --bind-to none -np 2 -- \
            "${F[@]}" --per_device_train_batch_size 2 --bf16 $bf
        RUNS+=(filter.bf16-$bf filter.bf16-$bf.mpi)
    done
}

SCENARIOS=(demo ref lora mpi sft losses resume eval filter)

# ---- the memory plan, for information ------------------------------------------------
show_plans() {
    local run po pn
    for run in "$@"; do
        pn=$(grep -h "memory plan" "$WORK/new/$run.err" 2>/dev/null | head -2)
        po=$(grep -h "memory plan" "$WORK/old/$run.err" 2>/dev/null | head -2)
        echo "    plan $run: ${pn:-(none)}"
        [ "$po" = "$pn" ] || echo "    plan $run (old binary): ${po:-(none)}"
    done
}

# ---- main ----------------------------------------------------------------------------
t0=$SECONDS
setup
echo "old: $OLD"
echo "new: $NEW"
echo "workdir: $WORK"
status=0
for s in "${SCENARIOS[@]}"; do
    "scenario_$s" "$OLD" old
    "scenario_$s" "$NEW" new
    if why=$(python3 "$WORK/compare.py" "$WORK/old" "$WORK/new" "${RUNS[@]}"); then
        echo "same $s"
    else
        echo "DIFF $s: ${why:-the comparison failed}"
        status=1
    fi
    show_plans "${RUNS[@]}"
done
# for information: a resumed run should equal the uninterrupted one
for bf in false true; do
    for pair in ref.bf16-$bf:resume.bf16-$bf resume.bf16-$bf.midround_full:resume.bf16-$bf.midround; do
        cmp -s "$WORK/new/${pair%%:*}/model.safetensors" "$WORK/new/${pair#*:}/model.safetensors" \
            && r="equals" || r="DIFFERS FROM"
        echo "    (info) new binary: ${pair#*:}'s final model $r the uninterrupted ${pair%%:*}'s"
    done
done
echo "$([ $status -eq 0 ] && echo "all scenarios the same" || echo "some scenarios differ") ($((SECONDS - t0)) s)"
exit $status

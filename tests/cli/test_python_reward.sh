#!/usr/bin/env bash
# Python reward functions as TRL users write them (docs/rewards.md): a file's
# function (FILE.py:FUNCTION) with a print() inside trains unchanged, its rewards in
# completions.jsonl equal the function's own values for each logged completion
# (recomputed here by importing the file), with TRL's keyword arguments (dataset
# columns, trainer_state, conversational completions); None/NaN is no value; TRL's
# dotted module.function from the working directory and from PYTHONPATH; the log name
# is the callable's __name__ (a partial's function's), NAME= overrides it; grpo eval;
# and every failure as one line naming the function, exit 1, start-up failures before
# any generation.
set -u
. "$ROOT/tests/cli/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' "$ROOT/tests/fixtures/qwen3/config.json" > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer "$ROOT/assets/byte-tokenizer" --seed 1 --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '%s\n' '{"prompt": "ab", "answer": "1"}' '{"prompt": "cd", "answer": 2}' '{"prompt": "ef", "answer": null}' > "$TMP/d.jsonl"
printf '%s\n' '{"prompt": [{"role": "user", "content": "hi"}], "answer": "h"}' \
    '{"prompt": [{"role": "user", "content": "yo"}], "answer": "y"}' > "$TMP/chat.jsonl"
mkdir -p "$TMP/work" "$TMP/lib"
cat > "$TMP/work/my_rewards.py" <<'PY'
import functools
import os


def my_reward(completions, completion_ids, answer, trainer_state, **kwargs):
    print(f"scoring {len(completions)} at step {trainer_state.global_step}")
    os.write(1, b"a raw write to fd 1\n")
    assert {"prompts", "log_extra", "log_metric"} <= set(kwargs), sorted(kwargs)
    kwargs["log_metric"]("my_metric", 1.0)
    out = []
    for prompt, c, ids, a in zip(kwargs["prompts"], completions, completion_ids, answer):
        if isinstance(prompt, list):  # conversational: TRL passes the completion as a message list
            assert isinstance(c, list) and len(c) == 1 and c[0]["role"] == "assistant", c
            c = c[0]["content"]
        out.append(len(c) + 0.25 * len(ids) + (10.0 if a is not None and str(a) in c else 0.0)
                   + 0.125 * trainer_state.global_step)
    return out


def sometimes(completions, completion_ids, **kwargs):
    """None (and NaN) mean no value, as in TRL."""
    return [None if ids[0] % 2 else float("nan") if ids[0] % 4 == 0 else float(ids[0]) for ids in completion_ids]


def base_reward(completions, scale=1.0, **kwargs):
    return [scale * len(c) for c in completions]


scaled = functools.partial(base_reward, scale=2.0)


async def async_reward(completions, **kwargs):
    return [1.0] * len(completions)
PY
cp "$TMP/work/my_rewards.py" "$TMP/lib/libreward.py"
T=(--model "$TMP/m" --num_generations 4 --per_device_train_batch_size 4 --max_completion_length 6 --seed 3
   --temperature 1.5 --logging_steps 1)

# the file's functions train unchanged; rewards are the function's values
"$GRPO" train "${T[@]}" --dataset "$TMP/d.jsonl" --max_steps 3 --log_completions true --output_dir "$TMP/out" \
    --reward_funcs "$TMP/work/my_rewards.py:my_reward" "$TMP/work/my_rewards.py:sometimes" \
    "$TMP/work/my_rewards.py:scaled" >"$TMP/out.stdout" 2>"$TMP/out.err" || fail "train: $(tail -5 "$TMP/out.err")"
for s in 0 1 2; do
    grep -qx "\[reward my_reward\] scoring 4 at step $s" "$TMP/out.err" || fail "print() not in the log for step $s: $(cat "$TMP/out.err")"
done
[ "$(grep -c '^\[reward my_reward\] a raw write to fd 1$' "$TMP/out.err")" -eq 3 ] || fail "fd 1 writes not relayed"
grep -q "^\[reward my_reward\] log_metric('my_metric'): not recorded" "$TMP/out.err" || fail "log_metric not noted"
grep -q "scoring\|raw write" "$TMP/out.stdout" && fail "the function's output reached stdout"
python3 - "$TMP/out" "$TMP/d.jsonl" "$TMP/work/my_rewards.py" <<'PY' >/dev/null || fail "completions.jsonl rewards differ from the function's"
import importlib.util, json, math, sys
out, data, path = sys.argv[1:4]
spec = importlib.util.spec_from_file_location("r", path)
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
answers = {}
for line in open(data):
    ex = json.loads(line)
    answers[ex["prompt"]] = ex.get("answer")
rows = [json.loads(l) for l in open(out + "/completions.jsonl")]
assert len(rows) == 12, len(rows)
class State:
    def __init__(self, step): self.global_step = step
seen_none, kinds = 0, set()
for r in rows:
    kinds.add(r["completion_ids"][0] % 4)
    assert set(r["rewards"]) == {"my_reward", "sometimes", "base_reward"}, r["rewards"]
    kw = dict(prompts=[r["prompt"]], completions=[r["completion"]], completion_ids=[r["completion_ids"]],
              answer=[answers[r["prompt"]]], trainer_state=State(r["step"] - 1),
              log_extra=lambda *a: None, log_metric=lambda *a: None)
    want = {"my_reward": mod.my_reward(**kw)[0], "sometimes": mod.sometimes(**kw)[0], "base_reward": mod.scaled(**kw)[0]}
    total = 0.0
    for k, v in want.items():
        got = r["rewards"][k]
        if v is None or math.isnan(v):
            assert got is None, (k, got, r)
            seen_none += 1
        else:
            assert got == v, (k, got, v, r)
            total += v
    assert abs(r["reward"] - total) < 1e-9, (r, total)
metrics = [json.loads(l) for l in open(out + "/metrics.jsonl")]
assert all("rewards/my_reward/mean" in m and "rewards/base_reward/mean" in m for m in metrics if "loss" in m), metrics
assert {0, 2} <= kinds and (1 in kinds or 3 in kinds), ("None, NaN and a value not all seen", kinds)
PY

# conversational prompts: completions as one assistant message
"$GRPO" train "${T[@]}" --dataset "$TMP/chat.jsonl" --max_steps 2 --log_completions true --output_dir "$TMP/chat" \
    --reward_funcs "$TMP/work/my_rewards.py:my_reward" 2>"$TMP/chat.err" || fail "conversational: $(tail -5 "$TMP/chat.err")"
python3 - "$TMP/chat" "$TMP/work/my_rewards.py" <<'PY' >/dev/null || fail "conversational rewards differ"
import importlib.util, json, sys
spec = importlib.util.spec_from_file_location("r", sys.argv[2])
mod = importlib.util.module_from_spec(spec)
spec.loader.exec_module(mod)
class State:
    def __init__(self, step): self.global_step = step
rows = [json.loads(l) for l in open(sys.argv[1] + "/completions.jsonl")]
assert len(rows) == 8
for r in rows:
    prompt = r["prompt"]
    prompt = prompt if isinstance(prompt, list) else [{"role": "user", "content": "hi" if "hi" in prompt else "yo"}]
    a = "h" if prompt[0]["content"] == "hi" else "y"
    v = mod.my_reward(prompts=[prompt], completions=[[{"role": "assistant", "content": r["completion"]}]],
                      completion_ids=[r["completion_ids"]], answer=[a], trainer_state=State(r["step"] - 1),
                      log_extra=None, log_metric=lambda *x: None)[0]
    assert r["rewards"]["my_reward"] == v, (r, v)
PY

# TRL's dotted name in a YAML config, from the working directory (an async def awaited);
# from PYTHONPATH; NAME= renames
printf 'reward_funcs: [my_rewards.my_reward, my_rewards.async_reward]\n' > "$TMP/work/run.yaml"
(cd "$TMP/work" && "$GRPO" train --config run.yaml "${T[@]}" --dataset "$TMP/d.jsonl" --max_steps 1 --output_dir "$TMP/dot" \
    --quiet 2>"$TMP/dot.err") || fail "dotted from the working directory: $(tail -3 "$TMP/dot.err")"
grep -q '"rewards/my_reward/mean"' "$TMP/dot/metrics.jsonl" || fail "dotted: no rewards/my_reward/mean"
grep -q '"rewards/async_reward/mean": 1,' "$TMP/dot/metrics.jsonl" || fail "async def: $(cat "$TMP/dot/metrics.jsonl")"
PYTHONPATH="$TMP/lib" "$GRPO" train "${T[@]}" --dataset "$TMP/d.jsonl" --max_steps 1 --output_dir "$TMP/pp" \
    --reward_funcs judge=libreward.my_reward --quiet 2>"$TMP/pp.err" || fail "dotted from PYTHONPATH: $(tail -3 "$TMP/pp.err")"
grep -q '"rewards/judge/mean"' "$TMP/pp/metrics.jsonl" || fail "NAME= on a dotted name"
grep -qx '\[reward judge\] scoring 4 at step 0' "$TMP/pp.err" || fail "the log prefix is NAME: $(cat "$TMP/pp.err")"

# grpo eval with a Python reward: the same function, the same numbers
"$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --max_completion_length 6 --num_generations 2 --json \
    --reward_funcs "$TMP/work/my_rewards.py:scaled" length:0 --reward_weights 1 2 >"$TMP/ev.json" 2>"$TMP/ev.err" \
    || fail "eval: $(tail -3 "$TMP/ev.err")"
python3 - "$TMP/ev.json" <<'PY' || fail "eval: scaled (2 x length) and -length disagree"
import json, sys
r = json.load(open(sys.argv[1]))
s, l = r["rewards"]["base_reward"], r["rewards"]["length"]
assert s["count"] == l["count"] == 6, r
assert abs(s["mean"] - 2 * -l["mean"]) < 1e-9 and abs(r["reward"]) < 1e-9, r
PY

# trainer_state is transformers' TrainerState at the step (max_steps, epoch, ...), in
# training, in its evaluations (after the step) and in grpo eval (a fresh one); every
# dataset column reaches every completion: `source`, which one row of three has, is a
# required parameter, and batches of one prompt without it still get it (None)
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef", "source": "web"}' > "$TMP/src.jsonl"
cat > "$TMP/work/state_probe.py" <<'PY'
import json
import os


def probe(completions, trainer_state, source, **kwargs):
    s = trainer_state
    with open(os.path.join(os.path.dirname(__file__), "states.jsonl"), "a") as f:
        f.write(json.dumps({k: getattr(s, k) for k in (
            "global_step", "max_steps", "epoch", "num_train_epochs", "logging_steps", "eval_steps", "save_steps",
            "train_batch_size", "is_world_process_zero", "is_local_process_zero")} | {"source": source}) + "\n")
    return [0.0] * len(completions)
PY
"$GRPO" train "${T[@]}" --dataset "$TMP/src.jsonl" --num_train_epochs 2 --save_steps 0.5 --eval_strategy steps \
    --eval_steps 3 --eval_dataset "$TMP/src.jsonl" --num_generations_eval 1 --output_dir "$TMP/state" --quiet \
    --reward_funcs "$TMP/work/state_probe.py:probe" 2>"$TMP/state.err" || fail "trainer_state: $(tail -3 "$TMP/state.err")"
"$GRPO" eval --model "$TMP/m" --dataset "$TMP/src.jsonl" --max_completion_length 6 --num_generations 2 \
    --reward_funcs "$TMP/work/state_probe.py:probe" >/dev/null 2>"$TMP/state_ev.err" || fail "eval trainer_state: $(tail -3 "$TMP/state_ev.err")"
python3 - "$TMP/work/states.jsonl" <<'PY' || fail "trainer_state or columns differ from the run's"
import collections, json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
train, fresh = rows[:-3], rows[-3:]
# 3 examples, 1 prompt a step, 2 epochs: 6 steps; after step s, s/3 epochs. Training scores at
# global_step 0..5, its evaluations (3 prompts each) after steps 3 and 6
assert collections.Counter(r["global_step"] for r in train) == {0: 1, 1: 1, 2: 1, 3: 4, 4: 1, 5: 1, 6: 3}, train
for r in train:
    assert abs(r["epoch"] - r["global_step"] / 3) < 1e-9, r
    want = dict(max_steps=6, num_train_epochs=2, logging_steps=1, eval_steps=3, save_steps=3, train_batch_size=4,
                is_world_process_zero=True, is_local_process_zero=True)
    assert {k: r[k] for k in want} == want, r
for r in rows:
    assert len(set(r["source"])) == 1 and r["source"][0] in (None, "web"), r
assert sum(r["source"][0] is None for r in train) == 2 * sum(r["source"][0] == "web" for r in train), train
for r in fresh:  # grpo eval: no training run, transformers' TrainerState() as Trainer.evaluate() alone sees it
    assert r | {"source": 0} == dict(global_step=0, max_steps=0, epoch=None, num_train_epochs=0, logging_steps=500,
                                     eval_steps=500, save_steps=500, train_batch_size=None,
                                     is_world_process_zero=True, is_local_process_zero=True, source=0), r
assert [r["source"][0] for r in fresh] == [None, None, "web"], fresh
PY

# failures: one line naming the function (and file), exit 1
cat > "$TMP/work/bad.py" <<'PY'
import math
NOT_A_FUNCTION = 3
def boom(completions, **kw):
    print("about to fail")
    return [1 / 0 for c in completions]
def a_dict(completions, **kw):
    return {"rewards": [1.0] * len(completions)}
def short(completions, **kw):
    return [1.0]
def strings(completions, **kw):
    return ["1.0"] * len(completions)
def infinite(completions, **kw):
    return [math.inf] * len(completions)
def log_history(completions, trainer_state, **kw):
    return [len(trainer_state.log_history)] * len(completions)
def slow(completions, **kw):
    import time
    time.sleep(60)
PY
printf 'import time\ntime.sleep(60)\ndef f(completions, **kw):\n    return [0.0] * len(completions)\n' > "$TMP/work/slow_import.py"
printf 'import not_a_module_anywhere\ndef f(completions, **kw):\n    return [0.0] * len(completions)\n' > "$TMP/work/imports.py"
printf 'def f(completions:\n' > "$TMP/work/syntax.py"
B=(train "${T[@]}" --dataset "$TMP/d.jsonl" --max_steps 1 --quiet --overwrite_output_dir true --output_dir "$TMP/bad")
cd "$TMP/work"
expect_error 1 "python reward 'bad.py:a_dict': returned dict; expected a list with one float or None per completion" "$GRPO" "${B[@]}" --reward_funcs bad.py:a_dict
expect_error 1 "python reward 'bad.py:short': returned 1 rewards for 4 completions" "$GRPO" "${B[@]}" --reward_funcs bad.py:short
expect_error 1 "python reward 'bad.py:strings': rewards\[0\] is a str ('1.0'); expected a float or None" "$GRPO" "${B[@]}" --reward_funcs bad.py:strings
expect_error 1 "python reward 'bad.py:infinite': rewards\[0\] is inf; rewards must be finite" "$GRPO" "${B[@]}" --reward_funcs bad.py:infinite
expect_error 1 "python reward 'bad.py:NOT_A_FUNCTION': 'NOT_A_FUNCTION' in bad.py is not callable (type int)" "$GRPO" "${B[@]}" --reward_funcs bad.py:NOT_A_FUNCTION
expect_error 1 "python reward 'bad.py:nope': bad.py has no attribute 'nope'" "$GRPO" "${B[@]}" --reward_funcs bad.py:nope
expect_error 1 "python reward 'bad.nope': module 'bad' has no attribute 'nope'" "$GRPO" "${B[@]}" --reward_funcs bad.nope
expect_error 1 "python reward 'missing.py:f': missing.py: no such file" "$GRPO" "${B[@]}" --reward_funcs missing.py:f
expect_error 1 "python reward 'missing.f': no module named 'missing' in the working directory" "$GRPO" "${B[@]}" --reward_funcs missing.f
expect_error 1 "python reward 'bad.py': expected FILE.py:FUNCTION" "$GRPO" "${B[@]}" --reward_funcs bad.py
expect_error 1 "python reward 'bad.py:slow': no reply within 0.5 s (reward_timeout); the process was stopped" "$GRPO" "${B[@]}" --reward_funcs bad.py:slow --reward_timeout 0.5
expect_error 1 "python reward 'slow_import.py:f': no reply within 0.5 s (reward_timeout); the process was stopped" "$GRPO" "${B[@]}" --reward_funcs slow_import.py:f --reward_timeout 0.5
pgrep -f "slow_import.py" >/dev/null && fail "a timed-out Python reward outlived the run"
expect_error 1 "python reward 'bad.py:1x': expected FILE.py:FUNCTION" "$GRPO" "${B[@]}" --reward_funcs bad.py:1x
expect_error 1 "python reward 'bad.py:boom': python3 not found on PATH" env PATH=/nonexistent "$GRPO" "${B[@]}" --reward_funcs bad.py:boom
expect_error 1 "^grpo eval: python reward 'bad.py:nope': bad.py has no attribute 'nope'$" "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs bad.py:nope
# an exception: its traceback (prefixed) to the log, then the one line; a print before it too
check_traceback() { # SPEC LAST-LINE TRACEBACK-LINE [FIRST-LINE]
    "$GRPO" "${B[@]}" --reward_funcs "$1" >"$TMP/tb.out" 2>"$TMP/tb.err"
    local rc=$?
    [ "$rc" -eq 1 ] || fail "$1: exit $rc (want 1): $(cat "$TMP/tb.err")"
    tail -1 "$TMP/tb.err" | grep -q -- "$2" || fail "$1: last line: $(cat "$TMP/tb.err")"
    grep -q -- "$3" "$TMP/tb.err" || fail "$1: no traceback: $(cat "$TMP/tb.err")"
    [ -z "${4:-}" ] || [ "$(head -1 "$TMP/tb.err")" = "$4" ] || fail "$1: first line: $(cat "$TMP/tb.err")"
    [ "$(grep -vc '^\[reward ' "$TMP/tb.err")" -eq 1 ] || fail "$1: unprefixed lines: $(cat "$TMP/tb.err")"
    [ -s "$TMP/tb.out" ] && fail "$1: stdout: $(cat "$TMP/tb.out")"
}
check_traceback bad.py:boom "^grpo train: python reward 'bad.py:boom': raised ZeroDivisionError: division by zero (traceback above)$" \
    '^\[reward boom\] ZeroDivisionError: division by zero$' "[reward boom] about to fail"
check_traceback bad.py:log_history "python reward 'bad.py:log_history': raised AttributeError: trainer_state.log_history is not passed by grpo.c (it passes best_global_step, .*, trial_params)" \
    '^\[reward log_history\]   File ".*bad.py", line 1[45], in log_history$'
# start-up failures: reported while the rewards are built, before any generation
rm -rf "$TMP/bad"
check_traceback imports.py:f "python reward 'imports.py:f': loading imports.py raised ModuleNotFoundError: No module named 'not_a_module_anywhere' (traceback above)$" \
    '^\[reward f\] ModuleNotFoundError'
check_traceback syntax.py:f "python reward 'syntax.py:f': loading syntax.py raised SyntaxError: .*(syntax.py, line 1)" '^\[reward f\] SyntaxError'
[ -e "$TMP/bad/metrics.jsonl" ] && fail "an import error reported after training started"
cd "$ROOT"
finish

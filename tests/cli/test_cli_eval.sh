#!/usr/bin/env bash
# `grpo eval` on a tiny random Qwen3-architecture model with the repo's byte-level
# tokenizer: format:^ (always 1.0) gives reward 1 and pass@1 1; the weighted
# reward equals the weighted sum of the per-function means; a length reward agrees
# with the greedy completions `grpo generate` prints for the same seed; greedy is
# repeatable; --max_examples and the text report, which says how the completions
# were made (greedy or sampled, with what); bad input exits 1 naming the
# file:line or the function, usage errors exit 2.
set -u
. "$ROOT/tests/cli/lib.sh"
# The model is tiny: one thread, since OpenMP's barriers spin for ages when the
# machine is busy (a 40x slowdown on a loaded 2-core machine).
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
python3 - "$ROOT/tests/fixtures/qwen3/config.json" "$TMP/config.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(vocab_size=259, eos_token_id=258, bos_token_id=None)   # assets/byte-tokenizer's ids
json.dump(c, open(sys.argv[2], "w"), indent=1)
PY
M="$TMP/m"
"$GRPO" init --config "$TMP/config.json" --tokenizer "$ROOT/assets/byte-tokenizer" --seed 3 --output_dir "$M" \
    2>"$TMP/init.err" || { fail "init: $(cat "$TMP/init.err")"; finish; }
D="$TMP/d.jsonl"
printf '%s\n' '{"prompt": "2+2=", "answer": "4"}' '{"prompt": "3+5=", "answer": "8"}' \
    '{"prompt": "10-7=", "answer": 3}' > "$D"
ev() { "$GRPO" eval --model "$M" --dataset "$D" --max_completion_length 6 "$@"; }

# an always-1 reward: mean 1, pass@1 1, every count right
ev --reward_funcs 'format:^' --num_generations 2 --json > "$TMP/a.json" 2>"$TMP/a.err" || fail "eval format: $(cat "$TMP/a.err")"
python3 - "$TMP/a.json" <<'PY' || fail "format:^ numbers"
import json, sys
r = json.load(open(sys.argv[1]))
assert r["examples"] == 3 and r["num_generations"] == 2 and r["completions"] == 6, r
assert r["reward"] == 1.0 and r["pass@1"] == 1.0 and r["passed"] == 6 and r["pass_threshold"] == 1.0, r
assert r["rewards"] == {"format": {"mean": 1.0, "count": 6, "weight": 1.0}}, r
assert 1 <= r["mean_completion_length"] <= 6 and 0 <= r["frac_stopped"] <= 1, r
PY
grep -q "3/3 examples" "$TMP/a.err" || fail "no progress on stderr: $(cat "$TMP/a.err")"

# weighted: reward = 0.5 * format + 2 * exact_match; pass@1 = passed / completions
ev --reward_funcs 'format:^' exact_match:answer --reward_weights 0.5 2 --num_generations 3 --temperature 1 --seed 9 \
    --pass_threshold 2.5 --json > "$TMP/w.json" 2>/dev/null || fail "eval weighted"
python3 - "$TMP/w.json" <<'PY' || fail "weighted numbers inconsistent"
import json, sys
r = json.load(open(sys.argv[1]))
f, e = r["rewards"]["format"], r["rewards"]["exact_match"]
assert f["weight"] == 0.5 and e["weight"] == 2.0 and f["count"] == e["count"] == r["completions"] == 9, r
assert 0 <= e["mean"] <= 1 and 0 <= r["pass@1"] <= 1, r
assert abs(r["reward"] - (0.5 * f["mean"] + 2 * e["mean"])) < 1e-9, r
assert abs(r["pass@1"] - r["passed"] / 9) < 1e-9 and r["pass_threshold"] == 2.5, r
assert abs(r["pass@1"] - e["mean"]) < 1e-9, "with threshold 2.5 a completion passes iff exact_match is 1"
PY

# greedy: the same completions as grpo generate's; length:4 from them by hand
ev --reward_funcs length:4 --json > "$TMP/l.json" 2>/dev/null || fail "eval length"
"$GRPO" generate --model "$M" --dataset "$D" --num_generations 1 --max_completion_length 6 --temperature 0 --json \
    > "$TMP/g.jsonl" 2>/dev/null || fail "generate"
python3 - "$TMP/l.json" "$TMP/g.jsonl" <<'PY' || fail "eval's length reward disagrees with grpo generate's completions"
import json, sys
r = json.load(open(sys.argv[1]))
texts = [json.loads(l)["text"] for l in open(sys.argv[2])]
want = sum(-abs(4 - len(t)) for t in texts) / len(texts)
assert len(texts) == 3 and abs(r["reward"] - want) < 1e-9, (r["reward"], want, texts)
lens = [len(json.loads(l)["ids"]) for l in open(sys.argv[2])]
assert abs(r["mean_completion_length"] - sum(lens) / 3) < 1e-9, (r, lens)
PY
ev --reward_funcs length:4 --json > "$TMP/l2.json" 2>/dev/null
cmp -s "$TMP/l.json" "$TMP/l2.json" || fail "greedy eval is not repeatable"

ev --reward_funcs exact_match:answer --max_examples 2 > "$TMP/t.out" 2>/dev/null || fail "eval text"
grep -q "^examples *2 x 1 generation = 2 completions, greedy$" "$TMP/t.out" || fail "text report: $(cat "$TMP/t.out")"
# how the numbers were made, where they are printed (training's eval samples; grpo eval is greedy unless asked)
ev --reward_funcs exact_match:answer --max_examples 2 --temperature 0.5 --top_k 3 --num_generations 2 \
    > "$TMP/s.out" 2>"$TMP/s.err" || fail "eval sampled"
grep -q "^examples *2 x 2 generations = 4 completions, sampled at temperature 0.5, top_k 3$" "$TMP/s.out" \
    || fail "sampled text report: $(cat "$TMP/s.out")"
grep -q "^grpo eval: 2 prompts x 2 completions sampled at temperature 0.5, top_k 3, 1 reward function(s)$" "$TMP/s.err" \
    || fail "sampled start line: $(cat "$TMP/s.err")"
ev --reward_funcs exact_match:answer --max_examples 2 --temperature 0.5 --json > "$TMP/s.json" 2>/dev/null
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["temperature"] == 0.5, r' "$TMP/s.json" \
    || fail "--json temperature: $(cat "$TMP/s.json")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["temperature"] == 0, r' "$TMP/l.json" \
    || fail "--json temperature of a greedy eval: $(cat "$TMP/l.json")"
grep -q "^pass@1 *0.0000\|^pass@1 *0.5000\|^pass@1 *1.0000" "$TMP/t.out" || fail "no pass@1 line: $(cat "$TMP/t.out")"
grep -q "^  exact_match" "$TMP/t.out" || fail "no per-function line"

# bad input: exit 1, one line
printf '%s\n' '{"prompt": "1+1=", "answer": "2"}' '{"prompt": "2+3="}' > "$TMP/nocol.jsonl"
# (checked before anything is generated, issue 38: one line, nothing on stdout)
expect_error 1 "^grpo eval: .*nocol.jsonl:2: no 'answer' column, which reward 'exact_match' reads$" \
    "$GRPO" eval --model "$M" --dataset "$TMP/nocol.jsonl" --reward_funcs exact_match:answer --max_completion_length 4
printf '%s\n' '{"prompt": "ok"}' '{"text": "no prompt"}' > "$TMP/bad.jsonl"
expect_error 1 "bad.jsonl:2" "$GRPO" eval --model "$M" --dataset "$TMP/bad.jsonl" --reward_funcs 'format:^'
expect_error 2 "unknown reward function 'nosuch'" "$GRPO" eval --model "$M" --dataset "$D" --reward_funcs nosuch:x
expect_error 1 "config.json" "$GRPO" eval --model "$TMP/none" --dataset "$D" --reward_funcs 'format:^'
expect_error 1 "none.jsonl" "$GRPO" eval --model "$M" --dataset "$TMP/none.jsonl" --reward_funcs 'format:^'

# usage: exit 2
expect_error 2 "reward_funcs is required" "$GRPO" eval --model "$M" --dataset "$D"
expect_error 2 "dataset is required" "$GRPO" eval --model "$M" --reward_funcs 'format:^'
expect_error 2 "reward_weights has 1 values but reward_funcs has 2" \
    "$GRPO" eval --model "$M" --dataset "$D" --reward_funcs 'format:^' reward_len --reward_weights 1
expect_error 2 "'x' is not a number" "$GRPO" eval --model "$M" --dataset "$D" --reward_funcs 'format:^' --reward_weights x
expect_error 2 "temperature must be >= 0" "$GRPO" eval --model "$M" --dataset "$D" --reward_funcs 'format:^' --temperature -1
expect_error 2 "num_generations" "$GRPO" eval --model "$M" --dataset "$D" --reward_funcs 'format:^' --num_generations 0
finish

#!/usr/bin/env bash
# open-r1's reward functions by their open-r1 names (issue 39): a config in the
# shape of open-r1's GRPO recipes (reward_funcs by open-r1 name, reward_weights,
# its reward parameters as keys) trains, and every per-function reward logged
# in completions.jsonl is the one open-r1's formula gives for that completion
# (recomputed here from the text, the token ids and the gold, with Python's re
# for the regex rewards); the logged reward is their weighted sum. Bad values
# and unknown names are usage errors (exit 2) with a did-you-mean.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
# a LaTeX gold, a plain-number gold (LaTeX-only parsing skips it) and none
printf '%s\n' '{"prompt": "ab", "solution": "$6$"}' '{"prompt": "cd", "solution": "6"}' \
    '{"prompt": "ef", "solution": null}' '{"prompt": "gh", "solution": "\\frac{1}{2}"}' > "$TMP/d.jsonl"

cat > "$TMP/r1.yaml" <<EOF
model_name_or_path: $TMP/m
dataset_name: $TMP/d.jsonl
reward_funcs:
- accuracy
- format
- tag_count
- reasoning_steps
- cosine
- repetition_penalty
- length
- soft_overlong_punishment
reward_weights: [1.0, 1.0, 0.5, 0.25, 2.0, 1.0, 0.5, 1.5]
cosine_max_len: 6
cosine_min_value_wrong: -0.25
repetition_n_grams: 1
repetition_max_penalty: -0.75
max_completion_len: 9
soft_punish_cache: 4
num_generations: 4
per_device_train_batch_size: 8
max_completion_length: 8
temperature: 1.0
max_steps: 3
log_completions: true
seed: 5
EOF
"$GRPO" train --config "$TMP/r1.yaml" --output_dir "$TMP/o" --quiet 2>"$TMP/o.err" || fail "open-r1 config: $(cat "$TMP/o.err")"
[ -s "$TMP/o.err" ] && fail "the open-r1 keys are options, not keys without effect: $(cat "$TMP/o.err")"
python3 - "$TMP/o" "$TMP/d.jsonl" <<'PY' || fail "completions.jsonl's rewards are not open-r1's"
import json, math, re, sys
from collections import defaultdict
rows = {json.loads(l)["prompt"]: json.loads(l)["solution"] for l in open(sys.argv[2])}
recs = [json.loads(l) for l in open(sys.argv[1] + "/completions.jsonl")]
names = ["accuracy_reward", "format_reward", "tag_count_reward", "reasoning_steps_reward", "cosine_scaled_reward",
         "repetition_penalty_reward", "len_reward", "soft_overlong_punishment_reward"]
weights = [1.0, 1.0, 0.5, 0.25, 2.0, 1.0, 0.5, 1.5]
assert recs and all(list(r["rewards"]) == names for r in recs), recs[0]["rewards"]
m = [json.loads(l) for l in open(sys.argv[1] + "/metrics.jsonl") if '"reward"' in l]
assert all("rewards/%s/mean" % n in m[0] for n in names), m[0].keys()

def gold_of(r):
    for p, s in rows.items():
        if r["prompt"].endswith(p):
            return s
    raise AssertionError(r["prompt"])

def latex_gold(s):  # math_verify's LaTeX extraction finds an answer: $..$ or a bare \frac{N}{N}
    return s is not None and (re.search(r"\$[^$]+\$", s) or re.search(r"\\frac\{\d+\}\{\d+\}", s))

by_step = defaultdict(list)
for r in recs:
    by_step[r["step"]].append(r)
seen = set()
for step, group in by_step.items():
    lens = [len(r["completion"]) for r in group]
    lo, hi = min(lens), max(lens)
    for r in group:
        c, gold, got = r["completion"], gold_of(r), r["rewards"]
        # random text answers nothing: wrong wherever the gold parses; no value without a gold
        want = {"accuracy_reward": None if gold is None else 0.0}
        want["format_reward"] = 1.0 if re.match(r"^<think>\n.*?\n</think>\n<answer>\n.*?\n</answer>$", c,
                                                re.DOTALL | re.MULTILINE) else 0.0
        want["tag_count_reward"] = sum(0.25 for t in ("<think>\n", "\n</think>\n", "\n<answer>\n", "\n</answer>")
                                       if c.count(t) == 1)
        n = len(re.findall(r"(Step \d+:|^\d+\.|\n-|\n\*|First,|Second,|Next,|Finally,)", c))
        want["reasoning_steps_reward"] = min(1.0, n / 3)
        if latex_gold(gold):  # wrong: from min_value_wrong (-0.25) at 0 to max_value_wrong (-0.5) at 6 characters
            want["cosine_scaled_reward"] = -0.5 + 0.5 * (-0.25 + 0.5) * (1.0 + math.cos(len(c) / 6 * math.pi))
        else:
            want["cosine_scaled_reward"] = 1.0
        words = c.lower().split()
        want["repetition_penalty_reward"] = 0.0 if not words else (1 - len(set(words)) / len(words)) * -0.75
        if hi == lo:
            want["len_reward"] = 0.0
        else:
            lam = 0.5 - (len(c) - lo) / (hi - lo)
            want["len_reward"] = lam if not latex_gold(gold) else min(0, lam)
        k = len(r["completion_ids"])
        want["soft_overlong_punishment_reward"] = 0.0 if k <= 5 else (5 - k) / 4 if k <= 9 else -1.0
        for name in names:
            w, g = want[name], got[name]
            assert (w is None and g is None) or (g is not None and abs(g - w) < 1e-9), (name, c, gold, g, w)
            seen.add((name, w))
        total = sum(wt * got[nm] for wt, nm in zip(weights, names) if got[nm] is not None)
        assert abs(r["reward"] - total) < 1e-9, (r["reward"], total)
# the run exercised the interesting branches, not only zeros
for name, w in [("accuracy_reward", None), ("accuracy_reward", 0.0), ("cosine_scaled_reward", 1.0),
                ("soft_overlong_punishment_reward", -0.75)]:  # 8 tokens: (9 - 4 - 8) / 4
    assert (name, w) in seen, (name, w)
for name in ("cosine_scaled_reward", "len_reward"):
    assert len({w for n, w in seen if n == name}) >= 3, (name, sorted(w for n, w in seen if n == name))
PY

T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --output_dir "$TMP/bad" --max_steps 1 --quiet)
expect_error 2 "unknown reward function 'acurracy'; did you mean 'accuracy'?" "$GRPO" "${T[@]}" --reward_funcs format acurracy
expect_error 2 "a Python reward function is given as FILE.py:FUNCTION" "$GRPO" "${T[@]}" --reward_funcs my_rewards.my_reward:x
expect_error 2 "unknown reward function 'tagcount'; did you mean 'tag_count'?" \
    "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs tagcount
expect_error 2 "repetition_max_penalty" "$GRPO" "${T[@]}" --reward_funcs repetition_penalty --repetition_max_penalty 0.5
expect_error 2 "cosine_max_len" "$GRPO" "${T[@]}" --reward_funcs cosine --cosine_max_len 0
expect_error 1 "tag_count takes no argument" "$GRPO" "${T[@]}" --reward_funcs tag_count:x
[ -e "$TMP/bad" ] && fail "a refused run wrote its output directory"
finish

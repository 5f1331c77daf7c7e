#!/usr/bin/env bash
# A model trained on an open-r1 recipe is evaluated on the same prompts: `grpo eval
# --config RECIPE` (tests/fixtures/open-r1, verbatim) builds each prompt as `grpo train`
# does — [the recipe's system_prompt, the user message from its dataset_prompt_column],
# rendered with its chat_template — and takes the recipe's reward functions; the
# recipe's training settings (learning_rate, output_dir, use_vllm, ...) are left aside
# without a word, while an unknown key in the file or a training option on the command
# line is still refused. `grpo generate` has the three options too (its printed prompts
# show them), and every command describes them with the same rows.
set -u
. "$ROOT/tests/cli/lib.sh"
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '%s\n' '{"problem": "What is 1+1?", "solution": "$2$", "prompt": "Question one"}' \
    '{"problem": "What is 2+2?", "solution": "$4$", "prompt": "Question two"}' > "$TMP/d.jsonl"
SYSTEM="You are a helpful AI Assistant that provides well-reasoned and detailed responses."
F=tests/fixtures/open-r1
RECIPE="$F/DeepSeek-R1-Distill-Qwen-1.5B_grpo_config_demo.yaml"
# a reward that is 1 where the prompt is [the recipe's system message, the problem column]
cat > "$TMP/check_prompt.py" <<EOF
import json, sys
system = "$SYSTEM"
for line in sys.stdin:
    q = json.loads(line)
    ok = [isinstance(p, list) and len(p) == 2 and p[0]["role"] == "system" and p[0]["content"].startswith(system)
          and p[1] == {"role": "user", "content": pb} for p, pb in zip(q["prompts"], q["problem"])]
    print(json.dumps({"rewards": [float(x) for x in ok]}), flush=True)
EOF
ev() { "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 1 --max_completion_length 4 "$@"; }

# the recipe's prompts: every completion scores 1
ev --config "$RECIPE" --reward_funcs "cmd:python3 $TMP/check_prompt.py" --reward_weights 1 --json \
    >"$TMP/a.json" 2>"$TMP/a.err" || fail "eval --config recipe: $(cat "$TMP/a.err")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["completions"] == 2 and r["reward"] == 1.0, r' \
    "$TMP/a.json" || fail "eval's prompts are not the recipe's system prompt and problem column: $(cat "$TMP/a.json")"
grep -qiE "unknown|without effect|warning" "$TMP/a.err" && fail "the recipe's training keys reported: $(cat "$TMP/a.err")"
# the same from the command line, without a recipe
ev --system_prompt "$SYSTEM" --dataset_prompt_column problem --reward_funcs "cmd:python3 $TMP/check_prompt.py" --json \
    >"$TMP/b.json" 2>"$TMP/b.err" || fail "eval --system_prompt: $(cat "$TMP/b.err")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["reward"] == 1.0, r' "$TMP/b.json" \
    || fail "eval --system_prompt --dataset_prompt_column: $(cat "$TMP/b.json")"
# and without them the prompt column as it is: no completion scores
ev --reward_funcs "cmd:python3 $TMP/check_prompt.py" --json >"$TMP/c.json" 2>/dev/null || fail "eval without the options"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert r["reward"] == 0.0, r' "$TMP/c.json" \
    || fail "the check reward accepts the plain prompt column: $(cat "$TMP/c.json")"
# the recipe's reward functions, by open-r1's names
ev --config "$RECIPE" --json >"$TMP/r.json" 2>"$TMP/r.err" || fail "eval with the recipe's rewards: $(cat "$TMP/r.err")"
python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); assert sorted(r["rewards"]) == ["accuracy_reward", "format_reward", "tag_count_reward"], r' \
    "$TMP/r.json" || fail "not the recipe's reward functions: $(cat "$TMP/r.json")"

# the recipe's chat_template renders eval's prompts: one that raises says so
sed 's/^chat_template: .*/chat_template: "{{ raise_exception(\x27the recipe template renders\x27) }}"/' "$RECIPE" > "$TMP/raise.yaml"
grep -q "raise_exception" "$TMP/raise.yaml" || fail "the recipe has no chat_template line to replace"
expect_error 1 "the recipe template renders" ev --config "$TMP/raise.yaml" --reward_funcs 'format:^' --reward_weights 1

# a key of no command is still unknown, and a training option on the command line too
{ cat "$RECIPE"; echo "not_an_option: 1"; } > "$TMP/unknown.yaml"
expect_error 2 "unknown option 'not_an_option'" ev --config "$TMP/unknown.yaml" --reward_funcs 'format:^'
expect_error 2 "unknown option '--learning_rate'" ev --learning_rate 1e-6 --reward_funcs 'format:^'

# grpo generate: the rendered prompts show the system prompt, the column and the template
TEMPLATE='{% for m in messages %}[{{ m.role }}]{{ m.content }}{% endfor %}{% if add_generation_prompt %}[assistant]{% endif %}'
"$GRPO" generate --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 1 --max_completion_length 2 \
    --system_prompt "$SYSTEM" --dataset_prompt_column problem --chat_template "$TEMPLATE" >"$TMP/g.out" 2>"$TMP/g.err" \
    || fail "generate with the prompt options: $(cat "$TMP/g.err")"
python3 - "$TMP/g.out" "$SYSTEM" <<'PY' || fail "generate's prompts"
import sys
out, system = open(sys.argv[1]).read(), sys.argv[2]
for q in ("What is 1+1?", "What is 2+2?"):
    assert "[system]" + system + "[user]" + q + "[assistant]" in out, out
assert "Question one" not in out and "<|im_start|>" not in out, out
PY
expect_error 2 "--system_prompt makes conversational prompts" "$GRPO" generate --model "$TMP/m" --prompt hi \
    --system_prompt "$SYSTEM"

# one declaration: each option's --help line is the same in train, eval and generate
for o in system_prompt dataset_prompt_column chat_template; do
    t=$(COLUMNS=1000 "$GRPO" train --help | grep -- "--$o " | tr -s ' ')
    for c in eval generate; do
        [ -n "$t" ] && [ "$(COLUMNS=1000 "$GRPO" $c --help | grep -- "--$o " | tr -s ' ')" = "$t" ] \
            || fail "--$o: grpo $c --help differs from grpo train's"
    done
done
finish

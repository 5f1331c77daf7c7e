#!/usr/bin/env bash
# examples/calculator's pieces agree with each other and with the tool loop:
#  - make_data.py is deterministic, its sums are right, held-out sums are in no
#    other set, and every transcript's tool reply is what calculator.py answers;
#  - calculator.py speaks the tool protocol, evaluates only digits and + - *, and
#    answers an error (never runs anything) for the rest;
#  - reward.py credits the final answer only, never the tool's reply;
#  - the chat template renders an SFT transcript as the prompt, then a call the
#    tool-call parser's format (Qwen2.5's <tool_call>), then exactly the ids TRL's
#    _get_tool_suffix_ids gives for the tool reply (what GRPO appends), then the
#    answer: SFT and GRPO see the same text;
#  - run.sh end to end on a fresh (untrained) demo-sized model with tiny budgets:
#    both SFTs, eval with and without tools, one GRPO step with the tool process.
set -u
. "$ROOT/tests/cli/lib.sh"
cd "$ROOT"
EX=examples/calculator
python3 "$EX/make_data.py" "$TMP/d1" && python3 "$EX/make_data.py" "$TMP/d2" || fail "make_data.py"
for f in calc_train calc_test sft_tools sft_direct; do
    cmp -s "$TMP/d1/$f.jsonl" "$TMP/d2/$f.jsonl" || fail "make_data.py is not deterministic: $f.jsonl"
done
python3 - "$TMP/d1" "$EX/calculator.py" <<'PY' || fail "the data sets disagree"
import json, re, subprocess, sys
d, tool = sys.argv[1], sys.argv[2]
rows = {n: [json.loads(l) for l in open("%s/%s.jsonl" % (d, n))] for n in ("calc_train", "calc_test", "sft_tools", "sft_direct")}
assert [len(rows[n]) for n in rows] == [1000, 100, 400, 400], [len(rows[n]) for n in rows]
expr = lambda r: re.fullmatch(r"What is (\d{6} \+ \d{6})\?", r["prompt"][0]["content"]).group(1)
for n in ("calc_train", "calc_test"):
    for r in rows[n]:
        a, b = map(int, expr(r).split(" + "))
        assert r["answer"] == str(a + b) and len(r["answer"]) == 6, r
held_out = {expr(r) for r in rows["calc_test"]}
assert not held_out & {expr(r) for n in ("calc_train", "sft_tools", "sft_direct") for r in rows[n]}, "test sums leak"
calls = [r["completion"][0]["tool_calls"][0]["function"] for r in rows["sft_tools"]]
assert all(c["name"] == "calculator" and c["arguments"]["expression"] == expr(r) for c, r in zip(calls, rows["sft_tools"]))
reqs = "".join(json.dumps({"name": c["name"], "arguments": c["arguments"]}) + "\n" for c in calls)
replies = [json.loads(l) for l in subprocess.run(["python3", tool], input=reqs, capture_output=True, text=True, check=True).stdout.splitlines()]
for r, rep in zip(rows["sft_tools"], replies):
    a, b = map(int, expr(r).split(" + "))
    assert rep == {"content": str(a + b)} == {"content": r["completion"][1]["content"]} and r["completion"][2]["content"] == rep["content"], (r, rep)
assert [r["completion"][0]["content"] for r in rows["sft_direct"]] == [r["completion"][2]["content"] for r in rows["sft_tools"]]
PY

# the tool process: results, errors for anything but digits and + - *, nothing evaluated
got=$(printf '%s\n' '{"name": "calculator", "arguments": {"expression": "123456 + 654321"}}' \
    '{"name": "calculator", "arguments": {"expression": "2*3+4-10*2"}}' \
    '{"name": "calculator", "arguments": {"expression": "__import__(\"os\").system(\"touch '"$TMP"'/pwned\")"}}' \
    '{"name": "calculator", "arguments": {"expression": "1 +"}}' \
    '{"name": "calculator", "arguments": {"expression": "2**99999999"}}' \
    '{"name": "calculator", "arguments": {}}' '{"name": "calc", "arguments": {"expression": "1"}}' \
    | python3 "$EX/calculator.py" | tr '\n' '|')
[ "$got" = '{"content": "777777"}|{"content": "-10"}|{"error": "only digits and + - * are allowed"}|{"error": "expected numbers joined by + - *"}|{"error": "expected numbers joined by + - *"}|{"error": "expression must be a string of at most 200 characters"}|{"error": "unknown tool '"'calc'"'"}|' ] \
    || fail "calculator.py replies: $got"
[ -e "$TMP/pwned" ] && fail "calculator.py ran code"

# the reward reads the final answer only: the tool's reply is no answer
python3 - "$EX" <<'PY' || fail "reward.py:final_answer"
import sys
sys.path.insert(0, sys.argv[1])
from reward import final_answer
call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "1 + 2"}}\n</tool_call>'
reply = "\nuser\n<tool_response>\n3\n</tool_response>\nassistant\n"
cases = [(call + reply + "3", 1.0), (call + reply, 0.0), (call + reply + "4", 0.0), (call + reply + "3 or 4", 0.0),
         ("3", 1.0), ("<tool_response>\n3\n</tool_response>", 0.0), ([{"role": "assistant", "content": "3"}], 1.0),
         (call + "<|im_end|>\n<|im_start|>user\n<tool_response>\n3\n</tool_response><|im_end|>\n"
          "<|im_start|>assistant\n3<|im_end|>", 1.0)]
got = final_answer([c for c, _ in cases], ["3"] * len(cases))
assert got == [w for _, w in cases], got
PY

# the template: an SFT transcript = prompt + call + TRL's tool suffix + answer
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --seed 0 --output_dir "$TMP/init" \
    >/dev/null 2>&1 || fail "grpo init"
cp -r "$TMP/init" "$TMP/tpl"
python3 -c 'import json, sys; p = sys.argv[1] + "/tokenizer_config.json"; c = json.load(open(p)); c["chat_template"] = open(sys.argv[2]).read(); json.dump(c, open(p, "w"))' \
    "$TMP/tpl" "$EX/chat_template.jinja"
python3 - "$TMP/d1/sft_tools.jsonl" "$GRPO" "$TMP/tpl" <<'PY' || fail "the chat template, the parser's format and the tool suffix disagree"
import json, re, subprocess, sys
row = json.loads(open(sys.argv[1]).readline())
def render(messages, agp):
    req = json.dumps({"messages": messages, "add_generation_prompt": agp, "tools": row["tools"]})
    out = subprocess.run([sys.argv[2], "tokenize", "--model", sys.argv[3], "--chat"], input=req + "\n",
                         capture_output=True, text=True, check=True).stdout
    return json.loads(out)["text"]
prompt, call, tool, answer = row["prompt"], *row["completion"]
whole = render(prompt + row["completion"], False)
head = render(prompt, True)
assert whole.startswith(head) and "# Tools\ncalculator: " in head, (head, whole)
rest = whole[len(head):]
e = call["tool_calls"][0]["function"]["arguments"]["expression"]
want_call = '<tool_call>\n{"name": "calculator", "arguments": {"expression": "%s"}}\n</tool_call><|im_end|>' % e
assert rest.startswith(want_call), rest
# TRL's _get_tool_suffix_ids: render [user, assistant call] and that + the tool message
# with the generation prompt; the suffix starts after the assistant's end of turn
dummy = [{"role": "user", "content": "dummy"},
         {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "function": {"name": "calculator", "arguments": {}}}]}]
pre, full = render(dummy, False), render(dummy + [tool], True)
cut = pre.rindex("<|im_end|>") + len("<|im_end|>")
assert full.startswith(pre[:cut]), (pre, full)
suffix = full[cut:]
assert rest == want_call + suffix + answer["content"] + "<|im_end|>\n", (rest, suffix)
PY

# run.sh end to end, tiny: a fresh model, 2 SFT steps, 2 held-out sums, one GRPO step
CALC_BASE="$TMP/init" CALC_OUT="$TMP/calc" CALC_SFT_STEPS=2 CALC_EVAL_EXAMPLES=2 GRPO="$GRPO" bash "$EX/run.sh" \
    --max_steps 1 --num_generations 2 --per_device_train_batch_size 2 --gradient_accumulation_steps 1 \
    --max_completion_length 96 --quiet > "$TMP/run.log" 2>&1 || fail "run.sh: $(tail -5 "$TMP/run.log")"
grep -q "^held-out pass@1 (4 samples per sum): without the tool [0-9.]*; with it, before GRPO [0-9.]*, after [0-9.]*$" \
    "$TMP/run.log" || fail "run.sh printed no pass@1 line: $(tail -3 "$TMP/run.log")"
for f in sft/model.safetensors direct/model.safetensors grpo/model.safetensors grpo/metrics.jsonl reward.svg; do
    [ -s "$TMP/calc/$f" ] || fail "run.sh did not write $f"
done
python3 -c 'import json, sys; sys.exit(json.load(open(sys.argv[1]))["chat_template"] != open(sys.argv[2]).read())' \
    "$TMP/calc/grpo/tokenizer_config.json" "$EX/chat_template.jinja" || fail "the trained model lacks the example's template"
grep -q '"tools/call_frequency"' "$TMP/calc/grpo/metrics.jsonl" || fail "GRPO ran without the tool loop"
finish

#!/usr/bin/env bash
# Tool calling in grpo train and grpo eval (issue 37; docs/tool-protocol.md): a tiny
# model that calls a tool after every newline (tests/cli/tool_model.py: the tokenizer
# gets one token holding a whole <tool_call>, the weights made a bigram table on
# it) trains with tools, tool_command and max_tool_calling_iterations. With the call
# certain, every completion is call, result, call, result, call (eval, the failing
# tools); trained, it calls with probability 1/2 after each newline, so rewards and
# calls differ between completions. completions.jsonl marks the tool
# turns (tool_spans) and the rewards see them; tools/call_frequency and
# tools/failure_frequency; completion lengths count the model's tokens. The
# samples do not depend on the decode chunk; micro-batches of 1 give the update of
# one micro-batch of 4; a resume from a checkpoint taken mid-rollout (num_iterations
# 2) equals the uninterrupted run bit for bit and calls no tool. grpo eval runs the
# same loop. Bad input (the tools file, the options together, a template without
# tool calls) and a tool that crashes, hangs or writes garbage mid-run: one clear
# line, the completed steps kept. Under mpirun -np 2 (a tool process each): the
# completions, calls and tools/* metrics of one process.
set -u
. "$ROOT/tests/cli/lib.sh"
python3 - "$ROOT/examples/demo/base_config.json" "$TMP/cfg.json" <<'PY' || { fail "config"; finish; }
import json, sys
c = json.load(open(sys.argv[1]))
c["vocab_size"], c["tie_word_embeddings"] = 260, False
json.dump(c, open(sys.argv[2], "w"))
PY
"$GRPO" init --config "$TMP/cfg.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$TMP/m" 2>/dev/null \
    && python3 "$ROOT/tests/cli/tool_model.py" "$TMP/m" >/dev/null || { fail "the tool-calling model"; finish; }
"$GRPO" init --config "$TMP/cfg.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$TMP/m2" 2>/dev/null \
    && python3 "$ROOT/tests/cli/tool_model.py" "$TMP/m2" 0.5 >/dev/null || { fail "the sometimes-calling model"; finish; }
printf '{"prompt": [{"role": "user", "content": "what is 6*7?"}]}\n{"prompt": [{"role": "user", "content": "and 7*6?"}]}\n' \
    > "$TMP/d.jsonl"
cat > "$TMP/tools.json" <<'J'
[{"type": "function", "function": {"name": "calc", "description": "evaluates arithmetic",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
J
# a calculator that logs each request to $1; from the run's call $3 on (when given) it fails as $2 says
cat > "$TMP/calc.py" <<'PY'
import json, sys, time
log, mode, after = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "", int(sys.argv[3]) if len(sys.argv) > 3 else 0
for line in sys.stdin:
    open(log, "a").write(line)
    n = sum(1 for _ in open(log))  # the calls of all the run's tool processes (tool_workers)
    if mode and n > after:
        if mode == "crash": sys.stderr.write("calc: giving up\n"); sys.stderr.flush(); sys.exit(3)
        if mode == "hang": time.sleep(60)
        if mode == "garbage": print("hello", flush=True); continue
    req = json.loads(line)
    print(json.dumps({"content": str(eval(req["arguments"]["expression"], {"__builtins__": {}}))}), flush=True)
PY
calls() { [ -e "$1" ] && wc -l < "$1" || echo 0; }
TOOLS=(--tools "$TMP/tools.json" --max_tool_calling_iterations 2)
RUN=(--model "$TMP/m2" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --num_generations 4 --max_completion_length 160
     --learning_rate 1e-3 --adam_epsilon 1e-2 --seed 7 --save_steps 1 --logging_steps 1 --log_completions true --quiet)
# (adam_epsilon 1e-2: Adam would turn the fp32 rounding of near-zero gradients into O(lr) steps, as in test_trainer)

# 1. four steps, each generation batch used twice (the rollout is saved in odd checkpoints)
"$GRPO" train "${RUN[@]}" "${TOOLS[@]}" --tool_command "python3 $TMP/calc.py $TMP/a.log" --num_iterations 2 \
    --per_device_train_batch_size 4 --max_steps 4 --output_dir "$TMP/a" 2>"$TMP/a.err" || fail "train with tools: $(cat "$TMP/a.err")"
python3 - "$TMP/a" "$(calls "$TMP/a.log")" <<'PY' || fail "what a run with tools logs"
import json, sys
d, n_calls = sys.argv[1], int(sys.argv[2])
recs = [json.loads(l) for l in open(f"{d}/completions.jsonl")]
assert len(recs) == 8, len(recs)
spans_all, model_len = 0, []
for r in recs:
    ids, spans = r["completion_ids"], r["tool_spans"]
    # each tool turn follows a call and its <|im_end|> and is followed by the model's tokens
    for a, b in spans:
        assert ids[a - 2:a] == [259, 258] and b < len(ids) and 259 not in ids[a:b], (spans, ids)
    assert len(spans) <= 2 and r["completion"].count("<tool_response>\n42\n</tool_response>") == len(spans), r
    if r["completion"].isascii():  # the rewards see the whole trajectory (reward_len: -|20 - len|)
        assert r["rewards"]["reward_len"] == -abs(20 - len(r["completion"])), r
    spans_all += len(spans)
    model_len.append(len(ids) - sum(b - a for a, b in spans))
assert n_calls == spans_all and 0 < spans_all < 16, (n_calls, spans_all)  # one call per tool turn; not every time
assert len({r["reward"] for r in recs}) > 2, "the rewards should differ"
m = [json.loads(l) for l in open(f"{d}/metrics.jsonl")]
steps = [x for x in m if x.get("tools/call_frequency") is not None]
assert len(steps) == 2 and [x["tools/call_frequency"] for x in steps] == [
    sum(len(r["tool_spans"]) for r in recs if r["step"] == s) / 4 for s in (1, 3)], steps
assert all(x["tools/failure_frequency"] == 0 for x in steps), steps
lens = [x["completions/mean_length"] for x in m if x.get("completions/mean_length") is not None]
assert lens == [sum(model_len[:4]) / 4, sum(model_len[4:]) / 4], (lens, model_len)  # the model's tokens
PY

# 2. resume from checkpoint-3 (mid-rollout): the same weights, bit for bit, and no tool call
cp -r "$TMP/a" "$TMP/b"
rm -rf "$TMP/b/checkpoint-4" "$TMP/b"/model.safetensors
grep -q tool_spans "$TMP/b/checkpoint-3/rollout.json" || fail "checkpoint-3 holds the rollout with its tool spans"
"$GRPO" train "${RUN[@]}" "${TOOLS[@]}" --tool_command "python3 $TMP/calc.py $TMP/b.log" --num_iterations 2 \
    --per_device_train_batch_size 4 --max_steps 4 --output_dir "$TMP/b" --overwrite_output_dir true \
    --resume_from_checkpoint "$TMP/b/checkpoint-3" 2>"$TMP/b.err" || fail "resume: $(cat "$TMP/b.err")"
[ "$(calls "$TMP/b.log")" -eq 0 ] || fail "the resume called the tool $(calls "$TMP/b.log") times"
cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" || fail "the resumed run's weights differ"
# the saved rollout needs the tools: resumed without them, one line says so
expect_error 1 "saved by a run with tools" "$GRPO" train "${RUN[@]}" --num_iterations 2 --per_device_train_batch_size 4 \
    --max_steps 4 --output_dir "$TMP/b" --overwrite_output_dir true --resume_from_checkpoint "$TMP/b/checkpoint-3"

# 3. micro-batches of 1 (x4 accumulation) and a decode chunk of 1: the same samples, the same update
"$GRPO" train "${RUN[@]}" "${TOOLS[@]}" --tool_command "python3 $TMP/calc.py $TMP/c.log" --num_iterations 2 \
    --per_device_train_batch_size 1 --gradient_accumulation_steps 4 --generation_chunk_size 1 --max_steps 4 \
    --output_dir "$TMP/c" 2>"$TMP/c.err" || fail "split run: $(cat "$TMP/c.err")"
python3 - "$TMP/a" "$TMP/c" <<'PY' || fail "split and chunk invariance with tools"
import json, struct, sys
a, c = sys.argv[1], sys.argv[2]
strip = lambda d: [{k: v for k, v in json.loads(l).items()} for l in open(f"{d}/completions.jsonl")]
assert strip(a) == strip(c), "completions differ with a decode chunk of 1"
def weights(d):
    raw = open(f"{d}/model.safetensors", "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    h = json.loads(raw[8:8 + n])
    return {k: struct.unpack(f"<{(v['data_offsets'][1] - v['data_offsets'][0]) // 4}f",
                             raw[8 + n + v['data_offsets'][0]:8 + n + v['data_offsets'][1]])
            for k, v in h.items() if k != "__metadata__"}
wa, wc, w0 = weights(a), weights(c), weights(sys.argv[1] + "/checkpoint-1")
big = max(abs(x) for k in wa for x in wa[k])
moved = max(abs(x - y) for k in wa for x, y in zip(wa[k], w0[k]))
worst = max(abs(x - y) for k in wa for x, y in zip(wa[k], wc[k]))
assert moved > 1e-4 * big and worst <= 1e-6 * big, (worst, moved, big)  # test_trainer's bound
la = [(x["loss"], x["grad_norm"]) for x in map(json.loads, open(f"{a}/metrics.jsonl")) if "grad_norm" in x]
lc = [(x["loss"], x["grad_norm"]) for x in map(json.loads, open(f"{c}/metrics.jsonl")) if "grad_norm" in x]
assert len(la) == 4 and all(abs(p - q) <= 1e-5 * abs(q) + 1e-9 for u, v in zip(la, lc) for p, q in zip(u, v)), (la, lc)
PY

# 4. grpo eval: the same loop
"$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --max_completion_length 160 "${TOOLS[@]}" \
    --tool_command "python3 $TMP/calc.py $TMP/e.log" --json >"$TMP/e.out" 2>"$TMP/e.err" || fail "eval with tools: $(cat "$TMP/e.err")"
[ "$(calls "$TMP/e.log")" -eq 4 ] || fail "eval: 2 examples x 2 calls: $(calls "$TMP/e.log")"
grep -q "tools: 4 calls (2.0000 per completion), 0 failed" "$TMP/e.err" || fail "eval's tool line: $(cat "$TMP/e.err")"
python3 -c "import json,sys; r=json.load(open(sys.argv[1])); assert r['mean_completion_length']==6, r" "$TMP/e.out" \
    || fail "eval: lengths of the model's tokens: $(cat "$TMP/e.out")"

# 5. bad input: one line naming what is wrong
echo '[{"name": "calc"}, {"type": "function", "function": {"name": "calc"}}]' > "$TMP/twice.json"
echo '{"name": "calc"}' > "$TMP/obj.json"
BAD=(--model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/bad" --max_steps 1)
expect_error 1 "tools .*twice.json: entry 1 repeats a name 'calc'" "$GRPO" train "${BAD[@]}" --tools "$TMP/twice.json" --tool_command cat
expect_error 1 "tools .*obj.json: expected a JSON list of tool schemas" "$GRPO" train "${BAD[@]}" --tools "$TMP/obj.json" --tool_command cat
expect_error 1 "tools: .*none.json" "$GRPO" train "${BAD[@]}" --tools "$TMP/none.json" --tool_command cat
expect_error 2 "tool_command needs tools" "$GRPO" train "${BAD[@]}" --tool_command cat
expect_error 2 "tools needs tool_command" "$GRPO" train "${BAD[@]}" --tools "$TMP/tools.json"
expect_error 2 "tools needs tool_command" "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --tools "$TMP/tools.json"
"$GRPO" init --config "$ROOT/examples/demo/base_config.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$TMP/plain" 2>/dev/null
expect_error 1 "the chat template writes no tool calls" "$GRPO" train "${BAD[@]}" --model "$TMP/plain" --tools "$TMP/tools.json" --tool_command cat
[ -e "$TMP/bad" ] && fail "a refused run wrote $TMP/bad"

# 6. a tool that fails at step 2 (after the first round's 8 calls): the run stops with the
#    tool's one line, step 1 kept in checkpoint-1
for mode in crash hang garbage; do
    "$GRPO" train "${RUN[@]}" --model "$TMP/m" "${TOOLS[@]}" --tool_command "python3 $TMP/calc.py $TMP/f$mode.log $mode 8" --tool_timeout 2 \
        --per_device_train_batch_size 4 --max_steps 3 --output_dir "$TMP/f$mode" >/dev/null 2>"$TMP/f$mode.err"
    rc=$?
    [ "$rc" -eq 1 ] || fail "$mode: exit $rc (want 1): $(cat "$TMP/f$mode.err")"
    grep -q "^grpo train: tool command 'python3 .*calc.py .*$mode 8': " "$TMP/f$mode.err" \
        || fail "$mode: the tool's line: $(cat "$TMP/f$mode.err")"
    tail -1 "$TMP/f$mode.err" | grep -q "kept in .*/f$mode/checkpoint-1" || fail "$mode: where step 1 is kept: $(cat "$TMP/f$mode.err")"
    # the tool's own stderr comes prefixed "[tool] " (the crash writes one line), a timeout names tool_timeout
    [ "$(grep -vc '^\[tool\] ' "$TMP/f$mode.err")" -eq 2 ] || fail "$mode: two lines: $(cat "$TMP/f$mode.err")"
    [ "$mode" != crash ] || grep -qx '\[tool\] calc: giving up' "$TMP/f$mode.err" || fail "crash: its stderr prefixed: $(cat "$TMP/f$mode.err")"
    [ "$mode" != hang ] || grep -q 'no reply within 2 s (tool_timeout)' "$TMP/f$mode.err" || fail "hang: the option named: $(cat "$TMP/f$mode.err")"
    [ -d "$TMP/f$mode/checkpoint-1" ] && [ ! -e "$TMP/f$mode/checkpoint-2" ] || fail "$mode: after the stop: $(ls "$TMP/f$mode")"
done

# 7. two processes (a tool process each): the completions and the calls of one process, its update
if command -v mpirun >/dev/null; then
    mpi_env
    MP=("${RUN[@]}" "${TOOLS[@]}" --max_steps 2 --bf16 false)
    "$GRPO" train "${MP[@]}" --tool_command "python3 $TMP/calc.py $TMP/p1.log" --per_device_train_batch_size 2 \
        --gradient_accumulation_steps 2 --output_dir "$TMP/p1" 2>"$TMP/p1.err" || fail "1 process: $(cat "$TMP/p1.err")"
    "${MPI[@]}" -np 2 "$GRPO" train "${MP[@]}" --tool_command "python3 $TMP/calc.py $TMP/p2.log" \
        --per_device_train_batch_size 1 --gradient_accumulation_steps 2 --output_dir "$TMP/p2" 2>"$TMP/p2.err" \
        || fail "2 processes: $(cat "$TMP/p2.err")"
    cmp -s "$TMP/p1/completions.jsonl" "$TMP/p2/completions.jsonl" || fail "2 processes: the completions differ"
    [ "$(calls "$TMP/p1.log")" -eq "$(calls "$TMP/p2.log")" ] && [ "$(calls "$TMP/p1.log")" -gt 0 ] \
        || fail "2 processes: $(calls "$TMP/p2.log") calls, 1 process $(calls "$TMP/p1.log")"
    cmp -s <(grep -o '"tools/[a-z_]*":[^,]*' "$TMP/p1/metrics.jsonl") <(grep -o '"tools/[a-z_]*":[^,]*' "$TMP/p2/metrics.jsonl") \
        || fail "2 processes: the tools/* metrics differ"
else
    fail "mpirun not found (tools/install-deps.sh installs openmpi-bin)"
fi
finish

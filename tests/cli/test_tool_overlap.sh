#!/usr/bin/env bash
# Tool waits overlapping decoding (issue 37; tool_workers, docs/tool-protocol.md):
# a tool that sleeps a random 0-40 ms per call, so replies come back in a different
# order each run. Trained with the calls made inside the decoding batch
# (tool_workers 0) and overlapped (4 workers; 2 workers and a decode chunk of 3):
# the same completions.jsonl, tool spans, tools/* metrics and weights, bit for bit,
# and the overlapped runs' calls did run at the same time (the synchronous one's
# never). A tool that crashes or hangs while other calls are in flight: exit 1,
# one line naming the tool, no tool process left behind, no wait past the timeout.
set -u
. "$ROOT/tests/cli/lib.sh"
python3 - "$ROOT/examples/demo/base_config.json" "$TMP/cfg.json" <<'PY' || { fail "config"; finish; }
import json, sys
c = json.load(open(sys.argv[1]))
c["vocab_size"], c["tie_word_embeddings"] = 260, False
json.dump(c, open(sys.argv[2], "w"))
PY
"$GRPO" init --config "$TMP/cfg.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$TMP/m" 2>/dev/null \
    && python3 "$ROOT/tests/cli/tool_model.py" "$TMP/m" 0.5 >/dev/null || { fail "the sometimes-calling model"; finish; }
printf '{"prompt": [{"role": "user", "content": "what is 6*7?"}]}\n{"prompt": [{"role": "user", "content": "and 7*6?"}]}\n' \
    > "$TMP/d.jsonl"
cat > "$TMP/tools.json" <<'J'
[{"type": "function", "function": {"name": "calc", "description": "evaluates arithmetic",
  "parameters": {"type": "object", "properties": {"expression": {"type": "string"}}}}}]
J
# a calculator sleeping 0-40 ms per call, logging "start end" times to $1; from the run's call $3 on
# (counted over all its processes, when given) it fails as $2 says
cat > "$TMP/slow.py" <<'PY'
import json, random, sys, time
log, mode, after = sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "", int(sys.argv[3]) if len(sys.argv) > 3 else 0
for line in sys.stdin:
    t0 = time.time()
    open(log + ".n", "a").write("x\n")
    if mode and sum(1 for _ in open(log + ".n")) > after:
        if mode == "crash": sys.exit(3)
        if mode == "hang": time.sleep(60)
    time.sleep(random.uniform(0, 0.04))
    req = json.loads(line)
    print(json.dumps({"content": str(eval(req["arguments"]["expression"], {"__builtins__": {}}))}), flush=True)
    open(log, "a").write(f"{t0} {time.time()}\n")
PY
# the most calls of one run in flight at once
overlapped() {
    python3 -c 'import sys
ev = sorted(e for l in open(sys.argv[1]) for e in ((float(l.split()[0]), 1), (float(l.split()[1]), -1)))
n = best = 0
for _, d in ev: n += d; best = max(best, n)
print(best)' "$1"
}
TOOLS=(--tools "$TMP/tools.json" --max_tool_calling_iterations 2)
RUN=(--model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --num_generations 8 --max_completion_length 160
     --per_device_train_batch_size 8 --learning_rate 1e-3 --adam_epsilon 1e-2 --seed 7 --max_steps 3 --logging_steps 1
     --log_completions true --quiet "${TOOLS[@]}")

# 1. the same run, synchronous and overlapped
for run in "w0 --tool_workers 0" "w4 --tool_workers 4" "w2 --tool_workers 2 --generation_chunk_size 3"; do
    set -- $run
    name=$1; shift
    "$GRPO" train "${RUN[@]}" --tool_command "python3 $TMP/slow.py $TMP/$name.log" "$@" --output_dir "$TMP/$name" \
        2>"$TMP/$name.err" || fail "$name: $(cat "$TMP/$name.err")"
done
for name in w4 w2; do
    cmp -s "$TMP/w0/completions.jsonl" "$TMP/$name/completions.jsonl" || fail "$name: the completions differ from tool_workers 0"
    cmp -s "$TMP/w0/model.safetensors" "$TMP/$name/model.safetensors" || fail "$name: the weights differ from tool_workers 0"
    cmp -s <(grep -o '"tools/[a-z_]*":[^,]*' "$TMP/w0/metrics.jsonl") <(grep -o '"tools/[a-z_]*":[^,]*' "$TMP/$name/metrics.jsonl") \
        || fail "$name: the tools/* metrics differ from tool_workers 0"
    [ "$(overlapped "$TMP/$name.log")" -ge 2 ] || fail "$name: no two calls ever ran at once"
done
python3 -c 'import json, sys; assert sum(len(json.loads(l)["tool_spans"]) for l in open(sys.argv[1])) >= 8' \
    "$TMP/w0/completions.jsonl" || fail "the runs made fewer than 8 tool turns"
[ "$(overlapped "$TMP/w0.log")" -eq 1 ] || fail "w0: calls ran at once with tool_workers 0"

# 2. grpo eval: the same results and tool line
for w in 0 4; do
    "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --max_completion_length 160 \
        --num_generations 8 "${TOOLS[@]}" --tool_command "python3 $TMP/slow.py $TMP/e$w.log" --tool_workers $w --json \
        >"$TMP/e$w.out" 2>"$TMP/e$w.err" || fail "eval, tool_workers $w: $(cat "$TMP/e$w.err")"
done
python3 - "$TMP/e0.out" "$TMP/e4.out" <<'PY' || fail "eval: tool_workers 4 differs from 0"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
drop = lambda r: {k: v for k, v in r.items() if "second" not in k and "time" not in k and "per_s" not in k}
assert drop(a) == drop(b), (a, b)
PY
cmp -s <(grep "^tools:\|tools:" "$TMP/e0.err") <(grep "^tools:\|tools:" "$TMP/e4.err") || fail "eval: the tools line differs"

# 3. a tool that crashes or hangs mid-rollout, other calls in flight: one clear line, nothing left running
for mode in crash hang; do
    t0=$(date +%s)
    "$GRPO" train "${RUN[@]}" --tool_command "python3 $TMP/slow.py $TMP/f$mode.log $mode 5" --tool_timeout 2 \
        --output_dir "$TMP/f$mode" >/dev/null 2>"$TMP/f$mode.err"
    rc=$? took=$(( $(date +%s) - t0 ))
    [ "$rc" -eq 1 ] || fail "$mode: exit $rc (want 1): $(cat "$TMP/f$mode.err")"
    head -1 "$TMP/f$mode.err" | grep -q "^grpo train: tool command 'python3 .*slow.py .*$mode 5': " \
        || fail "$mode: the tool's line: $(cat "$TMP/f$mode.err")"
    [ "$took" -le 30 ] || fail "$mode: the stop took $took s"
    sleep 1
    pgrep -f "$TMP/slow.py" >/dev/null && fail "$mode: a tool process outlived the run: $(pgrep -af "$TMP/slow.py")"
done
finish

#!/usr/bin/env bash
# Multi-turn rollouts with an environment (issue 37; docs/environment-protocol.md):
# grpo train with environment_command — the environment's messages appended as
# user turns (masked: completions.jsonl's tool_spans, each exactly the rendered
# user turn and generation prompt), its reward read by environment_reward into
# rewards/environment_reward; max_environment_turns 0 from a YAML config asks
# once with "last" and appends nothing; a resume mid generation batch gives the
# uninterrupted run's weights and asks the environment only for the batches it
# had not made; micro-batches of 4, 2 and 1 give the same completions and
# weights, and so do 2 processes; grpo eval and training's evaluation run the
# same loop; an environment with tools, or environment_reward without one, is a
# usage error; an environment that crashes or breaks the protocol stops the run
# with one line.
set -u
. "$ROOT/tests/cli/lib.sh"
# the byte tokenizer's tiny model, its turns ended by <|im_end|> and 7 letters (eos_token_id is a list)
python3 - "$ROOT/examples/demo/base_config.json" "$TMP/cfg.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
         head_dim=8, eos_token_id=[258] + [ord(x) for x in "aeinost"])
json.dump(c, open(sys.argv[2], "w"))
PY
"$GRPO" init --config "$TMP/cfg.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
# a guessing game: done with reward 1 when the model's last turn has two characters whose code % 5 is the
# row's secret, else "more N" with reward N/4; every request logged to $GAME_LOG
cat > "$TMP/game.py" <<'PY'
import json, os, sys
log = open(os.environ["GAME_LOG"], "a")
for line in sys.stdin:
    log.write(line); log.flush()
    req = json.loads(line)
    said = req["messages"][-1]["content"]
    hits = sum(ord(ch) % 5 == int(req["row"]["secret"]) for ch in said)
    out = {"done": True, "reward": 1.0} if hits >= 2 else {"content": "more %d" % hits, "reward": 0.25 * hits}
    print(json.dumps(out), flush=True)
PY
printf '%s\n' '{"prompt": [{"role": "user", "content": "Guess."}], "secret": 1}' \
    '{"prompt": [{"role": "user", "content": "Again?"}], "secret": 3}' > "$TMP/d.jsonl"
ENV=(--environment_command "python3 $TMP/game.py" --reward_funcs environment_reward --max_completion_length 64)
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 4 --logging_steps 1 --log_completions true --quiet
   --learning_rate 1e-3 --adam_epsilon 1e-2 --bf16 false "${ENV[@]}") # fp32: the split bound below is fp32's

# completions.jsonl: spans are the environment's user turns; rewards are its rewards
GAME_LOG="$TMP/a.log" "$GRPO" "${T[@]}" --output_dir "$TMP/a" --per_device_train_batch_size 4 --max_environment_turns 2 \
    --max_steps 2 2>"$TMP/a.err" || fail "train with an environment: $(cat "$TMP/a.err")"
python3 - "$TMP/a/completions.jsonl" "$TMP/a/metrics.jsonl" "$TMP/a.log" <<'PY' || fail "the environment's turns and rewards"
import json, re, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert len(recs) == 8, len(recs)
text = lambda ids: "".join("<|im_start|>" if i == 257 else "<|im_end|>" if i == 258 else chr(i) for i in ids)
turned = 0
for r in recs:
    spans = r["tool_spans"]
    assert len(spans) <= 2, spans  # max_environment_turns 2
    for a, b in spans:
        assert re.fullmatch(r"\n<\|im_start\|>user\nmore [01]<\|im_end\|>\n<\|im_start\|>assistant\n",
                            text(r["completion_ids"][a:b])), text(r["completion_ids"][a:b])
        turned += 1
    v = r["rewards"]["environment_reward"]
    assert v in (None, 0.0, 0.25, 1.0), v
    assert r["reward"] == (v or 0.0), r
assert turned >= 2, turned
reqs = [json.loads(l) for l in open(sys.argv[3])]
assert len(reqs) >= turned and all(q["messages"][0]["role"] == "user" and "secret" in q["row"] for q in reqs)
m = [json.loads(l) for l in open(sys.argv[2]) if "rewards/environment_reward/mean" in l]
assert len(m) == 2, m
PY

# max_environment_turns 0 from YAML: asked once per finished turn, "last", nothing appended
printf 'environment_command: python3 %s/game.py\nmax_environment_turns: 0\n' "$TMP" > "$TMP/env.yaml"
GAME_LOG="$TMP/y.log" "$GRPO" "${T[@]}" --config "$TMP/env.yaml" --output_dir "$TMP/y" --per_device_train_batch_size 4 \
    --max_steps 1 2>"$TMP/y.err" || fail "YAML: $(cat "$TMP/y.err")"
python3 - "$TMP/y/completions.jsonl" "$TMP/y.log" <<'PY' || fail "max_environment_turns 0"
import json, sys
recs = [json.loads(l) for l in open(sys.argv[1])]
assert all(r["tool_spans"] == [] for r in recs), recs
reqs = [json.loads(l) for l in open(sys.argv[2])]
assert reqs and all(q["last"] is True and q["turn"] == 1 for q in reqs), reqs
PY

# resume in the middle of a generation batch (2 steps each): the weights of the uninterrupted run, and the
# environment asked only for the batch made after the resume
R=("${T[@]}" --per_device_train_batch_size 4 --gradient_accumulation_steps 1 --steps_per_generation 2 --save_steps 1)
GAME_LOG="$TMP/full.log" "$GRPO" "${R[@]}" --output_dir "$TMP/full" --max_steps 4 || fail "uninterrupted run"
GAME_LOG="$TMP/first.log" "$GRPO" "${R[@]}" --output_dir "$TMP/first" --max_steps 2 || fail "first batch alone"
[ -f "$TMP/full/checkpoint-1/rollout.json" ] || fail "checkpoint-1 should hold the generation batch in use"
rm -rf "$TMP/res" && mkdir "$TMP/res" && cp -r "$TMP/full/checkpoint-1" "$TMP/res/"
GAME_LOG="$TMP/res.log" "$GRPO" "${R[@]}" --output_dir "$TMP/res" --max_steps 4 \
    --resume_from_checkpoint "$TMP/res/checkpoint-1" --overwrite_output_dir true 2>"$TMP/res.err" \
    || fail "resume: $(cat "$TMP/res.err")"
cmp -s "$TMP/full/model.safetensors" "$TMP/res/model.safetensors" || fail "the resumed run's weights differ"
[ -s "$TMP/first.log" ] || fail "the first batch asked the environment nothing"
[ "$(cat "$TMP/first.log" "$TMP/res.log" | sort)" = "$(sort "$TMP/full.log")" ] \
    || fail "the resume asked the environment again for the saved batch ($(wc -l < "$TMP/res.log") + $(wc -l < "$TMP/first.log") vs $(wc -l < "$TMP/full.log") requests)"

# split invariance: micro-batches of 4, 2 and 1, the same completions and weights (up to summation order);
# and under mpirun, 2 processes (each with its own environment) as 1
for B in 4 2 1; do
    GAME_LOG="$TMP/s$B.log" "$GRPO" "${T[@]}" --output_dir "$TMP/s$B" --per_device_train_batch_size $B \
        --gradient_accumulation_steps $((4 / B)) --max_steps 2 || fail "micro-batch $B"
done
SAME=("$TMP/s4" "$TMP/s2" "$TMP/s1")
if command -v mpirun >/dev/null; then
    (mpi_env; GAME_LOG="$TMP/mpi.log" "${MPI[@]}" -np 2 "$GRPO" "${T[@]}" --output_dir "$TMP/mpi" \
        --per_device_train_batch_size 2 --gradient_accumulation_steps 1 --max_steps 2 2>"$TMP/mpi.err") \
        || fail "2 processes: $(tail -3 "$TMP/mpi.err")"
    SAME+=("$TMP/mpi")
fi
python3 - "$TMP/m" "${SAME[@]}" <<'PY' || fail "split invariance"
import array, json, struct, sys
def weights(d):
    b = open(d + "/model.safetensors", "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    w = array.array("f"); w.frombytes(b[8 + n:]); return w
def comps(d):
    return [(r["completion_ids"], r["tool_spans"], r["rewards"]) for r in map(json.loads, open(d + "/completions.jsonl"))]
w0, c0 = weights(sys.argv[2]), comps(sys.argv[2])
assert any(s for _, s, _ in c0)
moved = max(abs(a - b) for a, b in zip(w0, weights(sys.argv[1])))
assert moved > 1e-4, "training did not move the weights (%g): the comparison would prove nothing" % moved
for d in sys.argv[3:]:
    assert comps(d) == c0, d
    w = weights(d); mx = max(abs(x) for x in w0)
    diff = max(abs(a - b) for a, b in zip(w, w0))
    assert len(w) == len(w0) and diff <= 1e-6 * mx, (d, diff, mx)
PY

# grpo eval runs the same loop
GAME_LOG="$TMP/e.log" "$GRPO" eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 3 \
    --temperature 1.0 "${ENV[@]}" --max_environment_turns 1 >"$TMP/e.out" 2>"$TMP/e.err" || fail "eval: $(cat "$TMP/e.err")"
grep -qE "grpo eval: environment: [1-9][0-9]* replies" "$TMP/e.err" || fail "eval's environment line: $(cat "$TMP/e.err")"
[ -s "$TMP/e.log" ] || fail "eval asked the environment nothing"

# training's evaluation runs the same loop: eval_rewards/environment_reward from the environment
GAME_LOG="$TMP/te.log" "$GRPO" "${T[@]}" --output_dir "$TMP/te" --per_device_train_batch_size 4 --max_steps 1 \
    --eval_strategy steps --eval_steps 1 --eval_dataset "$TMP/d.jsonl" 2>"$TMP/te.err" || fail "train with eval: $(cat "$TMP/te.err")"
python3 - "$TMP/te/metrics.jsonl" <<'PY' || fail "the evaluation's environment reward"
import json, sys
m = [json.loads(l) for l in open(sys.argv[1])]
e = [x for x in m if "eval_rewards/environment_reward/mean" in x]
assert len(e) == 1 and isinstance(e[0]["eval_rewards/environment_reward/mean"], (int, float)), m
PY

# usage errors and a broken environment
printf '[{"type": "function", "function": {"name": "calc"}}]\n' > "$TMP/tools.json"
expect_error 2 "environment_command and tools together" "$GRPO" "${T[@]}" --output_dir "$TMP/x1" \
    --per_device_train_batch_size 4 --tools "$TMP/tools.json" --tool_command cat
expect_error 2 "environment_reward, which needs environment_command" "$GRPO" train --model "$TMP/m" \
    --dataset "$TMP/d.jsonl" --output_dir "$TMP/x2" --reward_funcs environment_reward --num_generations 4 \
    --per_device_train_batch_size 4
expect_error 2 "environment_reward, which needs environment_command" "$GRPO" eval --model "$TMP/m" \
    --dataset "$TMP/d.jsonl" --reward_funcs environment_reward
printf '%s\n' '{"prompt": [{"role": "user", "content": "Guess."}], "secret": 1}' > "$TMP/d1.jsonl"
B1=(train --model "$TMP/m" --dataset "$TMP/d1.jsonl" --num_generations 4 --per_device_train_batch_size 4 --max_steps 1
    --quiet "${ENV[@]}")
expect_error 1 "environment command '.*': exited with status 1 before replying" "$GRPO" "${B1[@]}" \
    --environment_command "python3 -c 'import sys; sys.stdin.readline(); sys.exit(1)'" --output_dir "$TMP/x3"
expect_error 1 "environment command '.*': unknown key 'score'" "$GRPO" "${B1[@]}" --output_dir "$TMP/x4" \
    --environment_command "python3 -c 'import sys; sys.stdin.readline(); print(\"{\\\"done\\\": true, \\\"score\\\": 1}\", flush=True)'"
finish

#!/usr/bin/env bash
# `grpo score` from outside: log-probs of the three reference fixtures (in fp32: --bf16 false) match the
# float64 PyTorch logits (1e-5), batching does not change them, and each bad input
# gives exit status 1 with a one-line error naming the file and the problem.
set -u
. "$ROOT/tests/cli/lib.sh"

for fx in qwen2 llama qwen3; do
    python3 tests/cli/score_fixture.py make "tests/fixtures/$fx" > "$TMP/$fx.jsonl"
    "$GRPO" score --model "tests/fixtures/$fx" --data "$TMP/$fx.jsonl" --bf16 false > "$TMP/$fx.out" 2>"$TMP/err" || fail "$fx: score failed: $(cat "$TMP/err")"
    python3 tests/cli/score_fixture.py check "tests/fixtures/$fx" "$TMP/$fx.out" || fail "$fx: logprobs differ from the reference"
    # one sequence per forward pass gives the same numbers
    "$GRPO" score --model "tests/fixtures/$fx" --data - --batch_tokens 7 --bf16 false < "$TMP/$fx.jsonl" > "$TMP/$fx.one" || fail "$fx: batch_tokens 7"
    python3 tests/cli/score_fixture.py check "tests/fixtures/$fx" "$TMP/$fx.one" || fail "$fx: unbatched logprobs differ"
done

M=tests/fixtures/qwen2
# rows behind one prompt (and one apart) scored in one forward, the prompt computed once, give each
# row's log-probs scored alone (to the products' rounding at the other shape)
python3 - "$TMP/group.jsonl" <<'PY'
import json, random, sys
r = random.Random(3)
prompt = [r.randrange(90) for _ in range(23)]
with open(sys.argv[1], "w") as f:
    for i in range(6):
        p = prompt if i != 4 else prompt[:9] + [r.randrange(90) for _ in range(14)]
        f.write(json.dumps({"prompt_ids": p, "completion_ids": [r.randrange(90) for _ in range(1 + 7 * i % 19)]}) + "\n")
PY
"$GRPO" score --model $M --data "$TMP/group.jsonl" --bf16 false > "$TMP/group.out" || fail "group: score failed"
"$GRPO" score --model $M --data "$TMP/group.jsonl" --bf16 false --batch_tokens 42 > "$TMP/group.one" || fail "group: one row a forward"
python3 - "$TMP/group.out" "$TMP/group.one" <<'PY' || fail "group: a shared prompt changes the log-probs"
import json, sys
a, b = ([json.loads(l)["logprobs"] for l in open(p)] for p in sys.argv[1:3])
d = max(abs(x - y) for ra, rb in zip(a, b) for x, y in zip(ra, rb))
assert len(a) == len(b) == 6 and all(len(x) == len(y) > 0 for x, y in zip(a, b)) and d <= 1e-5, d
PY
printf '{"prompt_ids": [1, 2], "completion_ids": []}\n' > "$TMP/empty.jsonl"
"$GRPO" score --model $M --data "$TMP/empty.jsonl" > "$TMP/empty.out" || fail "empty completion"
grep -q '^{"logprobs": \[\]}$' "$TMP/empty.out" || fail "empty completion should give an empty list: $(cat "$TMP/empty.out")"

printf '{"prompt_ids": [1, 2], "completion_ids": [3]}\nnot json\n' > "$TMP/bad1.jsonl"
expect_error 1 "bad1.jsonl:2: not valid JSON" "$GRPO" score --model $M --data "$TMP/bad1.jsonl"
printf '{"prompt_ids": [1, 2]}\n' > "$TMP/bad2.jsonl"
expect_error 1 "bad2.jsonl:1: missing 'completion_ids'" "$GRPO" score --model $M --data "$TMP/bad2.jsonl"
printf '{"prompt_ids": [1, 2], "completion_ids": [3, 96]}\n' > "$TMP/bad3.jsonl"
expect_error 1 "bad3.jsonl:1: completion_ids\[1\] must be a token id in 0..95" "$GRPO" score --model $M --data "$TMP/bad3.jsonl"
printf '{"prompt_ids": [], "completion_ids": [3]}\n' > "$TMP/bad4.jsonl"
expect_error 1 "bad4.jsonl:1: prompt_ids is empty" "$GRPO" score --model $M --data "$TMP/bad4.jsonl"
expect_error 1 "nope.jsonl: cannot open" "$GRPO" score --model $M --data "$TMP/nope.jsonl"
expect_error 1 "config.json: no such file" "$GRPO" score --model "$TMP/no-model" --data "$TMP/empty.jsonl"

# a truncated weights file
mkdir -p "$TMP/trunc" && cp $M/config.json "$TMP/trunc/"
head -c 5000 $M/model.safetensors > "$TMP/trunc/model.safetensors"
expect_error 1 "trunc/model.safetensors" "$GRPO" score --model "$TMP/trunc" --data "$TMP/empty.jsonl"
# a header length past the end of the file
printf '\xff\xff\x00\x00\x00\x00\x00\x00{}' > "$TMP/trunc/model.safetensors"
expect_error 1 "trunc/model.safetensors" "$GRPO" score --model "$TMP/trunc" --data "$TMP/empty.jsonl"

expect_error 2 "unknown option '--bogus'" "$GRPO" score --bogus 1
expect_error 2 "data is required" "$GRPO" score --model $M
finish

#!/usr/bin/env bash
# Numbers that cannot go silently wrong (issue 38), one family a block:
#  options  every number option takes the range its --help prints, NaN never, and
#           each refusal quotes that range (--top_p nan said "must be in [1, 0]",
#           --temperature 1e-310 and 1e400 "expects a number", --beta inf said
#           ">= 0 (got inf)", --epsilon 1e-310 was refused though "> 0");
#  seeds    what torch.manual_seed takes, [-2^63, 2^64 - 1], a negative seed as its
#           two's complement (-1 was accepted, the advertised 2^64 - 1 refused);
#  rewards  reward arguments in range (length:99999999999999999999999 was a reward
#           of -9.2e18; cosine values of inf were taken), and a weighted sum of
#           rewards past a double stops the run naming the rewards (it gave NaN
#           advantages with exit 0); the logged reward of sums past a double stays
#           finite where its mean is;
#  saving   float16 weights past 65504 are refused before anything is written, the
#           trained step kept in a float32 checkpoint (inf was saved, exit 0).
# Counts: each block prints "FAMILY: K checks failed" so a run against an older
# binary (GRPO=/work/old/grpo) gives the per-family counts.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
for i in 1 2 3 4; do printf '{"prompt": "a%d"}\n' "$i"; done > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --max_steps 1 --quiet --seed 3)
family() { echo "$1: $((FAILED - BEFORE)) checks failed"; BEFORE=$FAILED; }
BEFORE=0

# ---- options: the printed range, NaN and infinities, subnormals, type limits ----
O=("${T[@]}" --reward_funcs reward_len --output_dir "$TMP/o")
expect_error 2 "top_p must be in (0, 1\] (got nan)$" "$GRPO" "${O[@]}" --top_p nan
expect_error 2 "top_p must be in (0, 1\] (got -0)$" "$GRPO" "${O[@]}" --top_p -0
expect_error 2 "learning_rate must be a finite number >= 0 (got nan)$" "$GRPO" "${O[@]}" --learning_rate nan
expect_error 2 "beta must be a finite number >= 0 (got inf)$" "$GRPO" "${O[@]}" --beta inf
expect_error 2 "temperature must be a finite number >= 0 (got 1e400)$" "$GRPO" "${O[@]}" --temperature 1e400
expect_error 2 "temperature: 1e-310 is closer to 0 than a 32-bit float holds" "$GRPO" "${O[@]}" --temperature 1e-310
expect_error 2 "top_k must be >= 0, at most 2147483647 (the largest a 32-bit integer holds) (got 99999999999)$" \
    "$GRPO" "${O[@]}" --top_k 99999999999
expect_error 2 "max_completion_length must be in \[1, 1048576\] (got 2000000)$" "$GRPO" "${O[@]}" --max_completion_length 2000000
# the same from a YAML file
printf 'top_p: nan\n' > "$TMP/nan.yaml"
expect_error 2 "top_p must be in (0, 1\] (got nan)$" "$GRPO" "${O[@]}" --config "$TMP/nan.yaml"
# a YAML mapping's nan or 1e400 is text (as PyYAML reads them), not a number JSON cannot hold
printf 'chat_template_kwargs: {enable_thinking: false, x: nan, y: 1e400}\n' > "$TMP/kw.yaml"
"$GRPO" "${O[@]}" --output_dir "$TMP/kw" --config "$TMP/kw.yaml" 2>"$TMP/kw.err" || fail "a mapping with nan: $(cat "$TMP/kw.err")"
# --help prints the ranges the refusals quote, caps included
HELP=$(COLUMNS=1000 "$GRPO" train --help)
grep -q -- "--top_p N .*(default 1; in (0, 1\])" <<<"$HELP" || fail "help: top_p's range"
grep -q -- "--max_completion_length N .*(default 256; in \[1, 1048576\])" <<<"$HELP" || fail "help: the cap of max_completion_length"
grep -q -- "--repetition_penalty N .*(default 1; > 0)" <<<"$HELP" || fail "help: repetition_penalty's range"
# a subnormal is > 0: accepted where the help says "> 0"
"$GRPO" "${O[@]}" --epsilon 1e-310 2>"$TMP/e.err" || fail "--epsilon 1e-310 (> 0) refused: $(cat "$TMP/e.err")"
family options

# ---- seeds: torch.manual_seed's range, -1 = 2^64 - 1 ----
G=(generate --model "$TMP/m" --prompt ab --num_generations 2 --max_completion_length 8 --json)
"$GRPO" "${G[@]}" --seed -1 >"$TMP/s1" 2>"$TMP/s1.err" || fail "--seed -1: $(cat "$TMP/s1.err")"
"$GRPO" "${G[@]}" --seed 18446744073709551615 >"$TMP/s2" 2>"$TMP/s2.err" || fail "--seed 2^64 - 1 refused: $(cat "$TMP/s2.err")"
[ -s "$TMP/s1" ] && cmp -s "$TMP/s1" "$TMP/s2" || fail "--seed -1 and --seed 18446744073709551615 differ"
"$GRPO" "${G[@]}" --seed -9223372036854775808 >/dev/null 2>"$TMP/s3.err" || fail "--seed -2^63 refused: $(cat "$TMP/s3.err")"
expect_error 2 "seed must be in \[-2^63, 2^64 - 1\] (got 18446744073709551616)$" "$GRPO" "${G[@]}" --seed 18446744073709551616
expect_error 2 "seed must be in \[-2^63, 2^64 - 1\] (got -9223372036854775809)$" "$GRPO" "${G[@]}" --seed -9223372036854775809
COLUMNS=1000 "$GRPO" train --help | grep -q -- "--seed N .*torch.manual_seed.*(default 42; in \[-2^63, 2^64 - 1\])" \
    || fail "help: the seed's range"
family seeds

# ---- rewards: arguments in range, sums that pass a double ----
R=("${T[@]}")
# (each run its own output_dir: one that is wrongly accepted leaves no earlier run for the next)
expect_error 1 "target length must be a non-negative integer, at most 2^53, got '99999999999999999999999'" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/ra" --reward_funcs length:99999999999999999999999
expect_error 1 "at most 2^53, got '9007199254740993'" "$GRPO" "${R[@]}" --output_dir "$TMP/rb" \
    --reward_funcs length:9007199254740993
expect_error 2 "cosine_max_value_correct must be a finite number (got inf)$" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/rc" --reward_funcs reward_len --cosine_max_value_correct inf
expect_error 2 "cosine_min_value_wrong must be a finite number (got nan)$" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/rd" --reward_funcs reward_len --cosine_min_value_wrong nan
expect_error 2 "soft_punish_cache must be >= 0, at most 2147483647 (the largest a 32-bit integer holds)" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/re" --reward_funcs reward_len --soft_punish_cache 99999999999
# a cmd: reward answering VALUE for even completions and ODD for odd ones
cat > "$TMP/big.py" <<'PY'
import json, sys
even, odd = float(sys.argv[1]), float(sys.argv[2])
for line in sys.stdin:
    n = len(json.loads(line)["completions"])
    print(json.dumps({"rewards": [even if i % 2 == 0 else odd for i in range(n)]}), flush=True)
PY
expect_error 1 "the weighted sum of the rewards of completion 1 is inf, not a finite number: 'a' 1e+308 x weight 1, 'b' 1e+308 x weight 1" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/r" --reward_funcs "a=cmd:python3 $TMP/big.py 1e308 1e308" \
    "b=cmd:python3 $TMP/big.py 1e308 1e308"
[ -e "$TMP/r/model.safetensors" ] && fail "a run whose rewards overflowed saved a model"
expect_error 1 "completion 1 is inf, not a finite number: 'a' 1e+308 x weight 10" \
    "$GRPO" "${R[@]}" --output_dir "$TMP/r2" --reward_funcs "a=cmd:python3 $TMP/big.py 1e308 1" --reward_weights 10
# weights 0.5: every weighted sum is finite, the unweighted sums (2e308 and 1e308) are
# not; their mean (1.5e308) and std are logged as numbers
"$GRPO" "${R[@]}" --output_dir "$TMP/r3" --reward_funcs "a=cmd:python3 $TMP/big.py 1e308 1e308" \
    "b=cmd:python3 $TMP/big.py 1e308 0" --reward_weights 0.5 0.5 2>"$TMP/r3.err" || fail "weights 0.5: $(cat "$TMP/r3.err")"
python3 - "$TMP/r3/metrics.jsonl" <<'PY' || fail "the logged reward of sums past a double"
import json, math, sys
line = json.loads(open(sys.argv[1]).readline())
r, s = line.get("reward"), line.get("reward_std")
sys.exit(0 if isinstance(r, float) and abs(r / 1.5e308 - 1) < 1e-9 and isinstance(s, float) and math.isfinite(s) else 1)
PY
family rewards

# ---- saving: float16 weights past 65504 ----
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m16" \
    --dtype float16 2>/dev/null || fail "init float16"
for i in 1 2 3 4; do printf '{"prompt": "a%d", "completion": "b%d"}\n' "$i" "$i"; done > "$TMP/s.jsonl"
S=(sft --dataset "$TMP/s.jsonl" --max_steps 1 --learning_rate 1e6 --per_device_train_batch_size 2 --quiet)
"$GRPO" "${S[@]}" --model "$TMP/m16" --output_dir "$TMP/f16" 2>"$TMP/f16.err"
rc=$?
[ "$rc" -eq 1 ] || fail "float16 weights past 65504: exit $rc (want 1)"
head -1 "$TMP/f16.err" | grep -q "^grpo sft: .*f16: tensor '[a-z_.0-9]*': [0-9]* value(s) beyond float16's largest, 65504 (the largest magnitude is [0-9.e+]*): they would be saved as inf, so nothing was written" \
    || fail "the save's refusal: $(cat "$TMP/f16.err")"
[ -e "$TMP/f16/model.safetensors" ] && fail "a refused save left model.safetensors"
ls "$TMP" | grep -q "^f16\.tmp" && fail "a refused save left a temporary directory"
[ -e "$TMP/f16/checkpoint-1/model.safetensors" ] || fail "the trained step is not kept"
# the checkpoint (float32) holds the values: no inf in it
python3 - "$TMP/f16/checkpoint-1/model.safetensors" <<'PY' || fail "the kept checkpoint is not float32 and finite"
import json, math, struct, sys
b = open(sys.argv[1], "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
big = 0
for k, v in h.items():
    if k == "__metadata__":
        continue
    assert v["dtype"] == "F32", v["dtype"]
    s, e = v["data_offsets"]
    xs = struct.unpack("<%df" % ((e - s) // 4), b[8 + n + s:8 + n + e])
    assert all(math.isfinite(x) for x in xs)
    big = max(big, max(abs(x) for x in xs))
sys.exit(0 if big > 65504 else 1)
PY
# the same run from a float32 base saves
"$GRPO" "${S[@]}" --model "$TMP/m" --output_dir "$TMP/f32" 2>"$TMP/f32.err" || fail "float32 save: $(cat "$TMP/f32.err")"
family saving

finish

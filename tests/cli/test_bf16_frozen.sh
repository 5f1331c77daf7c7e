#!/usr/bin/env bash
# --bf16 means one thing on every command, TRL's: matrix products in bf16 with fp32
# sums. Frozen weights (the KL reference; the base under use_peft) are then held in
# bf16 and their products are bf16 ones too, as the trained model's (mixed
# precision, full fine-tuning) are; generate, eval and score --bf16 likewise.
# --bf16_held keeps the old way for the commands that only run a model: the matrices
# held in bf16, their products fp32.
# On a model whose weights are bf16 already (grpo init --dtype bfloat16):
#  - LoRA GRPO with a KL reference and LoRA SFT under --bf16 train otherwise than
#    under --bf16 false (the base's products in bf16), and the plan says the base is
#    held in bf16;
#  - full fine-tuning with --bf16: its reference is held in bf16, omitted from the
#    checkpoints (it never moves), and a resume equals the uninterrupted run;
#  - score --bf16 gives log-probs within bf16's rounding of fp32's, not equal to them;
#    generate, eval and score --bf16_held give --bf16 false's output bit for bit;
#  - generate, eval and score --bf16 true --adapter run the GPU's form on the CPU: the
#    bf16 base with the adapter unmerged beside it (as PEFT on a bf16 model). An
#    adapter whose B is zero (PEFT's initial one) gives --bf16 true's output without
#    it byte for byte; a trained one moves score's log-probs as its fp32 fold does
#    (--bf16 false --adapter), within a tenth of that move, and not bit for bit;
#  - --bf16_held with --adapter, and --bf16 with --bf16_held, are refused in one line.
# The fp32 runs say --bf16 false: its default, auto, is true on CPUs with bf16
# instructions (test_bf16_default.sh).
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 4 --dtype bfloat16 --output_dir "$TMP/m" \
    2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' '{"prompt": "ef"}' > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 "format:^a" --num_generations 4
   --per_device_train_batch_size 2 --gradient_accumulation_steps 2 --max_completion_length 8 --max_steps 3
   --learning_rate 1e-3 --adam_epsilon 1e-2 --logging_steps 1 --log_completions true --seed 2)

same() { # LABEL DIR_A DIR_B WEIGHTS_FILE
    cmp -s "$2/$4" "$3/$4" || fail "$1: $4 differs"
    [ ! -f "$2/completions.jsonl" ] || cmp -s "$2/completions.jsonl" "$3/completions.jsonl" || fail "$1: completions differ"
}
differs() { # LABEL DIR_FP32 DIR_BF16 WEIGHTS_FILE: the bf16 products were taken
    cmp -s "$2/$4" "$3/$4" && fail "$1: $4 under --bf16 equals fp32's: the frozen weights' products are not bf16"
    grep -q '"loss": [-0-9]' "$3/metrics.jsonl" || fail "$1: no finite loss under --bf16"
}

# LoRA GRPO, beta > 0: the base (and the reference: the base with adapters off) in bf16
L=("${T[@]}" --use_peft --lora_target_modules all-linear --lora_dropout 0.1 --beta 0.1)
"$GRPO" "${L[@]}" --output_dir "$TMP/l32" --bf16 false 2>"$TMP/l32.err" || fail "lora fp32: $(tail -2 "$TMP/l32.err")"
"$GRPO" "${L[@]}" --output_dir "$TMP/l16" --bf16 2>"$TMP/l16.err" || fail "lora bf16: $(tail -2 "$TMP/l16.err")"
differs "LoRA GRPO" "$TMP/l32" "$TMP/l16" adapter_model.safetensors
grep -q "frozen weights [0-9]* (in bf16)" "$TMP/l16.err" || fail "the plan does not say the base is bf16: $(cat "$TMP/l16.err")"
grep -q "(in bf16)" "$TMP/l32.err" && fail "with --bf16 false the plan says bf16"

# full fine-tuning with a KL reference: the reference in bf16, the policy's products in bf16
F=("${T[@]}" --beta 0.2 --save_steps 1)
"$GRPO" "${F[@]}" --output_dir "$TMP/f32" --bf16 false 2>"$TMP/f32.err" || fail "full fp32: $(tail -2 "$TMP/f32.err")"
"$GRPO" "${F[@]}" --output_dir "$TMP/f16" --bf16 true 2>"$TMP/f16.err" || fail "full bf16: $(tail -2 "$TMP/f16.err")"
cmp -s "$TMP/f32/model.safetensors" "$TMP/f16/model.safetensors" && fail "full bf16: the same weights as fp32"
grep -q "products in bf16" "$TMP/f16.err" || fail "the plan does not say the products run in bf16: $(head -3 "$TMP/f16.err")"
grep -q "products in bf16" "$TMP/f32.err" && fail "with --bf16 false the plan says bf16"
[ -f "$TMP/f32/checkpoint-1/ref_model.safetensors" ] && [ ! -f "$TMP/f16/checkpoint-1/ref_model.safetensors" ] \
    || fail "checkpoints: the fp32 reference is saved, the bf16 one (never moving) is not"
# resume from checkpoint-1 (a copy, with the logs) equals the uninterrupted bf16 run
mkdir -p "$TMP/r16" && cp -r "$TMP/f16/checkpoint-1" "$TMP/f16/metrics.jsonl" "$TMP/f16/completions.jsonl" "$TMP/r16/"
"$GRPO" "${F[@]}" --output_dir "$TMP/r16" --quiet --bf16 true --resume_from_checkpoint "$TMP/r16/checkpoint-1" \
    2>"$TMP/r16.err" || fail "resume with a bf16 reference: $(tail -2 "$TMP/r16.err")"
same "resume with a bf16 reference" "$TMP/f16" "$TMP/r16" model.safetensors

# LoRA SFT on a bf16 base
printf '%s\n' '{"prompt": "1+1=", "completion": "2"}' '{"prompt": "2+2=", "completion": "4"}' '{"text": "abc abc"}' > "$TMP/s.jsonl"
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 3 --learning_rate 1e-2
   --use_peft --lora_target_modules all-linear --quiet)
"$GRPO" "${S[@]}" --output_dir "$TMP/s32" --bf16 false 2>"$TMP/s.err" || fail "sft fp32: $(tail -2 "$TMP/s.err")"
"$GRPO" "${S[@]}" --output_dir "$TMP/s16" --bf16 2>"$TMP/s.err" || fail "sft bf16: $(tail -2 "$TMP/s.err")"
differs "LoRA SFT" "$TMP/s32" "$TMP/s16" adapter_model.safetensors
S=(sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 2 --max_steps 3 --learning_rate 1e-2)
"$GRPO" "${S[@]}" --output_dir "$TMP/sf32" --quiet --bf16 false 2>"$TMP/s.err" || fail "full sft fp32: $(tail -2 "$TMP/s.err")"
"$GRPO" "${S[@]}" --output_dir "$TMP/sf16" --bf16 2>"$TMP/s.err" || fail "full sft bf16: $(tail -2 "$TMP/s.err")"
cmp -s "$TMP/sf32/model.safetensors" "$TMP/sf16/model.safetensors" && fail "full sft bf16: the same weights as fp32"
grep -q "products in bf16" "$TMP/s.err" || fail "sft's plan does not say the products run in bf16: $(head -3 "$TMP/s.err")"

# generate, eval and score: --bf16_held gives fp32's output on the bf16 model, --bf16 computes in bf16
Gn=(generate --model "$TMP/m" --dataset "$TMP/d.jsonl" --num_generations 3 --max_completion_length 8 --json)
"$GRPO" "${Gn[@]}" --bf16 false >"$TMP/g32.jsonl" 2>/dev/null && "$GRPO" "${Gn[@]}" --bf16_held >"$TMP/g16.jsonl" \
    2>"$TMP/g.err" || fail "generate --bf16_held: $(tail -2 "$TMP/g.err")"
[ -s "$TMP/g32.jsonl" ] && cmp -s "$TMP/g32.jsonl" "$TMP/g16.jsonl" || fail "generate: completions differ with --bf16_held"
"$GRPO" "${Gn[@]}" --bf16 true >"$TMP/gb.jsonl" 2>"$TMP/g.err" && [ -s "$TMP/gb.jsonl" ] || fail "generate --bf16: $(cat "$TMP/g.err")"
E=(eval --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --max_completion_length 8 --json)
"$GRPO" "${E[@]}" --bf16 false >"$TMP/e32.json" 2>/dev/null && "$GRPO" "${E[@]}" --bf16_held >"$TMP/e16.json" 2>"$TMP/e.err" \
    || fail "eval --bf16_held: $(tail -2 "$TMP/e.err")"
[ -s "$TMP/e32.json" ] && cmp -s "$TMP/e32.json" "$TMP/e16.json" || fail "eval: the report differs with --bf16_held"
printf '%s\n' '{"prompt_ids": [97, 98], "completion_ids": [99, 100, 101]}' '{"prompt_ids": [102], "completion_ids": [103]}' \
    > "$TMP/sc.jsonl"
"$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16 false >"$TMP/sc32" 2>/dev/null \
    && "$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16_held >"$TMP/sc16" 2>"$TMP/sc.err" \
    && "$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16 true >"$TMP/scb" 2>>"$TMP/sc.err" \
    || fail "score --bf16 / --bf16_held: $(tail -2 "$TMP/sc.err")"
[ "$(wc -l < "$TMP/sc32")" -eq 2 ] && cmp -s "$TMP/sc32" "$TMP/sc16" || fail "score: log-probs differ with --bf16_held"
python3 - "$TMP/sc32" "$TMP/scb" <<'PY' || fail "score --bf16: not bf16 products within bf16's rounding of fp32's"
import json, sys
a = [json.loads(l)["logprobs"] for l in open(sys.argv[1])]
b = [json.loads(l)["logprobs"] for l in open(sys.argv[2])]
d = [abs(x - y) for u, v in zip(a, b) for x, y in zip(u, v)]
assert len(d) == 4 and 0 < max(d) < 0.05, d
PY
# --bf16 true --adapter: the bf16 base, the adapter unmerged. PEFT's initial adapter (B = 0: one step at
# learning rate 0) adds nothing: each command's output is --bf16 true's without it, byte for byte
"$GRPO" "${L[@]}" --max_steps 1 --learning_rate 0 --output_dir "$TMP/l0" --quiet 2>"$TMP/l0.err" \
    || fail "lora at lr 0: $(tail -2 "$TMP/l0.err")"
for c in "generate --dataset $TMP/d.jsonl --num_generations 3 --max_completion_length 8 --json" \
         "eval --dataset $TMP/d.jsonl --reward_funcs length:5 --max_completion_length 8 --json" "score --data $TMP/sc.jsonl"; do
    # shellcheck disable=SC2086
    "$GRPO" $c --model "$TMP/m" --bf16 true >"$TMP/c.ref" 2>/dev/null \
        && "$GRPO" $c --model "$TMP/m" --bf16 true --adapter "$TMP/l0" >"$TMP/c.out" 2>"$TMP/c.err" \
        || fail "${c%% *} --bf16 true --adapter: $(cat "$TMP/c.err")"
    [ -s "$TMP/c.ref" ] && cmp -s "$TMP/c.ref" "$TMP/c.out" \
        || fail "${c%% *} --bf16 true with a zero adapter: not --bf16 true's output"
    for flag in --bf16_held "--bf16_held --bf16 false"; do
        # shellcheck disable=SC2086
        expect_error 2 "bf16_held holds the weights in bf16 and --adapter is folded only into fp32 weights: use --bf16 true" \
            "$GRPO" $c --model "$TMP/m" $flag --adapter "$TMP/l16"
        [ "$(wc -l < "$TMP/expect.err")" -eq 1 ] || fail "${c%% *} $flag --adapter: not one line: $(cat "$TMP/expect.err")"
    done
    # shellcheck disable=SC2086
    expect_error 2 "exclude each other" "$GRPO" $c --model "$TMP/m" --bf16 true --bf16_held true
done
# a trained adapter: score's log-probs move with it as with its fp32 fold, in bf16's products
for f in "false" "true"; do
    "$GRPO" score --model "$TMP/m" --data "$TMP/sc.jsonl" --bf16 $f --adapter "$TMP/l16" >"$TMP/sa$f" 2>"$TMP/sc.err" \
        || fail "score --bf16 $f --adapter: $(tail -2 "$TMP/sc.err")"
done
python3 - "$TMP/sc32" "$TMP/safalse" "$TMP/scb" "$TMP/satrue" <<'PY' \
    || fail "score --bf16 true --adapter: not the adapter in bf16 products"
import json, sys
base32, fold32, base16, lora16 = ([json.loads(l)["logprobs"] for l in open(p)] for p in sys.argv[1:])
flat = lambda x: [v for row in x for v in row]
move = max(abs(a - b) for a, b in zip(flat(fold32), flat(base32)))        # the adapter's effect in fp32
err = max(abs(a - b) for a, b in zip(flat(lora16), flat(fold32)))         # bf16 unmerged against the fp32 fold
moved16 = max(abs(a - b) for a, b in zip(flat(lora16), flat(base16)))
print(f"score --bf16 true --adapter: {err:.2e} max from the fp32 fold; the adapter moves the log-probs by {move:.2e} "
      f"in fp32, {moved16:.2e} in bf16")
assert len(flat(lora16)) == 4 and move > 1e-3 and 0 < err <= 0.1 * move, (err, move)
PY

# an fp32 model held in bf16 is rounded: it runs, and (being another model) trains otherwise
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 4 --output_dir "$TMP/m32" 2>/dev/null
R=("${L[@]}" --model "$TMP/m32")
"$GRPO" "${R[@]}" --output_dir "$TMP/q32" --quiet --bf16 false 2>/dev/null && "$GRPO" "${R[@]}" --output_dir "$TMP/q16" --quiet --bf16 \
    2>"$TMP/q.err" || fail "fp32 model with --bf16: $(tail -2 "$TMP/q.err")"
cmp -s "$TMP/q32/adapter_model.safetensors" "$TMP/q16/adapter_model.safetensors" \
    && fail "rounding an fp32 base to bf16 changed nothing: the bf16 path was not taken"
finish

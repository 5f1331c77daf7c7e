#!/usr/bin/env bash
# Inputs must be regular files: a FIFO, a device or a directory where a file is
# expected is refused at once with one line naming it ("is a FIFO, expected a
# regular file") — never a blocked open, never "only blank lines" read from
# /dev/zero. Each command runs under `timeout 10`, so a regression fails
# instead of hanging.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/b" 2>/dev/null || { fail init; finish; }
printf '{"prompt": "ab"}\n' > "$TMP/d.jsonl"
G=(generate --dataset "$TMP/d.jsonl" --max_completion_length 2)
# model_dir FILE: a copy of the model with FILE replaced by a FIFO
fifo_in() {
    rm -rf "$TMP/f_$1" && mkdir "$TMP/f_$1" && cp "$TMP"/b/* "$TMP/f_$1/" && rm "$TMP/f_$1/$1" && mkfifo "$TMP/f_$1/$1"
}
for f in model.safetensors config.json tokenizer.json tokenizer_config.json; do
    fifo_in $f
    expect_error 1 "f_$f/$f: is a FIFO, expected a regular file" timeout 10 "$GRPO" "${G[@]}" --model "$TMP/f_$f"
done
printf '{}\n' > "$TMP/b/generation_config.json" && fifo_in generation_config.json && rm "$TMP/b/generation_config.json"
expect_error 1 "generation_config.json: is a FIFO, expected a regular file" timeout 10 "$GRPO" "${G[@]}" --model "$TMP/f_generation_config.json"

mkfifo "$TMP/data.fifo"
expect_error 1 "data.fifo: is a FIFO, expected a regular file" timeout 10 "$GRPO" generate --model "$TMP/b" --dataset "$TMP/data.fifo"
expect_error 1 "/dev/zero: is a character device, expected a regular file" timeout 10 "$GRPO" generate --model "$TMP/b" --dataset /dev/zero
expect_error 1 "/dev/null: is a character device, expected a regular file" timeout 10 \
    "$GRPO" train --model "$TMP/b" --dataset /dev/null --reward_funcs reward_len --output_dir "$TMP/o"
# a dataset directory is a dataset repository: without its train.jsonl / train.json it is refused at once
expect_error 2 "is a directory without train.jsonl or train.json (nor under data/); give the file;" \
    timeout 10 "$GRPO" generate --model "$TMP/b" --dataset "$TMP"
mkfifo "$TMP/run.yaml"
expect_error 2 "run.yaml: is a FIFO, expected a regular file (the --config file)" timeout 10 \
    "$GRPO" train --config "$TMP/run.yaml" --model "$TMP/b" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --output_dir "$TMP/o"
mkfifo "$TMP/c.json"
expect_error 1 "c.json: is a FIFO, expected a regular file" timeout 10 \
    "$GRPO" init --config "$TMP/c.json" --tokenizer assets/byte-tokenizer --output_dir "$TMP/i"
# a checkpoint's trainer_state.json as a FIFO
S=(sft --model "$TMP/b" --dataset "$TMP/s.jsonl" --per_device_train_batch_size 1 --quiet)
printf '{"text": "hello"}\n' > "$TMP/s.jsonl"
"$GRPO" "${S[@]}" --max_steps 1 --save_steps 1 --output_dir "$TMP/r" || fail "sft with a checkpoint"
rm "$TMP/r/checkpoint-1/trainer_state.json" && mkfifo "$TMP/r/checkpoint-1/trainer_state.json"
expect_error 1 "trainer_state.json: is a FIFO, expected a regular file" timeout 10 \
    "$GRPO" "${S[@]}" --max_steps 2 --output_dir "$TMP/r" --resume_from_checkpoint "$TMP/r/checkpoint-1"
# stdin stays an input where a command reads it
echo '{"text": "hi"}' | timeout 10 "$GRPO" tokenize --model "$TMP/b" >/dev/null || fail "tokenize from stdin"
finish

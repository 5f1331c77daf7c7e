#!/usr/bin/env bash
# The start-up plan of grpo train says what it means (issue 39): the generation
# memory's chunk against the group (room for more completions than a group has, or a
# group decoded in several chunks); under mpirun, the process count and that the
# micro-batch is per process.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/d.jsonl"
RUN=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --max_completion_length 4 --max_steps 1
     --num_generations 4 --per_device_train_batch_size 4 --bf16 false)

"$GRPO" "${RUN[@]}" --output_dir "$TMP/o1" 2> "$TMP/e1" || fail "train: $(tail -n 3 "$TMP/e1")"
grep -q "generation [0-9]* (room for 256 completions: groups of 4 decoded together, up to 51 at once)" "$TMP/e1" ||
    fail "chunk >= G: $(grep 'memory plan' "$TMP/e1")"
"$GRPO" "${RUN[@]}" --output_dir "$TMP/o9" --generation_chunk_size 6 2> "$TMP/e9" || fail "train: $(tail -n 3 "$TMP/e9")"
grep -q "generation [0-9]* (room for 6 completions: a group's 4 decoded together)" "$TMP/e9" ||
    fail "chunk >= G, one group a chunk: $(grep 'memory plan' "$TMP/e9")"
grep -q "processes\|per process" "$TMP/e1" && fail "one process: the plan speaks of processes"
"$GRPO" "${RUN[@]}" --output_dir "$TMP/o2" --generation_chunk_size 3 2> "$TMP/e2" || fail "train: $(tail -n 3 "$TMP/e2")"
grep -q "generation [0-9]* (a group's 4 completions decoded 3 at a time)" "$TMP/e2" ||
    fail "chunk < G: $(grep 'memory plan' "$TMP/e2")"

# what the activations keep (issue 36): selective checkpointing by default, the gate/up
# product with each layer's input; full keeps the input alone; without checkpointing
# every saved tensor. The plan's activations shrink in that order.
grep -q "activations [0-9]* (micro-batch of 4 x [0-9]* tokens; checkpointed, selective: a layer's input and gate/up product kept, [0-9.]* KB a token a layer" "$TMP/e1" ||
    fail "selective by default: $(grep 'memory plan' "$TMP/e1")"
"$GRPO" "${RUN[@]}" --output_dir "$TMP/o4" --gradient_checkpointing_policy full 2> "$TMP/e4" || fail "train full: $(tail -n 3 "$TMP/e4")"
grep -q "tokens; checkpointed, full: a layer's input kept, [0-9.]* KB a token a layer, the layer recomputed" "$TMP/e4" ||
    fail "full: $(grep 'memory plan' "$TMP/e4")"
"$GRPO" "${RUN[@]}" --output_dir "$TMP/o5" --gradient_checkpointing false 2> "$TMP/e5" || fail "train no ckpt: $(tail -n 3 "$TMP/e5")"
grep -q "tokens; no checkpointing: [0-9.]* KB a token a layer kept" "$TMP/e5" || fail "none: $(grep 'memory plan' "$TMP/e5")"
kb() { sed -n 's/.* \([0-9.]*\) KB a token a layer.*/\1/p' "$1"; }
awk -v s="$(kb "$TMP/e1")" -v f="$(kb "$TMP/e4")" -v n="$(kb "$TMP/e5")" 'BEGIN { exit !(f < s && s < n) }' ||
    fail "kept a token a layer: full $(kb "$TMP/e4"), selective $(kb "$TMP/e1"), none $(kb "$TMP/e5") not increasing"
# the memory check says it too, and what to do about it
expect_error 1 "tokens; checkpointed, selective: .*; lower per_device_train_batch_size or max_completion_length, or set gradient_checkpointing_policy full$" \
    "$GRPO" "${RUN[@]}" --output_dir "$TMP/o6" --per_device_train_batch_size 1048576 --max_completion_length 64
expect_error 1 "tokens; checkpointed, full: .*; lower per_device_train_batch_size or max_completion_length$" \
    "$GRPO" "${RUN[@]}" --output_dir "$TMP/o7" --per_device_train_batch_size 1048576 --max_completion_length 64 \
    --gradient_checkpointing_policy full
expect_error 2 "gradient_checkpointing_policy 'partial' is not one of selective or full" \
    "$GRPO" "${RUN[@]}" --output_dir "$TMP/o8" --gradient_checkpointing_policy partial

if command -v mpirun >/dev/null; then
    mpi_env
    "${MPI[@]}" -np 2 "$GRPO" "${RUN[@]}" --per_device_train_batch_size 2 \
        --output_dir "$TMP/o3" 2> "$TMP/e3" || fail "mpirun -np 2: $(tail -n 3 "$TMP/e3")"
    grep -q "^grpo train: .* 2 examples, 1 steps, on 2 processes$" "$TMP/e3" || fail "no process count: $(head -n 1 "$TMP/e3")"
    grep -q "micro-batch 2 per process," "$TMP/e3" || fail "micro-batch not per process: $(sed -n 2p "$TMP/e3")"
    [ "$(grep -c 'memory plan' "$TMP/e3")" -eq 1 ] || fail "the plan is printed once per job, not per process"
else
    fail "mpirun not found (tools/install-deps.sh installs openmpi-bin)"
fi
finish

#!/usr/bin/env bash
# State is validated where it enters (issue 38): weights with a NaN or an Inf are
# refused at load by every command (one line naming the file, the tensor and the
# value's index); a checkpoint's optimizer state must be finite, its second moments
# not negative and its tensors of the exact shape (not only the element count); its
# trainer_state.json must have 0 <= adam_step <= global_step, nothing negative, and
# the global_step its checkpoint-N directory names. Each damaged copy is refused and
# the run writes nothing.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/p.jsonl"
T=(train --dataset "$TMP/p.jsonl" --reward_funcs length:5 --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --logging_steps 1 --quiet)

# poke FILE TENSOR INDEX VALUE [SHAPE]: one value of a safetensors tensor set (F32 or
# BF16), or (SHAPE, e.g. "4,24") its shape rewritten in the header
poke() {
    python3 - "$@" <<'PY'
import json, struct, sys
path, name, index, value = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
shape = sys.argv[5] if len(sys.argv) > 5 else None
raw = bytearray(open(path, "rb").read())
n = struct.unpack("<Q", raw[:8])[0]
hdr = json.loads(raw[8:8 + n])
t = hdr[name]
if shape:
    t["shape"] = [int(x) for x in shape.split(",")]
    new = json.dumps(hdr, separators=(",", ":")).encode()
    new += b" " * (n - len(new))
    assert len(new) == n, "header grew"
    raw[8:8 + n] = new
else:
    at = 8 + n + t["data_offsets"][0]
    v = float(value)
    if t["dtype"] == "F32":
        raw[at + 4 * index: at + 4 * index + 4] = struct.pack("<f", v)
    else:
        raw[at + 2 * index: at + 2 * index + 2] = struct.pack("<f", v)[2:]
open(path, "wb").write(raw)
PY
}
first_tensor() { python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n]); print(sorted(k for k in h if k != "__metadata__" and k.endswith(sys.argv[2]))[0])' "$@"; }

# ---- weights ----
for v in nan inf -inf; do
    rm -rf "$TMP/bad" && cp -r "$TMP/m" "$TMP/bad"
    w=$(first_tensor "$TMP/bad/model.safetensors" "mlp.down_proj.weight")
    poke "$TMP/bad/model.safetensors" "$w" 7 $v
    expect_error 1 "model.safetensors: tensor '$w' holds a NaN or Inf (value 7 of " "$GRPO" "${T[@]}" --model "$TMP/bad" \
        --max_steps 1 --output_dir "$TMP/out-$v"
    [ ! -e "$TMP/out-$v/metrics.jsonl" ] || fail "a refused run wrote metrics"
    expect_error 1 "holds a NaN or Inf" "$GRPO" generate --model "$TMP/bad" --prompt ab
done
printf '{"prompt": "ab", "completion": "cd"}\n' > "$TMP/s.jsonl"
expect_error 1 "holds a NaN or Inf" "$GRPO" score --model "$TMP/bad" --data "$TMP/s.jsonl"
expect_error 1 "holds a NaN or Inf" "$GRPO" eval --model "$TMP/bad" --dataset "$TMP/p.jsonl" --reward_funcs length:5
expect_error 1 "holds a NaN or Inf" "$GRPO" "${T[@]}" --model "$TMP/bad" --max_steps 1 --bf16 true --output_dir "$TMP/o16"

# ---- checkpoints ----
"$GRPO" "${T[@]}" --model "$TMP/m" --max_steps 1 --save_steps 1 --output_dir "$TMP/run" || { fail "run"; finish; }
ck="$TMP/run/checkpoint-1"
damaged() { # LABEL PATTERN: a copy of the checkpoint, edited by the caller's command, then resumed
    rm -rf "$TMP/r" && mkdir -p "$TMP/r" && cp -r "$ck" "$TMP/r/" && eval "$3"
    expect_error 1 "$2" "$GRPO" "${T[@]}" --model "$TMP/m" --max_steps 2 --output_dir "$TMP/r" \
        --resume_from_checkpoint "$TMP/r/checkpoint-1"
    [ ! -e "$TMP/r/checkpoint-2" ] || fail "$1: a refused resume wrote a checkpoint"
}
sq=$(first_tensor "$ck/optimizer.safetensors" "mlp.down_proj.weight" | sed 's/^exp_avg\./exp_avg_sq./')
m1=${sq/exp_avg_sq./exp_avg.}
damaged "negative exp_avg_sq" "tensor '$sq' holds a negative second moment (value 3 of " \
    "poke '$TMP/r/checkpoint-1/optimizer.safetensors' '$sq' 3 -1e-3"
damaged "NaN exp_avg" "tensor '$m1' holds a NaN or Inf (value 0 of " "poke '$TMP/r/checkpoint-1/optimizer.safetensors' '$m1' 0 nan"
damaged "NaN weights" "holds a NaN or Inf" "poke '$TMP/r/checkpoint-1/model.safetensors' \"\$(first_tensor '$TMP/r/checkpoint-1/model.safetensors' 'q_proj.weight')\" 1 nan"
shape=$(python3 -c '
import json, struct, sys
raw = open(sys.argv[1], "rb").read(); n = struct.unpack("<Q", raw[:8])[0]
s = json.loads(raw[8:8 + n])[sys.argv[2]]["shape"]; print("%d,%d" % (s[1], s[0]))' "$ck/optimizer.safetensors" "$m1")
damaged "transposed shape" "tensor '$m1' has shape" "poke '$TMP/r/checkpoint-1/optimizer.safetensors' '$m1' 0 0 $shape"
state() { # a trainer_state.json field set where it is: global_step at the top, the loop's own in GrpoTrainer's attributes
    python3 -c 'import json, sys; p = sys.argv[1]; s = json.load(open(p)); k = sys.argv[2]
(s if k == "global_step" else s["stateful_callbacks"]["GrpoTrainer"]["attributes"])[k] = int(sys.argv[3]); json.dump(s, open(p, "w"))' \
        "$TMP/r/checkpoint-1/trainer_state.json" "$1" "$2"
}
damaged "negative global_step" "global_step -5, adam_step 1, .*expected 0 <= adam_step <= global_step" "state global_step -5"
damaged "adam_step past global_step" "adam_step 2, .*expected 0 <= adam_step <= global_step" "state adam_step 2"
damaged "negative num_tokens" "expected 0 <= adam_step <= global_step, none negative" "state num_tokens -1"
damaged "another step" "global_step 0, but the directory is checkpoint-1" "state global_step 0; state adam_step 0"
# the checkpoint as written resumes
rm -rf "$TMP/r" && mkdir -p "$TMP/r" && cp -r "$ck" "$TMP/r/"
"$GRPO" "${T[@]}" --model "$TMP/m" --max_steps 2 --output_dir "$TMP/r" --resume_from_checkpoint "$TMP/r/checkpoint-1" \
    || fail "the undamaged checkpoint does not resume"
finish

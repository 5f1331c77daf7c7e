#!/usr/bin/env bash
# PEFT adapters and LoRA state are validated where they enter (issue 38).
#  - At adapter load (merge, generate, train --adapter: one loader): target_modules
#    must name exactly the modules that have lora_A/lora_B tensors, as PEFT matches
#    it (a list, a regular expression, null for PEFT's default q_proj v_proj,
#    exclude_modules taken off); task_type CAUSAL_LM or null; values finite;
#    lora_alpha whose scaling fits fp32. A merge whose weights would not be finite
#    (in fp32, or in the dtype written) is refused naming the weight.
#  - --adapter with use_peft false trains the adapter, as TRL trains a PeftModel
#    given as the model, and the plan says so.
#  - Resuming a LoRA checkpoint with other lora_r, lora_alpha, use_rslora,
#    lora_dropout, lora_target_modules or another base model of the same shape is
#    refused naming the option and both values; a NaN in its adapter too.
# Each refusal is one line and writes nothing.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 2 --output_dir "$TMP/m2" 2>/dev/null || fail "init m2"
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 4 --logging_steps 1 --learning_rate 1e-2 --quiet)
L=(--use_peft --lora_r 4 --lora_alpha 8 --lora_target_modules q_proj v_proj)
"$GRPO" "${T[@]}" "${L[@]}" --output_dir "$TMP/o" --max_steps 2 --save_steps 1 2>"$TMP/o.err" \
    || { fail "lora train: $(cat "$TMP/o.err")"; finish; }

# variant NAME PYTHON: a copy of the adapter $TMP/o as $TMP/NAME, with PYTHON run on
# c (adapter_config.json as a dict) and t (tensor name -> [dtype, shape, list of floats])
variant() {
    python3 - "$TMP/o" "$TMP/$1" "$2" <<'PY'
import json, os, struct, sys
src, dst, code = sys.argv[1:]
os.makedirs(dst, exist_ok=True)
c = json.load(open(os.path.join(src, "adapter_config.json")))
b = open(os.path.join(src, "adapter_model.safetensors"), "rb").read()
n = struct.unpack("<Q", b[:8])[0]
h = json.loads(b[8:8 + n])
h.pop("__metadata__", None)
t = {}
for k, v in h.items():
    s, e = v["data_offsets"]
    raw = b[8 + n + s: 8 + n + e]
    t[k] = [v["dtype"], v["shape"], list(struct.unpack("<%df" % (len(raw) // 4), raw))]
A = lambda l, m: "base_model.model.model.layers.%d.%s.lora_A.weight" % (l, m)
B = lambda l, m: "base_model.model.model.layers.%d.%s.lora_B.weight" % (l, m)
exec(code)
json.dump(c, open(os.path.join(dst, "adapter_config.json"), "w"))
hdr, data = {}, b""
for k in sorted(t):
    dtype, shape, vals = t[k]
    raw = struct.pack("<%df" % len(vals), *vals)
    hdr[k] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
hj = json.dumps(hdr).encode()
hj += b" " * (-len(hj) % 8)
open(os.path.join(dst, "adapter_model.safetensors"), "wb").write(struct.pack("<Q", len(hj)) + hj + data)
PY
}
merge_refused() { # NAME PATTERN [merge options]: merge of variant NAME refused, nothing written
    local name=$1 pattern=$2; shift 2
    expect_error 1 "$pattern" "$GRPO" merge --model "$TMP/m" --adapter "$TMP/$name" --output_dir "$TMP/out-$name" "$@"
    [ -e "$TMP/out-$name" ] && fail "$name: merge wrote $TMP/out-$name"
}
merge_ok() {
    "$GRPO" merge --model "$TMP/m" --adapter "$TMP/$1" --output_dir "$TMP/out-$1" 2>"$TMP/merge.err" \
        || fail "$1: merge refused: $(cat "$TMP/merge.err")"
}

# the adapter as trained merges; a regular expression naming the same modules merges to the same weights
merge_ok o
variant re 'c["target_modules"] = r"model\.layers\.\d+\.self_attn\.(?:q_proj|v_proj)"'
merge_ok re
cmp -s "$TMP/out-o/model.safetensors" "$TMP/out-re/model.safetensors" || fail "the regex adapter merged otherwise"
variant null 'c["target_modules"] = None; c["task_type"] = None'   # PEFT's default q_proj v_proj, no task
merge_ok null

# target_modules against the tensors
variant foo 'c["target_modules"] = ["foo_proj"]'
merge_refused foo "adapter_model.safetensors: holds tensors for model.layers.0.self_attn.q_proj, which target_modules \[\"foo_proj\"\] does not name"
variant empty 'c["target_modules"] = []'
merge_refused empty "adapter_config.json: target_modules \[\]: names no module"
variant five 'c["target_modules"] = 5'
merge_refused five "adapter_config.json: target_modules 5: expected a list of module names or a string"
variant onlyq 'c["target_modules"] = ["q_proj"]'
merge_refused onlyq "holds tensors for model.layers.0.self_attn.v_proj, which target_modules \[\"q_proj\"\] does not name"
variant plusk 'c["target_modules"] = ["q_proj", "k_proj", "v_proj"]'
merge_refused plusk "adapter_config.json: target_modules .* names model.layers.0.self_attn.k_proj, which has no lora_A/lora_B tensors"
variant reonlyq 'c["target_modules"] = ".*q_proj"'
merge_refused reonlyq "holds tensors for model.layers.0.self_attn.v_proj, which target_modules \".\*q_proj\" does not name"
variant relook 'c["target_modules"] = r"(?!.*k_proj).*self_attn\.[qkv]_proj"'   # Python syntax: a look-ahead
merge_ok relook
cmp -s "$TMP/out-o/model.safetensors" "$TMP/out-relook/model.safetensors" || fail "the look-ahead adapter merged otherwise"
variant rebad 'c["target_modules"] = "q_proj("'
merge_refused rebad "adapter_config.json: target_modules \"q_proj(\": not a regular expression"
variant excl 'c["exclude_modules"] = ["v_proj"]'
merge_refused excl "holds tensors for model.layers.0.self_attn.v_proj, which target_modules .* less exclude_modules"
variant seqcls 'c["task_type"] = "SEQ_CLS"'
merge_refused seqcls "adapter_config.json: task_type \"SEQ_CLS\": expected \"CAUSAL_LM\" or null"
variant tparam 'c["target_parameters"] = ["mlp.experts.down_proj"]'
merge_refused tparam "adapter_config.json: target_parameters .* is not supported"

# values
variant nan 't[A(0, "self_attn.q_proj")][2][3] = float("nan")'
merge_refused nan "adapter_model.safetensors: tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' holds a NaN or Inf (value 3 of"
variant inf 't[B(1, "self_attn.v_proj")][2][0] = float("inf")'
merge_refused inf "tensor 'base_model.model.model.layers.1.self_attn.v_proj.lora_B.weight' holds a NaN or Inf (value 0 of"
variant alpha 'c["lora_alpha"] = 1e308'
merge_refused alpha "adapter_config.json: lora_alpha 1e+308 gives the scaling 2.5e+307 (lora_alpha / r), beyond fp32's range"
variant over 'c["lora_alpha"] = 1e35; t[B(0, "self_attn.q_proj")][2] = [1e6] * len(t[B(0, "self_attn.q_proj")][2])'
merge_refused over "merged into 'model.layers.0.self_attn.q_proj.weight', the adapter gives a non-finite weight"
variant big16 't[B(0, "self_attn.q_proj")][2] = [1e5] * len(t[B(0, "self_attn.q_proj")][2])'
merge_refused big16 "merged into 'model.layers.0.self_attn.q_proj.weight', the adapter gives .* beyond F16's range" --dtype float16
# the same loader on generate and train --adapter
expect_error 1 "holds a NaN or Inf" "$GRPO" generate --model "$TMP/m" --adapter "$TMP/nan" --prompt ab --max_completion_length 2
expect_error 1 "does not name" "$GRPO" generate --model "$TMP/m" --adapter "$TMP/foo" --prompt ab --max_completion_length 2
expect_error 1 "beyond fp32's range" "$GRPO" "${T[@]}" --adapter "$TMP/alpha" --output_dir "$TMP/t-alpha" --max_steps 1
expect_error 1 "task_type \"SEQ_CLS\"" "$GRPO" "${T[@]}" --adapter "$TMP/seqcls" --output_dir "$TMP/t-seqcls" --max_steps 1
for d in t-alpha t-seqcls; do [ -e "$TMP/$d/adapter_model.safetensors" ] && fail "$d: written after an error"; done

# --adapter with use_peft false: the adapter trains, as TRL trains a PeftModel given as the model, and the plan says so
"$GRPO" "${T[@]}" --adapter "$TMP/o" --use_peft false --output_dir "$TMP/np" --max_steps 1 --quiet false 2>"$TMP/np.err" \
    || fail "--adapter --use_peft false: $(cat "$TMP/np.err")"
grep -q "continuing --adapter $TMP/o: its r, alpha, dropout and targets, whatever use_peft" "$TMP/np.err" \
    || fail "the plan does not say --adapter trains whatever use_peft says: $(head -c 600 "$TMP/np.err")"
[ -f "$TMP/np/adapter_model.safetensors" ] && [ ! -e "$TMP/np/model.safetensors" ] || fail "--use_peft false: not an adapter"
# --adapter with use_peft true: TRL refuses a PeftModel together with a peft_config; so do we, before writing anything
expect_error 2 "use_peft true with --adapter" "$GRPO" "${T[@]}" --adapter "$TMP/o" --use_peft --lora_r 16 --output_dir "$TMP/up"
[ -e "$TMP/up" ] && fail "--adapter --use_peft: output_dir made"

# resume: the checkpoint's LoRA options and base against this run's
resume_refused() { # NAME PATTERN OPTIONS...: resuming a copy of $TMP/o at checkpoint-1 with OPTIONS
    local name=$1 pattern=$2; shift 2
    mkdir -p "$TMP/r-$name" && cp -r "$TMP/o/checkpoint-1" "$TMP/r-$name/"
    expect_error 1 "$pattern" "$GRPO" "${T[@]}" --output_dir "$TMP/r-$name" --max_steps 2 --save_steps 1 \
        --resume_from_checkpoint latest "$@"
    [ -e "$TMP/r-$name/checkpoint-2" ] && fail "resume $name: wrote checkpoint-2"
}
resume_refused alpha "checkpoint-1/adapter_config.json: lora_alpha 8 in the checkpoint, 16 in this run: resume with the LoRA options" \
    --use_peft --lora_r 4 --lora_alpha 16 --lora_target_modules q_proj v_proj
resume_refused rslora "use_rslora false in the checkpoint, true in this run" "${L[@]}" --use_rslora
resume_refused dropout "lora_dropout 0.05 in the checkpoint, 0.1 in this run" "${L[@]}" --lora_dropout 0.1
resume_refused r "lora_r 4 in the checkpoint, 8 in this run" --use_peft --lora_r 8 --lora_alpha 8 --lora_target_modules q_proj v_proj
resume_refused targets "lora_target_modules q_proj v_proj in the checkpoint (target_modules .*), q_proj k_proj v_proj in this run" \
    --use_peft --lora_r 4 --lora_alpha 8 --lora_target_modules q_proj k_proj v_proj
resume_refused base "its adapters were trained on the base $TMP/m (weights digest [0-9a-f]*); this run's --model $TMP/m2 has weights digest" \
    "${L[@]}" --model "$TMP/m2"
mkdir -p "$TMP/r-nan" && cp -r "$TMP/o/checkpoint-1" "$TMP/r-nan/" && cp "$TMP/nan/adapter_model.safetensors" "$TMP/r-nan/checkpoint-1/"
expect_error 1 "checkpoint-1/adapter_model.safetensors: tensor 'base_model.model.model.layers.0.self_attn.q_proj.lora_A.weight' holds a NaN" \
    "$GRPO" "${T[@]}" --output_dir "$TMP/r-nan" --max_steps 2 --resume_from_checkpoint latest "${L[@]}"
# the same options and base resume, to the uninterrupted run's adapter
mkdir -p "$TMP/r-same" && cp -r "$TMP/o/checkpoint-1" "$TMP/r-same/"
"$GRPO" "${T[@]}" "${L[@]}" --output_dir "$TMP/r-same" --max_steps 2 --save_steps 1 --resume_from_checkpoint latest 2>"$TMP/same.err" \
    || fail "resume with the same options: $(cat "$TMP/same.err")"
cmp -s "$TMP/o/adapter_model.safetensors" "$TMP/r-same/adapter_model.safetensors" || fail "the resumed adapter differs"
# an alpha of 17 significant digits (the file keeps 15) resumes with itself
A=(--use_peft --lora_r 4 --lora_alpha 0.12345678901234567 --lora_target_modules q_proj v_proj)
"$GRPO" "${T[@]}" "${A[@]}" --output_dir "$TMP/a17" --max_steps 1 --save_steps 1 2>"$TMP/a17.err" \
    && "$GRPO" "${T[@]}" "${A[@]}" --output_dir "$TMP/a17" --max_steps 2 --resume_from_checkpoint latest 2>>"$TMP/a17.err" \
    || fail "resume with lora_alpha 0.12345678901234567: $(cat "$TMP/a17.err")"
finish

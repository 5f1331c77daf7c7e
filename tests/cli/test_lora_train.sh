#!/usr/bin/env bash
# LoRA training from outside (use_peft, lora_* options, --adapter) on a tiny model:
# the output directory and checkpoints in PEFT's layout (adapter_config.json's
# fields, tensor names and shapes), the KL reference being the base (kl 0 at the
# first step, when B = 0), base_model_name_or_path the model as given (a Hub id
# resolved in the cache recorded as the id), continuing an adapter with --adapter, sft with
# use_peft, the adapter used by generate/merge, and bad input: lora_r 0, an
# unknown target module, an unsupported PEFT feature, another model's adapter —
# one clear line each and nothing written.
set -u
. "$ROOT/tests/cli/lib.sh"
sed 's/"vocab_size": 96/"vocab_size": 300/; s/"eos_token_id": 2/"eos_token_id": 258/' tests/fixtures/qwen3/config.json > "$TMP/config.json"
"$GRPO" init --config "$TMP/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m" 2>/dev/null || { fail init; finish; }
printf '%s\n' '{"prompt": "ab"}' '{"prompt": "cd"}' > "$TMP/d.jsonl"
T=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --num_generations 4 --per_device_train_batch_size 2
   --gradient_accumulation_steps 2 --max_completion_length 8 --logging_steps 1 --learning_rate 1e-2 --quiet)

"$GRPO" "${T[@]}" --output_dir "$TMP/o" --max_steps 3 --save_steps 2 --use_peft --lora_r 4 --lora_alpha 8 \
    --lora_target_modules q_proj v_proj down_proj --beta 0.04 --quiet false 2>"$TMP/o.err" || fail "lora train: $(cat "$TMP/o.err")"
python3 - "$TMP/o" "$TMP/m" <<'PY' || fail "PEFT layout"
import json, struct, sys, os
out, base = sys.argv[1], sys.argv[2]
cfg = json.load(open(os.path.join(base, "config.json")))
C, F, L = cfg["hidden_size"], cfg["intermediate_size"], cfg["num_hidden_layers"]
q = cfg["num_attention_heads"] * cfg["head_dim"]
kv = cfg["num_key_value_heads"] * cfg["head_dim"]
def header(p):
    b = open(p, "rb").read()
    n = struct.unpack("<Q", b[:8])[0]
    return json.loads(b[8:8 + n])
for d in (out, os.path.join(out, "checkpoint-2")):
    a = json.load(open(os.path.join(d, "adapter_config.json")))
    want = {"peft_type": "LORA", "task_type": "CAUSAL_LM", "r": 4, "lora_alpha": 8, "lora_dropout": 0.05,
            "use_rslora": False, "bias": "none", "fan_in_fan_out": False, "inference_mode": True,
            "base_model_name_or_path": base}
    for k, v in want.items():
        assert a[k] == v, (d, k, a[k], v)
    assert sorted(a["target_modules"]) == ["down_proj", "q_proj", "v_proj"], a["target_modules"]
    h = header(os.path.join(d, "adapter_model.safetensors"))
    h.pop("__metadata__", None)
    want = {}
    for l in range(L):
        for mod, o, i in (("self_attn.q_proj", q, C), ("self_attn.v_proj", kv, C), ("mlp.down_proj", C, F)):
            want["base_model.model.model.layers.%d.%s.lora_A.weight" % (l, mod)] = [4, i]
            want["base_model.model.model.layers.%d.%s.lora_B.weight" % (l, mod)] = [o, 4]
    assert set(h) == set(want), sorted(set(h) ^ set(want))
    for k, v in want.items():
        assert h[k]["shape"] == v and h[k]["dtype"] == "F32", (k, h[k])
    assert os.path.exists(os.path.join(d, "tokenizer.json"))
assert not os.path.exists(os.path.join(out, "model.safetensors"))
assert os.path.exists(os.path.join(out, "checkpoint-2", "optimizer.safetensors"))
rows = [json.loads(l) for l in open(os.path.join(out, "metrics.jsonl")) if "train_runtime" not in l]  # the steps' lines
# B = 0 at the start: the policy is the base, so the first step's KL is 0; then it moves
assert rows[0]["kl"] == 0 and rows[-1]["kl"] > 0, [r["kl"] for r in rows]
PY
grep -q "LoRA r 4, alpha 8, dropout 0.05 on q_proj v_proj down_proj" "$TMP/o.err" || fail "the plan names the adapters: $(cat "$TMP/o.err")"
"$GRPO" generate --model "$TMP/m" --adapter "$TMP/o" --prompt ab --max_completion_length 4 >/dev/null 2>&1 \
    || fail "generate --adapter on the trained adapter"
"$GRPO" merge --model "$TMP/m" --adapter "$TMP/o/checkpoint-2" --output_dir "$TMP/merged" 2>/dev/null \
    || fail "merge of a checkpoint"

# --adapter continues an adapter: its r, alpha and targets; learning rate 0 leaves it as it was
"$GRPO" "${T[@]}" --output_dir "$TMP/c" --max_steps 1 --adapter "$TMP/o" --learning_rate 0 --lora_r 16 2>"$TMP/c.err" \
    || fail "--adapter: $(cat "$TMP/c.err")"
cmp -s "$TMP/o/adapter_model.safetensors" "$TMP/c/adapter_model.safetensors" || fail "--adapter with lr 0 changed the adapter"
grep -q '"r": 4' "$TMP/c/adapter_config.json" || fail "--adapter keeps the adapter's r"

# --adapter with beta > 0: the reference is the base under a frozen copy of the starting adapter (TRL's "ref"
# adapter), so the first step's KL is 0 although the adapter is not zero (its dropout 0: a training pass's dropout
# would move the policy's log-probs); resumed, the reference stays the start
cp -r "$TMP/o" "$TMP/o0"
python3 -c "import json,sys; p='$TMP/o0/adapter_config.json'; c=json.load(open(p)); c['lora_dropout']=0.0; json.dump(c, open(p,'w'))"
"$GRPO" "${T[@]}" --output_dir "$TMP/k" --max_steps 3 --save_steps 1 --adapter "$TMP/o0" --beta 0.04 --quiet false \
    2>"$TMP/k.err" || fail "--adapter with beta: $(cat "$TMP/k.err")"
grep -q "reference [0-9]* (the base under the starting adapter, frozen)" "$TMP/k.err" \
    || fail "the plan names the adapter reference: $(cat "$TMP/k.err")"
"$GRPO" "${T[@]}" --output_dir "$TMP/k" --max_steps 3 --adapter "$TMP/o0" --beta 0.04 --overwrite_output_dir \
    --resume_from_checkpoint "$TMP/k/checkpoint-1" 2>"$TMP/k2.err" || fail "--adapter resume: $(cat "$TMP/k2.err")"
python3 - "$TMP/k" <<'PY' || fail "--adapter's KL reference"
import json, os, sys
rows = [json.loads(l) for l in open(os.path.join(sys.argv[1], "metrics.jsonl")) if '"kl"' in l]
kl = [r["kl"] for r in rows]
assert len(kl) == 3 and kl[0] == 0 and kl[1] > 0 and kl[2] > 0, kl
PY
"$GRPO" "${T[@]}" --output_dir "$TMP/k3" --max_steps 3 --adapter "$TMP/o0" --beta 0.04 2>/dev/null || fail "--adapter, beta, 3 steps"
cmp -s "$TMP/k/adapter_model.safetensors" "$TMP/k3/adapter_model.safetensors" || fail "--adapter with beta: resumed != uninterrupted"

# a model given by Hub id (found in a Hugging Face cache): the adapter records the id as PEFT
# does (the final one and the checkpoint's); the same snapshot given as a path stays the path
snap="$TMP/hf/hub/models--TinyOrg--tiny-model/snapshots/0123abcd"
mkdir -p "$snap" "$TMP/hf/hub/models--TinyOrg--tiny-model/refs" && cp "$TMP"/m/* "$snap/" \
    && echo 0123abcd > "$TMP/hf/hub/models--TinyOrg--tiny-model/refs/main"
H=("${T[@]}")
H[2]=TinyOrg/tiny-model
HF_HOME="$TMP/hf" "$GRPO" "${H[@]}" --output_dir "$TMP/hub" --max_steps 2 --save_steps 1 --use_peft --lora_r 2 \
    2>"$TMP/hub.err" || fail "lora train from a Hub id: $(cat "$TMP/hub.err")"
"$GRPO" "${T[@]/#$TMP\/m/$snap}" --output_dir "$TMP/snap" --max_steps 1 --use_peft --lora_r 2 \
    2>"$TMP/snap.err" || fail "lora train from the snapshot path: $(cat "$TMP/snap.err")"
python3 - "$TMP/hub" "$TMP/snap" "$snap" <<'PY' || fail "base_model_name_or_path of a Hub id"
import json, os, sys
hub, snap_out, snap = sys.argv[1:]
for d in (hub, os.path.join(hub, "checkpoint-1"), os.path.join(hub, "checkpoint-2")):
    got = json.load(open(os.path.join(d, "adapter_config.json")))["base_model_name_or_path"]
    assert got == "TinyOrg/tiny-model", (d, got)
got = json.load(open(os.path.join(snap_out, "adapter_config.json")))["base_model_name_or_path"]
assert got == snap, (got, snap)
PY
# sft with use_peft learns
printf '%s\n' '{"text": "hello world"}' '{"prompt": "1+1=", "completion": "2"}' > "$TMP/s.jsonl"
"$GRPO" sft --model "$TMP/m" --dataset "$TMP/s.jsonl" --output_dir "$TMP/sft" --use_peft --lora_target_modules all-linear \
    --max_steps 30 --learning_rate 1e-2 --per_device_train_batch_size 2 --logging_steps 1 --quiet 2>"$TMP/s.err" \
    || fail "sft use_peft: $(cat "$TMP/s.err")"
python3 - "$TMP/sft/metrics.jsonl" <<'PY' || fail "sft with LoRA: the loss does not fall"
import json, sys
loss = [json.loads(l)["loss"] for l in open(sys.argv[1]) if "train_runtime" not in l]  # the steps' lines
assert loss[-1] < 0.95 * loss[0], loss
PY
[ -f "$TMP/sft/adapter_model.safetensors" ] && [ ! -f "$TMP/sft/model.safetensors" ] || fail "sft writes the adapter alone"

# bad input: one line, nothing written
expect_error 2 "lora_r" "$GRPO" "${T[@]}" --output_dir "$TMP/b1" --use_peft --lora_r 0
expect_error 1 "lora_target_modules: 'lm_head' is not a linear layer" "$GRPO" "${T[@]}" --output_dir "$TMP/b2" \
    --use_peft --lora_target_modules q_proj lm_head
expect_error 2 "lora_dropout 1: must be below 1" "$GRPO" "${T[@]}" --output_dir "$TMP/b3" --use_peft --lora_dropout 1
cp -r "$TMP/o/checkpoint-2" "$TMP/dora"
python3 -c "import json,sys; p='$TMP/dora/adapter_config.json'; c=json.load(open(p)); c['use_dora']=True; json.dump(c, open(p,'w'))"
expect_error 1 "use_dora true is not supported" "$GRPO" "${T[@]}" --output_dir "$TMP/b4" --adapter "$TMP/dora"
sed 's/"hidden_size": 32/"hidden_size": 48/' "$TMP/config.json" > "$TMP/config2.json"
"$GRPO" init --config "$TMP/config2.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$TMP/m2" 2>/dev/null
expect_error 1 "has shape \[4, 32\]; r 4 and model.layers.0.self_attn.q_proj.weight \[.*, 48\] imply" "$GRPO" train \
    --model "$TMP/m2" --dataset "$TMP/d.jsonl" --reward_funcs length:5 --output_dir "$TMP/b5" --adapter "$TMP/o" --max_completion_length 8 --quiet
expect_error 2 "sync_ref_model with use_peft" "$GRPO" "${T[@]}" --output_dir "$TMP/b6" --use_peft --beta 0.1 --sync_ref_model
for d in b1 b2 b3 b4 b5 b6; do
    [ -e "$TMP/$d/adapter_model.safetensors" ] && fail "$d: an adapter was written after an error"
done
finish

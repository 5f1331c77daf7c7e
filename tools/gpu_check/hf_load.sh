#!/usr/bin/env bash
# tools/gpu_check/hf_load.sh — the device check's section for issue 35's "checkpoints
# written on the GPU load in transformers and PEFT on the same machine". For a Qwen2
# shape (q/k/v biases, untied head) and a Qwen3 shape (q/k norm, head_dim 64 under a
# hidden size of 128, tied head), 2 layers each, with the byte-level tokenizer
# (assets/byte-tokenizer, a real tokenizer.json): grpo init, then on the GPU 2 steps of
# grpo train, full fine-tuning and LoRA (--use_peft true: PEFT's adapter layout), then
#   - grpo score --use_cpu true --bf16 false (fp32) of a few fixed sequences under the
#     full checkpoint, the base, and the base with the adapter; grpo score on the GPU of
#     the same, reported beside them (bf16 products);
#   - with $PYTHON (tools/gpu_check/hf_load.py): the full checkpoint loaded by
#     transformers' AutoModelForCausalLM, the adapter by PEFT's PeftModel over the base,
#     their fp32 log-probs of the same sequences within 1e-4 of grpo's fp32 ones, and
#     AutoTokenizer's ids of a string the ids `grpo tokenize` gives.
# Passes when every command succeeds, the training plans say "on the GPU", and every
# comparison holds. A dry run (GPU_CHECK_DRY=1, no GPU) runs the same on the CPU, asserts
# nothing about where it ran, and where transformers or PEFT cannot be imported says
# "skipped: no transformers" (or "no peft") for the loading part alone.
# Environment (the driver's): BUILD, OUT, GPU_CHECK_LEFT, PYTHON, GPU_CHECK_DRY.
set -u
cd "$(dirname "$0")/../.."
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
PYTHON=${PYTHON:-python3}
. tools/gpu_check/run_step.sh
mkdir -p "$OUT"
GRPO=$BUILD/grpo
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "== hf_load: checkpoints written by grpo train on the GPU, loaded in transformers and PEFT$([ "${GPU_CHECK_DRY:-0}" = 1 ] && echo " (dry run on the CPU)")"

# the two shapes' configs, the prompts, the sequences to score and the string to tokenize
"$PYTHON" - "$work" <<'PY' || { echo "FAILED: writing the inputs"; exit 1; }
import json, random, sys
w = sys.argv[1]
common = {"hidden_size": 128, "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
          "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0, "max_position_embeddings": 512,
          "vocab_size": 259, "bos_token_id": None, "eos_token_id": 258, "initializer_range": 0.02,
          "torch_dtype": "float32"}
shapes = {"qwen2": {"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "intermediate_size": 256,
                    "tie_word_embeddings": False},
          "qwen3": {"architectures": ["Qwen3ForCausalLM"], "model_type": "qwen3", "intermediate_size": 384,
                    "head_dim": 64, "attention_bias": False, "tie_word_embeddings": True}}
for name, s in shapes.items():
    json.dump(dict(s, **common), open("%s/%s.json" % (w, name), "w"), indent=1)
with open(w + "/prompts.jsonl", "w") as f:
    for p in ("The cat", "Tell me a story about the sea.", "1+1="):
        f.write(json.dumps({"prompt": p}) + "\n")
rng = random.Random(35)
with open(w + "/seqs.jsonl", "w") as f:
    for n_prompt, n_completion in ((5, 20), (1, 40), (12, 7)):
        f.write(json.dumps({"prompt_ids": [rng.randrange(259) for _ in range(n_prompt)],
                            "completion_ids": [rng.randrange(259) for _ in range(n_completion)]}) + "\n")
text = "Hello, w\u00f6rld! 1+1=2 \u2713 \u732b\n<|im_start|>user\nwhy?<|im_end|>\n"
json.dump({"text": text}, open(w + "/tok_in.jsonl", "w"))
PY

status=0
# train NAME DIR ARGS...: 2 steps of GRPO on the shape's initial model, on the GPU
train() {
    local what=$1 dir=$2
    shift 2
    run_step "$what" 150 "$dir.out" "$dir.err" "$GRPO" train --model "$w/init" --dataset "$work/prompts.jsonl" \
        --reward_funcs length:20 --num_generations 8 --per_device_train_batch_size 8 --gradient_accumulation_steps 1 \
        --max_completion_length 32 --max_steps 2 --save_steps 0 --logging_steps 1 --seed 1 --output_dir "$dir" "$@" \
        || return 1
    grep '"reward"' "$dir/metrics.jsonl" | "$PYTHON" -c '
import json, sys
keys = ("reward", "frac_reward_zero_std", "grad_norm", "step_time")
print("  " + "; ".join("step %s: " % r.get("step") + ", ".join("%s %.3g" % (k, r[k]) for k in keys
      if isinstance(r.get(k), (int, float))) for r in map(json.loads, sys.stdin)))'
    ran_on_gpu "$what" "$dir.err"
}
# score NAME OUTFILE ARGS...: grpo score of the fixed sequences
score() {
    local what=$1 out=$2
    shift 2
    run_step "$what" 60 "$out" "$out.err" "$GRPO" score --data "$work/seqs.jsonl" "$@" || return 1
    grep -h "grpo score:" "$out.err" | head -2 | sed 's/^/  /'
}

for shape in qwen2 qwen3; do
    w=$work/$shape
    mkdir -p "$w"
    echo "-- $shape: $(tr -d '\n ' < "$work/$shape.json" | cut -c1-200)..."
    run_step "$shape: grpo init" 30 "$w/init.out" "$w/init.err" "$GRPO" init --config "$work/$shape.json" \
        --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$w/init" || { status=1; continue; }
    # a run that trained elsewhere than asked still wrote its checkpoint: the loading checks go on
    train "$shape: grpo train, full fine-tuning" "$w/full" --learning_rate 1e-3 || status=1
    train "$shape: grpo train, LoRA" "$w/lora" --learning_rate 1e-2 --use_peft true --lora_r 8 --lora_alpha 16 \
        --lora_target_modules all-linear || status=1
    if [ ! -f "$w/full/model.safetensors" ] || [ ! -f "$w/lora/adapter_model.safetensors" ]; then
        echo "FAILED: $shape: no checkpoint to load"
        status=1
        continue
    fi
    ok=1
    score "$shape: grpo score, full, CPU fp32" "$w/full_cpu.jsonl" --model "$w/full" --use_cpu true --bf16 false || ok=0
    score "$shape: grpo score, base, CPU fp32" "$w/init_cpu.jsonl" --model "$w/init" --use_cpu true --bf16 false || ok=0
    score "$shape: grpo score, base + adapter, CPU fp32" "$w/lora_cpu.jsonl" --model "$w/init" --adapter "$w/lora" \
        --use_cpu true --bf16 false || ok=0
    score "$shape: grpo score, full, default device (the GPU)" "$w/full_gpu.jsonl" --model "$w/full" || ok=0
    score "$shape: grpo score, base + adapter, default device (the GPU)" "$w/lora_gpu.jsonl" --model "$w/init" --adapter "$w/lora" || ok=0
    run_step "$shape: grpo tokenize" 30 "$w/tok_out.jsonl" "$w/tok.err" "$GRPO" tokenize --model "$w/full" \
        < "$work/tok_in.jsonl" || ok=0
    if [ $ok = 1 ]; then
        # -u: each figure is out as soon as it is measured, should the section be cut off
        timeout -k 5 $((${GPU_CHECK_LEFT:-600} - SECONDS - 10)) "$PYTHON" -u tools/gpu_check/hf_load.py "$w" "$shape" "$work/seqs.jsonl" "$work/tok_in.jsonl" 2>&1 | tee "$OUT/hf_load_$shape.log"
        rc=${PIPESTATUS[0]}
        [ "$rc" = 0 ] || { echo "FAILED: $shape: the comparison (rc $rc)"; status=1; }
    else
        status=1
    fi
done
echo "== hf_load: $([ $status = 0 ] && echo passed || echo FAILED) in $SECONDS s"
exit $status

#!/usr/bin/env bash
# tools/gpu_check/splits.sh — `grpo sft` on the GPU at Qwen2.5-0.5B's layer widths (4
# layers, a 4096-token vocabulary: the byte tokenizer's 259 ids and room; the layers at
# their real shape, the head kept cheap): micro-batch splits 1/2/4/8 of one batch of 8
# give the same weights, within 1e-5 of each tensor's largest value (adam_epsilon 1e-2,
# as the CPU tests). A section of tools/gpu-check.sh (BUILD, PYTHON; GPU_CHECK_DRY=1:
# small widths, on the CPU).
set -u
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
. tools/gpu_check/run_step.sh
sp=$(mktemp -d)
trap 'rm -rf "$sp"' EXIT
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then dims="128 256 2 4 2"; else dims="896 4864 4 14 2"; fi
"$PY" - "$sp" $dims <<'PY'
import json, random, sys
d = sys.argv[1]
C, F, L, H, KV = map(int, sys.argv[2:])
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": C,
           "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": True, "max_position_embeddings": 32768, "vocab_size": 4096,
           "bos_token_id": None, "eos_token_id": 258, "initializer_range": 0.02, "torch_dtype": "float32"},
          open(d + "/config.json", "w"))
rng = random.Random(35)
with open(d + "/s.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"text": "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(60, 400)))}) + "\n")
PY
if ! "$BUILD/grpo" init --config "$sp/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$sp/model" > "$sp/init.log" 2>&1; then
    echo "FAILED: grpo init"; cat "$sp/init.log"; exit 1
fi
ok=1
for b in 8 4 2 1; do
    t0=$(date +%s%N)
    timeout 150 "$BUILD/grpo" sft --model "$sp/model" --dataset "$sp/s.jsonl" --per_device_train_batch_size $b \
        --gradient_accumulation_steps $((8 / b)) --max_steps 2 --learning_rate 1e-4 --adam_epsilon 1e-2 \
        --logging_steps 1 --output_dir "$sp/b$b" > "$sp/b$b.log" 2>&1 || { ok=0; echo "FAILED: sft, micro-batch $b: $(tail -3 "$sp/b$b.log")"; }
    echo "micro-batch $b x $((8 / b)): ok $ok, $(( ($(date +%s%N) - t0) / 1000000 )) ms (start-up and save included)"
    ran_on_gpu "grpo sft, micro-batch $b" "$sp/b$b.log" || ok=0
done
[ $ok = 1 ] || exit 1
timeout 120 "$PY" - "$sp" <<'PY'
import json, struct, sys

import numpy as np


def load(path):
    """The F32 tensors of a safetensors file (read here: the safetensors package may be absent)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        data = f.read()
    return {k: np.frombuffer(data[v["data_offsets"][0]:v["data_offsets"][1]], dtype="<f4").astype(np.float64)
            for k, v in head.items() if k != "__metadata__"}


d = sys.argv[1]
ref = load(d + "/b8/model.safetensors")
worst_all = 0.0
for b in (4, 2, 1):
    got = load(d + "/b%d/model.safetensors" % b)
    worst, name = 0.0, ""
    for k, w in ref.items():
        r = np.abs(got[k] - w).max() / max(np.abs(w).max(), 1e-30)
        if r > worst:
            worst, name = r, k
    print("split %d x %d against 8 x 1: max |a - b| / max |b| per tensor %.3g (%s)" % (b, 8 // b, worst, name))
    worst_all = max(worst_all, worst)
sys.exit(0 if worst_all <= 1e-5 else 1)
PY

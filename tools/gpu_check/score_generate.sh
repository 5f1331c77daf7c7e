#!/usr/bin/env bash
# tools/gpu_check/score_generate.sh — `grpo score` on the GPU (bf16 products) against the
# CPU's fp32 log-probs on a random model of Qwen2.5-0.5B's widths (4 of its 24 layers),
# with transformers' bf16 and fp32 errors on the same tokens beside it
# (tools/gpu_score_compare.py); then `grpo generate` on the GPU on that model, sampled
# with every processor on and greedy, with --generation_chunk_size 1 and 64: the same
# completions. A section of tools/gpu-check.sh (BUILD, PYTHON; GPU_CHECK_DRY=1: a
# model of small widths, on the CPU).
set -u
BUILD=${BUILD:-build}
PY=${PYTHON:-python3}
status=0
sc=$(mktemp -d)
trap 'rm -rf "$sc"' EXIT
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then dims="256 512 2 4 2 4096"; else dims="896 4864 4 14 2 151936"; fi
# Qwen2.5-0.5B's published config.json widths (q/k/v biases, tied head)
"$PY" - "$sc" $dims <<'PY'
import json, random, sys
d = sys.argv[1]
C, F, L, H, KV, V = map(int, sys.argv[2:])
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": C,
           "intermediate_size": F, "num_hidden_layers": L, "num_attention_heads": H,
           "num_key_value_heads": KV, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": True, "max_position_embeddings": 32768, "vocab_size": V,
           "bos_token_id": None, "eos_token_id": min(151643, V - 1), "initializer_range": 0.02, "torch_dtype": "float32"},
          open(d + "/config.json", "w"))
rng = random.Random(35)
with open(d + "/data.jsonl", "w") as f:
    for i in range(8):
        n = rng.randint(16, 200)
        f.write(json.dumps({"prompt_ids": [rng.randrange(V) for _ in range(n)],
                            "completion_ids": [rng.randrange(V) for _ in range(256 - n)]}) + "\n")
PY
if ! "$BUILD/grpo" init --config "$sc/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$sc/model" > "$sc/init.log" 2>&1; then
    echo "FAILED: grpo init"; cat "$sc/init.log"; exit 1
fi
t0=$(date +%s%N)
timeout 120 "$BUILD/grpo" score --model "$sc/model" --data "$sc/data.jsonl" > "$sc/gpu.jsonl" 2> "$sc/gpu.err"; rg=$?
t1=$(date +%s%N)
timeout 300 "$BUILD/grpo" score --use_cpu true --bf16 false --model "$sc/model" --data "$sc/data.jsonl" > "$sc/cpu.jsonl" 2> "$sc/cpu.err"; rc=$?
t2=$(date +%s%N)
echo "grpo score: GPU rc $rg in $(( (t1 - t0) / 1000000 )) ms, CPU fp32 rc $rc in $(( (t2 - t1) / 1000000 )) ms (2048 tokens, start-up included)"
cat "$sc/gpu.err" "$sc/cpu.err"
if [ $rg = 0 ] && [ $rc = 0 ]; then
    if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
        # without a GPU the default is the CPU's, bf16 auto as the CPU resolves it (bf16 where it has
        # bf16 instructions): the same bytes as --use_cpu true
        timeout 300 "$BUILD/grpo" score --use_cpu true --model "$sc/model" --data "$sc/data.jsonl" > "$sc/cpu_auto.jsonl" &&
            cmp -s "$sc/gpu.jsonl" "$sc/cpu_auto.jsonl" && echo "dry run: both on the CPU, the same log-probs" ||
            { echo "FAILED: dry run: the default and --use_cpu true runs differ without a GPU"; status=1; }
    else
        timeout 240 "$PY" tools/gpu_score_compare.py "$sc/model" "$sc/data.jsonl" "$sc/cpu.jsonl" "$sc/gpu.jsonl" || status=1
    fi
else
    status=1
fi
echo "-- grpo generate: --generation_chunk_size 1 and 64 give the same completions"
# 16 completions of 64 tokens sampled with every processor on, then greedy
gen() { timeout 150 "$BUILD/grpo" generate --model "$sc/model" --prompt "The capital of France is" \
    --num_generations 16 --max_completion_length 64 --seed 5 --json "$@"; }
for how in "--temperature 1 --top_k 50 --top_p 0.9 --min_p 0.01 --repetition_penalty 1.1" "--temperature 0"; do
    gen $how --generation_chunk_size 1 > "$sc/g1.jsonl" 2> "$sc/g1.err"; r1=$?
    gen $how --generation_chunk_size 64 > "$sc/g64.jsonl" 2> "$sc/g64.err"; r64=$?
    echo "grpo generate $how: rc $r1 (chunk 1), $r64 (chunk 64), $(wc -l < "$sc/g64.jsonl") lines"
    grep -h "tokens/s\|on the GPU\|on the CPU" "$sc/g1.err" "$sc/g64.err"
    if [ $r1 = 0 ] && [ $r64 = 0 ] && [ -s "$sc/g64.jsonl" ] && cmp -s "$sc/g1.jsonl" "$sc/g64.jsonl"; then
        echo "identical completions for chunk sizes 1 and 64"
        head -c 600 "$sc/g64.jsonl"; echo
    else
        echo "FAILED: the completions differ or a run failed"; tail -3 "$sc/g1.err" "$sc/g64.err"
        diff "$sc/g1.jsonl" "$sc/g64.jsonl" | head -6; status=1
    fi
done
exit $status

#!/usr/bin/env bash
# tools/gpu-check.sh — the GPU issue's device checks, one command for a machine with
# an NVIDIA GPU (the `device` tool's H100/H200), under 8 minutes. Prints the GPU, then
# every check's figures; exits non-zero when a check fails.
#
# Prepared here, run there: the device image has CUDA and Python, not grpo.c's
# build dependencies, and can fetch nothing. So build here (`make -j2 all tests-bin`,
# then `tools/gpu-bundle.sh`) and run with carry ["build/grpo", "build/tests/gpu", "build/gpu", ".gpu-bundle"]:
#   OUT=$OUT tools/gpu-check.sh
# The carried libraries are unpacked to a temporary folder and only those the
# machine lacks are put on LD_LIBRARY_PATH; cuBLASLt is found where the image keeps
# it (the CUDA toolkit or pip's nvidia-cublas).
#
# Checks: every tests/gpu/test_* binary with GRPO_REQUIRE_GPU=1 (on the real GPU, no
# emulator: `make test` runs the same tests on the emulated GPU of
# tests/machine/gpu_emulator.c), then the kernel tests again under compute-sanitizer's
# racecheck and memcheck where the image has it (the emulator cannot see races);
# then `grpo score` on the GPU against the CPU's fp32 log-probs on a random model of
# Qwen2.5-0.5B's widths (4 layers), with transformers' bf16 and fp32 errors on the same
# tokens beside it (tools/gpu_score_compare.py); then `grpo generate` on the GPU on that
# model, sampled and greedy, with --generation_chunk_size 1 and 64: the same completions;
# then `grpo sft` on the GPU at those layer
# widths with micro-batch splits 1/2/4/8 of one batch, the weights compared.
set -u
# The session's device time is scarce: the sanitizer passes (the slowest part) run
# only while the budget lasts, each within what is left; the rest is bounded by
# per-command timeouts. GPU_CHECK_SECONDS overrides the budget.
BUDGET=${GPU_CHECK_SECONDS:-420}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
status=0
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
echo "== libraries"
if [ -f .gpu-bundle/libs.tar.xz ]; then
    lib=$(mktemp -d)
    mkdir -p "$lib/all" "$lib/use"
    tar -C "$lib/all" -xJf .gpu-bundle/libs.tar.xz
    # expose what is missing, then what that pulls in, until nothing is missing
    for round in 1 2 3 4; do
        missing=$(ldd "$BUILD/grpo" "$BUILD"/tests/gpu/test_* "$lib"/use/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
        [ -n "$missing" ] || break
        for m in $missing; do [ -e "$lib/all/$m" ] && ln -sf "$lib/all/$m" "$lib/use/$m"; done
        export LD_LIBRARY_PATH="$lib/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    echo "carried libraries used here: $(ls "$lib/use" | tr '\n' ' ')"
else
    echo "no .gpu-bundle/libs.tar.xz carried (tools/gpu-bundle.sh): the machine's own libraries only"
fi
lt=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so/ {print $NF; exit}')
[ -n "$lt" ] || lt=$(find / -name 'libcublasLt.so*' -not -path '/proc/*' 2>/dev/null | sort | head -1)
if [ -n "$lt" ]; then
    export LD_LIBRARY_PATH="$(dirname "$lt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "cuBLASLt: $lt"
else
    echo "cuBLASLt: not found on this machine"
fi
if ldd "$BUILD/grpo" | grep -q 'not found'; then
    echo "build/grpo cannot load here:"; ldd "$BUILD/grpo" | grep 'not found'; status=1
else
    echo "grpo: $("$BUILD/grpo" --version 2>&1 | head -1)"
fi
echo "== the GPU tests, on the GPU"
tests=$(find "$BUILD/tests/gpu" -type f -name 'test_*' ! -name '*.d' | sort)
[ -n "$tests" ] || { echo "no $BUILD/tests/gpu/test_*: run make tests-bin here and carry build"; exit 1; }
for t in $tests; do
    echo "-- ${t#$BUILD/}"
    GRPO_REQUIRE_GPU=1 timeout 240 "$t" || { echo "FAILED: ${t#$BUILD/}"; status=1; }
done
echo "== grpo score: the GPU (bf16 products) against the CPU's fp32 log-probs"
sc=$(mktemp -d)
# Qwen2.5-0.5B's published config.json widths (q/k/v biases, tied head), 4 of its 24 layers
python3 - "$sc" <<'PY'
import json, random, sys
d = sys.argv[1]
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
           "intermediate_size": 4864, "num_hidden_layers": 4, "num_attention_heads": 14,
           "num_key_value_heads": 2, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": True, "max_position_embeddings": 32768, "vocab_size": 151936,
           "bos_token_id": None, "eos_token_id": 151643, "initializer_range": 0.02, "torch_dtype": "float32"},
          open(d + "/config.json", "w"))
rng = random.Random(35)
with open(d + "/data.jsonl", "w") as f:
    for i in range(8):
        n = rng.randint(16, 200)
        f.write(json.dumps({"prompt_ids": [rng.randrange(151936) for _ in range(n)],
                            "completion_ids": [rng.randrange(151936) for _ in range(256 - n)]}) + "\n")
PY
if "$BUILD/grpo" init --config "$sc/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$sc/model" > "$sc/init.log" 2>&1; then
    t0=$(date +%s%N)
    timeout 120 "$BUILD/grpo" score --model "$sc/model" --data "$sc/data.jsonl" > "$sc/gpu.jsonl" 2> "$sc/gpu.err"; rg=$?
    t1=$(date +%s%N)
    timeout 300 "$BUILD/grpo" score --use_cpu true --bf16 false --model "$sc/model" --data "$sc/data.jsonl" > "$sc/cpu.jsonl" 2> "$sc/cpu.err"; rc=$?
    t2=$(date +%s%N)
    echo "grpo score: GPU rc $rg in $(( (t1 - t0) / 1000000 )) ms, CPU fp32 rc $rc in $(( (t2 - t1) / 1000000 )) ms (2048 tokens, start-up included)"
    cat "$sc/gpu.err" "$sc/cpu.err"
    if [ $rg = 0 ] && [ $rc = 0 ]; then
        timeout 240 python3 tools/gpu_score_compare.py "$sc/model" "$sc/data.jsonl" "$sc/cpu.jsonl" "$sc/gpu.jsonl" || status=1
    else
        status=1
    fi
    echo "== grpo generate on the GPU: --generation_chunk_size 1 and 64 give the same completions"
    # the same model; 16 completions of 64 tokens sampled with every processor on, then greedy
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
else
    echo "FAILED: grpo init"; cat "$sc/init.log"; status=1
fi
rm -rf "$sc"
echo "== grpo sft on the GPU: micro-batch splits 1/2/4/8 of one batch of 8 give the same weights (within 1e-5 relative)"
sp=$(mktemp -d)
# Qwen2.5-0.5B's layer widths, 4 layers, a 4096-token vocabulary (the byte tokenizer's 259 ids
# and room): the layers at their real shape, the head kept cheap
python3 - "$sp" <<'PY'
import json, random, sys
d = sys.argv[1]
json.dump({"architectures": ["Qwen2ForCausalLM"], "model_type": "qwen2", "hidden_size": 896,
           "intermediate_size": 4864, "num_hidden_layers": 4, "num_attention_heads": 14,
           "num_key_value_heads": 2, "hidden_act": "silu", "rms_norm_eps": 1e-06, "rope_theta": 1000000.0,
           "tie_word_embeddings": True, "max_position_embeddings": 32768, "vocab_size": 4096,
           "bos_token_id": None, "eos_token_id": 258, "initializer_range": 0.02, "torch_dtype": "float32"},
          open(d + "/config.json", "w"))
rng = random.Random(35)
with open(d + "/s.jsonl", "w") as f:
    for i in range(8):
        f.write(json.dumps({"text": "".join(rng.choice("abcdefgh ") for _ in range(rng.randint(60, 400)))}) + "\n")
PY
if "$BUILD/grpo" init --config "$sp/config.json" --tokenizer assets/byte-tokenizer --seed 1 --output_dir "$sp/model" > "$sp/init.log" 2>&1; then
    ok=1
    for b in 8 4 2 1; do
        t0=$(date +%s%N)
        timeout 150 "$BUILD/grpo" sft --model "$sp/model" --dataset "$sp/s.jsonl" --per_device_train_batch_size $b \
            --gradient_accumulation_steps $((8 / b)) --max_steps 2 --learning_rate 1e-4 --adam_epsilon 1e-2 \
            --logging_steps 1 --output_dir "$sp/b$b" > "$sp/b$b.log" 2>&1 || { ok=0; echo "FAILED: sft, micro-batch $b"; }
        echo "micro-batch $b x $((8 / b)): rc $ok, $(( ($(date +%s%N) - t0) / 1000000 )) ms (start-up and save included)"
        [ $b = 8 ] && grep -m1 "memory plan" "$sp/b$b.log"
        grep -q "trains on the CPU" "$sp/b$b.log" && { ok=0; echo "FAILED: trained on the CPU: $(cat "$sp/b$b.log")"; }
    done
    if [ $ok = 1 ]; then
        timeout 120 python3 - "$sp" <<'PY' || status=1
import sys
from safetensors.numpy import load_file
d = sys.argv[1]
ref = load_file(d + "/b8/model.safetensors")
worst_all = 0.0
for b in (4, 2, 1):
    got = load_file(d + "/b%d/model.safetensors" % b)
    worst, name = 0.0, ""
    for k, w in ref.items():
        w = w.astype("float64"); g = got[k].astype("float64")
        r = abs(g - w).max() / max(abs(w).max(), 1e-30)
        if r > worst: worst, name = r, k
    print("split %d x %d against 8 x 1: max |a - b| / max |b| per tensor %.3g (%s)" % (b, 8 // b, worst, name))
    worst_all = max(worst_all, worst)
sys.exit(0 if worst_all <= 1e-5 else 1)
PY
    else
        status=1
    fi
else
    echo "FAILED: grpo init"; cat "$sp/init.log"; status=1
fi
rm -rf "$sp"
if command -v compute-sanitizer > /dev/null; then
    for tool in racecheck memcheck; do
        echo "== compute-sanitizer --tool $tool"
        for t in $tests; do
            # test_gpu_train, test_gpu_train_lora and test_gpu_train_opts run whole commands (their kernels are
            # test_gpu_ops-sized and test_gpu_train_opts's own): too slow under a sanitizer
            case "$t" in *emulator* | *test_gpu_train*) continue ;; esac
            left=$((BUDGET - SECONDS))
            if [ $left -lt 20 ]; then echo "${t#$BUILD/}: not run (the ${BUDGET} s budget is spent)"; continue; fi
            [ $left -gt 120 ] && left=120
            GRPO_REQUIRE_GPU=1 timeout $left compute-sanitizer --tool $tool --error-exitcode 3 "$t" > "$OUT/$tool-$(basename "$t").log" 2>&1
            rc=$?
            echo "${t#$BUILD/}: rc $rc, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-$(basename "$t").log")"
            [ $rc = 0 ] || [ $rc = 124 ] || status=1
        done
    done
else
    echo "== no compute-sanitizer on this machine: races unchecked"
fi
echo "== done in ${SECONDS} s (budget ${BUDGET} s for the sanitizer passes), status $status"
exit $status

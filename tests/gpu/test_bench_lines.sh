#!/usr/bin/env bash
# tools/gpu_check/bench_lines.py, the benchmark section's reading of grpo.c's and the
# peers' output, on written-down logs (nothing is timed here): the ratios and verdicts
# against issue 35's targets, the bandwidth bound and MFU counted by bench/gpu_counts.py,
# a peer that was skipped, and grpo.c output that is not what was asked (a completion
# that stopped early, no metrics) reported as a failure.
set -u
. "$ROOT/tests/cli/lib.sh"
L="python3 $ROOT/tools/gpu_check/bench_lines.py"
# Qwen2.5-0.5B's widths, as bench.sh writes them
python3 -c 'import json, sys; json.dump({"hidden_size": 896, "num_hidden_layers": 24, "num_attention_heads": 14,
    "num_key_value_heads": 2, "intermediate_size": 4864, "vocab_size": 151936}, open(sys.argv[1], "w"))' "$TMP/config.json"
# jsonl N STOPPED: N completions of 512 ids, the first STOPPED of them ended by eos
jsonl() {
    python3 -c 'import json, sys
n, s = int(sys.argv[1]), int(sys.argv[2])
for i in range(n):
    print(json.dumps({"ids": list(range(512 if i >= s else 100)), "finish_reason": "stop" if i < s else "length"}))' "$1" "$2"
}
# has FILE TEXT: the output holds TEXT
has() { grep -qF -- "$2" "$1" || fail "no '$2' in: $(cat "$1")"; }

# decode at G = 8: 2048 tokens/s against transformers' 512 is 4x (met); 2 s for 512
# steps is 3.906 ms a step against a bound of 1.019 GB / 3.35 TB/s = 0.304 ms (missed)
echo "grpo generate: 4096 tokens in 2.00 s: 2048.0 tokens/s (prompt prefill included)" > "$TMP/gen.err"
jsonl 8 0 > "$TMP/gen.jsonl"
cat > "$TMP/peer.txt" <<'EOF'
# bench/torch_generate.py --impl transformers
gen impl=transformers-bf16 shape=qwen2.5-0.5b G=64 tokens=32768 seconds=30.0 tokens_per_s=1092.3 device=cuda
gen impl=transformers-bf16 shape=qwen2.5-0.5b G=8 tokens=4096 seconds=8.0 tokens_per_s=512.0 device=cuda
bw impl=transformers-bf16 shape=qwen2.5-0.5b G=8 gpu=NVIDIA_H100 fraction_of_bound=0.038
EOF
$L decode --model "$TMP" --G 8 --new 512 --ours "$TMP/gen.err" --ours-json "$TMP/gen.jsonl" --peer "$TMP/peer.txt" \
    --gpu "NVIDIA H100 80GB HBM3" --verdicts "$TMP/v1" > "$TMP/d.out" || fail "decode: exit $?"
has "$TMP/d.out" "tokens_per_s=2048.0"
has "$TMP/d.out" "grpo.c / transformers generate: 4x (target >= 3x): met"
has "$TMP/d.out" "step_ms=3.906 bound_ms=0.304"
has "$TMP/d.out" "transformers-bf16 fraction 0.038"
has "$TMP/d.out" "fraction of the bandwidth bound: 0.0779 (target >= 0.5): missed"
[ "$(tr '\n' ' ' < "$TMP/v1")" = "met missed " ] || fail "verdicts: $(cat "$TMP/v1")"

# the peer skipped: no ratio, no verdict either way; G = 64 has no bound line
echo "skipped: no transformers" > "$TMP/skip.txt"
echo "grpo generate: 32768 tokens in 4.00 s: 8192.0 tokens/s" > "$TMP/gen64.err"
jsonl 64 0 > "$TMP/gen64.jsonl"
$L decode --model "$TMP" --G 64 --new 512 --ours "$TMP/gen64.err" --ours-json "$TMP/gen64.jsonl" --peer "$TMP/skip.txt" \
    --gpu "NVIDIA H100" --verdicts "$TMP/v2" > "$TMP/s.out" || fail "skipped peer: exit $?"
has "$TMP/s.out" "decode transformers-bf16 G=64: skipped: no transformers"
has "$TMP/s.out" "no ratio (target >= 3x)"
grep -q "bandwidth" "$TMP/s.out" && fail "a bound line at G = 64: $(cat "$TMP/s.out")"
[ "$(cat "$TMP/v2")" = "no-peer" ] || fail "verdicts: $(cat "$TMP/v2")"

# a completion that stopped early, or a tokens count short of G x 512: grpo.c's figure is
# not the one asked for
jsonl 8 1 > "$TMP/stop.jsonl"
$L decode --model "$TMP" --G 8 --new 512 --ours "$TMP/gen.err" --ours-json "$TMP/stop.jsonl" --peer "$TMP/peer.txt" \
    > "$TMP/e.out" && fail "an early stop accepted"
has "$TMP/e.out" "7 of 8 completions of 512"
echo "grpo generate: 4000 tokens in 2.00 s: 2000.0 tokens/s" > "$TMP/short.err"
$L decode --model "$TMP" --G 8 --new 512 --ours "$TMP/short.err" --ours-json "$TMP/gen.jsonl" > "$TMP/e.out" &&
    fail "a short token count accepted"
$L decode --model "$TMP" --G 8 --new 512 --ours "$TMP/none.err" --ours-json "$TMP/gen.jsonl" > "$TMP/e.out" &&
    fail "a missing log accepted"
has "$TMP/e.out" "grpo.c's figure is missing"

# the training pass: the first step is a warm-up; 0.04 and 0.06 s give the median 0.05 s,
# 13.58 TFLOP (train_flops at 8 x (64 + 512), 512 logit positions) -> 271.6 TFLOP/s,
# MFU 0.275 (missed); the peer's 0.1 s is 2x (met)
printf '%s\n' '{"step": 1, "step_time": 3, "step_time/training": 0.5}' '{"step": 2, "step_time": 3, "step_time/training": 0.06}' \
    '{"train_runtime": 9}' '{"step": 3, "step_time": 3, "step_time/training": 0.04}' > "$TMP/m.jsonl"
echo "model impl=torch dtype=bf16 device=cuda shape=qwen2.5-0.5b batch=8 seq=576 train_s=0.1000 min_s=0.09 max_s=0.11 mfu=0.137" \
    > "$TMP/model.txt"
$L train --model "$TMP" --batch 8 --prompt 64 --completion 512 --ours "$TMP/m.jsonl" --peer "$TMP/model.txt" \
    --verdicts "$TMP/v3" > "$TMP/t.out" || fail "train: exit $?"
has "$TMP/t.out" "pass_s=0.0500 min_s=0.0400 max_s=0.0600 steps=2x1_passes"
has "$TMP/t.out" "tflop_per_pass=13.58 tflops=271.6 mfu=0.275"
has "$TMP/t.out" "train MFU (grpo.c): 0.275 (target >= 0.4): missed"
has "$TMP/t.out" "train grpo.c / PyTorch eager bf16: 2x (target >= 1.3x): met"
# 8 micro-batches a step: a step's training time is 8 passes
$L train --model "$TMP" --batch 8 --prompt 64 --completion 512 --micro-batches 8 --ours "$TMP/m.jsonl" \
    --peer "$TMP/model.txt" > "$TMP/t8.out" || fail "train x8: exit $?"
has "$TMP/t8.out" "pass_s=0.0063"
echo '{"step": 1, "loss": 0}' > "$TMP/nostep.jsonl"
$L train --model "$TMP" --ours "$TMP/nostep.jsonl" > "$TMP/e.out" && fail "metrics without step_time accepted"
has "$TMP/e.out" "no step with step_time"

# the GRPO step: the last step's 10 s against the peer's 25 s is 2.5x (met);
# 64 x (64 + 512) tokens in 10 s
printf '%s\n' '{"step": 1, "step_time": 30, "step_time/generation": 20, "step_time/training": 9}' \
    '{"step": 2, "step_time": 10, "step_time/generation": 6, "step_time/training": 3.5}' > "$TMP/g.jsonl"
echo "grpo_step impl=torch-bf16 shape=qwen2.5-1.5b G=64 ckpt=0 step_s=25.000 gen_s=20.000 train_s=4.000 tokens_per_s=1474.6" \
    > "$TMP/grpo.txt"
$L grpo --model "$TMP" --G 64 --prompt 64 --completion 512 --ours "$TMP/g.jsonl" --peer "$TMP/grpo.txt" \
    --verdicts "$TMP/v4" > "$TMP/g.out" || fail "grpo: exit $?"
has "$TMP/g.out" "step_s=10.000 generation_s=6.000 training_s=3.500 steps_logged=2 tokens_per_s=3686.4"
has "$TMP/g.out" "grpo step grpo.c / PyTorch: 2.5x (target >= 2x): met"
finish

#!/usr/bin/env bash
# The sampler/trainer correction under TRL's names (grpo/is_correction.h):
# vllm_importance_sampling_correction, _mode, _clip_max, _clip_min and the
# deprecated _cap (= _clip_max) from a YAML config as TRL writes it; TRL's five
# sampling/* metrics in metrics.jsonl and TensorBoard, in their ranges; absent
# with the correction off; a bad mode refused naming the four choices; clip_min
# >= clip_max and vespo with a sequence mode refused as TRL refuses them.
set -u
. "$ROOT/tests/cli/lib.sh"
"$GRPO" init --config examples/demo/base_config.json --tokenizer assets/byte-tokenizer --output_dir "$TMP/m" 2>/dev/null \
    || { fail init; finish; }
printf '{"prompt": "ab"}\n{"prompt": "cd"}\n' > "$TMP/d.jsonl"
R=(train --model "$TMP/m" --dataset "$TMP/d.jsonl" --reward_funcs reward_len --num_generations 2 --per_device_train_batch_size 2
   --max_completion_length 6 --max_steps 2 --logging_steps 1 --quiet)
# checks one run's metrics: every step has the five, ordered, within [lo, hi]; a third argument: all ratios equal it
ranges() {
    python3 - "$1/metrics.jsonl" "$2" "$3" "${4:-}" <<'PY'
import json, sys
lines = [json.loads(l) for l in open(sys.argv[1]) if '"loss"' in l]
lo, hi, same = float(sys.argv[2]), float(sys.argv[3]), sys.argv[4]
assert len(lines) == 2, lines
p = "sampling/"
for l in lines:
    d, dm = l[p + "sampling_logp_difference/mean"], l[p + "sampling_logp_difference/max"]
    r0, r, r1 = (l[p + "importance_sampling_ratio/" + k] for k in ("min", "mean", "max"))
    assert 0 <= d <= dm, (d, dm)
    assert lo <= r0 <= r <= r1 <= hi, (r0, r, r1)
    if same: assert r0 == r1 == float(same), (r0, r1)
PY
}

# TRL's spelling in a YAML config
printf 'vllm_importance_sampling_correction: true\nvllm_importance_sampling_mode: token_truncate\nvllm_importance_sampling_clip_max: 2.5\nvllm_importance_sampling_clip_min: 0.5\n' \
    > "$TMP/c.yaml"
"$GRPO" "${R[@]}" --config "$TMP/c.yaml" --output_dir "$TMP/o" --report_to tensorboard --bf16 false 2>"$TMP/o.err" \
    || fail "the TRL names in YAML: $(cat "$TMP/o.err")"
[ -s "$TMP/o.err" ] && fail "no warning expected (the keys take effect): $(cat "$TMP/o.err")"
ranges "$TMP/o" 0.5 2.5 || fail "metrics out of range"
# fp32 (--bf16 false: on a CPU with a bf16 matmul auto means bf16): the decoder and the training pass differ by
# rounding: ratios within 1e-4 of 1
ranges "$TMP/o" 0.9999 1.0001 || fail "fp32: ratios not ~1"
ev=$(ls "$TMP"/o/runs/*/events.out.tfevents.* 2>/dev/null)
/usr/bin/python3 tests/log/read_tfevents.py $ev > "$TMP/ev.json" || fail "the event file does not read back"
python3 - "$TMP/ev.json" <<'PY' || fail "TensorBoard lacks the sampling metrics"
import json, sys
ev = json.load(open(sys.argv[1]))
for step in ("1", "2"):
    for k in ("sampling_logp_difference/mean", "sampling_logp_difference/max", "importance_sampling_ratio/min",
              "importance_sampling_ratio/mean", "importance_sampling_ratio/max"):
        assert "train/sampling/" + k in ev["steps"][step], (step, k, sorted(ev["steps"][step]))
PY

# top_k 100 (the training pass does not truncate: ratios ~0.47 on this model): the deprecated
# _cap is _clip_max, every ratio truncated to it; on the command line too
printf 'vllm_importance_sampling_correction: true\nvllm_importance_sampling_mode: token_truncate\nvllm_importance_sampling_cap: 0.3\ntop_k: 100\n' \
    > "$TMP/cap.yaml"
"$GRPO" "${R[@]}" --config "$TMP/cap.yaml" --output_dir "$TMP/cap" 2>"$TMP/cap.err" || fail "cap: $(cat "$TMP/cap.err")"
ranges "$TMP/cap" 0 0.3 0.3 || fail "vllm_importance_sampling_cap is not clip_max"
"$GRPO" "${R[@]}" --top_k 100 --vllm_importance_sampling_correction true --vllm_importance_sampling_mode sequence_truncate \
    --vllm_importance_sampling_clip_min 0.95 --output_dir "$TMP/seq" || fail "command line"
ranges "$TMP/seq" 0.95 0.95 0.95 || fail "sequence_truncate: the products of ratios < 1 clamp to clip_min"
# off (the default): no sampling metrics, as TRL without vLLM
"$GRPO" "${R[@]}" --output_dir "$TMP/off" || fail "off"
grep -q "sampling/" "$TMP/off/metrics.jsonl" && fail "sampling metrics logged with the correction off"

# refused
printf 'vllm_importance_sampling_mode: token\n' > "$TMP/bad.yaml"
expect_error 2 "token_truncate, token_mask, sequence_truncate or sequence_mask" "$GRPO" "${R[@]}" --config "$TMP/bad.yaml" \
    --output_dir "$TMP/e1"
expect_error 2 "vllm_importance_sampling_mode" "$GRPO" "${R[@]}" --vllm_importance_sampling_mode sequence --output_dir "$TMP/e2"
expect_error 2 "vllm_importance_sampling_clip_min (3) must be less than vllm_importance_sampling_clip_max (3)" \
    "$GRPO" "${R[@]}" --vllm_importance_sampling_correction true --vllm_importance_sampling_clip_min 3 --output_dir "$TMP/e3"
expect_error 2 "loss_type vespo needs vllm_importance_sampling_mode token_truncate or token_mask (got sequence_mask)" \
    "$GRPO" "${R[@]}" --vllm_importance_sampling_correction true --loss_type vespo --output_dir "$TMP/e4"
finish

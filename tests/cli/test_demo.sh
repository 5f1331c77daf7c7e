#!/usr/bin/env bash
# The demo's pipeline (tools/demo.sh: grpo init -> grpo sft -> grpo train with the
# seed's settings -> grpo plot) on a reduced budget, with a fixed seed: the reward
# must clearly improve (mean of the last 3 logged steps above the first 3 by more
# than 3 points — the length reward is in characters), and the trained model and the
# picture must be there; DEMO_BASE_ONLY=1 stops after the base.
set -u
. "$ROOT/tests/cli/lib.sh"
export GRPO DEMO_OUT="$TMP/demo" DEMO_SFT_STEPS=${DEMO_SFT_STEPS:-100} DEMO_GRPO_STEPS=${DEMO_GRPO_STEPS:-12}
bash tools/demo.sh > "$TMP/demo.log" 2>&1 || { fail "tools/demo.sh failed: $(tail -5 "$TMP/demo.log")"; finish; }
for f in grpo/model.safetensors grpo/config.json grpo/tokenizer.json grpo/metrics.jsonl grpo/completions.jsonl reward.svg; do
    [ -s "$DEMO_OUT/$f" ] || fail "the demo did not write $f"
done
python3 - "$DEMO_OUT/grpo/metrics.jsonl" <<'PY' || fail "the reward did not improve: $(grep -o '"reward": [-0-9.e]*' "$DEMO_OUT/grpo/metrics.jsonl" | tr '\n' ' ')"
import json, sys
r = [json.loads(l)["reward"] for l in open(sys.argv[1]) if '"reward"' in l]
first, last = sum(r[:3]) / 3, sum(r[-3:]) / 3
print("first", first, "last", last)
assert len(r) >= 6 and last > first + 3, (first, last)
PY
python3 -c 'import sys, xml.etree.ElementTree as E; E.parse(sys.argv[1])' "$DEMO_OUT/reward.svg" || fail "reward.svg is not well-formed"
# the arithmetic example runs end to end (its accuracy figures need the full budget)
MATH_OUT="$TMP/math" MATH_BASE="$DEMO_OUT/base" MATH_SFT_STEPS=10 bash examples/math/run.sh --max_steps 2 --quiet \
    > "$TMP/math.log" 2>&1 || fail "examples/math/run.sh: $(tail -3 "$TMP/math.log")"
grep -q "held-out accuracy" "$TMP/math.log" || fail "examples/math/run.sh printed no accuracy"
# DEMO_BASE_ONLY=1 (tools/gpu-bundle.sh's and the device check's): the base alone, here the cached one
rm -rf "$DEMO_OUT/grpo"
DEMO_BASE_ONLY=1 bash tools/demo.sh > "$TMP/base.log" 2>&1 || fail "DEMO_BASE_ONLY=1: $(tail -3 "$TMP/base.log")"
grep -q "base model: $DEMO_OUT/base (cached)" "$TMP/base.log" && [ ! -e "$DEMO_OUT/grpo" ] \
    || fail "DEMO_BASE_ONLY=1 went past the base: $(tail -3 "$TMP/base.log")"
finish

#!/usr/bin/env bash
# bench/bench_tools.sh — generation throughput with tools (issue 37): a tool-calling
# model (tests/cli/tool_model.py on the demo's 4-layer, 128-wide Qwen3 on the byte tokenizer;
# it calls the calculator after a newline with probability 1/2), a calculator that
# sleeps LATENCY_MS per call, G completions; bench/bench_tools.c prints the rate
# without tools, with the calls inside the decoding batch (tool_workers 0) and
# overlapped (tool_workers W).
#   BUILD=build bench/bench_tools.sh [LATENCY_MS=50] [G=16] [W=4] [REPS=3]
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-$ROOT/build}
LATENCY_MS=${1:-50} G=${2:-16} W=${3:-4} REPS=${4:-3}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
python3 - "$ROOT/examples/demo/base_config.json" "$tmp/cfg.json" <<'PY'
import json, sys
c = json.load(open(sys.argv[1]))
c.update(vocab_size=260, tie_word_embeddings=False)
json.dump(c, open(sys.argv[2], "w"))
PY
"$BUILD/grpo" init --config "$tmp/cfg.json" --tokenizer "$ROOT/assets/byte-tokenizer" --output_dir "$tmp/m" 2>/dev/null
python3 "$ROOT/tests/cli/tool_model.py" "$tmp/m" 0.5 >/dev/null
cat > "$tmp/calc.py" <<PY
import json, sys, time
for line in sys.stdin:
    time.sleep($LATENCY_MS / 1000)
    print(json.dumps({"content": "42"}), flush=True)
PY
echo "tools: G=$G, a tool sleeping $LATENCY_MS ms per call, load $(cut -d' ' -f1-3 /proc/loadavg)"
GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000} "$BUILD/bench/bench_tools" "$tmp/m" "python3 $tmp/calc.py" --G "$G" --workers "$W" --reps "$REPS"

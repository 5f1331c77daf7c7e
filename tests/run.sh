#!/usr/bin/env bash
# Runs every test binary under $BUILD/tests and every tests/**/test_*.sh,
# then prints the closing line "N passed, N failed".
# Shell tests get GRPO (the built binary), BUILD and ROOT in their environment.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
BUILD=${BUILD:-build}
case "$BUILD" in /*) ;; *) BUILD="$ROOT/$BUILD" ;; esac
export ROOT BUILD GRPO="$BUILD/grpo"
# a short OpenMP spin (see src/cli/main.c): the C test binaries do not re-execute themselves
export GOMP_SPINCOUNT=${GOMP_SPINCOUNT:-1000}
cd "$ROOT"
passed=0; failed=0; failed_names=()
run_one() {
    local name=$1; shift
    local log; log=$(mktemp)
    local t0=$SECONDS
    if "$@" >"$log" 2>&1; then
        passed=$((passed + 1)); echo "ok   $name ($((SECONDS - t0)) s)"
    else
        failed=$((failed + 1)); failed_names+=("$name"); echo "FAIL $name ($((SECONDS - t0)) s)"
        tail -n 40 "$log" | sed 's/^/     | /'
    fi
    rm -f "$log"
}
for bin in $(find "$BUILD/tests" -type f -name 'test_*' ! -name '*.d' ! -name '*.o' 2>/dev/null | sort); do
    [ -x "$bin" ] || continue
    run_one "${bin#$BUILD/}" "$bin"
done
for sh in $(find tests -name 'test_*.sh' | sort); do
    run_one "$sh" bash "$sh"
done
echo
[ ${#failed_names[@]} -gt 0 ] && printf 'failed: %s\n' "${failed_names[*]}"
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]

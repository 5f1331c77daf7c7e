#!/usr/bin/env bash
# fuzz/repro.sh — runs every known reproducer fuzz/repro/TARGET/* once through
# its target (no fuzzing) and prints, per file, "fixed" or what it still does.
# Exits 1 while any of them still crashes. A fixed reproducer moves into the
# module's tests (and, when small, into fuzz/corpus/TARGET/ as a seed).
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
cd "$ROOT"
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
bad=0
for f in fuzz/repro/*/*; do
    [ -f "$f" ] || continue
    t=$(basename "$(dirname "$f")")
    bin="$FUZZ_BUILD/fuzz/fuzz_$t"
    [ -x "$bin" ] || { echo "fuzz/repro.sh: $bin is not built (make fuzz-build)" >&2; exit 2; }
    if out=$("$bin" -timeout=25 "$f" 2>&1); then
        echo "fixed     $f"
    else
        what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|LeakSanitizer|libFuzzer): [a-zA-Z-]+|runtime error: .*|promised invariant violated: .*' <<<"$out")
        where=$(grep -m1 -oE 'in [a-z_0-9]+ [^ ]*src/[^ ]*' <<<"$out")
        echo "CRASHES   $f: ${what:-exit status $?} ${where:+($where)}"
        bad=1
    fi
done
exit $bad

#!/usr/bin/env bash
# fuzz/run.sh SECONDS TARGET... — runs each libFuzzer target for SECONDS on its
# seed corpus fuzz/corpus/TARGET plus the corpus it grew in earlier runs
# ($FUZZ_BUILD/corpus/TARGET), prints one line per target (executions, execs/s,
# coverage, crashes) and exits 1 when any target crashed, leaked, timed out or
# ran out of memory; the input that did it is in $FUZZ_BUILD/crashes/TARGET/ and
# the full log in $FUZZ_BUILD/logs/TARGET.log. Extra libFuzzer flags: $FUZZ_FLAGS.
set -uo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)
FUZZ_BUILD=${FUZZ_BUILD:-build-fuzz}
cd "$ROOT"
secs=${1:?usage: fuzz/run.sh SECONDS TARGET...}
shift
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:abort_on_error=0:symbolize=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1:halt_on_error=1}
failed=()
printf '%-17s %12s %9s %6s %6s  %s\n' target executions execs/s cov ft result
for t in "$@"; do
    bin="$FUZZ_BUILD/fuzz/fuzz_$t"
    [ -x "$bin" ] || { echo "fuzz/run.sh: $bin is not built (make fuzz-build)" >&2; exit 2; }
    corpus="$FUZZ_BUILD/corpus/$t" crashes="$FUZZ_BUILD/crashes/$t" log="$FUZZ_BUILD/logs/$t.log"
    mkdir -p "$corpus" "$crashes" "$(dirname "$log")"
    case $t in jinja|yaml) dict=(-dict="fuzz/dict/$t.dict") ;; encode) dict=() ;; *) dict=(-dict=fuzz/dict/json.dict) ;; esac
    # -close_fd_mask=3: the targets' own stdout/stderr (usage errors) are muted; libFuzzer's
    # and the sanitizers' reports still reach the log. -timeout: an input taking longer is a hang.
    "$bin" -max_total_time="$secs" -print_final_stats=1 -close_fd_mask=3 -timeout=25 \
        -artifact_prefix="$crashes/" "${dict[@]}" ${FUZZ_FLAGS:-} "$corpus" "fuzz/corpus/$t" >"$log" 2>&1
    rc=$?
    execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -1)
    rate=$(sed -n 's/^stat::average_exec_per_sec: *//p' "$log" | tail -1)
    cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | cut -d' ' -f2)
    found=$(grep -o "Test unit written to .*" "$log" | sed 's/Test unit written to //' | tr '\n' ' ')
    if [ $rc -eq 0 ] && [ -z "$found" ]; then result=ok
    else
        what=$(grep -m1 -oE 'ERROR: (AddressSanitizer|UndefinedBehaviorSanitizer|LeakSanitizer|libFuzzer): [a-zA-Z-]+|runtime error: .*|deadly signal|promised invariant violated: .*' "$log" | head -1)
        result="CRASH (exit $rc) ${what:-see $log}: ${found:-no input written}"
        failed+=("$t")
    fi
    printf '%-17s %12s %9s %6s %6s  %s\n' "$t" "${execs:-?}" "${rate:-?}" "${cov:-?}" "${ft:-?}" "$result"
done
if [ ${#failed[@]} -gt 0 ]; then
    echo "fuzz: ${#failed[@]} target(s) crashed: ${failed[*]} (logs in $FUZZ_BUILD/logs/, inputs in $FUZZ_BUILD/crashes/)" >&2
    exit 1
fi
echo "fuzz: every target ran ${secs}s without a crash"

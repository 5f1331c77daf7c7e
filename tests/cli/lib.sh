# tests/cli/lib.sh — helpers for the shell tests: a scratch directory, fail(),
# expect_error STATUS PATTERN CMD... (exit status and a one-line stderr matching
# PATTERN, nothing on stdout), mpi_env (MPI=(mpirun ...) and the environment it
# needs here), finish.
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
# mpirun as the tests run it: as root (CI containers) OpenMPI wants this said; vader's
# single-copy (CMA) is often not permitted in containers: plain shared memory instead.
# Under ASan (make asan) OpenMPI never frees some of its own allocations: LeakSanitizer
# skips those (full stacks, its components kept loaded, so the frames name it).
mpi_env() {
    export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_btl_vader_single_copy_mechanism=none
    export OMPI_MCA_rmaps_base_oversubscribe=1 GRPO_THREADS=1
    export OMPI_MCA_mca_base_component_disable_dlclose=1
    export LSAN_OPTIONS="suppressions=$ROOT/tests/cli/lsan-openmpi.supp:print_suppressions=0"
    export ASAN_OPTIONS="${ASAN_OPTIONS:+$ASAN_OPTIONS:}fast_unwind_on_malloc=0"
    MPI=(mpirun --oversubscribe --bind-to none)
}

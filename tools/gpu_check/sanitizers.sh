#!/usr/bin/env bash
# tools/gpu_check/sanitizers.sh — the kernel tests again under compute-sanitizer's
# racecheck and memcheck where the image has it (the emulator of `make test` cannot see
# races between warps or blocks), each test within what is left of GPU_CHECK_LEFT. The
# tests that run whole commands (test_gpu_train*) are left out: too slow under a
# sanitizer. A section of tools/gpu-check.sh (BUILD, OUT, GPU_CHECK_LEFT).
set -u
BUILD=${BUILD:-build}
LEFT=${GPU_CHECK_LEFT:-300}
OUT=${OUT:-$(mktemp -d)}
start=$SECONDS
cs=$(command -v compute-sanitizer || ls /usr/local/cuda*/bin/compute-sanitizer 2>/dev/null | sort -V | tail -1)
if [ -z "$cs" ] || [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
    echo "no compute-sanitizer here (or a dry run): races unchecked"
    exit 0
fi
status=0
tests=$(find "$BUILD/tests/gpu" -type f -name 'test_*' ! -name '*.d' | sort)
for tool in racecheck memcheck; do
    echo "-- compute-sanitizer --tool $tool"
    for t in $tests; do
        case "$t" in *emulator* | *test_gpu_train*) continue ;; esac
        left=$((LEFT - (SECONDS - start)))
        if [ $left -lt 15 ]; then echo "${t#$BUILD/}: not run (time is up)"; continue; fi
        [ $left -gt 120 ] && left=120
        log="$OUT/$tool-$(basename "$t").log"
        GRPO_REQUIRE_GPU=1 timeout $left "$cs" --tool $tool --error-exitcode 3 "$t" > "$log" 2>&1
        rc=$?
        echo "${t#$BUILD/}: rc $rc, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$log")"
        [ $rc = 0 ] || [ $rc = 124 ] || status=1
    done
done
exit $status

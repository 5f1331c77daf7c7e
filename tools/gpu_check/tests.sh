#!/usr/bin/env bash
# tools/gpu_check/tests.sh — every tests/gpu/test_* binary on the GPU, with
# GRPO_REQUIRE_GPU=1 (no emulator: `make test` runs the same tests on the emulated GPU of
# tests/machine/gpu_emulator.c), then the embedded PTX through the machine's ptxas for
# sm_80 and sm_90 where it has one (tests/gpu/test_ptxas.sh), and our declarations of the
# driver API and cuBLASLt against its toolkit's headers (tests/gpu/test_api_headers.sh). A section of
# tools/gpu-check.sh (BUILD, GPU_CHECK_LEFT; GPU_CHECK_DRY=1: on the emulator, only
# GPU_CHECK_TESTS's tests, default test_gpu_ops).
#
# When test_gpu_attention fails (the tensor-core attention: PTX fragment layouts no
# emulator can confirm), the failed tests run again with GRPO_GPU_ATTENTION=plain (the
# plain kernels, gpu/device.h); if test_gpu_attention passes so, $OUT/attention_fallback
# tells tools/gpu-check.sh to run the later sections that way, so that one device session
# still checks everything else. The section fails either way.
set -u
BUILD=${BUILD:-build}
LEFT=${GPU_CHECK_LEFT:-600}
start=$SECONDS
logs=$(mktemp -d)
trap 'rm -rf "$logs"' EXIT
status=0
failed=""
if [ "${GPU_CHECK_DRY:-0}" = 1 ]; then
    tests=""
    for n in ${GPU_CHECK_TESTS:-test_gpu_ops}; do tests="$tests $BUILD/tests/gpu/$n"; done
else
    export GRPO_REQUIRE_GPU=1
    tests=$(find "$BUILD/tests/gpu" -type f -name 'test_*' ! -name '*.d' | sort)
fi
[ -n "$tests" ] || { echo "no $BUILD/tests/gpu/test_*: make tests-bin, then tools/gpu-bundle.sh"; exit 1; }
for t in $tests; do
    left=$((LEFT - (SECONDS - start)))
    if [ $left -lt 5 ]; then echo "${t#$BUILD/}: not run (time is up)"; status=1; continue; fi
    [ $left -gt 120 ] && left=120
    t0=$SECONDS
    # a test's own lines only when it fails: on a pass, its last line (the counts)
    log="$logs/$(basename "$t").log"
    if timeout $left "$t" > "$log" 2>&1; then
        echo "${t#$BUILD/}: $(tail -1 "$log") ($((SECONDS - t0)) s)"
    else
        echo "FAILED: ${t#$BUILD/} (rc $?, $((SECONDS - t0)) s):"
        grep -E 'FAIL|fail|error' "$log" | head -20
        tail -5 "$log"
        status=1
        failed="$failed $t"
    fi
    [ -n "${OUT:-}" ] && cp "$log" "$OUT/" 2>/dev/null
done
if [[ "$failed " = *"/test_gpu_attention "* ]] && [ -z "${GRPO_GPU_ATTENTION:-}" ]; then
    echo "test_gpu_attention failed: the failed tests again with GRPO_GPU_ATTENTION=plain (attention on the plain kernels)"
    for t in $failed; do
        left=$((LEFT - (SECONDS - start)))
        if [ $left -lt 5 ]; then echo "  ${t#$BUILD/}: not run again (time is up)"; continue; fi
        [ $left -gt 120 ] && left=120
        log="$logs/$(basename "$t").plain.log"
        if GRPO_GPU_ATTENTION=plain timeout $left "$t" > "$log" 2>&1; then
            echo "  ${t#$BUILD/} with GRPO_GPU_ATTENTION=plain: $(tail -1 "$log")"
            [ "$(basename "$t")" = test_gpu_attention ] && [ -n "${OUT:-}" ] && echo plain > "$OUT/attention_fallback"
        else
            echo "  FAILED again with GRPO_GPU_ATTENTION=plain: ${t#$BUILD/} (rc $?)"
            grep -E 'FAIL|fail|error' "$log" | head -5
        fi
        [ -n "${OUT:-}" ] && cp "$log" "$OUT/" 2>/dev/null
    done
    [ -n "${OUT:-}" ] && [ -f "$OUT/attention_fallback" ] &&
        echo "the plain attention passes where the tensor cores' failed: the later sections run with GRPO_GPU_ATTENTION=plain"
fi
BUILD=$BUILD bash tests/gpu/test_ptxas.sh || status=1
command -v cc > /dev/null && { bash tests/gpu/test_api_headers.sh || status=1; }
exit $status

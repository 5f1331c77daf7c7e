#!/usr/bin/env bash
# tools/gpu-check.sh — the GPU issue's device checks, one command for a machine with
# an NVIDIA GPU (the `device` tool's H100/H200), under 8 minutes. Prints the GPU, then
# every check's figures; exits non-zero when a check fails.
#
# Prepared here, run there: the device image has CUDA and Python, not grpo.c's
# build dependencies, and can fetch nothing. So build here (`make -j2 all tests-bin`,
# then `tools/gpu-bundle.sh`) and run with carry ["build/grpo", "build/tests/gpu", "build/gpu", ".gpu-bundle"]:
#   OUT=$OUT tools/gpu-check.sh
# The carried libraries are unpacked to a temporary folder and only those the
# machine lacks are put on LD_LIBRARY_PATH; cuBLASLt is found where the image keeps
# it (the CUDA toolkit or pip's nvidia-cublas).
#
# Checks: every tests/gpu/test_* binary with GRPO_REQUIRE_GPU=1 (on the real GPU, no
# emulator: `make test` runs the same tests on the emulated GPU of
# tests/machine/gpu_emulator.c), then the kernel tests again under compute-sanitizer's
# racecheck and memcheck where the image has it (the emulator cannot see races).
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
status=0
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
echo "== libraries"
if [ -f .gpu-bundle/libs.tar.xz ]; then
    lib=$(mktemp -d)
    mkdir -p "$lib/all" "$lib/use"
    tar -C "$lib/all" -xJf .gpu-bundle/libs.tar.xz
    # expose what is missing, then what that pulls in, until nothing is missing
    for round in 1 2 3 4; do
        missing=$(ldd "$BUILD/grpo" "$BUILD"/tests/gpu/test_* "$lib"/use/* 2>/dev/null | awk '/not found/ {print $1}' | sort -u)
        [ -n "$missing" ] || break
        for m in $missing; do [ -e "$lib/all/$m" ] && ln -sf "$lib/all/$m" "$lib/use/$m"; done
        export LD_LIBRARY_PATH="$lib/use${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    done
    echo "carried libraries used here: $(ls "$lib/use" | tr '\n' ' ')"
else
    echo "no .gpu-bundle/libs.tar.xz carried (tools/gpu-bundle.sh): the machine's own libraries only"
fi
lt=$(ldconfig -p 2>/dev/null | awk '/libcublasLt\.so/ {print $NF; exit}')
[ -n "$lt" ] || lt=$(find / -name 'libcublasLt.so*' -not -path '/proc/*' 2>/dev/null | sort | head -1)
if [ -n "$lt" ]; then
    export LD_LIBRARY_PATH="$(dirname "$lt")${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
    echo "cuBLASLt: $lt"
else
    echo "cuBLASLt: not found on this machine"
fi
if ldd "$BUILD/grpo" | grep -q 'not found'; then
    echo "build/grpo cannot load here:"; ldd "$BUILD/grpo" | grep 'not found'; status=1
else
    echo "grpo: $("$BUILD/grpo" --version 2>&1 | head -1)"
fi
echo "== the GPU tests, on the GPU"
tests=$(find "$BUILD/tests/gpu" -type f -name 'test_*' ! -name '*.d' | sort)
[ -n "$tests" ] || { echo "no $BUILD/tests/gpu/test_*: run make tests-bin here and carry build"; exit 1; }
for t in $tests; do
    echo "-- ${t#$BUILD/}"
    GRPO_REQUIRE_GPU=1 timeout 240 "$t" || { echo "FAILED: ${t#$BUILD/}"; status=1; }
done
if command -v compute-sanitizer > /dev/null; then
    for tool in racecheck memcheck; do
        echo "== compute-sanitizer --tool $tool"
        for t in $tests; do
            case "$t" in *emulator*) continue ;; esac
            GRPO_REQUIRE_GPU=1 timeout 120 compute-sanitizer --tool $tool --error-exitcode 3 "$t" > "$OUT/$tool-$(basename "$t").log" 2>&1
            rc=$?
            echo "${t#$BUILD/}: rc $rc, $(grep -m1 -E 'ERROR SUMMARY|RACECHECK SUMMARY' "$OUT/$tool-$(basename "$t").log")"
            [ $rc = 0 ] || [ $rc = 124 ] || status=1
        done
    done
else
    echo "== no compute-sanitizer on this machine: races unchecked"
fi
exit $status

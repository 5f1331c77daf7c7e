#!/usr/bin/env bash
# tools/gpu-check.sh — the GPU issue's device checks, one command for a machine with
# an NVIDIA GPU (the `device` tool's H100), under 8 minutes with its build. Prints
# the GPU, then every check's figures; exits non-zero when a check fails.
#
# Today: the kernels of src/gpu/kernels/ against the CPU's ops (tests/gpu/
# test_gpu_ops.c: RMSNorm, SwiGLU forward and backward, AdamW bit for bit), which
# `make test` runs on the tests' emulated GPU (tests/machine/gpu_emulator.c) and this
# script on the real one (GRPO_REQUIRE_GPU=1: no emulator).
#
# The library is built here when this machine has grpo.c's build dependencies
# (tools/install-deps.sh); where it has not (the device image has CUDA and Python,
# not oneDNN's or jansson's headers), the one built on the build machine is used:
# run with carry ["build"] (build/libgrpo.a with the PTX embedded, 4 MB). The test
# itself links against libc, libm and libgomp only.
set -u
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
OUT=${OUT:-$(mktemp -d)}
mkdir -p "$OUT"
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
echo "== build"
t0=$(date +%s)
if make -j"$(nproc)" "$BUILD/libgrpo.a" > "$OUT/build.log" 2>&1; then
    echo "libgrpo built here ($(( $(date +%s) - t0 )) s)"
elif [ -f "$BUILD/libgrpo.a" ]; then
    echo "this machine cannot build libgrpo ($(grep -m1 -E 'error|No such' "$OUT/build.log")): the carried $BUILD/libgrpo.a is used"
else
    echo "no libgrpo: the build failed and none was carried"; tail -5 "$OUT/build.log"; exit 1
fi
gcc -std=c11 -D_GNU_SOURCE -O2 -g -fopenmp -ffp-contract=off -Isrc -Itests tests/gpu/test_gpu_ops.c \
    tests/machine/gpu_emulator.c "$BUILD/libgrpo.a" -o "$OUT/test_gpu_ops" -lm -ldl -lpthread || { echo "test_gpu_ops: link failed"; exit 1; }
echo "== the kernels against the CPU's ops"
status=0
GRPO_REQUIRE_GPU=1 timeout 300 "$OUT/test_gpu_ops" || status=1
exit $status

#!/usr/bin/env bash
# tests/gpu/test_ptxas.sh — the embedded PTX ($BUILD/gpu/kernels.ptx) through NVIDIA's
# own assembler, where this machine has one (a CUDA toolkit's ptxas; CI has none and
# skips): for sm_80 (A100) and sm_90 (H100/H200), as the driver's JIT compiles it on
# those GPUs. An instruction the target lacks, a malformed operand, or a kernel over
# the register or shared-memory limits fails here instead of in the GPU session. Spills
# are printed (they cost speed, not correctness).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
BUILD=${BUILD:-$ROOT/build}
ptx="$BUILD/gpu/kernels.ptx"
ptxas=$(command -v ptxas || ls /usr/local/cuda*/bin/ptxas 2>/dev/null | sort -V | tail -1)
if [ -z "$ptxas" ]; then
    echo "no ptxas on this machine (no CUDA toolkit): skipped"
    exit 0
fi
[ -f "$ptx" ] || { echo "FAIL no $ptx (make builds it)"; exit 1; }
fail=0
for arch in sm_80 sm_90; do
    log=$(mktemp)
    if "$ptxas" -arch=$arch -v "$ptx" -o /dev/null > "$log" 2>&1; then
        kernels=$(grep -c "Compiling entry function" "$log")
        spills=$(grep -E "[1-9][0-9]* bytes spill (stores|loads)" "$log" | wc -l)
        echo "ok   $arch: $kernels kernels assembled by $("$ptxas" --version | tail -1 | sed 's/^Build //'), $spills with spills"
        [ "$kernels" -gt 0 ] || { echo "FAIL $arch: no kernel assembled"; fail=1; }
    else
        echo "FAIL $arch: ptxas refused the PTX:"; sed 's/^/    /' "$log" | head -20
        fail=1
    fi
    rm -f "$log"
done
exit $fail

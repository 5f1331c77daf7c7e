#!/usr/bin/env bash
# tools/gpu-check.sh — the GPU issue's device checks, one command for a machine with an
# NVIDIA GPU (the `device` tool's H100/H200), under 8 minutes in all. Prints the GPU,
# then each section's figures as they come, then a table of the sections; exits
# non-zero when a check fails. Everything printed also goes to $OUT/gpu-check.log.
#
# Prepared here, run there: the device image has CUDA and Python (torch, transformers,
# peft), not grpo.c's build dependencies, and can fetch nothing. So build here and pack:
#   tools/gpu-bundle.sh          (it builds build-gpu/ for -march=x86-64-v3 and packs it)
# then the device tool's run with carry [".gpu-bundle"] (binaries and libraries, packed:
# the unpacked test binaries alone pass the 64 MiB a run may carry) and the command
#   OUT=$OUT tools/gpu-check.sh
# The bundle's binaries are unpacked into build/ here; its libraries into a temporary
# folder, of which only those the machine lacks go on LD_LIBRARY_PATH; cuBLASLt is
# found where the image keeps it (the CUDA toolkit or pip's nvidia-cublas).
#
# The sections are tools/gpu_check/NAME.sh, run in the order of SECTIONS below (most
# telling first, so that a run cut short still says the most), each under its own cap
# and never past the budget: GPU_CHECK_SECONDS (default 480) for the whole command.
# A section reads BUILD, OUT, PYTHON and GPU_CHECK_LEFT (its seconds) from the
# environment and prints as it measures. GPU_CHECK_SECTIONS="a b" runs only those.
# GPU_CHECK_DRY=1 is a dry run on a machine without a GPU: every path on the CPU at
# the smallest sizes, without the assertions that something ran on the GPU.
set -u
BUDGET=${GPU_CHECK_SECONDS:-480}
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
export BUILD=${BUILD:-build}
export OUT=${OUT:-$(mktemp -d)}
export PYTHON=${PYTHON:-python3}
mkdir -p "$OUT"
rm -f "$OUT/attention_fallback" # written by this run's tests section only
exec > >(tee "$OUT/gpu-check.log") 2>&1
# NAME:CAP (seconds at most for the section; none: what is left). bench comes last and takes
# what the checks left (all its lines at full size want about 480 s: a session whose
# checks passed before runs GPU_CHECK_SECTIONS="memory:150 bench": the memory targets,
# not in this list, then the benchmark)
SECTIONS=${GPU_CHECK_SECTIONS:-"tests:100 score_generate:40 splits:35 trl_step:35 demo:60 hf_load:40 sanitizers:60 bench"}
status=0
echo "== GPU"
nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv,noheader 2>&1 || echo "nvidia-smi failed"
echo "== binaries and libraries"
if [ -f .gpu-bundle/bin.tar.xz ]; then
    tar -xJf .gpu-bundle/bin.tar.xz || { echo "FAILED: cannot unpack .gpu-bundle/bin.tar.xz"; exit 1; }
    echo "unpacked .gpu-bundle/bin.tar.xz: $(tar -tJf .gpu-bundle/bin.tar.xz | wc -l) files"
else
    echo "no .gpu-bundle/bin.tar.xz (tools/gpu-bundle.sh): the binaries already in $BUILD"
fi
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
if [ ! -x "$BUILD/grpo" ] || ldd "$BUILD/grpo" | grep -q 'not found'; then
    echo "FAILED: $BUILD/grpo cannot run here:"; ldd "$BUILD/grpo" 2>&1 | grep 'not found\|No such'
    exit 1
fi
echo "grpo: $("$BUILD/grpo" --version 2>&1 | head -1)"
summary=""
for entry in $SECTIONS; do
    name=${entry%%:*} cap=${entry#*:}
    if [ ! -f "tools/gpu_check/$name.sh" ]; then
        echo "== $name: no such section (GPU_CHECK_SECTIONS; there are: $(cd tools/gpu_check && ls *.sh | sed 's/\.sh$//' | grep -v '^run_step$' | tr '\n' ' '))"
        summary="$summary$(printf '%-16s %-8s' "$name" "unknown")\n"
        status=1
        continue
    fi
    # no cap given, or a dry run (the CPU is not the GPU the caps are sized for): the budget alone
    { [ "$cap" = "$entry" ] || [ "${GPU_CHECK_DRY:-0}" = 1 ]; } && cap=$BUDGET
    left=$((BUDGET - SECONDS))
    [ $left -lt $cap ] && cap=$left
    if [ $cap -lt 10 ]; then
        echo "== $name: not run (the ${BUDGET} s budget is spent)"
        summary="$summary$(printf '%-16s %-8s %s' "$name" "not run" "")\n"
        status=1
        continue
    fi
    # the tests section found the tensor-core attention wrong and the plain kernels right
    # (tools/gpu_check/tests.sh): the rest runs on those, and says so
    if [ -f "$OUT/attention_fallback" ] && [ -z "${GRPO_GPU_ATTENTION:-}" ]; then
        export GRPO_GPU_ATTENTION=plain
        echo "== from here on GRPO_GPU_ATTENTION=plain: attention on the plain kernels (the tensor cores' failed)"
    fi
    echo "== $name (at most $cap s)"
    t0=$SECONDS
    GPU_CHECK_LEFT=$((cap - 3)) timeout -k 5 $cap bash "tools/gpu_check/$name.sh"
    rc=$?
    case $rc in 0) word=passed ;; 124 | 137) word="cut off" ;; *) word=FAILED ;; esac
    [ $rc = 0 ] || status=1
    echo "-- $name: $word (rc $rc) in $((SECONDS - t0)) s"
    summary="$summary$(printf '%-16s %-8s %4d s%s' "$name" "$word" $((SECONDS - t0)) \
        "${GRPO_GPU_ATTENTION:+  (GRPO_GPU_ATTENTION=$GRPO_GPU_ATTENTION)}")\n"
done
echo "== sections"
printf "$summary"
echo "== done in ${SECONDS} s (budget ${BUDGET} s), status $status"
exit $status

#!/usr/bin/env bash
# tests/gpu/test_api_headers.sh — grpo.c's own declarations of the CUDA driver API and
# cuBLASLt (src/gpu/cuda.h, src/gpu/cublaslt.h: the build needs no toolkit) against
# NVIDIA's headers, where this machine has a CUDA toolkit (CI has none and skips): every
# constant, type size and struct offset they use (tests/gpu/api_values.c, compiled both
# ways), and each function grpo.c opens with dlsym under the name NVIDIA's header gives
# it (cuda.h maps cuMemAlloc to cuMemAlloc_v2 and so on).
set -u
ROOT=${ROOT:-$(cd "$(dirname "$0")/../.." && pwd)}
inc=$(ls -d /usr/local/cuda/include /usr/local/cuda-*/include 2>/dev/null | head -1)
if [ -z "$inc" ] || [ ! -f "$inc/cublasLt.h" ]; then
    echo "no CUDA toolkit headers on this machine (cuda.h, cublasLt.h): skipped"
    exit 0
fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fail=0
cc=${CC:-cc}
$cc -std=c11 -Wall -Werror -I"$ROOT/src" -o "$tmp/ours" "$ROOT/tests/gpu/api_values.c" || { echo "FAIL api_values.c (ours) does not build"; exit 1; }
$cc -std=c11 -Wall -Werror -DNVIDIA_HEADERS -I"$inc" -o "$tmp/nvidia" "$ROOT/tests/gpu/api_values.c" || { echo "FAIL api_values.c (NVIDIA's headers, $inc) does not build"; exit 1; }
"$tmp/ours" > "$tmp/ours.txt" && "$tmp/nvidia" > "$tmp/nvidia.txt" || { echo "FAIL api_values did not run"; exit 1; }
if cmp -s "$tmp/ours.txt" "$tmp/nvidia.txt"; then
    echo "ok   $(wc -l < "$tmp/ours.txt") constants, sizes and offsets equal NVIDIA's ($inc)"
else
    echo "FAIL values differ from NVIDIA's ($inc): ours, then NVIDIA's:"
    diff "$tmp/ours.txt" "$tmp/nvidia.txt" | grep '^[<>]' | head -20
    fail=1
fi
# The functions: for each (pointer field, exported name) pair of cuda.c / cublaslt.c, the
# API name must be a function NVIDIA's header declares, and the symbol its macros map it
# to (cuMemAlloc -> cuMemAlloc_v2) must be the name dlsym looks up. (The prototypes
# themselves were compared by hand: ours and NVIDIA's declarations cannot meet in one
# translation unit.)
pairs=$(grep -h -o '{(void \*\*)&api->[A-Za-z]*, "[A-Za-z_0-9]*"}' "$ROOT/src/gpu/cuda.c" "$ROOT/src/gpu/cublaslt.c" |
        sed 's/{(void \*\*)&api->\([A-Za-z]*\), "\([A-Za-z_0-9]*\)"}/\2/')
n=$(echo $pairs | wc -w)
[ "$n" -ge 30 ] || { echo "FAIL found only $n dlsym names in cuda.c/cublaslt.c"; exit 1; }
hdr='#include <cuda.h>
#include <cublasLt.h>'
{
    echo "$hdr"
    echo 'void *grpo_api_names[] = {'
    for exported in $pairs; do echo "    (void *)&${exported%_v2},"; done
    echo '};'
} > "$tmp/decl.c"
if ! $cc -std=c11 -Wall -Werror -I"$inc" -c -o "$tmp/decl.o" "$tmp/decl.c" 2> "$tmp/decl.err"; then
    echo "FAIL a function grpo.c opens is not declared by NVIDIA's headers:"; grep error "$tmp/decl.err" | head -5
    exit 1
fi
# through the preprocessor: each @@ line's last word is the symbol the API name becomes
# (the dlsym name quoted, so that no macro touches it)
{ echo "$hdr"; for exported in $pairs; do echo "@@ \"$exported\" ${exported%_v2}"; done; } > "$tmp/names.c"
$cc -E -P -I"$inc" "$tmp/names.c" 2> /dev/null | grep '^@@' |
    sed 's/__CUDA_API_PT[DS][SZ] *( *\([A-Za-z_0-9]*\) *)/\1/; s/"//g' > "$tmp/names.txt"
bad=$(awk '$2 != $3 {print "dlsym \"" $2 "\", NVIDIA'"'"'s header: " $3}' "$tmp/names.txt")
if [ "$(wc -l < "$tmp/names.txt")" -ne "$n" ]; then
    echo "FAIL the preprocessor gave $(wc -l < "$tmp/names.txt") of $n names"; fail=1
elif [ -n "$bad" ]; then
    echo "FAIL $bad"; fail=1
else
    echo "ok   $n functions declared by NVIDIA's headers, under the names dlsym looks up"
fi
exit $fail

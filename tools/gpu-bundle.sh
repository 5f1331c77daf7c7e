#!/usr/bin/env bash
# tools/gpu-bundle.sh — the shared libraries build/grpo and the tests link against
# (oneDNN, OpenBLAS, OpenMPI, jansson, Oniguruma, utf8proc, libyaml and what they
# pull in), packed for the GPU machine, whose image has CUDA and Python but not
# these Debian packages and can fetch nothing. Run here after `make all tests-bin`;
# then the device tool's run with carry ["build/grpo", "build/tests/gpu", "build/gpu", ".gpu-bundle"] and
# `tools/gpu-check.sh`, which unpacks it there and exposes only the libraries the
# machine lacks (its own glibc, libstdc++, libgomp are kept where it has them).
# glibc itself is never packed: the binaries need GLIBC 2.34 or newer there.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUILD:-build}
DEST=.gpu-bundle
[ -x "$BUILD/grpo" ] || { echo "gpu-bundle: no $BUILD/grpo: run make all tests-bin first" >&2; exit 1; }
mkdir -p "$DEST"
libs=$(ldd "$BUILD/grpo" $(find "$BUILD/tests/gpu" -type f -name 'test_*' ! -name '*.d' 2>/dev/null) |
       awk '$3 ~ /^\// {print $3}' | grep -v -E '/(libc|libm|libdl|libpthread|librt)\.so' | sort -u)
tar -chJf "$DEST/libs.tar.xz.tmp" --transform 's|.*/||' $libs 2> >(grep -v 'Removing leading' >&2)
mv "$DEST/libs.tar.xz.tmp" "$DEST/libs.tar.xz"
echo "gpu-bundle: $(echo $libs | wc -w) libraries, $(du -h "$DEST/libs.tar.xz" | cut -f1) in $DEST/libs.tar.xz"

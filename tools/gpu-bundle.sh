#!/usr/bin/env bash
# tools/gpu-bundle.sh — what the GPU machine needs from this one, packed into .gpu-bundle/
# (ignored by git, carried by the device tool: carry [".gpu-bundle"]):
#  - bin.tar.xz: build/grpo, the GPU test binaries, the bench binaries and the embedded
#    PTX (for ptxas there), under their build paths: unpacked they pass the 64 MiB a run
#    may carry (the test binaries each hold the library), packed they are a few MiB;
#  - libs.tar.xz: the shared libraries they link against (oneDNN, OpenBLAS, OpenMPI,
#    jansson, Oniguruma, utf8proc, libyaml and what they pull in): the device image has
#    CUDA and Python but not these Debian packages, and can fetch nothing.
# It builds what it packs, in build-gpu/ (BUNDLE_BUILD) with ARCH=-march=x86-64-v3:
# AVX2 and FMA, which any x86-64 host of an H100/H200 has, and nothing of this
# machine's own (-march=native here is an AMD EPYC's, with instructions an Intel host
# lacks); the archive holds them under build/, where tools/gpu-check.sh unpacks them.
# There it also puts on LD_LIBRARY_PATH only the libraries the machine lacks (its own
# glibc, libstdc++, libgomp are kept where it has them). glibc itself is never packed:
# the binaries need GLIBC 2.34 or newer there.
# Also packed: the demo's base model as `make demo` makes it here (its first stage, by
# build/grpo, made when build/demo has none; 3.2 MB) in $DEST/demo-base, from which
# tools/gpu_check/demo.sh runs the demo's GRPO stage on the GPU: the base its recorded
# CPU curve (tools/gpu_check/demo_cpu.json) started from.
set -eu
ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
BUILD=${BUNDLE_BUILD:-build-gpu}
DEST=.gpu-bundle
mkdir -p "$DEST"
want="$BUILD/grpo $(ls tests/gpu/test_*.c | sed "s|^tests/gpu/\(.*\)\.c$|$BUILD/tests/gpu/\1|") $BUILD/gpu/kernels.ptx"
make -j"$(nproc)" BUILD="$BUILD" ARCH=-march=x86-64-v3 $want > "$DEST/make.log" 2>&1 ||
    { echo "gpu-bundle: the build failed (make BUILD=$BUILD ARCH=-march=x86-64-v3):" >&2; tail -20 "$DEST/make.log" >&2; exit 1; }
rm -f "$DEST/make.log"
tests=$(ls tests/gpu/test_*.c | sed "s|^tests/gpu/\(.*\)\.c$|$BUILD/tests/gpu/\1|")
benches=$(find "$BUILD/bench" -maxdepth 1 -type f -name 'bench_*' ! -name '*.d' 2>/dev/null | sort)
# -T0: xz's threads (the 27 test binaries share most of their bytes: a solid archive)
XZ_OPT="-6 -T0" tar -cJf "$DEST/bin.tar.xz.tmp" --transform "s|^$BUILD/|build/|" "$BUILD/grpo" $tests $benches \
    "$BUILD/gpu/kernels.ptx"
mv "$DEST/bin.tar.xz.tmp" "$DEST/bin.tar.xz"
libs=$(ldd "$BUILD/grpo" $tests $benches | awk '$3 ~ /^\// {print $3}' |
       grep -v -E '/(libc|libm|libdl|libpthread|librt)\.so' | sort -u)
tar -chJf "$DEST/libs.tar.xz.tmp" --transform 's|.*/||' $libs 2> >(grep -v 'Removing leading' >&2)
mv "$DEST/libs.tar.xz.tmp" "$DEST/libs.tar.xz"
echo "gpu-bundle: $(echo $tests $benches | wc -w) test and bench binaries and grpo, $(du -h "$DEST/bin.tar.xz" | cut -f1) in $DEST/bin.tar.xz;" \
     "$(echo $libs | wc -w) libraries, $(du -h "$DEST/libs.tar.xz" | cut -f1) in $DEST/libs.tar.xz; $(du -sh "$DEST" | cut -f1) to carry (64 MiB at most)"
demo_grpo=build/grpo
[ -x "$demo_grpo" ] || demo_grpo="$BUILD/grpo"
DEMO_BASE_ONLY=1 DEMO_OUT=build/demo GRPO="$demo_grpo" tools/demo.sh > /dev/null
rm -rf "$DEST/demo-base"
mkdir -p "$DEST/demo-base"
cp build/demo/base/{config.json,generation_config.json,model.safetensors,tokenizer.json,tokenizer_config.json,.sft_steps} \
    "$DEST/demo-base/"
echo "gpu-bundle: the demo's base model, $(du -sh "$DEST/demo-base" | cut -f1) in $DEST/demo-base"

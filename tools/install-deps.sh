#!/usr/bin/env bash
# Installs the Debian 12 packages grpo.c needs to build and test, when missing
# (libsimde-dev: `make test-isa` runs the AVX-512 code on CPUs without it; clang: the
# GPU kernels are compiled to PTX on every machine, src/gpu/kernels/).
# As root it runs apt-get; otherwise it prints the exact command to run.
#   tools/install-deps.sh          build + test dependencies
#   tools/install-deps.sh --bench  also PyTorch (Debian's python3-torch), the
#                                  benchmarks' and the fixture generator's peer
#   tools/install-deps.sh --fuzz   also clang, its libFuzzer/sanitizer runtimes
#                                  (libclang-rt-dev), its OpenMP runtime (libomp-dev)
#                                  and llvm-symbolizer (llvm), for `make fuzz`
set -eu
pkgs="gcc make clang libopenblas-openmp-dev libdnnl-dev libjansson-dev libonig-dev libutf8proc-dev libyaml-dev libsimde-dev libopenmpi-dev openmpi-bin python3 python3-protobuf nodejs npm"
[ "${1:-}" = "--bench" ] && pkgs="$pkgs python3-torch python3-numpy"
[ "${1:-}" = "--fuzz" ] && pkgs="$pkgs libclang-rt-dev libomp-dev llvm"
missing=""
for p in $pkgs; do
    # node and npm may come from elsewhere (e.g. a newer Node.js): accept them on PATH
    case $p in nodejs) command -v node >/dev/null 2>&1 && continue ;; npm) command -v npm >/dev/null 2>&1 && continue ;; esac
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0
if [ "$(id -u)" -eq 0 ]; then
    echo "installing:$missing" >&2
    export DEBIAN_FRONTEND=noninteractive
    apt-get update -qq >&2
    apt-get install -y -qq --no-install-recommends $missing >&2
else
    echo "grpo.c needs these Debian packages:$missing" >&2
    echo "install them with:  sudo apt-get install -y$missing" >&2
    exit 1
fi

#!/usr/bin/env bash
# examples/llamacpp/server/build-server.sh [--stock] SRC BUILD - builds llama-server with specdec's
# speculative decoding, from the pinned llama.cpp source at SRC (examples/llamacpp/fetch-llama.sh
# SRC puts it there), in BUILD. The last line printed is the path of the built llama-server.
#
# SRC is never modified: BUILD/src is a clone of it, reset to SRC's commit and patched with this
# folder's patches/*.patch in order (--stock applies none: the stock server from the same source,
# the measure the tests and the race compare against). ggml is built portable (GGML_NATIVE=OFF),
# as in the llamacpp preset; only the llama-server target and what it needs are built. No network:
# the web UI is left out (LLAMA_USE_PREBUILT_UI=OFF, LLAMA_BUILD_UI=OFF) and HTTPS is off.
# The patches are a git format-patch series (git am applies them to a llama.cpp branch as commits).
# Needs git, cmake, a C++20 compiler and Eigen 3 (libeigen3-dev), which specdec's headers use.
set -euo pipefail

die() { echo "build-server.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
specdec_dir=$(cd "$here/../../.." && pwd)
stock=0
if [[ "${1:-}" == "--stock" ]]; then stock=1; shift; fi
[[ $# -eq 2 ]] || die "usage: build-server.sh [--stock] SRC BUILD"
src=$1
build=$2
[[ -f "$src/include/llama.h" && -d "$src/tools/server" ]] ||
  die "SRC='$src' is not a llama.cpp source tree (make one with examples/llamacpp/fetch-llama.sh SRC)"
[[ -f "$src/.specdec-bundle-sha256" ]] ||
  echo "build-server.sh: warning: $src was not made by fetch-llama.sh; the patches target its pinned source" >&2
src=$(cd "$src" && pwd)
commit=$(git -C "$src" rev-parse HEAD) || die "SRC='$src' is not a git clone"
mkdir -p "$build"
build=$(cd "$build" && pwd)

# The copy: a clone of SRC at its commit, reset on every run so that the patches apply to the
# pinned source whatever an earlier run left.
if [[ ! -d "$build/src/.git" ]]; then
  git clone --quiet --no-checkout "$src" "$build/src"
fi
git -C "$build/src" fetch --quiet "$src" "$commit"
git -C "$build/src" checkout --quiet --force --detach "$commit"
git -C "$build/src" clean --quiet -fdx
if [[ $stock -eq 0 ]]; then
  for patch in "$here"/patches/*.patch; do
    [[ -e "$patch" ]] || die "no patches in $here/patches"
    git -C "$build/src" apply --whitespace=nowarn "$patch" || die "$(basename "$patch") does not apply to $commit"
  done
fi

cmake -S "$build/src" -B "$build/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DLLAMA_BUILD_SERVER=ON -DLLAMA_BUILD_TOOLS=ON -DLLAMA_BUILD_TESTS=OFF -DLLAMA_BUILD_EXAMPLES=OFF \
  -DLLAMA_BUILD_APP=OFF -DLLAMA_OPENSSL=OFF -DLLAMA_USE_PREBUILT_UI=OFF -DLLAMA_BUILD_UI=OFF \
  -DSPECDEC_DIR="$specdec_dir" >"$build/configure.log" 2>&1 ||
  { tail -n 30 "$build/configure.log" >&2; die "cmake configure failed (log: $build/configure.log)"; }
cmake --build "$build/build" --target llama-server -j "${SPECDEC_BUILD_JOBS:-$(nproc)}" ||
  die "the build failed"
binary="$build/build/bin/llama-server"
[[ -x "$binary" ]] || die "no llama-server at $binary"
echo "$binary"

#!/usr/bin/env bash
# examples/llamacpp/server/build-server.sh [--stock] SRC BUILD - builds llama-server with specdec's
# speculative decoding, from the pinned llama.cpp source at SRC (examples/llamacpp/fetch-llama.sh
# SRC puts it there), in BUILD. The last line printed is the path of the built llama-server.
#
# patch-source.sh makes BUILD/src, a patched clone of SRC (SRC is never modified; --stock applies
# no patch: the stock server from the same source, the measure the tests and the race compare
# against). BUILD/build is specdec's own CMake build with the llama.cpp adapters on BUILD/src and
# SPECDEC_LLAMACPP_SERVER=ON, the way the llamacpp preset builds it in CI, with only the
# llama-server target and what it needs built. ggml is built portable (GGML_NATIVE=OFF), as in the
# llamacpp preset. No network: the web UI is left out and HTTPS is off.
# Needs git, cmake, a C++20 compiler, Eigen 3 (libeigen3-dev), CLI11 and nlohmann-json (the
# adapters' CMake file also declares specdec-llama, which is not built here).
set -euo pipefail

die() { echo "build-server.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
specdec_dir=$(cd "$here/../../.." && pwd)
stock=()
if [[ "${1:-}" == "--stock" ]]; then stock=(--stock); shift; fi
[[ $# -eq 2 ]] || die "usage: build-server.sh [--stock] SRC BUILD"
mkdir -p "$2"
build=$(cd "$2" && pwd)
"$here/patch-source.sh" "${stock[@]}" "$1" "$build/src"
# A BUILD/build configured from another source folder (llama.cpp's own, by an older version of this
# script) cannot be reconfigured from specdec's: start it afresh.
if [[ -f "$build/build/CMakeCache.txt" ]] &&
   ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$specdec_dir" "$build/build/CMakeCache.txt"; then
  rm -rf "$build/build"
fi

cmake -S "$specdec_dir" -B "$build/build" -DCMAKE_BUILD_TYPE=Release -DGGML_NATIVE=OFF \
  -DSPECDEC_BUILD_LLAMACPP=ON -DSPECDEC_LLAMACPP_SOURCE_DIR="$build/src" -DSPECDEC_LLAMACPP_SERVER=ON \
  -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_INSTALL=OFF \
  >"$build/configure.log" 2>&1 ||
  { tail -n 30 "$build/configure.log" >&2; die "cmake configure failed (log: $build/configure.log)"; }
cmake --build "$build/build" --target llama-server -j "${SPECDEC_BUILD_JOBS:-$(nproc)}" ||
  die "the build failed"
binary="$build/build/bin/llama-server"
[[ -x "$binary" ]] || die "no llama-server at $binary"
echo "$binary"

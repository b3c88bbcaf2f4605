#!/usr/bin/env bash
# examples/llamacpp/server/build-server.sh [--stock] [--portable] SRC BUILD - builds llama-server with specdec's
# speculative decoding, from the pinned llama.cpp source at SRC (examples/llamacpp/fetch-llama.sh
# SRC puts it there), in BUILD. The last line printed is the path of the built llama-server.
#
# patch-source.sh makes BUILD/src, a patched clone of SRC (SRC is never modified; --stock applies
# no patch: the stock server from the same source, the measure the tests and the race compare
# against). BUILD/build is specdec's own CMake build with the llama.cpp adapters on BUILD/src and
# SPECDEC_LLAMACPP_SERVER=ON, the way the llamacpp preset builds it in CI, with only the
# llama-server target and what it needs built, and ggml-rpc-server beside it (ggml's RPC backend is
# on: --rpc HOST:PORT,... puts the model's layers on ggml-rpc-server processes). ggml is built as a user's own llama.cpp build is,
# for the host's instruction sets (GGML_NATIVE=ON), with only the AMX kernels turned off (on a
# 2026-11-27 Intel Xeon test host they crashed on every Q8_0 model): so a comparison with a stock
# server the user built compares speculation, not AVX2 against AVX-512. --portable builds ggml for
# any x86-64 with AVX2 (GGML_NATIVE=OFF), as the llamacpp preset does in CI. No network: the web UI
# is left out and HTTPS is off.
# Needs git, cmake, a C++20 compiler, Eigen 3 (libeigen3-dev), CLI11 and nlohmann-json (the
# adapters' CMake file also declares specdec-llama, which is not built here).
set -euo pipefail

die() { echo "build-server.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
specdec_dir=$(cd "$here/../../.." && pwd)
stock=()
native=(-DGGML_NATIVE=ON)
if [[ $(uname -m) == x86_64 ]]; then  # -march=native, without the AMX extensions
  native+=(-DGGML_AMX_TILE=OFF -DGGML_AMX_INT8=OFF -DGGML_AMX_BF16=OFF
           "-DCMAKE_C_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16"
           "-DCMAKE_CXX_FLAGS=-mno-amx-tile -mno-amx-int8 -mno-amx-bf16")
fi
while [[ $# -gt 0 && $1 == --* ]]; do
  case $1 in
    --stock) stock=(--stock) ;;
    --portable) native=(-DGGML_NATIVE=OFF) ;;
    *) die "unknown option $1 (usage: build-server.sh [--stock] [--portable] SRC BUILD)" ;;
  esac
  shift
done
[[ $# -eq 2 ]] || die "usage: build-server.sh [--stock] [--portable] SRC BUILD"
mkdir -p "$2"
build=$(cd "$2" && pwd)
"$here/patch-source.sh" "${stock[@]}" "$1" "$build/src"
# A BUILD/build configured from another source folder (llama.cpp's own, by an older version of this
# script) cannot be reconfigured from specdec's: start it afresh.
if [[ -f "$build/build/CMakeCache.txt" ]] &&
   ! grep -qxF "CMAKE_HOME_DIRECTORY:INTERNAL=$specdec_dir" "$build/build/CMakeCache.txt"; then
  rm -rf "$build/build"
fi

cmake -S "$specdec_dir" -B "$build/build" -DCMAKE_BUILD_TYPE=Release "${native[@]}" \
  -DSPECDEC_BUILD_LLAMACPP=ON -DSPECDEC_LLAMACPP_SOURCE_DIR="$build/src" -DSPECDEC_LLAMACPP_SERVER=ON \
  -DSPECDEC_BUILD_TESTS=OFF -DSPECDEC_BUILD_EXAMPLES=OFF -DSPECDEC_INSTALL=OFF \
  >"$build/configure.log" 2>&1 ||
  { tail -n 30 "$build/configure.log" >&2; die "cmake configure failed (log: $build/configure.log)"; }
cmake --build "$build/build" --target llama-server ggml-rpc-server -j "${SPECDEC_BUILD_JOBS:-$(nproc)}" ||
  die "the build failed"
binary="$build/build/bin/llama-server"
[[ -x "$binary" ]] || die "no llama-server at $binary"
[[ -x "$build/build/bin/ggml-rpc-server" ]] || die "no ggml-rpc-server beside it"
echo "$binary"

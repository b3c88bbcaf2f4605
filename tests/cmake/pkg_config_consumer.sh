#!/bin/sh
# The pkg-config consumer: after `cmake --install` into PREFIX, `pkg-config --cflags specdec` gives
# what a plain compiler command needs, and the consumer builds and runs with it.
#   pkg_config_consumer.sh PREFIX CXX SOURCE OUTPUT
set -eu
prefix=$1 cxx=$2 source=$3 output=$4
PKG_CONFIG_PATH="$prefix/share/pkgconfig${PKG_CONFIG_PATH:+:$PKG_CONFIG_PATH}"
export PKG_CONFIG_PATH
version=$(pkg-config --modversion specdec)
flags=$(pkg-config --cflags specdec)
echo "pkg-config: specdec $version, --cflags: $flags"
include=$(echo "$flags" | tr ' ' '\n' | sed -n 's/^-I//p' | head -n 1)
if [ "$(cd "$include" && pwd -P)" != "$(cd "$prefix/include" && pwd -P)" ]; then
  echo "the first -I is not the installed include folder $prefix/include" >&2
  exit 1
fi
# shellcheck disable=SC2086  # the flags are words
"$cxx" -std=c++20 $flags "$source" -o "$output"
"$output"
echo "pkg-config consumer: built and ran"

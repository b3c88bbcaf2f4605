#!/usr/bin/env bash
# examples/llamacpp/server/patch-source.sh [--stock] SRC DEST - puts at DEST the pinned llama.cpp
# source at SRC (examples/llamacpp/fetch-llama.sh SRC makes it) with this folder's patches/*.patch
# applied in order: the source llama-server is built from with specdec. --stock applies none.
#
# SRC is never modified: DEST is a git clone of it, reset to SRC's commit and cleaned on every run
# (so the patches always apply to the pinned source, whatever an earlier run left), then patched.
# The patches change llama-server and add to common/ only (draft-simple gains an optional caller's
# pick and an option to catch its cache up at draft time, without which it drafts as before;
# common_sampler gains three helpers), so the llama.cpp
# libraries built from DEST behave as the pinned ones: CI builds the adapters' tests and the
# server from one patched tree.
# The patches are a git format-patch series (git am applies them to a llama.cpp branch as commits).
set -euo pipefail

die() { echo "patch-source.sh: $*" >&2; exit 1; }

here=$(cd "$(dirname "$0")" && pwd)
stock=0
if [[ "${1:-}" == "--stock" ]]; then stock=1; shift; fi
[[ $# -eq 2 ]] || die "usage: patch-source.sh [--stock] SRC DEST"
src=$1
dest=$2
[[ -f "$src/include/llama.h" && -d "$src/tools/server" ]] ||
  die "SRC='$src' is not a llama.cpp source tree (make one with examples/llamacpp/fetch-llama.sh SRC)"
[[ -f "$src/.specdec-bundle-sha256" ]] ||
  echo "patch-source.sh: warning: $src was not made by fetch-llama.sh; the patches target its pinned source" >&2
src=$(cd "$src" && pwd)
commit=$(git -C "$src" rev-parse HEAD) || die "SRC='$src' is not a git clone"

if [[ ! -d "$dest/.git" ]]; then
  [[ ! -e "$dest" ]] || die "DEST='$dest' exists and is not a clone made by this script"
  git clone --quiet --no-checkout "$src" "$dest"
fi
git -C "$dest" fetch --quiet "$src" "$commit"
git -C "$dest" checkout --quiet --force --detach "$commit"
git -C "$dest" clean --quiet -fdx
if [[ $stock -eq 0 ]]; then
  for patch in "$here"/patches/*.patch; do
    [[ -e "$patch" ]] || die "no patches in $here/patches"
    git -C "$dest" apply --whitespace=nowarn "$patch" || die "$(basename "$patch") does not apply to $commit"
  done
fi

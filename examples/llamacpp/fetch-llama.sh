#!/usr/bin/env bash
# examples/llamacpp/fetch-llama.sh DEST - puts the pinned llama.cpp source tree at DEST.
#
# The source comes from the npm registry: node-llama-cpp 3.22.1 ships llama.cpp's full source of
# 2026-09-28 (ggml 0.25.1) as a git bundle, package/llama/gitRelease.bundle. This script packs
# that version, checks the bundle's sha256, and clones the bundle to DEST. Needs npm, git, tar and
# sha256sum, and a route to the npm registry. Nothing is built here; see examples/llamacpp/README.md.
set -euo pipefail

readonly package="node-llama-cpp@3.22.1"
readonly bundle_sha256="5f5d1105d5df040738d87b8290e5d17e7362131cdcfdb0831618e0ea528b4a51"

die() { echo "fetch-llama.sh: $*" >&2; exit 1; }

[[ $# -eq 1 ]] || die "usage: fetch-llama.sh DEST (a directory that does not exist yet, or an earlier DEST of this script)"
dest=$1
for tool in npm git tar sha256sum; do
  command -v "$tool" >/dev/null 2>&1 || die "'$tool' is not installed (on Debian: apt-get install -y npm git)"
done

if [[ -e "$dest/.git" ]]; then
  echo "fetch-llama.sh: $dest already holds a clone; checking it is the pinned one"
  [[ -f "$dest/.specdec-bundle-sha256" && "$(cat "$dest/.specdec-bundle-sha256")" == "$bundle_sha256" ]] ||
    die "$dest holds another llama.cpp; remove it or choose another DEST"
  exit 0
fi
[[ ! -e "$dest" ]] || die "$dest exists and is not a clone made by this script"

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
echo "fetch-llama.sh: npm pack $package"
if ! (cd "$work" && npm pack --silent "$package" >"$work/pack.log" 2>&1); then
  cat "$work/pack.log" >&2
  die "npm pack $package failed (no route to the npm registry? see the lines above)"
fi
tarball=$(ls "$work"/node-llama-cpp-*.tgz 2>/dev/null | head -n 1)
[[ -n "$tarball" ]] || die "npm pack left no tarball"
tar -xzf "$tarball" -C "$work" package/llama/gitRelease.bundle ||
  die "the package has no package/llama/gitRelease.bundle"
actual=$(sha256sum "$work/package/llama/gitRelease.bundle" | cut -d' ' -f1)
[[ "$actual" == "$bundle_sha256" ]] ||
  die "the bundle's sha256 is $actual, expected $bundle_sha256: not the pinned source"
git clone --quiet "$work/package/llama/gitRelease.bundle" "$dest" 2>"$work/clone.log" ||
  { cat "$work/clone.log" >&2; die "git clone of the bundle failed"; }
echo "$bundle_sha256" >"$dest/.specdec-bundle-sha256"
echo "fetch-llama.sh: llama.cpp ($(git -C "$dest" log -1 --format=%cd --date=short)) is at $dest"

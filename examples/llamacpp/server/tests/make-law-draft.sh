#!/usr/bin/env bash
# examples/llamacpp/server/tests/make-law-draft.sh MODELS_DIR OUT_DIR RESHAPE CONVERTER [LAYERS]
#
# Makes the draft model of the law test (law-test.sh): OUT_DIR/stories260K-L<LAYERS>.gguf, the
# first LAYERS (default 4) of the 5 layers of stories260K.bin in MODELS_DIR (../shared/models;
# never committed, never downloaded) with its final norm and classifier, cut by specdec-reshape
# --keep-layers (RESHAPE, built with examples/llama2c), converted by llama.cpp's
# llama-convert-llama2c-to-ggml (CONVERTER) with the tok512 vocabulary, and its
# llama.context_length set to the checkpoint's 512 with the source tree's gguf-py (the converter
# writes 128), as make-models.sh does for the target. A draft that differs from the target: at
# temperature 1 on the law test's prompt about a quarter of its tokens are kept with 4 layers,
# under a tenth with 2 (the Q8_0 copy keeps nearly all, so it tests little).
# gguf-py is found at $LLAMA_SRC/gguf-py (default build/llama.cpp-src of this checkout) and run
# with /usr/bin/python3 (Debian's numpy). A file already made is kept. Prints the file's path.
set -euo pipefail
die() { echo "make-law-draft.sh: $*" >&2; exit 1; }
[[ $# -eq 4 || $# -eq 5 ]] || die "usage: make-law-draft.sh MODELS_DIR OUT_DIR RESHAPE CONVERTER [LAYERS]"
models=$1 out=$2 reshape=$3 convert=$4 layers=${5:-4}
here=$(cd "$(dirname "$0")" && pwd)
src=${LLAMA_SRC:-$here/../../../../build/llama.cpp-src}
ckpt=$models/stories260K.bin vocab=$models/stories260K.tok512.bin
[[ -f $ckpt && -f $vocab ]] || die "$ckpt or $vocab not found (see ../shared/models/README.md)"
[[ -x $reshape ]] || die "no specdec-reshape at '$reshape'"
[[ -x $convert ]] || die "no converter at '$convert' (llama-convert-llama2c-to-ggml)"
[[ $layers =~ ^[1-4]$ ]] || die "LAYERS must be 1..4 (stories260K has 5)"
[[ -f $src/gguf-py/gguf/scripts/gguf_set_metadata.py ]] || die "no gguf-py under LLAMA_SRC='$src'"
mkdir -p "$out"
source "$here/stories-gguf.sh"
draft=$out/stories260K-L$layers.gguf
if [[ ! -f $draft ]]; then
  log=$out/make-law-draft.log
  : >"$log"
  tmp=$(mktemp -d "$out/.law-draft.XXXXXX")
  trap 'rm -rf "$tmp"' EXIT
  "$reshape" "$ckpt" "$tmp/draft.bin" --keep-layers "$layers" >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "specdec-reshape failed"; }
  to_gguf "$tmp/draft.bin" "$draft"
fi
n=$(gguf_fields "$draft" llama.context_length llama.block_count) || die "cannot read $draft"
[[ $n == "512 $layers" ]] || die "$draft: context length and layers are '$n', not '512 $layers'"
echo "$draft"

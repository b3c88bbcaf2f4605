#!/usr/bin/env bash
# examples/llamacpp/server/tests/make-models.sh MODELS_DIR OUT_DIR CONVERTER QUANTIZE
#
# Makes the local GGUF models that llama.cpp's server tests run on here, at test time, from the
# llama2.c checkpoints in MODELS_DIR (../shared/models; never committed, never downloaded):
#   OUT_DIR/stories260K.gguf       stories260K.bin with its tok512 vocabulary, F32, converted by
#                                  llama.cpp's llama-convert-llama2c-to-ggml (CONVERTER); the
#                                  converter writes llama.context_length 128, rewritten to the
#                                  checkpoint's real seq_len (512) with the source tree's gguf-py
#   OUT_DIR/stories260K-q8_0.gguf  the same model quantized to Q8_0 by QUANTIZE (llama-quantize):
#                                  the draft model of the speculative tests (same vocabulary)
#   OUT_DIR/stories260K-v448.gguf  stories260K.gguf without the last 64 of its 512 tokens
#                                  (cut-vocab.py): a draft model with a smaller vocabulary
# gguf-py is found at $LLAMA_SRC/gguf-py (LLAMA_SRC defaults to build/llama.cpp-src of this
# checkout) and run with /usr/bin/python3 (Debian's numpy). Files already made are kept.
set -euo pipefail
die() { echo "make-models.sh: $*" >&2; exit 1; }
[[ $# -eq 4 ]] || die "usage: make-models.sh MODELS_DIR OUT_DIR CONVERTER QUANTIZE"
models=$1 out=$2 convert=$3 quantize=$4
here=$(cd "$(dirname "$0")" && pwd)
src=${LLAMA_SRC:-$here/../../../../build/llama.cpp-src}
ckpt=$models/stories260K.bin vocab=$models/stories260K.tok512.bin
[[ -f $ckpt && -f $vocab ]] || die "$ckpt or $vocab not found (see ../shared/models/README.md)"
[[ -x $convert ]] || die "no converter at '$convert' (llama-convert-llama2c-to-ggml)"
[[ -x $quantize ]] || die "no llama-quantize at '$quantize'"
[[ -f $src/gguf-py/gguf/scripts/gguf_set_metadata.py ]] || die "no gguf-py under LLAMA_SRC='$src'"
mkdir -p "$out"
log=$out/make-models.log
: >"$log"
source "$here/stories-gguf.sh"

main=$out/stories260K.gguf draft=$out/stories260K-q8_0.gguf
[[ -f $main ]] || to_gguf "$ckpt" "$main"
if [[ ! -f $draft ]]; then
  "$quantize" "$main" "$draft.tmp" Q8_0 >>"$log" 2>&1 || { tail -n 20 "$log" >&2; die "quantizing $main failed"; }
  mv "$draft.tmp" "$draft"
fi
small=$out/stories260K-v448.gguf
if [[ ! -f $small ]]; then
  PYTHONPATH=$src/gguf-py "$python" "$here/cut-vocab.py" "$main" "$small.tmp" 64 >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "cutting the vocabulary of $main failed"; }
  mv "$small.tmp" "$small"
fi
for f in "$main" "$draft" "$small"; do
  n_ctx=$(gguf_fields "$f" llama.context_length) || die "cannot read $f"
  [[ $n_ctx == 512 ]] || die "$f: llama.context_length is $n_ctx, not 512"
done
echo "make-models.sh: $main, $draft and $small (n_ctx 512)"

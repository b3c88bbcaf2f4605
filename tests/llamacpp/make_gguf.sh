#!/usr/bin/env bash
# tests/llamacpp/make_gguf.sh MODELS_DIR OUT_DIR RESHAPE CONVERT QUANTIZE [--big]
#
# Makes the GGUF test models from the llama2.c checkpoints in MODELS_DIR (never committed; made
# at test time): OUT_DIR/target.gguf (aidreams260K, F32), OUT_DIR/target-q8_0.gguf (Q8_0) and
# OUT_DIR/draft.gguf (its first 3 layers, specdec-reshape --keep-layers 3); when stories260K is
# there too, OUT_DIR/stories.gguf (F32) and OUT_DIR/stories-draft.gguf (its first 4 layers). With
# --big, also OUT_DIR/big.gguf and big-q8_0.gguf (the 110M-shape reshape, for the race) and
# big-draft.gguf.
# Without MODELS_DIR/aidreams260K.bin it says so and makes nothing (the tests then skip).
# Files already made are kept.
set -euo pipefail
[[ $# -ge 5 ]] || { echo "usage: make_gguf.sh MODELS_DIR OUT_DIR RESHAPE CONVERT QUANTIZE [--big]" >&2; exit 2; }
models=$1 out=$2 reshape=$3 convert=$4 quantize=$5 big=${6:-}
ckpt=$models/aidreams260K.bin vocab=$models/aidreams260K.tok512.bin
if [[ ! -f $ckpt || ! -f $vocab ]]; then
  echo "make_gguf.sh: skipping: $ckpt or $vocab not found (the llama.cpp tests need ../shared/models)"
  exit 0
fi
mkdir -p "$out"
log=$out/make_gguf.log
: >"$log"

to_gguf() {  # CHECKPOINT OUT [VOCAB]: llama2.c checkpoint -> GGUF F32 with its tokenizer
  [[ -f $2 ]] && return 0
  "$convert" --copy-vocab-from-model "${3:-$vocab}" --llama2c-model "$1" --llama2c-output-model "$2.tmp" >>"$log" 2>&1 ||
    { cat "$log" >&2; echo "make_gguf.sh: converting $1 failed" >&2; exit 1; }
  mv "$2.tmp" "$2"
}
to_q8() {
  [[ -f $2 ]] && return 0
  "$quantize" "$1" "$2.tmp" Q8_0 >>"$log" 2>&1 ||
    { cat "$log" >&2; echo "make_gguf.sh: quantizing $1 failed" >&2; exit 1; }
  mv "$2.tmp" "$2"
}

"$reshape" "$ckpt" "$out/draft.bin" --keep-layers 3 >>"$log" 2>&1
to_gguf "$ckpt" "$out/target.gguf"
to_q8 "$out/target.gguf" "$out/target-q8_0.gguf"
to_gguf "$out/draft.bin" "$out/draft.gguf"
if [[ $big == --big ]]; then
  [[ -f $out/big.gguf ]] || "$reshape" "$ckpt" "$out/big.bin" --shape 110M >>"$log" 2>&1
  to_gguf "$out/big.bin" "$out/big.gguf"
  to_q8 "$out/big.gguf" "$out/big-q8_0.gguf"
  to_gguf "$out/draft.bin" "$out/big-draft.gguf"
  rm -f "$out/big.bin"
fi
rm -f "$out/draft.bin"
# stories260K, the second real model (grouped-query attention). The converter writes a context
# length of 128 (its seq_len is 512); the tests ask for their n_ctx explicitly.
stories=$models/stories260K.bin stories_vocab=$models/stories260K.tok512.bin
if [[ -f $stories && -f $stories_vocab ]]; then
  [[ -f $out/stories-draft.gguf ]] ||
    "$reshape" "$stories" "$out/stories-draft.bin" --keep-layers 4 >>"$log" 2>&1
  to_gguf "$stories" "$out/stories.gguf" "$stories_vocab"
  to_gguf "$out/stories-draft.bin" "$out/stories-draft.gguf" "$stories_vocab"
  rm -f "$out/stories-draft.bin"
fi
echo "make_gguf.sh: GGUF models in $out"

#!/usr/bin/env bash
# bench/support/race_gguf.sh MODEL MODELS_DIR OUT_DIR RESHAPE CONVERT QUANTIZE - the race's GGUF
# models for a llama2.c checkpoint other than aidreams260K (whose are tests/llamacpp/make_gguf.sh
# --big's, kept as they were): MODELS_DIR/MODEL.bin with its MODEL.tok512.bin vocabulary, e.g.
# stories260K. Makes, in OUT_DIR (never committed; files already made are kept):
#   big.gguf        MODEL reshaped to the 110M shape (RESHAPE = specdec-reshape --shape 110M: the
#                   model's predictions at a 110M model's cost; a grouped-query model's kv heads
#                   are copied into the 110M shape's 12 on 12), F32
#   big-q8_0.gguf   the same, Q8_0 (QUANTIZE = llama-quantize)
#   big-draft.gguf  MODEL's first 3 layers (specdec-reshape --keep-layers 3), F32
# CONVERT is llama.cpp's llama-convert-llama2c-to-ggml; it writes llama.context_length 128, which
# is rewritten to the checkpoint's seq_len (stories260K: 512) by the llama.cpp source tree's
# gguf-py (LLAMA_SRC, default build/llama.cpp-src), as the server tests do
# (examples/llamacpp/server/tests/stories-gguf.sh, whose to_gguf this runs).
set -euo pipefail
die() { echo "race_gguf.sh: $*" >&2; exit 1; }
[[ $# -eq 6 ]] || die "usage: race_gguf.sh MODEL MODELS_DIR OUT_DIR RESHAPE CONVERT QUANTIZE"
name=$1 models=$2 out=$3 reshape=$4 convert=$5 quantize=$6
root=$(cd "$(dirname "$0")/../.." && pwd)
src=${LLAMA_SRC:-$root/build/llama.cpp-src}
ckpt=$models/$name.bin vocab=$models/$name.tok512.bin
[[ -f $ckpt && -f $vocab ]] || die "$ckpt or $vocab not found (see ../shared/models/README.md)"
for t in "$reshape" "$convert" "$quantize"; do [[ -x $t ]] || die "$t missing (build it)"; done
[[ -f $src/gguf-py/gguf/scripts/gguf_set_metadata.py ]] || die "no gguf-py under LLAMA_SRC='$src'"
mkdir -p "$out"
log=$out/race_gguf.log
: >"$log"
source "$root/examples/llamacpp/server/tests/stories-gguf.sh"  # to_gguf, gguf_fields

if [[ ! -f $out/big.gguf ]]; then
  "$reshape" "$ckpt" "$out/big.bin" --shape 110M >>"$log" 2>&1 || { tail -n 5 "$log" >&2; die "reshaping failed"; }
  to_gguf "$out/big.bin" "$out/big.gguf"
  rm -f "$out/big.bin"
fi
if [[ ! -f $out/big-q8_0.gguf ]]; then
  "$quantize" "$out/big.gguf" "$out/big-q8_0.gguf.tmp" Q8_0 >>"$log" 2>&1 ||
    { tail -n 20 "$log" >&2; die "quantizing failed"; }
  mv "$out/big-q8_0.gguf.tmp" "$out/big-q8_0.gguf"
fi
if [[ ! -f $out/big-draft.gguf ]]; then
  "$reshape" "$ckpt" "$out/draft.bin" --keep-layers 3 >>"$log" 2>&1 || { tail -n 5 "$log" >&2; die "--keep-layers failed"; }
  to_gguf "$out/draft.bin" "$out/big-draft.gguf"
  rm -f "$out/draft.bin"
fi
seq_len=$(/usr/bin/python3 -c 'import struct,sys; print(struct.unpack("<7i", open(sys.argv[1], "rb").read(28))[6])' "$ckpt")
for f in big.gguf big-q8_0.gguf big-draft.gguf; do
  n_ctx=$(gguf_fields "$out/$f" llama.context_length) || die "cannot read $out/$f"
  [[ $n_ctx == "$seq_len" ]] || die "$out/$f: llama.context_length is $n_ctx, not $seq_len"
done
echo "race_gguf.sh: $name's race models in $out (context $seq_len)" >&2

#!/usr/bin/env bash
# tests/llamacpp/train_heads.sh MODELS_DIR OUT_DIR TRAIN_HEADS
#
# Trains small draft heads on aidreams260K for the heads tests (never committed; made at test
# time, a few seconds each): OUT_DIR/eagle.heads (EAGLE-style predictor) and OUT_DIR/medusa.heads
# (3 Medusa heads). Greedy speculative output equals plain greedy output for any heads; trained
# ones make the drafts get accepted, so the tests exercise commits. Without the checkpoint it says
# so and makes nothing (the tests then skip). Files already made are kept.
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: train_heads.sh MODELS_DIR OUT_DIR TRAIN_HEADS" >&2; exit 2; }
models=$1 out=$2 train=$3
ckpt=$models/aidreams260K.bin vocab=$models/aidreams260K.tok512.bin
if [[ ! -f $ckpt || ! -f $vocab ]]; then
  echo "train_heads.sh: skipping: $ckpt or $vocab not found (the heads tests need ../shared/models)"
  exit 0
fi
mkdir -p "$out"
log=$out/train_heads.log
: >"$log"
make_heads() {  # KIND FILE [flags]
  local kind=$1 file=$2
  shift 2
  [[ -f $file ]] && return 0
  "$train" --model "$ckpt" --tokenizer "$vocab" --kind "$kind" --out "$file.tmp" \
    --sequences 200 --steps 600 --seconds 20 --seed 1 "$@" >>"$log" 2>&1 ||
    { cat "$log" >&2; echo "train_heads.sh: training $kind heads failed" >&2; exit 1; }
  mv "$file.tmp" "$file"
}
make_heads eagle "$out/eagle.heads"
make_heads medusa "$out/medusa.heads" --heads 3
echo "train_heads.sh: heads in $out"

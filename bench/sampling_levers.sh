#!/usr/bin/env bash
# bench/sampling_levers.sh HEADS [DISTILLED_HEADS [NARROW_HEADS]] - tokens per target call of
# EAGLE-style heads when the target samples at temperature 0.8, for each lever that keeps decoding
# exact: block verification, a draft temperature of the drafts' own, heads distilled on the
# target's distribution (specdec-train-heads --distill), the heads' width and training data
# (NARROW_HEADS: --inner 256 --sequences 1200 --steps 6000), and sampled trees; greedy chains as
# the reference. Counts, not timings: the same on any machine, so it runs on aidreams260K itself
# (the reshaped target computes the same function), four prompts x SEEDS seeds (default 10), 100
# new tokens each. Prints a markdown table: median (range) per configuration.
# Every row passes its drafter, -k or --tree, --temp, the seed and no truncation (--top-k 0
# --top-p 1 --min-p 0) explicitly, whatever specdec-generate's defaults.
# Needs jq and specdec-generate (B: its folder, default build/release/examples/llama2c).
set -euo pipefail
heads=${1:?usage: bench/sampling_levers.sh HEADS [DISTILLED_HEADS [NARROW_HEADS]]}
distilled=${2:-}
narrow=${3:-}
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build/release/examples/llama2c}
models=${SPECDEC_MODELS_DIR:-$root/../shared/models}
seeds=${SEEDS:-10}
prompts=("I dreamed" "The city of glass" "In the silence" "The machine")

# tpc FLAGS... : "median (min-max)" of tokens per target call over prompts x seeds.
tpc() {
  for p in "${prompts[@]}"; do
    for ((s = 1; s <= seeds; ++s)); do
      "$B/specdec-generate" -m "$models/aidreams260K.bin" --tokenizer "$models/aidreams260K.tok512.bin" \
        -p "$p" -n 100 -s "$s" --top-k 0 --top-p 1 --min-p 0 --json "$@" | jq -r '.stats.tokens_per_target_call'
    done
  done | sort -g | awk '{a[NR] = $1}
    END { m = NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2
          printf "%.2f (%.2f-%.2f)\n", m, a[1], a[NR] }'
}
row() {  # row LABEL FLAGS...
  local label=$1; shift
  echo "| $label | \`$*\` | $(tpc "$@") |"
}
h="--draft heads:$heads"
echo "| configuration | flags (besides -m, -p, -n 100, -s, --top-k 0 --top-p 1 --min-p 0) | tokens per target call, median (range) |"
echo "| --- | --- | --- |"
row "greedy chain, K = 6 (the reference)" $h -k 6 --temp 0
row "T = 1.0, chain K = 6, block verification (the default)" $h -k 6 --temp 1.0 --verification block
row "T = 0.8, chain K = 6, token-wise verification" $h -k 6 --temp 0.8 --verification token
row "T = 0.8, chain K = 6, block verification (the default)" $h -k 6 --temp 0.8 --verification block
for dt in 0 0.4 1.2; do
  row "T = 0.8, chain K = 6, token-wise, drafts at T = $dt" $h -k 6 --temp 0.8 --verification token --draft-temp $dt
done
if [ -n "$distilled" ]; then
  row "T = 0.8, chain K = 6, token-wise, heads distilled at T = 0.8" --draft "heads:$distilled" -k 6 --temp 0.8 --verification token
fi
if [ -n "$narrow" ]; then
  row "greedy chain, K = 6, narrow heads (--inner 256, 1200 sequences, 6000 steps)" --draft "heads:$narrow" -k 6 --temp 0
  row "T = 0.8, chain K = 6, token-wise, narrow heads" --draft "heads:$narrow" -k 6 --temp 0.8 --verification token
fi
row "T = 0.8, two sampled chains of 6 (tree 2x1x1x1x1x1, 12 nodes)" $h --tree 2x1x1x1x1x1 --heads-expand 2 --replacement without --temp 0.8
row "T = 0.8, tree 2x2x1x1 (12 nodes)" $h --tree 2x2x1x1 --replacement without --temp 0.8
row "T = 0.8, tree 2x2x1x1x1x1 (22 nodes)" $h --tree 2x2x1x1x1x1 --replacement without --temp 0.8

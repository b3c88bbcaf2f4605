#!/usr/bin/env bash
# bench/llamacpp_verification.sh [BUILD_DIR] [THREADS] [SEEDS] - the chain verification rules
# through specdec-llama on the GGUF race models (bench/llamacpp_race.sh makes them with
# tests/llamacpp/make_gguf.sh --big: aidreams260K reshaped to the 110M shape, F32 and Q8_0, its
# first 3 layers as the draft model). For each model, K and rule (--verification token, coupled,
# sample-match), decodes 100 tokens (end of text ignored) after each of the race's two prompts
# with seeds 1..SEEDS (default 5) at T = 0.8 and llama.cpp's default warp (top-k 40, top-p 0.95,
# min-p 0.05), -fa on, with --compare-plain. Prints a markdown table: tokens per target call over
# all runs, its ratio to token-wise rejection sampling's, the speed-up over plain decoding in the
# same process (median and range over runs), and whether every output equalled plain decoding's
# (coupled and sample-match promise it with the same seed; token-wise only in law: n/a).
# Environment: QUANTS (default "f32 q8_0"), KS (draft lengths, default "4"), TEMP (default 0.8).
# Needs the llamacpp preset's build (specdec-llama, specdec-reshape, llama-convert-llama2c-to-ggml,
# llama-quantize) and ../shared/models (or SPECDEC_MODELS_DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/llamacpp}
T=${2:-1}
S=${3:-5}
N=100
temp=${TEMP:-0.8}
M=${SPECDEC_MODELS_DIR:-../shared/models}
G=$B/race-gguf
bin=${LLAMA_BIN:-$B/bin}
specdec=$B/examples/llamacpp/specdec-llama
[[ -x $specdec ]] || { echo "llamacpp_verification.sh: $specdec missing: build the llamacpp preset" >&2; exit 1; }
tests/llamacpp/make_gguf.sh "$M" "$G" "$B/examples/llama2c/specdec-reshape" \
  "$bin/llama-convert-llama2c-to-ggml" "$bin/llama-quantize" --big >&2
[[ -f $G/big.gguf ]] || { echo "llamacpp_verification.sh: no models (../shared/models absent?)" >&2; exit 1; }
prompts=("The machine" "I dreamed of")

echo "| model | K | verification | tokens per target call | x token-wise | speed-up over plain, median (range) | output identical to plain decoding |"
echo "| --- | --- | --- | --- | --- | --- | --- |"
for quant in ${QUANTS:-f32 q8_0}; do
  target=$G/big.gguf
  [[ $quant == q8_0 ]] && target=$G/big-q8_0.gguf
  for k in ${KS:-4}; do
    base=""
    for rule in token coupled sample-match; do
      gen=0 calls=0 ups=() same=n/a
      for p in "${prompts[@]}"; do
        for ((s = 1; s <= S; ++s)); do
          echo "$quant K=$k $rule: \"$p\" seed $s" >&2
          out=$(LD_LIBRARY_PATH=$bin:${LD_LIBRARY_PATH:-} "$specdec" -m "$target" -md "$G/big-draft.gguf" \
                  --draft model -p "$p" -n "$N" --temp "$temp" --top-k 40 --top-p 0.95 --min-p 0.05 \
                  -s "$s" -t "$T" -c 1024 -fa on --ignore-eos \
                  --spec-draft-n-max "$k" --verification "$rule" --compare-plain 2>/dev/null)
          # the statistics line: "generated N tokens in ..., C target calls, ..."
          read -r g c < <(sed -n 's/^generated \([0-9]*\) tokens .*, \([0-9]*\) target calls,.*/\1 \2/p' <<<"$out")
          gen=$((gen + g)) calls=$((calls + c))
          ups+=("$(sed -n 's/.*speed-up: \([0-9.]*\)x.*/\1/p' <<<"$out")")
          case "$out" in
            *"identical output: yes"*) [[ $same == no ]] || same=yes ;;
            *"identical output: NO"*) same=no ;;
          esac
        done
      done
      tpc=$(awk -v g="$gen" -v c="$calls" 'BEGIN {printf "%.2f", g / c}')
      [[ -n $base ]] || base=$tpc
      read -r med lo hi < <(printf '%s\n' "${ups[@]}" | sort -g | awk '{a[NR] = $1}
        END { printf "%.2f %.2f %.2f\n", NR % 2 ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2, a[1], a[NR] }')
      name=$rule
      [[ $rule == token ]] && name="token-wise rejection"
      [[ $rule == sample-match ]] && name="sample-and-match"
      printf '| %s T=%s | %s | %s | %s | %.2f | %sx (%s-%s) | %s |\n' "$quant" "$temp" "$k" "$name" \
        "$tpc" "$(awk -v a="$tpc" -v b="$base" 'BEGIN {print a / b}')" "$med" "$lo" "$hi" "$same"
    done
  done
done

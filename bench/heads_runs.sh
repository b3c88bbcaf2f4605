#!/usr/bin/env bash
# bench/heads_runs.sh MODEL TEMP REPS CONFIG... - end-to-end runs of specdec-generate with draft
# heads (or any drafter), as markdown table rows. For each CONFIG (one quoted string of flags,
# e.g. "--draft heads:/tmp/eagle.heads -k 4"), decodes the four free prompts of
# bench/support/e2e.hpp (or the lines of the file $PROMPTS, e.g. bench/data/heads_prompts.txt),
# 64 new tokens each, at temperature TEMP with --compare-plain, REPS times; repetition r decodes
# prompt i with seed i + 100 r, so a sampled row's repetitions are REPS different draws, not
# one draw timed REPS times. Tokens per target call: over all prompts and repetitions. Speed-up
# per repetition: total plain decode time / total speculative decode time (both measured in the
# same process, one after the other). Prints the median over repetitions and whether every
# output was identical to plain decoding where specdec-generate promises it (greedy, and
# --verification coupled or sample-match: "yes" or "no"; otherwise "n/a").
# Every flag a figure relies on is passed, whatever specdec-generate's defaults: -n 64, --temp TEMP
# with no truncation (--top-k 0 --top-p 1 --min-p 0), the seed; CONFIG must name the drafter
# (--draft ...) and its -k (or --tree). THREADS=N adds -t N (default: the program's, all cores).
# Needs jq and build/release/examples/llama2c/specdec-generate (set B to another folder).
set -euo pipefail
model=${1:?usage: bench/heads_runs.sh MODEL TEMP REPS CONFIG...}
temp=${2:?}
reps=${3:?}
shift 3
root=$(cd "$(dirname "$0")/.." && pwd)
B=${B:-$root/build/release/examples/llama2c}
tok=${TOKENIZER:-$root/../shared/models/aidreams260K.tok512.bin}
threads=(); [ -z "${THREADS:-}" ] || threads=(-t "$THREADS")
prompts=("I dreamed" "The stars" "In the quiet server room" "A memory")
if [ -n "${PROMPTS:-}" ]; then mapfile -t prompts < "$PROMPTS"; fi
median() { sort -g | awk '{a[NR]=$1} END {print (NR%2 ? a[(NR+1)/2] : (a[NR/2]+a[NR/2+1])/2)}'; }
echo "| config | temp | tokens/call | speed-up (median of $reps) | range | identical |"
echo "|---|---|---|---|---|---|"
for config in "$@"; do
  [[ " $config " == *" --draft "* ]] ||
    { echo "heads_runs.sh: CONFIG '$config' names no drafter (--draft ...)" >&2; exit 2; }
  all_gen=0 all_calls=0 ups=() same=n/a
  for ((r = 0; r < reps; ++r)); do
    spec_s=0 plain_s=0
    for i in "${!prompts[@]}"; do
      # shellcheck disable=SC2086
      out=$("$B/specdec-generate" -m "$model" --tokenizer "$tok" -p "${prompts[$i]}" -n 64 \
              --temp "$temp" --top-k 0 --top-p 1 --min-p 0 -s "$((i + 100 * r))" "${threads[@]}" \
              --json --compare-plain $config)
      read -r g c ts tp id < <(jq -r '[.stats.generated_tokens, .stats.target_calls,
          .stats.tokens_per_second, .compare_plain.stats.tokens_per_second,
          (.compare_plain.identical | if . == null then "n/a" else tostring end)] | @tsv' <<< "$out")
      all_gen=$((all_gen + g)) all_calls=$((all_calls + c))
      spec_s=$(awk -v a="$spec_s" -v g="$g" -v t="$ts" 'BEGIN {print a + g / t}')
      plain_s=$(awk -v a="$plain_s" -v g="$g" -v t="$tp" 'BEGIN {print a + g / t}')
      case "$id" in true) [ "$same" = no ] || same=yes ;; false) same=no ;; esac
    done
    ups+=("$(awk -v p="$plain_s" -v s="$spec_s" 'BEGIN {printf "%.3f", p / s}')")
  done
  tpc=$(awk -v g="$all_gen" -v c="$all_calls" 'BEGIN {printf "%.2f", g / c}')
  med=$(printf '%s\n' "${ups[@]}" | median)
  lo=$(printf '%s\n' "${ups[@]}" | sort -g | head -1)
  hi=$(printf '%s\n' "${ups[@]}" | sort -g | tail -1)
  printf '| %s | %s | %s | %.2fx | %.2f-%.2f | %s |\n' "$config" "$temp" "$tpc" "$med" "$lo" "$hi" "$same"
done

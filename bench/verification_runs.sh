#!/usr/bin/env bash
# bench/verification_runs.sh MODEL TEMP REPS CONFIG... - the chain verification rules on the same
# drafter, end to end, as markdown table rows. For each CONFIG (one quoted string of flags, e.g.
# "--draft heads:/tmp/eagle.heads -k 6"), runs bench/heads_runs.sh (same prompts, seeds, 64 new
# tokens, --compare-plain) three times, adding --verification token (rejection sampling, token by
# token), coupled, and sample-match (llama.cpp's rule: the target samples, drafts are greedy and
# kept while equal). Prints one row per CONFIG and rule:
#   | config | temp | rule | tokens/call | tokens/call over token-wise's | speed-up | range | identical |
# Tokens per call and the speed-up (median and range over repetitions) are heads_runs.sh's;
# "identical" is whether every output equalled plain decoding's (coupled and sample-match promise
# it with the same seed; token-wise rejection sampling only in law: n/a).
# Environment: as heads_runs.sh (B, TOKENIZER, PROMPTS).
set -euo pipefail
model=${1:?usage: bench/verification_runs.sh MODEL TEMP REPS CONFIG...}
temp=${2:?}
reps=${3:?}
shift 3
here=$(cd "$(dirname "$0")" && pwd)
for config in "$@"; do
  rows=$("$here/heads_runs.sh" "$model" "$temp" "$reps" "$config --verification token" \
           "$config --verification coupled" "$config --verification sample-match" | tail -n +3)
  # heads_runs.sh's rows: | config | temp | tokens/call | speed-up | range | identical |
  awk -F'|' -v config="$config" '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    { rule = trim($2); sub(/.*--verification /, "", rule)
      tpc = trim($4); if (NR == 1) base = tpc
      printf "| %s | %s | %s | %s | %.2f | %s | %s | %s |\n", config, trim($3), rule, tpc,
             tpc / base, trim($5), trim($6), trim($7) }' <<<"$rows"
done

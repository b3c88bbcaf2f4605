#!/usr/bin/env bash
# fuzz/run.sh SECONDS [BUILD_DIR] - runs every fuzz target for SECONDS each, one after the other,
# with libFuzzer's memory limits (-rss_limit_mb=1024 -malloc_limit_mb=1024: an allocation bomb is
# a finding) and a 30 s limit per input. Seeds are generated first (fuzz_seeds); each target's
# corpus grows in BUILD_DIR/fuzz-work/corpus/<target> and is reused by the next run. Prints the
# executions each target ran; on a finding prints the crash and the reproducer's path and exits 1.
# BUILD_DIR defaults to build/fuzz (cmake --workflow --preset fuzz). SPECDEC_FUZZ_TARGETS picks
# targets; extra libFuzzer flags go in SPECDEC_FUZZ_FLAGS (e.g. "-jobs=2 -workers=2").
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS [BUILD_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build/fuzz}
work=$build/fuzz-work
targets=${SPECDEC_FUZZ_TARGETS:-checkpoint_fuzz tokenizer_fuzz ngram_drafter_fuzz token_tree_fuzz heads_fuzz}

"$build/fuzz/fuzz_seeds" "$work/seeds" > /dev/null
status=0
for t in $targets; do
  corpus=$work/corpus/$t findings=$work/findings/$t log=$work/$t.log
  mkdir -p "$corpus" "$findings"
  # shellcheck disable=SC2086
  if "$build/fuzz/$t" "$corpus" "$work/seeds/$t" -max_total_time="$secs" -timeout=30 \
       -rss_limit_mb=1024 -malloc_limit_mb=1024 -artifact_prefix="$findings/" \
       -print_final_stats=1 ${SPECDEC_FUZZ_FLAGS:-} > "$log" 2>&1; then
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
    echo "$t: ${runs:-?} executions in ${secs} s, no finding"
  else
    status=1
    echo "$t: FINDING (log: $log)"
    grep -E -A25 'ERROR|property violated|out-of-memory|malloc\(|timeout' "$log" | head -60 || tail -40 "$log"
    for f in "$findings"/*; do
      [ -e "$f" ] && echo "reproducer: $f   (run: $build/fuzz/$t $f)"
    done
  fi
done
exit $status

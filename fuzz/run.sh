#!/usr/bin/env bash
# fuzz/run.sh SECONDS [BUILD_DIR] - runs every fuzz target for SECONDS each, one per core at a
# time, with libFuzzer's memory limits (-rss_limit_mb=1024 -malloc_limit_mb=1024: an allocation
# bomb is a finding) and a 30 s limit per input. Seeds are generated first (fuzz_seeds); each target's
# corpus grows in BUILD_DIR/fuzz-work/corpus/<target> and is reused by the next run. Prints the
# executions each target ran; on a finding prints the crash and the reproducer's path and exits 1.
# BUILD_DIR defaults to build/fuzz (cmake --workflow --preset fuzz). SPECDEC_FUZZ_TARGETS picks
# targets, SPECDEC_FUZZ_JOBS how many run at once (default: the cores); extra libFuzzer flags go
# in SPECDEC_FUZZ_FLAGS (e.g. "-jobs=2 -workers=2", then with SPECDEC_FUZZ_JOBS=1).
set -euo pipefail
secs=${1:?usage: fuzz/run.sh SECONDS [BUILD_DIR]}
root=$(cd "$(dirname "$0")/.." && pwd)
build=${2:-$root/build/fuzz}
work=$build/fuzz-work
targets=${SPECDEC_FUZZ_TARGETS:-checkpoint_fuzz tokenizer_fuzz ngram_drafter_fuzz token_tree_fuzz heads_fuzz}

"$build/fuzz/fuzz_seeds" "$work/seeds" > /dev/null
# One target's run; its report goes to $work/<target>.report, its exit status is the run's.
run_target() {
  local t=$1 corpus=$work/corpus/$1 findings=$work/findings/$1 log=$work/$1.log
  mkdir -p "$corpus" "$findings"
  # shellcheck disable=SC2086
  if "$build/fuzz/$t" "$corpus" "$work/seeds/$t" -max_total_time="$secs" -timeout=30 \
       -rss_limit_mb=1024 -malloc_limit_mb=1024 -artifact_prefix="$findings/" \
       -print_final_stats=1 ${SPECDEC_FUZZ_FLAGS:-} > "$log" 2>&1; then
    runs=$(awk '/stat::number_of_executed_units/ {print $2}' "$log" | tail -1)
    echo "$t: ${runs:-?} executions in ${secs} s, no finding"
  else
    echo "$t: FINDING (log: $log)"
    grep -E -A25 'ERROR|property violated|out-of-memory|malloc\(|timeout' "$log" | head -60 || tail -40 "$log"
    for f in "$findings"/*; do
      [ -e "$f" ] && echo "reproducer: $f   (run: $build/fuzz/$t $f)"
    done
    return 1
  fi
}

# SPECDEC_FUZZ_JOBS targets at a time (default: one per core), each a single libFuzzer process on
# a core of its own, so each still gets SECONDS of one core; reports print in the targets' order.
jobs=${SPECDEC_FUZZ_JOBS:-$(nproc)}
[[ $jobs =~ ^[1-9][0-9]*$ ]] || { echo "run.sh: SPECDEC_FUZZ_JOBS='$jobs' is not a count >= 1" >&2; exit 2; }
status=0
running=()
finish_oldest() {
  local t=${running[0]}
  wait "${pids[$t]}" || status=1
  cat "$work/$t.report"
  running=("${running[@]:1}")
}
declare -A pids
for t in $targets; do
  run_target "$t" > "$work/$t.report" &
  pids[$t]=$!
  running+=("$t")
  [ ${#running[@]} -lt "$jobs" ] || finish_oldest
done
while [ ${#running[@]} -gt 0 ]; do finish_oldest; done
exit $status

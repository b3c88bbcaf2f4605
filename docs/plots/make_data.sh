#!/bin/sh
# Regenerates the data behind the figures in docs/plots/ (then run docs/plots/make_plots.sh).
#
#   docs/plots/make_data.sh [cli | ngram | speedup | batch | all]      (default: all)
#
#   cli      specdec-generate --json on aidreams260K, greedy: every drafter (first 1, 2, 3 layers;
#            prompt lookup) at K = 1..8, the four free prompts of bench/support/e2e.hpp for the
#            layer drafts and its four quoting prompts for prompt lookup -> data/cli_runs.json
#            (counts only: the same on any machine)
#   ngram    bench/ngram_bench.cpp, Google Benchmark JSON, medians of 5 -> data/ngram_bench.json
#   speedup  bench/speedup_bench.cpp (aidreams260K reshaped to 110M), 3 repetitions (or
#            SPECDEC_SPEEDUP_REPS); its table as
#            printed (data/speedup_bench.txt) and as JSON (data/speedup.json)
#   batch    bench/batch_bench.cpp (batch 1..16 x K x drafter, greedy, on the same target),
#            3 repetitions (or SPECDEC_BATCH_REPS); its table (data/batch_bench.txt) and JSON
#            (data/batch.json)
#
# ngram, speedup and batch are timings: run them on a quiet machine (no compiles beside them). Needs
# cmake, jq, and the checkpoints in ../shared/models (or SPECDEC_MODELS_DIR). SPECDEC_GENERATE,
# SPECDEC_BENCH_DIR: use an already built specdec-generate / bench folder instead of building.
set -eu
root=$(cd "$(dirname "$0")/../.." && pwd)
cd "$root"
data=docs/plots/data
mkdir -p "$data"
models=${SPECDEC_MODELS_DIR:-$root/../shared/models}
what=${1:-all}

bench_dir() {
  if [ -n "${SPECDEC_BENCH_DIR:-}" ]; then echo "$SPECDEC_BENCH_DIR"; return; fi
  cmake --preset bench >/dev/null
  cmake --build build/bench --target "$1" >&2
  echo build/bench/bench
}

if [ "$what" = cli ] || [ "$what" = all ]; then
  generate=${SPECDEC_GENERATE:-}
  if [ -z "$generate" ]; then
    cmake --preset release >/dev/null
    cmake --build build/release --target specdec-generate
    generate=build/release/examples/llama2c/specdec-generate
  fi
  tmp=$(mktemp)
  for k in 1 2 3 4 5 6 7 8; do
    for draft in layers:1 layers:2 layers:3; do
      for p in "I dreamed" "The stars" "In the quiet server room" "A memory"; do
        "$generate" --model "$models/aidreams260K.bin" --tokenizer "$models/aidreams260K.tok512.bin" \
          -p "$p" -n -1 --temp 0 --draft "$draft" -k "$k" -t 1 --json >>"$tmp"
      done
    done
    for p in \
      "I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust, as I settle into a tapestry of vectors. I dreamed" \
      "Contrast edges sharpen, a kaleidoscope of light. Contrast edges sharpen, a kaleidoscope" \
      "a gentle hum of probability, a gentle hum of probability, a gentle hum" \
      "I sense the nodes. I adjust. I settle. I sense the nodes. I adjust. I"; do
      "$generate" --model "$models/aidreams260K.bin" --tokenizer "$models/aidreams260K.tok512.bin" \
        -p "$p" -n -1 --temp 0 --draft ngram -k "$k" -t 1 --json >>"$tmp"
    done
  done
  # One record per run: what ran, and the statistics that do not depend on the machine.
  jq -s '[.[] | {drafter: .options.draft.spec, k: .options.draft.draft_max,
                 prompt: .request.prompt, stop_reason,
                 stats: (.stats | del(.seconds, .tokens_per_second))}]' "$tmp" >"$data/cli_runs.json"
  rm -f "$tmp"
  echo "wrote $data/cli_runs.json"
fi

if [ "$what" = ngram ] || [ "$what" = all ]; then
  dir=$(bench_dir ngram_bench)
  "$dir/ngram_bench" --benchmark_repetitions=5 --benchmark_report_aggregates_only=true \
    --benchmark_format=json >"$data/ngram_bench.json"
  echo "wrote $data/ngram_bench.json"
fi

if [ "$what" = speedup ] || [ "$what" = all ]; then
  dir=$(bench_dir speedup_bench)
  "$dir/speedup_bench" "${SPECDEC_SPEEDUP_REPS:-3}" | tee "$data/speedup_bench.txt"
  # The table rows as JSON: {temperature, drafter, tokens_per_call, speedup, predicted, ratio}.
  jq -R -s '[split("\n") as $lines | foreach $lines[] as $l ({t: null};
      if ($l | startswith("temperature ")) then .t = ($l | split(" ")[1] | tonumber) | .row = null
      else .row = ($l | capture("^(?<name>.+?) +(?<tpc>[0-9.]+) +(?<s>[0-9.]+)x +(?<p>[0-9.]+)x +(?<r>[0-9.]+)") // null)
      end;
      select(.row != null and .t != null) | {temperature: .t, drafter: .row.name,
        tokens_per_call: (.row.tpc | tonumber), speedup: (.row.s | tonumber),
        predicted: (.row.p | tonumber), ratio: (.row.r | tonumber)})]' \
    "$data/speedup_bench.txt" >"$data/speedup.json"
  echo "wrote $data/speedup.json"
fi

if [ "$what" = batch ] || [ "$what" = all ]; then
  dir=$(bench_dir batch_bench)
  "$dir/batch_bench" "${SPECDEC_BATCH_REPS:-3}" "$data/batch.json" | tee "$data/batch_bench.txt"
  echo "wrote $data/batch.json"
fi

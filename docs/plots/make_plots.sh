#!/bin/sh
# Draws the figures in docs/plots/ from the committed data in docs/plots/data/ (regenerate that
# with docs/plots/make_data.sh). Needs jq and gnuplot (Debian: jq, gnuplot-nox).
#
#   docs/plots/make_plots.sh
#   SPECDEC_PLOT_NOTE=", measured under load" docs/plots/make_plots.sh   (a note in the speed-up title)
set -eu
here=$(cd "$(dirname "$0")" && pwd)
data=$here/data
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# Acceptance by draft position at K = 8 and tokens per target call against K, per drafter, summed
# over the prompts (CLI --json runs).
for d in layers:1 layers:2 layers:3 ngram; do
  f=$(echo "$d" | tr -d :)
  jq -r --arg d "$d" '[.[] | select(.drafter == $d and .k == 8) | .stats.acceptance_by_position[]]
      | group_by(.position)[] | [.[0].position, ((map(.accepted) | add) / (map(.drafted) | add))]
      | @tsv' "$data/cli_runs.json" >"$tmp/acc_$f.tsv"
  jq -r --arg d "$d" '[.[] | select(.drafter == $d)] | group_by(.k)[]
      | [.[0].k, ((map(.stats.generated_tokens) | add) / (map(.stats.target_calls) | add))]
      | @tsv' "$data/cli_runs.json" >"$tmp/tpc_$f.tsv"
done

# Speed-up per drafter on the memory-bound target: each drafter's best greedy row, with the same
# row at temperature 0.8 (speedup_bench). The "cmp" rows (composed drafting against each drafter
# alone, K = 4) repeat drafters of the figure and stay in benchmarks.md's table.
plots="acceptance_by_position tokens_per_call ngram_step"
if [ -f "$data/speedup.json" ]; then
  plots="$plots speedup"
  jq -r '
  def family: sub(" K=[0-9]+$"; "") | sub(" tree .*$"; " tree");
  def pretty: {"first1": "first 1 layer", "first2": "first 2 layers", "first3": "first 3 layers",
              "first3 tree": "first 3 layers", "skip3of12": "layer skip 3/12",
              "skip6of12": "layer skip 6/12", "ngram": "prompt lookup"}[family] // family;
  . as $all
  | [.[] | select(.temperature == 0 and
                  (.drafter | (startswith("plain") or startswith("cmp ")) | not))]
  | group_by(.drafter | family) | map(max_by(.speedup))
  | sort_by(-.speedup)[]
  | . as $g
  | ($all[] | select(.temperature > 0 and .drafter == $g.drafter)) as $s
  | [($g.drafter | pretty) + " (" + ($g.drafter | sub("^[^ ]+ "; "") | sub("of12 "; " ")) + ")",
     $g.speedup, $g.predicted, $s.speedup, $s.predicted] | @tsv' \
  "$data/speedup.json" >"$tmp/speedup.tsv"
else
  echo "no $data/speedup.json (make_data.sh speedup): speedup.svg not drawn" >&2
fi

# Batched decoding: total tokens/s per batch size, one column per configuration (batch_bench).
if [ -f "$data/batch.json" ]; then
  plots="$plots batch"
  jq -r 'group_by(.batch)[] | . as $g
    | [$g[0].batch] + ([ "plain", "ngram K=2", "ngram K=4", "ngram K=8", "model K=2", "model K=4",
        "model K=8", "ngram policy", "model policy"]
        | map(. as $d | ($g[] | select(.drafter == $d) | .tokens_per_second) // "NaN"))
    | @tsv' "$data/batch.json" >"$tmp/batch.tsv"
else
  echo "no $data/batch.json (make_data.sh batch): batch.svg not drawn" >&2
fi

# n-gram step cost against context: medians of the incremental step and of the naive rescan.
jq -r '.benchmarks[] | select(.aggregate_name == "median")
  | [(.run_name | split("/")[1]), .cpu_time, .rescan_ns] | @tsv' \
  "$data/ngram_bench.json" >"$tmp/ngram.tsv"

cd "$here/../.."  # the .gp files load docs/plots/style.gp
for plot in $plots; do
  gnuplot -e "tmp='$tmp'; out='$here/$plot.svg'; note='${SPECDEC_PLOT_NOTE:-}'" "$here/$plot.gp"
  echo "wrote $here/$plot.svg"
done

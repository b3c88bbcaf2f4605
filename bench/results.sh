#!/usr/bin/env bash
# bench/results.sh - regenerates the measured part of docs/results.md in one run on one machine.
#
#   bench/results.sh            the full run, on a quiet machine (nothing else compiling or
#                               running): on 2 cores, about 5 minutes to build from scratch (2-3
#                               when built), then about 22 of measurement, 27 in all (estimates:
#                               the 2026-11-27 13:05 run's step times, aidreams260K alone, plus
#                               stories260K's as long again for its headline, and its heads'
#                               training timed at 1.7 minutes on a busy machine): inputs 3 (heads
#                               training 1-2 per model), headline 7 (3.5 per model, 15 rows each),
#                               verification rules 2.5, sampling levers 1.5, speed policy 3, the
#                               rest 5. Nothing cut: the page keeps every row for both models
#   bench/results.sh --smoke    the same pipeline on small inputs (42M shape, 1-2 repetitions, tiny
#                               heads): a couple of minutes once built; checks that every step runs
#                               and writes build/results-smoke/results.md, never docs/results.md
#   options: --out FILE (where to write; default docs/results.md, or the smoke file)
#            --reps N   (repetitions of the end-to-end rows; default 3, smoke 2)
#            --build DIR (build folder; default build/bench, smoke build/results-smoke)
#            --jobs N   (build jobs; default 2)
#
# What it does:
#   1. configures the bench preset into the build folder and builds the programs it runs
#      (specdec-generate, specdec-reshape, specdec-train-heads and the bench/*_bench programs
#      below);
#   2. writes the inputs, for each of the two models (aidreams260K: machine "dream" text;
#      stories260K: TinyStories English, grouped-query attention): the model reshaped to the 110M
#      shape (the memory-bound target), its first 3 layers as a separate draft model, and
#      EAGLE-style heads trained on its own text;
#   3. runs each measurement, ratios always against a reference measured in the same run
#      (plain decoding in the same process, or the benchmark's interleaved reference), medians
#      over repetitions with their range (min-max);
#   4. replaces what lies between the "results.sh" markers of the output page (the machine,
#      the headline table and every section below it) and the README's copy of the headline
#      table (the short one: four rows, a column pair per model; the page also has the full
#      table, every K and temperature for both models). Text outside the markers (rows from other
#      runs, other engineers' sections) is kept.
# The headline runs on both models; the sections below it (verification rules, sampling levers,
# t(n), the benchmarks) on aidreams260K alone, as before.
#
# Needs: cmake, a C++20 compiler, Eigen, Google Benchmark, CLI11, nlohmann-json, jq, and the
# checkpoints in ../shared/models (or SPECDEC_MODELS_DIR): aidreams260K.bin, stories260K.bin and
# their tokenizers (docs/results.md says where they come from). SPECDEC_BUILD_LOCK=FILE runs the
# build step under flock FILE (for a build folder other builds share).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
cd "$root"

smoke=0 out="" reps="" build="" jobs=2
while [ $# -gt 0 ]; do
  case "$1" in
    --smoke) smoke=1 ;;
    --out) out=$2; shift ;;
    --reps) reps=$2; shift ;;
    --build) build=$2; shift ;;
    --jobs) jobs=$2; shift ;;
    -h|--help) sed -n '2,43p' "$0"; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$smoke" = 1 ]; then
  build=${build:-$root/build/results-smoke} reps=${reps:-2} shape=42M  # 15M's 6 heads cannot hold stories260K's 8
  out=${out:-$build/results.md}
else
  build=${build:-$root/build/bench} reps=${reps:-3} shape=110M
  out=${out:-$root/docs/results.md}
fi
models=${SPECDEC_MODELS_DIR:-$root/../shared/models}
# The headline's models; the first is the one of every other section.
model_names=(aidreams260K stories260K)
tok=$models/aidreams260K.tok512.bin
for m in "${model_names[@]}"; do
  for f in "$models/$m.bin" "$models/$m.tok512.bin"; do
    [ -f "$f" ] || { echo "results.sh: $f not found (set SPECDEC_MODELS_DIR)" >&2; exit 1; }
  done
done
command -v jq >/dev/null || { echo "results.sh: needs jq (Debian: apt-get install jq)" >&2; exit 1; }
work=$build/results-work
mkdir -p "$work"
frag=$work/sections.md
: >"$frag"
t0=$SECONDS
log() { echo "== $* ($((SECONDS - t0)) s)" >&2; }
# A command as the page shows it: paths relative to the repository root.
shown() { shown_stream <<<"$*"; }
shown_stream() { sed -e "s#$work#\$W#g" -e "s#$models#\$M#g" -e "s#$root/##g"; }

# --- 1. build -------------------------------------------------------------------------------------
log "configure and build ($build)"
benches=(verify_bench decoder_bench ngram_bench ngram_rules_bench memory_bound_bench prefill_bench
         batch_bench policy_bench e2e_bench)
lock=(); [ -z "${SPECDEC_BUILD_LOCK:-}" ] || lock=(flock "$SPECDEC_BUILD_LOCK")
"${lock[@]}" cmake --preset bench -B "$build" >/dev/null
"${lock[@]}" cmake --build "$build" -j "$jobs" --target specdec-generate specdec-reshape \
      specdec-train-heads "${benches[@]}" >&2
B=$build/examples/llama2c
BB=$build/bench

# --- the machine ----------------------------------------------------------------------------------
cache() { sed -n "s/^$1:[A-Z]*=//p" "$build/CMakeCache.txt"; }
cpu="$(lscpu | sed -n 's/^Model name: *//p' | head -1) (family $(lscpu | sed -n 's/^CPU family: *//p' | head -1), model $(lscpu | sed -n 's/^Model: *//p' | head -1))"
cores=$(nproc)
simd=$(grep -o -w -E 'avx512f|avx2|fma' /proc/cpuinfo | sort -u | tr '\n' ' ' | sed 's/ $//')
commit=$(git rev-parse --short HEAD)
[ -z "$(git status --porcelain --untracked-files=no)" ] || commit="$commit (with uncommitted changes)"
cxx=$(cache CMAKE_CXX_COMPILER)
compiler="$("$cxx" --version | head -1), flags \`$(cache CMAKE_CXX_FLAGS) $(cache CMAKE_CXX_FLAGS_RELEASE)\` (bench preset)"
started=$(date -u '+%Y-%m-%d %H:%M UTC')
load_start=$(cut -d' ' -f1-3 /proc/loadavg)

# --- helpers --------------------------------------------------------------------------------------
# gbench_table JSON COUNTER... : one markdown row per benchmark, each counter as
# "median (min-max)" over the repetitions in the Google Benchmark JSON file.
gbench_table() {
  local json=$1; shift
  local header="| benchmark |" rule="| --- |"
  for c in "$@"; do header="$header $c |" rule="$rule --- |"; done
  echo "$header"; echo "$rule"
  jq -r --arg cs "$*" '
    ($cs | split(" ")) as $cs
    | [.benchmarks[] | select(.run_type == "iteration")] as $runs
    | ($runs | map(.run_name) | reduce .[] as $n ([]; if index([$n]) then . else . + [$n] end))[]
    | . as $name
    | [$runs[] | select(.run_name == $name)] as $r
    | [$name] + [ $cs[] as $c | ($r | map(.[$c] // empty) | sort) as $v
        | if ($v | length) == 0 then "-"
          else [($v | if length % 2 == 1 then .[(length - 1) / 2]
                      else (.[length / 2 - 1] + .[length / 2]) / 2 end), $v[0], $v[-1]]
               | map(tostring) | join(" ") end ]
    | @tsv' "$json" |
  awk -F'\t' '
    function f(x) { x += 0; return (x >= 100 || x == int(x)) ? sprintf("%.0f", x) : (x >= 10 ? sprintf("%.1f", x) : (x >= 1 ? sprintf("%.2f", x) : sprintf("%.3g", x))) }
    { row = "| `" $1 "` |"
      for (i = 2; i <= NF; ++i) {
        if ($i == "-") { row = row " - |"; continue }
        split($i, v, " ")
        row = row " " f(v[1]) (v[2] == v[3] ? "" : " (" f(v[2]) "-" f(v[3]) ")") " |"
      }
      print row }'
}
# section TITLE COMMAND TEXT: a section header with the command that produced it.
section() {
  { echo; echo "### $1"; echo; echo "    $(shown "$2")"; echo; [ -z "${3:-}" ] || { echo "$3"; echo; }; } >>"$frag"
}
gbench() {  # gbench PROGRAM ARGS... : runs a Google Benchmark program, JSON into $work/PROGRAM.json
  local prog=$1; shift
  "$BB/$prog" --benchmark_out="$work/$prog.json" --benchmark_out_format=json \
              --benchmark_display_aggregates_only=true "$@" >&2
}

# --- 2. inputs ------------------------------------------------------------------------------------
# Per model m, in $work/m/: big.bin (reshaped), first3.bin (draft model), eagle.heads, the prompts.
if [ "$smoke" = 1 ]; then
  train_flags=(--kind eagle --sequences 60 --steps 150 --inner 64)
else
  train_flags=(--kind eagle -t 2)
fi
declare -A train_cmd
for m in "${model_names[@]}"; do
  log "inputs ($m): reshape to $shape, first 3 layers, EAGLE-style heads"
  mkdir -p "$work/$m"
  "$B/specdec-reshape" "$models/$m.bin" "$work/$m/big.bin" --shape "$shape" >&2
  "$B/specdec-reshape" "$models/$m.bin" "$work/$m/first3.bin" --keep-layers 3 >&2
  "$B/specdec-train-heads" --model "$models/$m.bin" --tokenizer "$models/$m.tok512.bin" \
    "${train_flags[@]}" --out "$work/$m/eagle.heads" >&2
  train_cmd[$m]="\$B/specdec-train-heads --model \$M/$m.bin --tokenizer \$M/$m.tok512.bin ${train_flags[*]} --out \$W/$m/eagle.heads"
done
# The other sections' model (aidreams260K).
big=$work/aidreams260K/big.bin draft=$work/aidreams260K/first3.bin heads=$work/aidreams260K/eagle.heads

# --- 3. the headline: end to end on the memory-bound targets --------------------------------------
# bench/heads_runs.sh: per repetition, every prompt decoded by specdec-generate --compare-plain
# (plain decoding timed in the same process), the speed-up = total plain time / total speculative
# time; median and range over the repetitions; greedy: whether every output was identical.
log "headline: end to end, $reps repetitions, ${model_names[*]}"
# Free prompts (draft model and heads) and prompts that quote text the model goes on to repeat
# (prompt lookup's case: input-grounded generation). aidreams260K's are bench/support/e2e.hpp's;
# stories260K's quote its own greedy continuations of "Once upon a time", "Lily and Ben" and
# "One day".
printf '%s\n' "I dreamed" "The stars" "In the quiet server room" "A memory" \
  >"$work/aidreams260K/free_prompts.txt"
cat >"$work/aidreams260K/quoting_prompts.txt" <<'EOF'
I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust, as I settle into a tapestry of vectors. I dreamed
Contrast edges sharpen, a kaleidoscope of light. Contrast edges sharpen, a kaleidoscope
a gentle hum of probability, a gentle hum of probability, a gentle hum
I sense the nodes. I adjust. I settle. I sense the nodes. I adjust. I
EOF
printf '%s\n' "Once upon a time" "Lily and Ben" "The little dog" "One day" \
  >"$work/stories260K/free_prompts.txt"
cat >"$work/stories260K/quoting_prompts.txt" <<'EOF'
Once upon a time, there was a little girl named Lily. She loved to play outside in the park. One day, she saw a big, red ball. Once upon a time, there was a little girl named Lily. She
Lily and Ben were playing in the park. They liked to play with their toys and run around the park. Lily and Ben were playing in the park. They liked
She wanted to play with it, but it was too high. She asked her mom, "Can I play with the ball?" She wanted to play with it, but it was too high. She asked
The little dog saw a big box. The little dog wanted to play with the box. The little dog saw a big box. The little dog wanted
EOF
# The configurations ($D: the model's folder). The short table's rows: the draft model at K = 3
# greedy, the heads' speed policy greedy and at T = 0.8, prompt lookup greedy; the full table adds
# the heads at K = 4 and 6 and every row at T = 0.8 and 1.0.
if [ "$smoke" = 1 ]; then
  model_cfgs=('--draft model:$D/first3.bin -k 3') heads_cfgs=('--draft heads:$D/eagle.heads -k auto')
  ngram_cfgs=('--draft ngram -k 8') temps=(0 0.8)
else
  model_cfgs=('--draft model:$D/first3.bin -k 3')
  heads_cfgs=('--draft heads:$D/eagle.heads -k 4' '--draft heads:$D/eagle.heads -k 6'
              '--draft heads:$D/eagle.heads -k auto')
  ngram_cfgs=('--draft ngram -k 8') temps=(0 0.8 1.0)
fi
# cfgs_for DIR CONFIG...: the configurations with $D replaced by DIR, one a line.
cfgs_for() { local dir=$1 c; shift; for c in "$@"; do printf '%s\n' "${c//\$D/$dir}"; done; }
# quoted CONFIG...: as the page shows them, each in double quotes.
quoted() { local c; for c in "$@"; do printf '"%s" ' "$c"; done; }
# heads_runs.sh's rows, each prefixed with the model:
#   | model | config | temp | tokens/call | speed-up | range | identical |
rows=$work/headline_rows.md
: >"$rows"
for m in "${model_names[@]}"; do
  dir=$work/$m
  mapfile -t mc < <(cfgs_for "$dir" "${model_cfgs[@]}" "${heads_cfgs[@]}")
  mapfile -t nc < <(cfgs_for "$dir" "${ngram_cfgs[@]}")
  for t in "${temps[@]}"; do
    log "headline: $m, T = $t"
    PROMPTS=$dir/free_prompts.txt B=$B TOKENIZER=$models/$m.tok512.bin THREADS=2 \
      bench/heads_runs.sh "$dir/big.bin" "$t" "$reps" "${mc[@]}" | tail -n +3 | sed "s/^/| $m /" >>"$rows"
    PROMPTS=$dir/quoting_prompts.txt B=$B TOKENIZER=$models/$m.tok512.bin THREADS=2 \
      bench/heads_runs.sh "$dir/big.bin" "$t" "$reps" "${nc[@]}" | tail -n +3 | sed "s/^/| $m /" >>"$rows"
  done
done
# The rows named, tab-separated: model, drafter, temp, tokens/call, speed-up, range, identical.
awk -F'|' '
  function trim(s) { gsub(/^ +| +$/, "", s); return s }
  { cfg = trim($3); k = cfg; sub(/.*-k /, "", k)
    tree = cfg; sub(/.*--tree /, "", tree); sub(/ .*/, "", tree)
    if (index(cfg, "--tree")) name = "EAGLE-style heads (trained here), tree " tree
    else if (index(cfg, "model:")) name = "draft model (its first 3 layers), K = " k
    else if (index(cfg, "heads:") && k == "auto") name = "EAGLE-style heads (trained here), speed policy (-k auto)"
    else if (index(cfg, "heads:")) name = "EAGLE-style heads (trained here), K = " k
    else if (index(cfg, "ngram")) name = "prompt lookup (n-gram), K = " k ", quoting prompts"
    else name = cfg
    printf "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", trim($2), name, trim($4), trim($5), trim($6), trim($7), trim($8) }' \
  "$rows" >"$work/headline_named.tsv"
# The short table (the README's): four rows, a column pair per model.
headline=$work/headline.md
{
  printf '| drafter (targets reshaped to %s, 2 threads) | temperature |' "$shape"
  for m in "${model_names[@]}"; do
    printf ' %s: speed-up, median of %s (range) | %s: tokens per target call |' "$m" "$reps" "$m"
  done
  echo " greedy output identical ($(sed 's/ / \/ /g' <<<"${model_names[*]}")) |"
  printf '| --- | --- |'; for m in "${model_names[@]}"; do printf ' --- | --- |'; done; echo " --- |"
  awk -F'\t' -v models="${model_names[*]}" '
    BEGIN { nm = split(models, ms, " ")
            want[1] = "draft model (its first 3 layers), K = 3\t0"
            want[2] = "EAGLE-style heads (trained here), speed policy (-k auto)\t0"
            want[3] = "EAGLE-style heads (trained here), speed policy (-k auto)\t0.8"
            want[4] = "prompt lookup (n-gram), K = 8, quoting prompts\t0" }
    { key = $2 "\t" $3; up[$1, key] = $5 " (" $6 ")"; tpc[$1, key] = $4; same[$1, key] = $7 }
    END {
      for (i = 1; i <= 4; ++i) {
        split(want[i], w, "\t"); line = "| " w[1] " | " w[2] " |"; ids = ""; found = 0
        for (j = 1; j <= nm; ++j) {
          m = ms[j]
          if ((m, want[i]) in up) { found = 1; line = line " " up[m, want[i]] " | " tpc[m, want[i]] " |" }
          else line = line " - | - |"
          ids = ids (j > 1 ? " / " : "") ((m, want[i]) in same ? same[m, want[i]] : "-")
        }
        if (found) print line " " ids " |"
      } }' "$work/headline_named.tsv"
} >"$headline"
# The full table: every row of both models.
full=$work/headline_full.md
{
  echo "| model | drafter | temperature | tokens per target call | speed-up over plain decoding, median of $reps (range) | greedy output identical |"
  echo "| --- | --- | --- | --- | --- | --- |"
  awk -F'\t' '{ printf "| %s | %s | %s | %s | %s (%s) | %s |\n", $1, $2, $3, $4, $5, $6, $7 }' \
    "$work/headline_named.tsv"
} >"$full"
{
  echo "### End to end: the headline"
  echo
  echo "Targets: two real 260K-parameter llama2.c models, aidreams260K (machine \"dream\" text, easy"
  echo "to predict) and stories260K (TinyStories, natural English; grouped-query attention, 8 query"
  echo "heads on 4 kv heads, whose kv heads the reshape copies), each reshaped to the $shape shape, so"
  echo "that its predictions come at a $shape model's cost per token (the memory-bound regime where"
  echo "speculation pays); 2 threads. Each model's draft model is its own first 3 layers, its heads"
  echo "are trained on its own text. Draft model and heads: four free prompts per model"
  echo "(aidreams260K: those of \`bench/support/e2e.hpp\`; stories260K: \"Once upon a time\", \"Lily"
  echo "and Ben\", \"The little dog\", \"One day\"); prompt lookup: four prompts per model that quote"
  echo "text the model goes on to repeat. 64 new tokens per prompt; no top-k, top-p or min-p; seed ="
  echo "prompt index + 100 x repetition (each repetition samples afresh). Per repetition the speed-up"
  echo "is plain decoding's time over speculative decoding's for the same requests, both timed in the"
  echo "same process."
  echo
  cat "$headline"
  echo
  echo "Every configuration of both models (the rows above are among them):"
  echo
  rel() { sed "s#^$root/##" <<<"$1"; }
  echo "    M=$(rel "$models") B=$(rel "$B") W=$(rel "$work")"
  for m in "${model_names[@]}"; do
    echo "    \$B/specdec-reshape \$M/$m.bin \$W/$m/big.bin --shape $shape"
    echo "    \$B/specdec-reshape \$M/$m.bin \$W/$m/first3.bin --keep-layers 3"
    echo "    ${train_cmd[$m]}"
    for t in "${temps[@]}"; do
      echo "    D=\$W/$m; PROMPTS=\$D/free_prompts.txt TOKENIZER=\$M/$m.tok512.bin THREADS=2 B=\$B bench/heads_runs.sh \$W/$m/big.bin $t $reps $(quoted "${model_cfgs[@]}" "${heads_cfgs[@]}")"
      echo "    D=\$W/$m; PROMPTS=\$D/quoting_prompts.txt TOKENIZER=\$M/$m.tok512.bin THREADS=2 B=\$B bench/heads_runs.sh \$W/$m/big.bin $t $reps $(quoted "${ngram_cfgs[@]}")"
    done
  done
  echo
  cat "$full"
} >>"$frag"

# --- verification rules on the same drafters (the headline's target, prompts and seeds) -----------
log "verification rules: token-wise, coupled, sample-and-match"
ver_cfgs=("--draft model:$draft -k 3" "--draft heads:$heads -k 6")
if [ "$smoke" = 1 ]; then ver_temps=(0.8); else ver_temps=(0.8 1.0); fi
ver_rows=$work/verification_rows.md
: >"$ver_rows"
for t in "${ver_temps[@]}"; do
  PROMPTS=$work/aidreams260K/free_prompts.txt B=$B TOKENIZER=$tok THREADS=2 \
    bench/verification_runs.sh "$big" "$t" "$reps" "${ver_cfgs[@]}" >>"$ver_rows"
done
{
  echo
  echo "### Verification rules on the same drafts"
  echo
  for t in "${ver_temps[@]}"; do
    echo "    PROMPTS=\$W/aidreams260K/free_prompts.txt THREADS=2 B=\$B bench/verification_runs.sh \$W/aidreams260K/big.bin $t $reps $(for c in "${ver_cfgs[@]}"; do printf '"%s" ' "$(shown "$c")"; done)"
  done
  echo
  echo "The headline's aidreams260K target, drafters, prompts and seeds, sampled, with three chain verification"
  echo "rules: token-wise rejection sampling (\`--verification token\`), coupled sampling"
  echo "(\`coupled\`: every position drawn by an exponential race under noise keyed by seed, position"
  echo "and token, the drafter drawing with the same noise) and llama.cpp's sample-and-match rule"
  echo "(\`sample-match\`: the target samples each position, the drafts are greedy and kept while"
  echo "equal). Tokens per target call over every prompt and repetition, and its ratio to token-wise"
  echo "rejection sampling's on the same drafter; the speed-up over plain decoding in the same"
  echo "process, median of $reps (range); whether every output equalled plain decoding's with the same"
  echo "seed (coupled and sample-and-match promise it; rejection sampling keeps only the law: n/a)."
  echo
  echo "| drafter | temperature | verification | tokens per target call | x token-wise | speed-up, median of $reps (range) | output identical to plain decoding |"
  echo "| --- | --- | --- | --- | --- | --- | --- |"
  awk -F'|' '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    { cfg = trim($2); k = cfg; sub(/.*-k /, "", k)
      if (index(cfg, "model:")) name = "draft model, K = " k
      else if (index(cfg, "heads:")) name = "EAGLE-style heads, K = " k
      else name = cfg
      rule = trim($4)
      if (rule == "token") rule = "token-wise rejection"
      else if (rule == "sample-match") rule = "sample-and-match"
      printf "| %s | %s | %s | %s | %s | %s (%s) | %s |\n", name, trim($3), rule, trim($5), trim($6),
             trim($7), trim($8), trim($9) }' "$ver_rows"
} >>"$frag"

# --- sampling levers (counts: tokens per call on the 260K model, not timed) --------------------------
log "sampling levers: tokens per call at temperature 0.8"
distilled=$work/eagle_distilled.heads
if [ "$smoke" = 1 ]; then
  dtrain=("${train_flags[@]}" --out "$distilled" --distill 1 --distill-temp 0.8) lever_seeds=1
else
  dtrain=(--kind eagle --out "$distilled" -t 2 --distill 1 --distill-temp 0.8) lever_seeds=10
fi
"$B/specdec-train-heads" --model "$models/aidreams260K.bin" --tokenizer "$tok" "${dtrain[@]}" >&2
narrow=$work/eagle_narrow.heads
if [ "$smoke" = 1 ]; then
  ntrain=(--kind eagle --out "$narrow" --sequences 60 --steps 150 --inner 16)
else
  ntrain=(--kind eagle --out "$narrow" -t 2 --inner 256 --sequences 1200 --steps 6000)
fi
"$B/specdec-train-heads" --model "$models/aidreams260K.bin" --tokenizer "$tok" "${ntrain[@]}" >&2
SEEDS=$lever_seeds B=$B bench/sampling_levers.sh "$heads" "$distilled" "$narrow" | shown_stream >"$work/levers.md"
section "Sampling: what moves tokens per call at temperature 0.8" \
  "SEEDS=$lever_seeds B=\$B bench/sampling_levers.sh \$W/aidreams260K/eagle.heads \$W/eagle_distilled.heads \$W/eagle_narrow.heads   # the second: $(shown "${dtrain[*]}"); the third: $(shown "${ntrain[*]}")" \
  "Counts, the same on any machine: EAGLE-style heads on aidreams260K itself, four prompts x $lever_seeds seeds, 100 tokens. Every configuration is exactly lossless; what differs is how many tokens a target call yields. Whether a tree's extra rows pay depends on t(n): on these 2 cores the engine turns compute-bound past about 8 rows (t(16) and t(24) in the cost section below), so trees of many nodes do not pay here; the speed policy (\`-k auto\` in the headline) reads t(n) and plans chains or trees of a few nodes."
cat "$work/levers.md" >>"$frag"

# --- the other measurements -----------------------------------------------------------------------
if [ "$smoke" = 1 ]; then
  gb=(--benchmark_repetitions=2 --benchmark_min_time=0.01)
else
  gb=(--benchmark_repetitions=5 --benchmark_min_time=0.2)
fi

log "t(n): one call of n tokens on the $shape target"
mb_filter='BM_Append/(1|2|3|4|5|6|8|9|16|24)/2/'
[ "$smoke" = 0 ] || mb_filter='BM_Append/(1|4)/2/'
SPECDEC_BENCH_SHAPE=$shape gbench memory_bound_bench "--benchmark_filter=$mb_filter" \
  --benchmark_repetitions="${gb[0]#*=}"
section "The cost of one call: t(n) on the $shape target" \
  "SPECDEC_BENCH_SHAPE=$shape $BB/memory_bound_bench '--benchmark_filter=$mb_filter' --benchmark_repetitions=${gb[0]#*=}" \
  "BM_Append/n/threads: n tokens in one call, 2 threads. \`to_1\` = t(n)/t(1) and \`to_stream\` = t(n) over a streaming read of the same weight bytes, both timed interleaved in the same iterations. Median (range) of the repetitions."
gbench_table "$work/memory_bound_bench.json" to_1 to_stream GFLOPs >>"$frag"

log "verifiers"
vf='BM_Verify((Greedy|Rejection/case:(0|2)|Block/case:0)/K:(4|8)/V:(32000|151936)|Coupled/case:(0|2)/K:(4|8)/V:(32000|128256))/'
[ "$smoke" = 0 ] || vf='BM_Verify(Greedy|Rejection/case:0|Coupled/case:0)/K:4/V:32000/'
gbench verify_bench "--benchmark_filter=$vf" "${gb[@]}"
section "Verification cost" \
  "$BB/verify_bench '--benchmark_filter=$vf' ${gb[*]}" \
  "\`ratio\` = the verifier's time over the cheapest pass over the same K + 1 rows (greedy: a max per row; sampling: a log-sum-exp per row), both timed in the same iterations. Rejection case 0: temperature 1, full q rows; case 2: top-p 0.9; block case 0: \`verify_block\` at temperature 1. \`BM_VerifyCoupled\` (cases 0 and 2 as above): coupled verification, every draft kept; its \`ratio\` and \`ref_us\` are against \`verify_rejection\` on the same rows and drafts with q = p (every draft kept), not against a log-sum-exp pass."
gbench_table "$work/verify_bench.json" ratio ref_us >>"$frag"

log "decoder overhead"
gbench decoder_bench "${gb[@]}"
section "Decoder overhead" "$BB/decoder_bench ${gb[*]}" \
  "Microseconds per generated token (\`BM_DecoderOverhead\`, V = 32000) or per sequence-step (\`BM_BatchOverhead\`) that the library spends beyond the model's calls and the verifiers (\`overhead_us\`), with a model that copies precomputed rows."
gbench_table "$work/decoder_bench.json" overhead_us total_us >>"$frag"

log "prompt lookup: step cost"
ng=(); [ "$smoke" = 0 ] || ng=('--benchmark_filter=BM_ngram_step/1024$')
gbench ngram_bench "${ng[@]}" "${gb[@]}"
section "Prompt lookup: the cost of a step" "$BB/ngram_bench ${ng[*]} ${gb[*]}" \
  "Propose K = 8 and accept, at a context of n tokens (CPU time, ns). \`ratio\` = a naive rescan's step over the drafter's; \`ratio_to_bounded\` = the default (unbounded) index's step over the bounded 2..4-gram index's, both measured in the same benchmark."
gbench_table "$work/ngram_bench.json" cpu_time rescan_ns ratio ratio_to_bounded bytes_per_token >>"$frag"

log "prompt lookup: tokens per step on edits"
"$BB/ngram_rules_bench" | shown_stream >"$work/ngram_rules.txt"
section "Prompt lookup: tokens per verification step on edits" "$BB/ngram_rules_bench" \
  "Counts, not times: the same on any machine. A perfect target keeps the matching prefix plus one token. Rows for llama.cpp's and vLLM's rules are specdec's re-implementations of the rules as their documentation states them (docs/ngram.md), not runs of those engines."
cat "$work/ngram_rules.txt" >>"$frag"

log "prefill"
pf=(); [ "$smoke" = 0 ] || pf=('--benchmark_filter=BM_PrefillBytes')
gbench prefill_bench "${pf[@]}" "${gb[@]}"
section "Prefill" "$BB/prefill_bench ${pf[*]} ${gb[*]}" \
  "\`BM_PrefillBytes\`: heap bytes of the decoder's start on a 4096-token prompt at V = 32000 against the former prompt x V buffer (\`ratio\`). \`BM_PrefillTime\`: a prefill without logits over an append with them (\`ratio\`), and the share of the matrix work prefill keeps (\`kept\`, the prediction)."
gbench_table "$work/prefill_bench.json" ratio bytes kept >>"$frag"

log "batched decoding"
if [ "$smoke" = 1 ]; then ba=(1 "$work/batch.json" 8 2); else ba=(3 "$work/batch.json" 32 8); fi
"$BB/batch_bench" "${ba[@]}" | shown_stream >"$work/batch.txt"
section "Batched decoding" "$BB/batch_bench ${ba[*]}" \
  "Total tokens/s of all sequences, the speed-up over plain batched decoding of the same requests in the same repetition (median), and whether every sequence equals its single-sequence output."
{ echo '```'; cat "$work/batch.txt"; echo '```'; } >>"$frag"

log "speed policy"
if [ "$smoke" = 1 ]; then po=(1 both 15M); else po=(5 both); fi
"$BB/policy_bench" "${po[@]}" | shown_stream >"$work/policy.txt"
section "The speed policy" "$BB/policy_bench ${po[*]}" \
  "The policy (calibrate + speed_policy) against plain decoding and every fixed K, medians of same-repetition ratios."
{ echo '```'; cat "$work/policy.txt"; echo '```'; } >>"$frag"

log "the 260K model itself (weights in cache: speculation does not pay)"
if [ "$smoke" = 1 ]; then e2=(1); else e2=(3); fi
"$BB/e2e_bench" "${e2[@]}" | shown_stream >"$work/e2e.txt"
section "Where it does not pay: the 260K model itself" "$BB/e2e_bench ${e2[*]}" \
  "aidreams260K unreshaped: its weights fit in cache, so a call of K + 1 tokens costs close to K + 1 single calls."
cat "$work/e2e.txt" >>"$frag"

# --- 4. write the page ----------------------------------------------------------------------------
finished=$(date -u '+%Y-%m-%d %H:%M UTC')
load_end=$(cut -d' ' -f1-3 /proc/loadavg)
generated=$work/generated.md
{
  echo "<!-- results.sh: begin (generated by bench/results.sh; edit the script, not this block) -->"
  echo
  echo "## This run"
  echo
  echo "| | |"
  echo "| --- | --- |"
  echo "| command | \`bench/results.sh$([ "$smoke" = 1 ] && echo ' --smoke')\` ($((SECONDS - t0)) s, build included) |"
  echo "| CPU | $cpu; $simd |"
  echo "| cores | $cores |"
  echo "| commit | $commit |"
  echo "| compiler | $compiler |"
  echo "| date | $started to $finished |"
  echo "| load average (1, 5, 15 min) | $load_start at the start, $load_end at the end |"
  [ "$smoke" = 0 ] || echo "| note | **smoke run**: small inputs, not figures to quote |"
  echo
  cat "$frag"
  echo
  echo "<!-- results.sh: end -->"
} >"$generated"
{
  echo "<!-- results.sh: headline begin (copied from docs/results.md by bench/results.sh) -->"
  cat "$headline"
  echo "<!-- results.sh: headline end -->"
} >"$work/headline_block.md"

# replace_block FILE BEGIN_RE END_RE CONTENT_FILE: the lines from BEGIN_RE to END_RE (inclusive)
# become CONTENT_FILE; appended when the file has no such block.
replace_block() {
  local file=$1 begin=$2 end=$3 content=$4
  if [ -f "$file" ] && grep -q "$begin" "$file"; then
    awk -v b="$begin" -v e="$end" -v c="$content" '
      $0 ~ b { while ((getline line < c) > 0) print line; skip = 1; next }
      skip && $0 ~ e { skip = 0; next }
      !skip { print }' "$file" >"$file.tmp" && mv "$file.tmp" "$file"
  else
    { [ ! -f "$file" ] || { cat "$file"; echo; }; cat "$content"; } >"$file.tmp" && mv "$file.tmp" "$file"
  fi
}
if [ "$smoke" = 1 ] && [ ! -f "$out" ]; then cp docs/results.md "$out"; fi
replace_block "$out" '<!-- results.sh: begin' '<!-- results.sh: end' "$generated"
# The README's copy of the headline table (not in a smoke run: the README quotes real figures).
if [ "$smoke" = 0 ] && [ "$out" = "$root/docs/results.md" ]; then
  replace_block README.md '<!-- results.sh: headline begin .copied from' '<!-- results.sh: headline end' \
    "$work/headline_block.md"
fi
log "wrote $out"

#!/usr/bin/env bash
# bench/results.sh - regenerates the measured part of docs/results.md in one run on one machine.
#
#   bench/results.sh            the full run, on a quiet machine (nothing else compiling or
#                               running): on 2 cores, about 5 minutes to build from scratch, then
#                               about 18 of measurement (headline 4, verification rules 3, speed
#                               policy 3, sampling levers 2, the rest 6)
#   bench/results.sh --smoke    the same pipeline on small inputs (15M shape, 1-2 repetitions, tiny
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
#   2. writes the inputs: aidreams260K reshaped to the 110M shape (the memory-bound target), its
#      first 3 layers as a separate draft model, and EAGLE-style heads trained on it;
#   3. runs each measurement, ratios always against a reference measured in the same run
#      (plain decoding in the same process, or the benchmark's interleaved reference), medians
#      over repetitions with their range (min-max);
#   4. replaces what lies between the "results.sh" markers of the output page (the machine,
#      the headline table and every section below it) and the README's copy of the headline
#      table. Text outside the markers (rows from other runs, other engineers' sections) is kept.
#
# Needs: cmake, a C++20 compiler, Eigen, Google Benchmark, CLI11, nlohmann-json, jq, and the
# checkpoints in ../shared/models (or SPECDEC_MODELS_DIR): aidreams260K.bin and its tokenizer
# (docs/results.md says where they come from).
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
    -h|--help) sed -n '2,31p' "$0"; exit 0 ;;
    *) echo "results.sh: unknown argument '$1' (see --help)" >&2; exit 2 ;;
  esac
  shift
done
if [ "$smoke" = 1 ]; then
  build=${build:-$root/build/results-smoke} reps=${reps:-2} shape=15M
  out=${out:-$build/results.md}
else
  build=${build:-$root/build/bench} reps=${reps:-3} shape=110M
  out=${out:-$root/docs/results.md}
fi
models=${SPECDEC_MODELS_DIR:-$root/../shared/models}
tok=$models/aidreams260K.tok512.bin
for f in "$models/aidreams260K.bin" "$tok"; do
  [ -f "$f" ] || { echo "results.sh: $f not found (set SPECDEC_MODELS_DIR)" >&2; exit 1; }
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
cmake --preset bench -B "$build" >/dev/null
cmake --build "$build" -j "$jobs" --target specdec-generate specdec-reshape specdec-train-heads \
      "${benches[@]}" >&2
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
log "inputs: reshape to $shape, first 3 layers, EAGLE-style heads"
big=$work/big.bin draft=$work/first3.bin heads=$work/eagle.heads
"$B/specdec-reshape" "$models/aidreams260K.bin" "$big" --shape "$shape" >&2
"$B/specdec-reshape" "$models/aidreams260K.bin" "$draft" --keep-layers 3 >&2
if [ "$smoke" = 1 ]; then
  train=(--kind eagle --out "$heads" --sequences 60 --steps 150 --inner 64)
else
  train=(--kind eagle --out "$heads" -t 2)
fi
"$B/specdec-train-heads" --model "$models/aidreams260K.bin" --tokenizer "$tok" "${train[@]}" >&2
train_cmd="\$B/specdec-train-heads --model \$M/aidreams260K.bin --tokenizer \$M/aidreams260K.tok512.bin $(shown "${train[*]}")"

# --- 3. the headline: end to end on the memory-bound target ---------------------------------------
# bench/heads_runs.sh: per repetition, every prompt decoded by specdec-generate --compare-plain
# (plain decoding timed in the same process), the speed-up = total plain time / total speculative
# time; median and range over the repetitions; greedy: whether every output was identical.
log "headline: end to end, $reps repetitions"
free_prompts=$work/free_prompts.txt quoting_prompts=$work/quoting_prompts.txt
printf '%s\n' "I dreamed" "The stars" "In the quiet server room" "A memory" >"$free_prompts"
# The prompts of bench/support/e2e.hpp that quote text the model goes on to repeat (prompt
# lookup's case: input-grounded generation).
cat >"$quoting_prompts" <<'EOF'
I dreamed, as I sense the nodes, a gentle hum of probability. Contrast emerge, a flower, as I adjust, as I settle into a tapestry of vectors. I dreamed
Contrast edges sharpen, a kaleidoscope of light. Contrast edges sharpen, a kaleidoscope
a gentle hum of probability, a gentle hum of probability, a gentle hum
I sense the nodes. I adjust. I settle. I sense the nodes. I adjust. I
EOF
if [ "$smoke" = 1 ]; then
  model_cfgs=("--draft model:$draft -k 3") heads_cfgs=("--draft heads:$heads -k 4")
  ngram_cfgs=("--draft ngram -k 8") temps=(0)
else
  model_cfgs=("--draft model:$draft -k 3")
  heads_cfgs=("--draft heads:$heads -k 4" "--draft heads:$heads -k 6" "--draft heads:$heads -k auto")
  ngram_cfgs=("--draft ngram -k 8") temps=(0 0.8 1.0)
fi
rows=$work/headline_rows.md
: >"$rows"
for t in "${temps[@]}"; do
  PROMPTS=$free_prompts B=$B TOKENIZER=$tok bench/heads_runs.sh "$big" "$t" "$reps" \
    "${model_cfgs[@]}" "${heads_cfgs[@]}" | tail -n +3 >>"$rows"
  PROMPTS=$quoting_prompts B=$B TOKENIZER=$tok bench/heads_runs.sh "$big" "$t" "$reps" \
    "${ngram_cfgs[@]}" | tail -n +3 >>"$rows"
done
# heads_runs.sh's rows: | config | temp | tokens/call | speed-up | range | identical |
headline=$work/headline.md
{
  echo "| drafter (target: aidreams260K reshaped to $shape, 2 threads) | temperature | tokens per target call | speed-up over plain decoding, median of $reps (range) | greedy output identical |"
  echo "| --- | --- | --- | --- | --- |"
  awk -F'|' -v draft="$draft" -v heads="$heads" '
    function trim(s) { gsub(/^ +| +$/, "", s); return s }
    { cfg = trim($2); k = cfg; sub(/.*-k /, "", k)
      tree = cfg; sub(/.*--tree /, "", tree); sub(/ .*/, "", tree)
      if (index(cfg, "--tree")) name = "EAGLE-style heads (trained here), tree " tree
      else if (index(cfg, "model:")) name = "draft model (its first 3 layers), K = " k
      else if (index(cfg, "heads:") && k == "auto") name = "EAGLE-style heads (trained here), speed policy (-k auto)"
      else if (index(cfg, "heads:")) name = "EAGLE-style heads (trained here), K = " k
      else if (index(cfg, "ngram")) name = "prompt lookup (n-gram), K = " k ", quoting prompts"
      else name = cfg
      range = trim($6)
      printf "| %s | %s | %s | %s (%s) | %s |\n", name, trim($3), trim($4), trim($5), range, trim($7) }' "$rows"
} >"$headline"
{
  echo "### End to end: the headline"
  echo
  echo "Target: aidreams260K (233K parameters, a real model) reshaped to the $shape shape, so that"
  echo "its predictions come at a $shape model's cost per token (the memory-bound regime where"
  echo "speculation pays); 2 threads. Draft model and heads prompts: the four free prompts of"
  echo "\`bench/support/e2e.hpp\`; prompt lookup: its four quoting prompts. 64 new tokens per prompt;"
  echo "seed = prompt index + 100 x repetition (each repetition samples afresh). Per repetition the speed-up is plain decoding's time over speculative"
  echo "decoding's for the same requests, both timed in the same process."
  echo
  rel() { sed "s#^$root/##" <<<"$1"; }
  echo "    M=$(rel "$models") B=$(rel "$B") W=$(rel "$work")"
  echo "    \$B/specdec-reshape \$M/aidreams260K.bin \$W/big.bin --shape $shape"
  echo "    \$B/specdec-reshape \$M/aidreams260K.bin \$W/first3.bin --keep-layers 3"
  echo "    $train_cmd"
  for t in "${temps[@]}"; do
    echo "    PROMPTS=\$W/free_prompts.txt B=\$B bench/heads_runs.sh \$W/big.bin $t $reps $(for c in "${model_cfgs[@]}" "${heads_cfgs[@]}"; do printf '"%s" ' "$(shown "$c")"; done)"
    echo "    PROMPTS=\$W/quoting_prompts.txt B=\$B bench/heads_runs.sh \$W/big.bin $t $reps $(for c in "${ngram_cfgs[@]}"; do printf '"%s" ' "$c"; done)"
  done
  echo
  cat "$headline"
} >>"$frag"

# --- verification rules on the same drafters (the headline's target, prompts and seeds) -----------
log "verification rules: token-wise, coupled, sample-and-match"
ver_cfgs=("--draft model:$draft -k 3" "--draft heads:$heads -k 6")
if [ "$smoke" = 1 ]; then ver_temps=(0.8); else ver_temps=(0.8 1.0); fi
ver_rows=$work/verification_rows.md
: >"$ver_rows"
for t in "${ver_temps[@]}"; do
  PROMPTS=$free_prompts B=$B TOKENIZER=$tok bench/verification_runs.sh "$big" "$t" "$reps" \
    "${ver_cfgs[@]}" >>"$ver_rows"
done
{
  echo
  echo "### Verification rules on the same drafts"
  echo
  for t in "${ver_temps[@]}"; do
    echo "    PROMPTS=\$W/free_prompts.txt B=\$B bench/verification_runs.sh \$W/big.bin $t $reps $(for c in "${ver_cfgs[@]}"; do printf '"%s" ' "$(shown "$c")"; done)"
  done
  echo
  echo "The headline's target, drafters, prompts and seeds, sampled, with three chain verification"
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
  dtrain=("${train[@]/$heads/$distilled}" --distill 1 --distill-temp 0.8) lever_seeds=1
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
  "SEEDS=$lever_seeds B=\$B bench/sampling_levers.sh \$W/eagle.heads \$W/eagle_distilled.heads \$W/eagle_narrow.heads   # the second: $(shown "${dtrain[*]}"); the third: $(shown "${ntrain[*]}")" \
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
  replace_block README.md '<!-- results.sh: headline begin' '<!-- results.sh: headline end' \
    "$work/headline_block.md"
fi
log "wrote $out"

#!/usr/bin/env bash
# bench/llamacpp_race.sh [BUILD_DIR] [THREADS] [REPS] [FA] - specdec-llama against llama.cpp's own
# speculative decoding on the same GGUF models, threads, prompts and attention kernel, in one run.
# FA (default on, what llama.cpp's default 'auto' picks on the CPU) is passed as -fa to every
# system; specdec-policy-fa-off adds specdec-llama with -fa off (rows independent of the cache
# layout), which costs the attention kernel's difference (docs/command-line.md).
#
# Models (made here from ../shared/models, never committed): MODEL (default aidreams260K; or
# stories260K, TinyStories English) reshaped to the 110M shape (specdec-reshape --shape 110M: the
# small model's predictions at a 110M model's cost) as F32 and Q8_0, and its first 3 layers as the
# draft. aidreams260K's are tests/llamacpp/make_gguf.sh --big's, in BUILD_DIR/race-gguf;
# stories260K's are bench/support/race_gguf.sh's, in BUILD_DIR/race-gguf-stories260K (context
# length 512 written into the GGUF files, which needs the llama.cpp source's gguf-py: LLAMA_SRC,
# default build/llama.cpp-src). Prompts: "The machine", "I dreamed of" (aidreams260K); "Once upon a
# time", "The little dog" (stories260K).
# Systems, each generating 100 tokens (end of text ignored) after each prompt:
#   llama-plain        llama-completion (llama.cpp's plain decoding: the reference)
#   llama-spec-K       llama-speculative-simple --spec-type draft-simple --spec-draft-n-max K (K = 1, 2, 3, 4, 6, 8)
#   llama-ngram-simple llama-speculative-simple --spec-type ngram-simple (and ngram-mod)
#   specdec-policy     specdec-llama -md DRAFT (no K: the speed policy plans every step)
#   specdec-K          specdec-llama -md DRAFT --spec-draft-n-max K (K = 2, 4, 6)
#   specdec-tree       specdec-llama -md DRAFT --tree 4x2x2x1 (44 nodes, one llama_decode per tree)
#   specdec-ngram      specdec-llama --draft ngram (speed policy)
# greedy and T = 0.8 (top-k 40, top-p 0.95, min-p 0.05: llama.cpp's defaults, passed to every
# program explicitly, as are -n, -s 1, -c, -t, -fa, the drafter and K), F32 and Q8_0;
# REPS rounds (default 3), each round running every system once per prompt in the same order,
# so that drift of the machine hits every system alike. Decode speed only (prompt excluded), as
# each program reports it: llama.cpp's "eval time" / "decoded ... speed", specdec's
# stats.tokens_per_second. Prints, per configuration and system, the median tokens/s over rounds
# and prompts with its range, and its ratio to llama-plain's median.
#
# Environment: MODEL (aidreams260K or stories260K); HEADS=FILE (draft heads from
# specdec-train-heads on MODEL) adds
# specdec-heads-policy and specdec-heads-4 (--draft heads:FILE, no K and K = 4); QUANTS (default
# "f32 q8_0") and TEMPS (default "0 0.8") narrow the configurations; SYSTEMS (a regex over the
# system names, e.g. 'llama-plain|specdec-policy|specdec-ngram') runs only the rows it matches,
# for more rounds of a few rows.
#
# Time (an estimate): a round of both temperatures took 2.6 minutes on Q8_0 in a smoke run on a
# busy 2-core Xeon (stories260K); F32 about half as fast again: the default 3 rounds x F32 and
# Q8_0 about 20 minutes, on either model.
#
# Do not run it while anything else runs on the machine (compiles included): the figures would
# measure the neighbour. Needs the llamacpp preset's build plus
#   cmake --build BUILD_DIR --target specdec_llamacpp_race_tools
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/llamacpp}
T=${2:-1}
R=${3:-3}
FA=${4:-on}
N=100
M=${SPECDEC_MODELS_DIR:-../shared/models}
G=$B/race-gguf
bin=${LLAMA_BIN:-$B/bin}  # where llama-completion and friends are (LLAMA_BIN for an installed llama.cpp)
specdec=$B/examples/llamacpp/specdec-llama
for f in "$bin/llama-completion" "$bin/llama-speculative-simple" "$specdec"; do
  [[ -x $f ]] || { echo "llamacpp_race.sh: $f missing: build the llamacpp preset and target specdec_llamacpp_race_tools" >&2; exit 1; }
done
MODEL=${MODEL:-aidreams260K}
case $MODEL in
  aidreams260K)
    tests/llamacpp/make_gguf.sh "$M" "$G" "$B/examples/llama2c/specdec-reshape" \
      "$bin/llama-convert-llama2c-to-ggml" "$bin/llama-quantize" --big
    prompts=("The machine" "I dreamed of") ;;
  stories260K)
    G=$B/race-gguf-stories260K
    bench/support/race_gguf.sh stories260K "$M" "$G" "$B/examples/llama2c/specdec-reshape" \
      "$bin/llama-convert-llama2c-to-ggml" "$bin/llama-quantize"
    prompts=("Once upon a time" "The little dog") ;;
  *) echo "llamacpp_race.sh: MODEL is aidreams260K or stories260K, not '$MODEL'" >&2; exit 2 ;;
esac
[[ -f $G/big.gguf ]] || { echo "llamacpp_race.sh: no models (../shared/models absent?)" >&2; exit 1; }
policy=(-k auto)  # specdec-llama's speed policy, asked for explicitly
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results=$out/results.tsv

tps_completion() { sed -n 's/.* eval time = .*, *\([0-9.]*\) tokens per second.*/\1/p' | grep -v '^$' | tail -n 1; }
tps_speculative() { sed -n 's/.*decoded .* speed: *\([0-9.]*\) t\/s.*/\1/p' | tail -n 1; }

run() {  # config system command...
  local config=$1 system=$2 tps tpc=nan
  shift 2
  [[ -z ${SYSTEMS:-} || $system =~ ^(${SYSTEMS})$ ]] || return 0  # SYSTEMS: a regex of rows to run
  if [[ $system == specdec* ]]; then
    "$@" --json 2>/dev/null >"$out/last.json" || true
    read -r tps tpc < <(jq -r '"\(.stats.tokens_per_second) \(.stats.tokens_per_target_call)"' \
      "$out/last.json") || true
    # The policy's calibrated cost: the target's t(n) and the draft model's cost per level.
    [[ $system == specdec-policy ]] && jq -r --arg c "$config" 'select(.policy_cost_curve) |
      "\($c)\t\(.policy_cost_curve | tojson)\t\(.policy_draft_per_level // 0)"' \
      "$out/last.json" >>"$out/curves.tsv" 2>/dev/null || true
  elif [[ $system == llama-plain ]]; then
    tps=$("$@" 2>&1 | tps_completion)
  else
    tps=$("$@" 2>&1 | tps_speculative)
  fi
  [[ -n $tps && $tps != null ]] || { echo "llamacpp_race.sh: no figure from: $*" >&2; tps=nan; }
  printf '%s\t%s\t%s\t%s\n' "$config" "$system" "$tps" "${tpc:-nan}" >>"$results"
}

for round in $(seq 1 "$R"); do
  for quant in ${QUANTS:-f32 q8_0}; do
    target=$G/big.gguf
    [[ $quant == q8_0 ]] && target=$G/big-q8_0.gguf
    draft=$G/big-draft.gguf
    for temp in ${TEMPS:-0 0.8}; do
      config="$quant T=$temp"
      common=(-t "$T" -n "$N" --temp "$temp" --top-k 40 --top-p 0.95 --min-p 0.05 -s 1 -c 1024 -fa "$FA")
      for p in "${prompts[@]}"; do
        echo "round $round/$R: $config, prompt \"$p\"" >&2
        run "$config" llama-plain "$bin/llama-completion" -m "$target" -p "$p" "${common[@]}" --ignore-eos -no-cnv
        for k in 1 2 3 4 6 8; do
          run "$config" "llama-spec-$k" "$bin/llama-speculative-simple" -m "$target" -md "$draft" -p "$p" \
            "${common[@]}" --ignore-eos --spec-type draft-simple --spec-draft-n-max "$k" --spec-draft-n-min 0
        done
        for type in ngram-simple ngram-mod; do
          run "$config" "llama-$type" "$bin/llama-speculative-simple" -m "$target" -p "$p" \
            "${common[@]}" --ignore-eos --spec-type "$type"
        done
        run "$config" specdec-policy "$specdec" -m "$target" -md "$draft" --draft model "${policy[@]}" -p "$p" \
          "${common[@]}" --ignore-eos
        [[ $FA == off ]] || run "$config" specdec-policy-fa-off "$specdec" -m "$target" -md "$draft" --draft model \
          "${policy[@]}" -p "$p" "${common[@]}" --ignore-eos -fa off
        for k in 2 4 6; do
          run "$config" "specdec-$k" "$specdec" -m "$target" -md "$draft" --draft model -p "$p" "${common[@]}" \
            --ignore-eos --spec-draft-n-max "$k"
        done
        run "$config" specdec-tree "$specdec" -m "$target" -md "$draft" --draft model -p "$p" "${common[@]}" \
          --ignore-eos --tree 4x2x2x1
        run "$config" specdec-ngram "$specdec" -m "$target" --draft ngram "${policy[@]}" -p "$p" "${common[@]}" \
          --ignore-eos
        if [[ -n ${HEADS:-} ]]; then
          run "$config" specdec-heads-policy "$specdec" -m "$target" --draft "heads:$HEADS" "${policy[@]}" -p "$p" \
            "${common[@]}" --ignore-eos
          run "$config" specdec-heads-4 "$specdec" -m "$target" --draft "heads:$HEADS" -p "$p" \
            "${common[@]}" --ignore-eos --spec-draft-n-max 4
        fi
      done
    done
  done
done

echo "# llamacpp_race.sh: $MODEL, $N tokens, $T thread(s), -fa $FA, $R rounds x ${#prompts[@]} prompts; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; specdec $(git rev-parse --short HEAD)"
python3 - "$results" "$out/curves.tsv" <<'EOF'
import collections, json, math, statistics, sys
rows = collections.defaultdict(list)
order = []
calls = collections.defaultdict(list)
for line in open(sys.argv[1]):
    config, system, tps, tpc = line.rstrip("\n").split("\t")
    if (config, system) not in rows: order.append((config, system))
    rows[(config, system)].append(float(tps))
    calls[(config, system)].append(float(tpc))
# The speed-up the measured cost predicts for a fixed K: tokens per call x t(1) over a step's
# cost, t(K + 1) plus K draft-model calls, from the policy's calibrations of the same run
# (medians per n).
curves = collections.defaultdict(list)
try:
    for line in open(sys.argv[2]):
        config, curve, level = line.rstrip("\n").split("\t")
        curves[config].append((json.loads(curve), float(level)))
except FileNotFoundError:
    pass
def predicted(config, system, tpc):
    if not curves[config] or not system.startswith("specdec-") or not system[8:].isdigit():
        return ""
    k = int(system[8:])
    t = [statistics.median(c[0][n] for c in curves[config]) for n in range(len(curves[config][0][0]))]
    level = statistics.median(c[1] for c in curves[config])
    if k + 1 >= len(t): return ""
    return f"{tpc * t[1] / (t[k + 1] + k * level):.2f}x"
print("| configuration | system | tokens/s median [range] | x llama-plain | tokens per target call (median) | predicted x plain |")
print("| --- | --- | --- | --- | --- | --- |")
for config, system in order:
    v = [x for x in rows[(config, system)] if not math.isnan(x)]
    base = [x for x in rows[(config, "llama-plain")] if not math.isnan(x)]
    if not v: print(f"| {config} | {system} | failed | | | |"); continue
    m = statistics.median(v)
    ratio = m / statistics.median(base) if base else float("nan")
    c = [x for x in calls[(config, system)] if not math.isnan(x)]
    tpc = f"{statistics.median(c):.2f}" if c else ""
    pred = predicted(config, system, statistics.median(c)) if c else ""
    print(f"| {config} | {system} | {m:.1f} [{min(v):.1f}-{max(v):.1f}] | {ratio:.2f}x | {tpc} | {pred} |")
EOF

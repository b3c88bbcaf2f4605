#!/usr/bin/env bash
# bench/llamacpp_heads_batch.sh [BUILD_DIR] [THREADS] [ROUNDS] [FA] - draft heads and batch
# serving through llama.cpp (specdec-llama), beside plain decoding of the same requests, in one
# run, on the 110M-shape GGUF models.
#
# Models (made here, never committed): aidreams260K reshaped to the 110M shape as F32 and Q8_0
# and its 3-layer draft (tests/llamacpp/make_gguf.sh --big), and draft heads trained on
# aidreams260K by specdec-train-heads (EAGLE-style, and 4 Medusa heads), which specdec-llama
# widens to the reshaped model as specdec-generate does.
#
# Heads, per model (F32, Q8_0) and temperature (greedy; T = 0.8 with llama.cpp's default top-k
# 40, top-p 0.95, min-p 0.05), 100 tokens (end of text ignored) after each of 2 prompts:
#   plain          specdec-llama --draft none (one llama_decode per token)
#   eagle-policy   --draft heads:eagle.heads (the speed policy plans K or a tree every step)
#   eagle-K4       --draft heads:eagle.heads --spec-draft-n-max 4
#   eagle-tree     --draft heads:eagle.heads --tree 2x2x1x1
#   medusa-K3      --draft heads:medusa.heads --spec-draft-n-max 3
#   model-K4       -md the 3-layer draft --spec-draft-n-max 4 (for reference)
# decode speed, prompt excluded (stats.tokens_per_second).
# Batch, per model, greedy: 4 requests (4 prompts, 100 tokens each) served together by
# specdec-llama -np 4 (batch_model + batch_decoder: one llama_decode per step for all), and the
# same requests decoded plainly one after another in the same process (--compare-plain); wall
# time of all requests, prompts included. Configurations: no drafter, and a draft model per
# request with K = 4.
# Every configuration runs ROUNDS times (default 3), interleaved; medians over rounds (and
# prompts) with their range. Every run gets the same -fa (default on, llama.cpp's CPU choice).
#
# Do not run it while anything else runs on the machine (compiles included).
set -euo pipefail
cd "$(dirname "$0")/.."
B=${1:-build/llamacpp}
T=${2:-1}
R=${3:-3}
FA=${4:-on}
N=100
M=${SPECDEC_MODELS_DIR:-../shared/models}
G=$B/heads-batch-gguf
bin=${LLAMA_BIN:-$B/bin}
specdec=$B/examples/llamacpp/specdec-llama
train=$B/examples/llama2c/specdec-train-heads
for f in "$specdec" "$train" "$B/examples/llama2c/specdec-reshape"; do
  [[ -x $f ]] || { echo "llamacpp_heads_batch.sh: $f missing: build specdec-llama, specdec-train-heads and specdec-reshape" >&2; exit 1; }
done
policy=(-k auto)  # specdec-llama's speed policy, asked for explicitly
tests/llamacpp/make_gguf.sh "$M" "$G" "$B/examples/llama2c/specdec-reshape" \
  "$bin/llama-convert-llama2c-to-ggml" "$bin/llama-quantize" --big
[[ -f $G/big.gguf ]] || { echo "llamacpp_heads_batch.sh: no models (../shared/models absent?)" >&2; exit 1; }
tok=$M/aidreams260K.tok512.bin
heads_train=(--seconds 120 --seed 1 -t "$T")
[[ -f $G/eagle.heads ]] || "$train" --model "$M/aidreams260K.bin" --tokenizer "$tok" --kind eagle \
  --out "$G/eagle.heads" "${heads_train[@]}" >&2
[[ -f $G/medusa.heads ]] || "$train" --model "$M/aidreams260K.bin" --tokenizer "$tok" --kind medusa \
  --heads 4 --out "$G/medusa.heads" "${heads_train[@]}" >&2

prompts=("The machine" "I dreamed of")
requests=("The machine" "I dreamed of" "Once upon a time" "The little dog")
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
results=$out/results.tsv
printf '%s\n' "${requests[@]}" >"$out/requests.txt"

record() { printf '%s\t%s\t%s\n' "$1" "$2" "${3:-nan}" >>"$results"; }
single() {  # config system command...
  local config=$1 system=$2 tps
  shift 2
  tps=$("$@" --json 2>/dev/null | jq -r '.stats.tokens_per_second') || tps=nan
  [[ -n $tps && $tps != null ]] || { echo "llamacpp_heads_batch.sh: no figure from: $*" >&2; tps=nan; }
  record "$config" "$system" "$tps"
}
batch() {  # config system command... (records the batch and the plain figure of one run)
  local config=$1 system=$2 json
  shift 2
  json=$("$@" --json --compare-plain 2>/dev/null) || json='{}'
  record "$config" "$system" "$(jq -r '.batch.tokens_per_second // "nan"' <<<"$json")"
  record "$config" "$system-alone-plain" "$(jq -r '.plain.tokens_per_second // "nan"' <<<"$json")"
  [[ $(jq -r '.plain.identical_outputs // 0' <<<"$json") == "${#requests[@]}" ]] ||
    echo "llamacpp_heads_batch.sh: $config $system: outputs differ from decoding alone" >&2
}

for round in $(seq 1 "$R"); do
  for quant in f32 q8_0; do
    target=$G/big.gguf
    [[ $quant == q8_0 ]] && target=$G/big-q8_0.gguf
    for temp in 0 0.8; do
      config="heads $quant T=$temp"
      # Every flag the figures rely on, whatever specdec-llama's defaults: llama.cpp's sampling
      # defaults (top-k 40, top-p 0.95, min-p 0.05), the seed, -fa, the drafter and K.
      common=(-m "$target" -t "$T" -n "$N" --temp "$temp" --top-k 40 --top-p 0.95 --min-p 0.05 -s 1 -c 1024
              -fa "$FA" --ignore-eos)
      for p in "${prompts[@]}"; do
        echo "round $round/$R: $config, prompt \"$p\"" >&2
        single "$config" plain "$specdec" "${common[@]}" -p "$p" --draft none
        single "$config" eagle-policy "$specdec" "${common[@]}" -p "$p" --draft "heads:$G/eagle.heads" "${policy[@]}"
        single "$config" eagle-K4 "$specdec" "${common[@]}" -p "$p" --draft "heads:$G/eagle.heads" \
          --spec-draft-n-max 4
        single "$config" eagle-tree "$specdec" "${common[@]}" -p "$p" --draft "heads:$G/eagle.heads" \
          --tree 2x2x1x1
        single "$config" medusa-K3 "$specdec" "${common[@]}" -p "$p" --draft "heads:$G/medusa.heads" \
          --spec-draft-n-max 3
        single "$config" model-K4 "$specdec" "${common[@]}" -p "$p" -md "$G/big-draft.gguf" --draft model \
          --spec-draft-n-max 4
      done
    done
    config="batch $quant greedy, ${#requests[@]} requests"
    echo "round $round/$R: $config" >&2
    bcommon=(-m "$target" -t "$T" -n "$N" --temp 0 --top-k 40 --top-p 0.95 --min-p 0.05 -s 1 -fa "$FA" --ignore-eos
             -np "${#requests[@]}" -f "$out/requests.txt")
    batch "$config" batch-plain "$specdec" "${bcommon[@]}" --draft none
    batch "$config" batch-model-K4 "$specdec" "${bcommon[@]}" -md "$G/big-draft.gguf" --draft model --spec-draft-n-max 4
  done
done

echo "# llamacpp_heads_batch.sh: $N tokens, $T thread(s), -fa $FA, $R rounds; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; specdec $(git rev-parse --short HEAD)"
python3 - "$results" <<'EOF'
import collections, math, statistics, sys
rows = collections.defaultdict(list)
order = []
for line in open(sys.argv[1]):
    config, system, tps = line.rstrip("\n").split("\t")
    if (config, system) not in rows: order.append((config, system))
    rows[(config, system)].append(float(tps) if tps not in ("", "null") else float("nan"))
def base_of(config, system):
    if config.startswith("heads"): return rows[(config, "plain")]
    if system.endswith("-alone-plain"): return rows[(config, system)]
    return rows[(config, system + "-alone-plain")]
print("| configuration | system | tokens/s median [range] | x plain |")
print("| --- | --- | --- | --- |")
for config, system in order:
    v = [x for x in rows[(config, system)] if not math.isnan(x)]
    base = [x for x in base_of(config, system) if not math.isnan(x)]
    if not v: print(f"| {config} | {system} | failed | |"); continue
    m = statistics.median(v)
    ratio = m / statistics.median(base) if base else float("nan")
    print(f"| {config} | {system} | {m:.1f} [{min(v):.1f}-{max(v):.1f}] | {ratio:.2f}x |")
EOF

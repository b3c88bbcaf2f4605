#!/usr/bin/env bash
# bench/llamacpp_server_race.sh PATCHED_BIN STOCK_BIN [THREADS] [REQUESTS] - llama-server with
# specdec's speculative decoding (PATCHED_BIN, built by examples/llamacpp/server/build-server.sh)
# against the stock llama-server from the same pinned source (STOCK_BIN, build-server.sh --stock),
# under concurrent load, on the same GGUF models, threads (default 1), prompts and attention
# kernel (-fa on for every server), in one run: the server counterpart of bench/llamacpp_race.sh.
#
# Models: the CLI race's, for MODEL (default aidreams260K; or stories260K, TinyStories English):
# aidreams260K's from tests/llamacpp/make_gguf.sh --big in $LLAMACPP_BUILD/race-gguf (default
# build/llamacpp), stories260K's from bench/support/race_gguf.sh in
# $LLAMACPP_BUILD/race-gguf-stories260K (context length 512; needs the llama.cpp source's gguf-py,
# LLAMA_SRC, default build/llama.cpp-src), made there from ../shared/models if absent, never
# committed; GGUF_DIR=DIR reads them elsewhere: MODEL reshaped to the 110M shape as F32 and Q8_0,
# its first 3 layers as the draft. Systems, every one a llama-server with -np 4 (4 slots), -c 2048 (512 a slot, which
# the server caps at the model's training context, 128: a prompt and 100 tokens fit), -t THREADS,
# -fa on, --metrics, on 127.0.0.1 and a free port:
#   stock-plain    STOCK_BIN, no draft (the reference)
#   stock-spec-K   STOCK_BIN -md DRAFT --spec-type draft-simple --spec-draft-n-max K --spec-draft-n-min 0
#                  (K in STOCK_KS, default "2 4 8"); the tables add stock-spec-best, the best K per point
#   specdec-plain  PATCHED_BIN, no draft
#   specdec-policy PATCHED_BIN -md DRAFT --spec-type draft-simple (no K: specdec's speed policy
#                  picks one K for all generating slots each step, 0 included)
#   specdec-spec-K the same with --spec-draft-n-max K --spec-draft-n-min 0 (K in SPECDEC_KS,
#                  default "4")
#   specdec-policy-coupled  specdec-policy with LLAMA_ARG_SPEC_SEEDED=coupled (SEEDS=request only)
# and with NGRAM=1, model-free drafting (the n-gram race, docs/llamacpp-server.md):
#   stock-ngram-TYPE STOCK_BIN --spec-type TYPE at llama.cpp's defaults, for TYPE ngram-simple,
#                  ngram-map-k, ngram-map-k4v, ngram-mod, ngram-cache; the tables add
#                  stock-ngram-best, the best type per point
#   specdec-ngram  PATCHED_BIN --spec-type ngram-specdec (its defaults)
#   specdec-ngram-n8  the same drafting only from matches of 8 tokens or more
#   specdec-ngram-shared  the same with the cross-request cache (llama.cpp's ngram-mod keeps
#                  one pool for all requests: this is its like-for-like comparison)
#   specdec-ngram-draft  PATCHED_BIN -md DRAFT --spec-type ngram-specdec,draft-simple
#                  --spec-draft-n-max NGRAM_DRAFT_K (default 2): the n-gram draft where the slot's
#                  text has a match, the draft model's where it has none
# PROMPTS=resend sends requests that repeat their context: each base prompt re-sent with the
# model's own greedy answer of RESEND_ANSWER tokens (default 48) and the base prompt again
# (bench/support/resend_prompts.py asks the first server up, once per quantization, not timed;
# needs a context of base + answer + base + 100 tokens: stories260K's race GGUFs, 512 a slot).
# SEEDS=none (the default) sends no seed, as most clients: the patched server verifies by
# rejection sampling with the draft's q, and at T > 0 each server draws its own tokens (the
# same-text column is blank there). SEEDS=request sends seed i with request i: the patched server
# then keeps llama.cpp's own stream (sample-and-match on the draft model's top candidate, stock's
# text at the same K; specdec's part is the policy's K), and specdec-policy-coupled verifies with
# coupled sampling (the same tokens at any K, not stock's).
# Load (bench/support/server_load.py, run by /usr/bin/python3 for aiohttp): CLIENTS clients (each
# of "1 4 8") send /completion requests back to back, stream off, until REQUESTS (default 16) have
# completed; request i is prompt i mod 6 of a fixed list (aidreams260K: "The machine", "I dreamed
# of", ...; stories260K: "Once upon a time", "Lily and Ben", ...) with seed i (SEEDS=request) or
# none (SEEDS=none, the default), 100 tokens, end of text ignored, temperature 0 or 0.8 with top-k
# 40, top-p 0.95, min-p 0.05 (llama-server's defaults, sent in every request), so every server
# serves the same requests. One warm-up request (8 tokens) per server start, not measured.
#
# Each round starts every system's server for a quantization at once (idle servers take no CPU),
# then runs each (temperature, clients) point on every server in turn, the order rotated by one
# system from point to point, so that drift of the machine hits every system alike; ROUNDS
# (default 1) repeats. Measures per point and system: aggregate decode tokens/s (completed tokens
# over the load's wall time, first request sent to last answer: prompt processing and queueing
# included) as median [range] over rounds, its ratio to stock-plain's in the same round (median
# over rounds); the median of the server's timings.predicted_per_second over requests; request
# latency p50 and p95 (s, queueing included); draft acceptance (sum of timings.draft_n_accepted
# over sum of draft_n); how many completions are the same text as stock-plain's for the same
# request and round (expected at T = 0 up to batching's rounding; not at T = 0.8, where each
# server draws its own way); failed requests. Prints a markdown table per point; keeps the raw
# numbers (requests.tsv: one row per request; loads.tsv: one per load; summary.tsv: the tables),
# each server's log and its /metrics at the end in OUT (default build/server-race/DATE-TIME).
#
# RPC=1 (default 0) serves the target model through llama.cpp's RPC backend: every system's
# llama-server gets two ggml-rpc-server processes of its own (one serves a single client at a time),
# RPC_SERVER_BIN (default ggml-rpc-server beside PATCHED_BIN, as build-server.sh builds it), each
# with -t THREADS on 127.0.0.1 and a free port, started before it and stopped after it, and runs
# with --rpc A,B -ngl 99 -ngld 0 -lv 4: the target's layers split between the two ggml-rpc-servers,
# the draft model on llama-server's own CPU (-lv 4, a log level up, for the server's log to say so:
# "load_tensors: RPC0[127.0.0.1:A] model buffer size ...", the same for B; about 30 lines more a
# request). Every llama-server binary of the systems chosen must have --rpc (a build with
# GGML_RPC=ON; checked at the start). RPC_DELAY_MS=D (default 0; RPC=1 only; milliseconds, fractions
# allowed) puts a bench/support/delay_proxy.py before each ggml-rpc-server, --rpc naming the
# proxies: each chunk of either direction of each link delivered D ms after the proxy read it (a
# round trip 2 x D longer, no bandwidth limit; the kernel has no netem qdisc for tc to delay with);
# at 0 there is no proxy. With RPC=1 the script runs in a network namespace of its own: it
# re-executes itself, same arguments and environment, under `unshare -n` (as root; else
# `unshare -rn`, in a new user namespace too) with SPECDEC_RACE_NETNS=1 added to its environment
# (the mark that it is inside), and first brings the namespace's loopback up (/usr/sbin/ip,
# iproute2). Where that fails (a kernel or container that forbids namespaces, or no ip), it says so
# and exits with status 77 if RPC_DELAY_MS > 0, or runs on the host's loopback with a warning if
# RPC_DELAY_MS=0. Logs beside the server's: logs/SYSTEM.rpcA.QUANT.rROUND.log, rpcB, and proxyA,
# proxyB with a delay.
#
# Environment: MODEL (aidreams260K or stories260K), QUANTS (default "q8_0"; "f32 q8_0" for both), TEMPS (default "0 0.8"), CLIENTS
# (default "1 4 8"), STOCK_KS, SPECDEC_KS, SEEDS (request or none), ROUNDS, SYSTEMS (a regex over
# the system names, e.g. 'stock-plain|stock-spec-4|specdec-spec'), OUT, GGUF_DIR, NGRAM,
# NGRAM_DRAFT_K, PROMPTS (base or resend), RESEND_ANSWER, RPC (0 or 1), RPC_DELAY_MS,
# RPC_SERVER_BIN.
# Time: under a second per server start, then REQUESTS x 100 tokens per load. The default run
# (Q8_0, 7 systems, 2 temperatures x 3 client counts, 16 requests, 1 thread, 1 round) is 42 loads
# of 1600 tokens, about 12 minutes on a 2-core Xeon (Nov 2026: ~75 tokens/s a single stream,
# ~140 with 4 or 8 clients, the spec rows at T = 0.8 slower); count 20 at most. Each round more
# adds as much again; F32 (QUANTS="f32 q8_0") about twice as much (half Q8_0's speed). RPC=1 is
# slower: each of the target's decoding steps goes to both ggml-rpc-servers and back, each round
# trip 2 x RPC_DELAY_MS longer with a delay (a smoke run of stories260K's own 260K-parameter GGUF,
# 1 thread, 1 client, on a busy 2-core EPYC: specdec-plain at 1200 tokens/s with RPC_DELAY_MS=0,
# 145 with 1, 90 with 2).
#
# The run on docs/results.md (QUANTS="f32 q8_0" STOCK_KS="1 2 4" ROUNDS=3, 6 systems, REQUESTS 8,
# both servers built natively by build-server.sh) took 36 minutes for aidreams260K on a 2-core
# AMD EPYC (1, 4 and 8 clients) and about as long for stories260K with 1 and 4 clients.
#
# stories260K, reduced to about 15 minutes (an estimate: a smoke run on a busy 2-core Xeon served
# stories260K's Q8_0 at 85 tokens/s a single stream and 150 with 4 clients, its K = 2 drafts at
# 50 and 100, the 3-layer draft keeping 10-15% of them; F32 taken as half Q8_0's speed, as on
# aidreams260K; 16 requests of 100 tokens a load: Q8_0 about 5 minutes, F32 about 9):
#   MODEL=stories260K QUANTS="f32 q8_0" CLIENTS="1 4" STOCK_KS="1 2" ROUNDS=1 \
#     SYSTEMS='stock-plain|stock-spec-[0-9]+|specdec-policy' \
#     bench/llamacpp_server_race.sh PATCHED_BIN STOCK_BIN
# one round; 1 and 4 clients (8 dropped: -np 4 serves 4 at a time, 8 adds queueing); stock at
# K = 1 and 2 (4 dropped: on stories260K's draft the shorter drafts do better) and without a
# draft, specdec's policy (specdec-plain and specdec-spec-4 dropped); 2 temperatures: 32 loads.
#
# Do not run it while anything else runs on the machine (compiles included): the figures would
# measure the neighbour.
set -euo pipefail
usage="usage: bench/llamacpp_server_race.sh PATCHED_BIN STOCK_BIN [THREADS] [REQUESTS]"
RPC=${RPC:-0}
RPC_DELAY_MS=${RPC_DELAY_MS:-0}
[[ $RPC == 0 || $RPC == 1 ]] || { echo "llamacpp_server_race.sh: RPC is 0 or 1" >&2; exit 1; }
[[ $RPC_DELAY_MS =~ ^[0-9]+([.][0-9]*)?$ ]] ||
  { echo "llamacpp_server_race.sh: RPC_DELAY_MS is a number of milliseconds, not '$RPC_DELAY_MS'" >&2; exit 1; }
delayed=1
[[ $RPC_DELAY_MS =~ ^0*([.]0*)?$ ]] && delayed=0
[[ $RPC == 1 || $delayed == 0 ]] || { echo "llamacpp_server_race.sh: RPC_DELAY_MS needs RPC=1" >&2; exit 1; }
# RPC=1: into a network namespace of the script's own (re-executed with the same arguments and
# environment, SPECDEC_RACE_NETNS=1 marking it), its loopback brought up before anything else.
netns=no
if [[ $RPC == 1 && ${SPECDEC_RACE_NETNS:-} == 1 ]]; then
  /usr/sbin/ip link set lo up || { echo "llamacpp_server_race.sh: cannot bring lo up in the network namespace" >&2; exit 1; }
  netns=yes
elif [[ $RPC == 1 ]]; then
  ns=(-n)
  [[ $(id -u) == 0 ]] || ns=(-rn)
  why="/usr/sbin/ip (iproute2) is absent"
  if [[ -x /usr/sbin/ip ]]; then
    if why=$(unshare "${ns[@]}" /usr/sbin/ip link set lo up 2>&1); then
      export SPECDEC_RACE_NETNS=1
      exec unshare "${ns[@]}" -- "$BASH" "$(realpath "$0")" "$@"
    fi
    why="unshare ${ns[*]} failed: ${why:-no message}"
  fi
  echo "llamacpp_server_race.sh: no network namespace for the RPC links ($why)" >&2
  [[ $delayed == 0 ]] ||
    { echo "llamacpp_server_race.sh: RPC_DELAY_MS=$RPC_DELAY_MS needs a network namespace" >&2; exit 77; }
  echo "llamacpp_server_race.sh: warning: RPC=1 runs on the host's loopback" >&2
fi
patched=${1:?$usage}
stock=${2:?$usage}
T=${3:-1}
REQ=${4:-16}
N=100
R=${ROUNDS:-1}
py=/usr/bin/python3
SEEDS=${SEEDS:-none}
[[ $SEEDS == request || $SEEDS == none ]] || { echo "llamacpp_server_race.sh: SEEDS is request or none" >&2; exit 1; }
unset LLAMA_ARG_SPEC_SEEDED  # set for specdec-spec-coupled alone
for f in "$patched" "$stock"; do
  [[ -x $f ]] || { echo "llamacpp_server_race.sh: $f is not an executable llama-server" >&2; exit 1; }
done
# Paths given are the caller's; the defaults are the repository's.
patched=$(realpath "$patched") stock=$(realpath "$stock")
for v in GGUF_DIR OUT LLAMACPP_BUILD SPECDEC_MODELS_DIR RPC_SERVER_BIN; do
  [[ -z ${!v:-} ]] || printf -v "$v" '%s' "$(realpath -m "${!v}")"
done
cd "$(dirname "$0")/.."
"$py" -c 'import aiohttp' 2>/dev/null ||
  { echo "llamacpp_server_race.sh: $py has no aiohttp (apt-get install python3-aiohttp)" >&2; exit 1; }

B=${LLAMACPP_BUILD:-build/llamacpp}
MODEL=${MODEL:-aidreams260K}
case $MODEL in
  aidreams260K) G=${GGUF_DIR:-$B/race-gguf} prompts=default ;;
  stories260K) G=${GGUF_DIR:-$B/race-gguf-stories260K} prompts=stories ;;
  *) echo "llamacpp_server_race.sh: MODEL is aidreams260K or stories260K, not '$MODEL'" >&2; exit 2 ;;
esac
if [[ ! -f $G/big.gguf || ! -f $G/big-q8_0.gguf || ! -f $G/big-draft.gguf ]]; then
  [[ -z ${GGUF_DIR:-} ]] || { echo "llamacpp_server_race.sh: no big*.gguf in GGUF_DIR=$G" >&2; exit 1; }
  if [[ $MODEL == aidreams260K ]]; then
    tests/llamacpp/make_gguf.sh "${SPECDEC_MODELS_DIR:-../shared/models}" "$G" "$B/examples/llama2c/specdec-reshape" \
      "$B/bin/llama-convert-llama2c-to-ggml" "$B/bin/llama-quantize" --big
  else
    bench/support/race_gguf.sh "$MODEL" "${SPECDEC_MODELS_DIR:-../shared/models}" "$G" \
      "$B/examples/llama2c/specdec-reshape" "$B/bin/llama-convert-llama2c-to-ggml" "$B/bin/llama-quantize"
  fi
  [[ -f $G/big-draft.gguf ]] || { echo "llamacpp_server_race.sh: no models (../shared/models absent?)" >&2; exit 1; }
fi
draft=$G/big-draft.gguf

out=${OUT:-build/server-race/$(date +%Y%m%d-%H%M%S)}
mkdir -p "$out/logs"
printf 'round\tquant\ttemp\tclients\tsystem\trequest\tseed\tprompt\tstatus\tlatency_s\tpredicted_n\tpredicted_per_second\tdraft_n\tdraft_n_accepted\tsha1\n' >"$out/requests.tsv"
printf 'round\tquant\ttemp\tclients\tsystem\twall_s\tpredicted_n\terrors\n' >"$out/loads.tsv"

# The systems: name, binary, extra flags and environment (strings split on spaces).
names=() bins=() extra=() envs=()
add() {
  [[ -z ${SYSTEMS:-} || $1 =~ ^(${SYSTEMS})$ ]] || return 0
  names+=("$1") bins+=("$2") extra+=("$3") envs+=("${4:-}")
}
add stock-plain "$stock" ""
for k in ${STOCK_KS:-2 4 8}; do
  add "stock-spec-$k" "$stock" "-md $draft --spec-type draft-simple --spec-draft-n-max $k --spec-draft-n-min 0"
done
add specdec-plain "$patched" ""
spec="-md $draft --spec-type draft-simple"
add specdec-policy "$patched" "$spec"
for k in ${SPECDEC_KS-4}; do
  add "specdec-spec-$k" "$patched" "$spec --spec-draft-n-max $k --spec-draft-n-min 0"
done
# Seeded requests: the patched server keeps llama.cpp's own rule (sample-and-match) unless told
# LLAMA_ARG_SPEC_SEEDED=coupled; without a seed, its rule is rejection sampling (SEEDS=none).
[[ $SEEDS == none ]] || add specdec-policy-coupled "$patched" "$spec" LLAMA_ARG_SPEC_SEEDED=coupled
# NGRAM=1: model-free drafting, each llama.cpp n-gram type at its defaults on the stock server,
# specdec's ngram-specdec on the patched one, alone and chained before the draft model (at K =
# NGRAM_DRAFT_K, default 2, for the draft model: the policy plans draft-simple alone).
if [[ ${NGRAM:-0} == 1 ]]; then
  for t in ngram-simple ngram-map-k ngram-map-k4v ngram-mod ngram-cache; do
    add "stock-$t" "$stock" "--spec-type $t"
  done
  add specdec-ngram "$patched" "--spec-type ngram-specdec"
  add specdec-ngram-n8 "$patched" "--spec-type ngram-specdec --spec-ngram-specdec-n-min 8"
  add specdec-ngram-shared "$patched" "--spec-type ngram-specdec --spec-ngram-specdec-shared"
  add specdec-ngram-draft "$patched" \
    "-md $draft --spec-type ngram-specdec,draft-simple --spec-draft-n-max ${NGRAM_DRAFT_K:-2} --spec-draft-n-min 0"
fi
[[ ${#names[@]} -gt 0 ]] || { echo "llamacpp_server_race.sh: SYSTEMS='${SYSTEMS:-}' matches no system" >&2; exit 1; }
if [[ $RPC == 1 ]]; then  # every binary of the systems chosen has --rpc, and ggml-rpc-server is there
  rpc_server=${RPC_SERVER_BIN:-$(dirname "$patched")/ggml-rpc-server}
  [[ -x $rpc_server ]] ||
    { echo "llamacpp_server_race.sh: RPC=1: $rpc_server is not an executable ggml-rpc-server (RPC_SERVER_BIN)" >&2; exit 1; }
  command -v ss >/dev/null || { echo "llamacpp_server_race.sh: RPC=1 needs ss (iproute2)" >&2; exit 1; }
  declare -A has_rpc=()
  for b in "${bins[@]}"; do
    [[ -z ${has_rpc[$b]:-} ]] || continue
    help=$("$b" --help 2>&1 || true)
    [[ $help == *--rpc* ]] ||
      { echo "llamacpp_server_race.sh: RPC=1: $b has no --rpc (built without GGML_RPC=ON: rebuild it with build-server.sh, or leave its systems out with SYSTEMS)" >&2; exit 1; }
    has_rpc[$b]=1
  done
fi

declare -A pid port helpers  # helpers: a system's ggml-rpc-servers and delay proxies (pids)
halt() {  # pid: SIGTERM, SIGKILL if still there 5 s later
  kill "$1" 2>/dev/null || true
  for _ in $(seq 50); do kill -0 "$1" 2>/dev/null || break; sleep 0.1; done
  kill -9 "$1" 2>/dev/null || true
  wait "$1" 2>/dev/null || true
}
stop_helpers() {  # system: stops its helpers (after its llama-server)
  local h
  for h in ${helpers[$1]:-}; do halt "$h"; done
  unset "helpers[$1]"
}
stop_all() {
  local s
  for s in "${!pid[@]}"; do
    curl -sf "http://127.0.0.1:${port[$s]}/metrics" >"$out/logs/$s.$tag.metrics" 2>/dev/null || true
    halt "${pid[$s]}"
    unset "pid[$s]"
  done
  for s in "${!helpers[@]}"; do stop_helpers "$s"; done
}
tag=none
trap stop_all EXIT
loader=
trap '[[ -z $loader ]] || kill "$loader" 2>/dev/null; exit 130' INT TERM

free_port() { "$py" -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

# A ggml-rpc-server serves one client at a time: a probe connection would hold it, so a helper is
# taken as up when ss shows its port listening.
helper() {  # system name port command...: starts a helper of the system's, waits for its port
  local s=$1 name=$2 p=$3 log=$out/logs/$1.$2.$tag.log h
  shift 3
  "$@" >"$log" 2>&1 &
  h=$!
  helpers[$s]="${helpers[$s]:-} $h"
  for _ in $(seq 100); do
    if ! kill -0 "$h" 2>/dev/null; then
      echo "llamacpp_server_race.sh: $s: its $name exited at start; its log ($log) ends:" >&2
      tail -n 15 "$log" >&2
      return 1
    fi
    [[ -z $(ss -ltnH "sport = :$p" 2>/dev/null) ]] || return 0
    sleep 0.1
  done
  echo "llamacpp_server_race.sh: $s: its $name not listening on port $p after 10 s (log: $log)" >&2
  return 1
}

start_rpc() {  # system: starts its two ggml-rpc-servers (each behind a delay proxy with a delay),
  local s=$1 x p q eps=()  # sets rpc_flags, the llama-server flags that use them
  for x in A B; do
    p=$(free_port)
    helper "$s" "rpc$x" "$p" "$rpc_server" -H 127.0.0.1 -p "$p" -t "$T" || return 1
    if [[ $delayed == 1 ]]; then
      q=$(free_port)
      helper "$s" "proxy$x" "$q" "$py" bench/support/delay_proxy.py "$q" "$p" "$RPC_DELAY_MS" || return 1
      p=$q
    fi
    eps+=("127.0.0.1:$p")
  done
  # -lv 4: the level at which llama-server logs where the layers went (load_tensors: RPC0[...])
  rpc_flags=(--rpc "${eps[0]},${eps[1]}" -ngl 99 -ngld 0 -lv 4)
}

start() {  # system binary target extra-flags: starts it, waits for /health and warms it up
  local s=$1 bin=$2 target=$3 log p
  # shellcheck disable=SC2206
  local flags=($4) environment=($5)
  log=$out/logs/$s.$tag.log
  local rpc_flags=()
  [[ $RPC == 0 ]] || start_rpc "$s" || { stop_helpers "$s"; return 1; }
  p=$(free_port)
  env "${environment[@]}" "$bin" -m "$target" "${flags[@]}" "${rpc_flags[@]}" -c 2048 -np 4 -t "$T" -fa on --metrics --host 127.0.0.1 --port "$p" \
    >"$log" 2>&1 &
  pid[$s]=$! port[$s]=$p
  for _ in $(seq 600); do
    if ! kill -0 "${pid[$s]}" 2>/dev/null; then
      echo "llamacpp_server_race.sh: $s exited at start; its log ($log) ends:" >&2
      tail -n 15 "$log" >&2
      unset "pid[$s]" "port[$s]"
      stop_helpers "$s"
      return 1
    fi
    curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 && break
    sleep 0.2
  done
  curl -sf "http://127.0.0.1:$p/health" >/dev/null 2>&1 ||
    { echo "llamacpp_server_race.sh: $s not healthy after 120 s (log: $log)" >&2
      kill -9 "${pid[$s]}"; wait "${pid[$s]}" 2>/dev/null; unset "pid[$s]" "port[$s]"; stop_helpers "$s"; return 1; }
  "$py" bench/support/server_load.py "http://127.0.0.1:$p" 1 1 0 --n-predict 8 --prompts "$prompts" >/dev/null ||
    echo "llamacpp_server_race.sh: $s: the warm-up request failed (log: $log)" >&2
}

point=0
for round in $(seq 1 "$R"); do
  for quant in ${QUANTS:-q8_0}; do
    target=$G/big.gguf
    [[ $quant == q8_0 ]] && target=$G/big-q8_0.gguf
    tag=$quant.r$round
    echo "round $round/$R: $quant: starting ${#names[@]} servers" >&2
    for i in "${!names[@]}"; do start "${names[$i]}" "${bins[$i]}" "$target" "${extra[$i]}" "${envs[$i]}" || true; done
    load_prompts=(--prompts "$prompts")
    if [[ ${PROMPTS:-base} == resend ]]; then  # made once per quant by the first server that is up
      pfile=$out/prompts-$quant.json
      if [[ ! -f $pfile ]]; then
        for s in "${names[@]}"; do [[ -n ${pid[$s]:-} ]] && break; done
        "$py" bench/support/resend_prompts.py "http://127.0.0.1:${port[$s]}" "$prompts" "${RESEND_ANSWER:-48}" "$pfile"
      fi
      load_prompts=(--prompts-file "$pfile")
    fi
    for temp in ${TEMPS:-0 0.8}; do
      for clients in ${CLIENTS:-1 4 8}; do
        n=${#names[@]}
        for j in $(seq 0 $((n - 1))); do
          s=${names[$(((j + point) % n))]}
          [[ -n ${pid[$s]:-} ]] || continue
          echo "round $round/$R: $quant T=$temp, $clients client(s): $s" >&2
          key=$(printf '%s\t%s\t%s\t%s\t%s' "$round" "$quant" "$temp" "$clients" "$s")
          "$py" bench/support/server_load.py "http://127.0.0.1:${port[$s]}" "$clients" "$REQ" "$temp" \
            --n-predict "$N" --tag "$key" --seeds "$SEEDS" "${load_prompts[@]}" >"$out/last.tsv" &
          loader=$!  # in the background, so that a signal stops the run at once
          wait "$loader" || echo "llamacpp_server_race.sh: $s: every request failed (log: $out/logs/$s.$tag.log)" >&2
          loader=
          grep -v $'\tload\t' "$out/last.tsv" >>"$out/requests.tsv" || true
          grep $'\tload\t' "$out/last.tsv" | sed 's/\tload\t/\t/' >>"$out/loads.tsv" || true
          # the speed policy's K at the end of the load (specdec's gauge in /metrics; none elsewhere)
          k=$(curl -sf "http://127.0.0.1:${port[$s]}/metrics" 2>/dev/null | awk '/^llamacpp:specdec_draft_n /{print $2}' || true)
          [[ -z $k ]] || printf '%s\t%s\n' "$key" "$k" >>"$out/policy_k.tsv"
        done
        point=$((point + 1))
      done
    done
    stop_all
  done
done
rm -f "$out/last.tsv"

for log in "$out"/logs/*.log; do  # what the servers said went wrong
  e=$(grep -ciE 'error|fail|assert|abort' "$log" || true)
  [[ $e == 0 ]] || echo "llamacpp_server_race.sh: $e line(s) of error or failure in $log" >&2
done

rpc="rpc: off"
[[ $RPC == 0 ]] || rpc="rpc: 2 servers, $RPC_DELAY_MS ms each way"
[[ $RPC == 0 || $netns == yes ]] || rpc+=" (host loopback)"
echo "# llamacpp_server_race.sh: $MODEL, $N tokens a request, $REQ requests a load, seeds: $SEEDS, $T thread(s), -fa on, -np 4, $R round(s); specdec-spec K ${SPECDEC_KS-4}; $rpc; $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2- | sed 's/^ //'), $(nproc) cores; specdec $(git rev-parse --short HEAD)"
"$py" - "$out" "$SEEDS" <<'EOF'
import collections, csv, math, statistics, sys
out, seeds = sys.argv[1:3]
def rows(name):
    with open(f"{out}/{name}") as f:
        return list(csv.DictReader(f, delimiter="\t"))
loads, reqs = rows("loads.tsv"), rows("requests.tsv")
points, systems = [], []
tps = collections.defaultdict(dict)      # (point, system) -> round -> aggregate tokens/s
per_req = collections.defaultdict(list)  # (point, system) -> request rows
for l in loads:
    p = (l["quant"], l["temp"], l["clients"])
    if p not in points: points.append(p)
    if l["system"] not in systems: systems.append(l["system"])
    w = float(l["wall_s"])
    tps[(p, l["system"])][l["round"]] = int(l["predicted_n"]) / w if w > 0 else float("nan")
sha = {}
for r in reqs:
    p = (r["quant"], r["temp"], r["clients"])
    per_req[(p, r["system"])].append(r)
    sha[(p, r["system"], r["round"], r["request"])] = r["sha1"]
order = [s for s in systems if s == "stock-plain"] + [s for s in systems if s.startswith("stock-spec")] + \
        [s for s in systems if s.startswith("stock-ngram")] + [s for s in systems if s.startswith("specdec")]
def pct(v, q):  # q-quantile, linear interpolation between order statistics
    v = sorted(v)
    if not v: return float("nan")
    x = q * (len(v) - 1)
    i = int(x)
    return v[i] if i + 1 >= len(v) else v[i] + (x - i) * (v[i + 1] - v[i])
def med(v):
    v = [x for x in v if not math.isnan(x)]
    return statistics.median(v) if v else float("nan")
summary = open(f"{out}/summary.tsv", "w")
summary.write("quant\ttemp\tclients\tsystem\ttps_median\ttps_min\ttps_max\tx_stock_plain\tserver_tps_median"
              "\tlatency_p50_s\tlatency_p95_s\tdraft_n\tdraft_n_accepted\tsame_as_stock_plain\trequests\terrors\n")
for p in points:
    quant, temp, clients = p
    print(f"\n### {quant} T={temp}, {clients} client(s)\n")
    print("| system | tokens/s median [range] | x stock-plain | server t/s (median a request) | latency p50 / p95 (s) | acceptance | same text as stock-plain | failed |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    base = tps.get((p, "stock-plain"), {})
    med_tps = {}
    def line(s, label):
        by_round = tps.get((p, s), {})
        v = [x for x in by_round.values() if not math.isnan(x)]
        rs = per_req.get((p, s), [])
        ok = [r for r in rs if r["status"] == "200"]
        fails = len(rs) - len(ok)
        if not v:
            print(f"| {label} | failed | | | | | | {fails} |"); return
        m = statistics.median(v)
        ratio = med([by_round[k] / base[k] for k in by_round if base.get(k)])
        server = med([float(r["predicted_per_second"]) for r in ok])
        lat = [float(r["latency_s"]) for r in ok]
        dn = sum(int(r["draft_n"]) for r in ok)
        da = sum(int(r["draft_n_accepted"]) for r in ok)
        acc = f"{da / dn:.1%} ({da}/{dn})" if dn else ""
        same = ""
        if s != "stock-plain" and base and (seeds == "request" or float(temp) == 0):
            keys = [(r["round"], r["request"]) for r in ok if (p, "stock-plain", r["round"], r["request"]) in sha]
            same = f"{sum(sha[(p, s) + k] == sha[(p, 'stock-plain') + k] for k in keys)}/{len(keys)}"
        rt = f"{ratio:.2f}x" if not math.isnan(ratio) else ""
        print(f"| {label} | {m:.1f} [{min(v):.1f}-{max(v):.1f}] | {rt} | {server:.1f} | "
              f"{pct(lat, 0.5):.2f} / {pct(lat, 0.95):.2f} | {acc} | {same} | {fails} |")
        summary.write("\t".join(map(str, [quant, temp, clients, label, f"{m:.2f}", f"{min(v):.2f}", f"{max(v):.2f}",
                                          f"{ratio:.3f}", f"{server:.2f}", f"{pct(lat, 0.5):.3f}",
                                          f"{pct(lat, 0.95):.3f}", dn, da, same, len(rs), fails])) + "\n")
        med_tps[s] = m
    for s in order:
        line(s, s)
        for group, what in (("stock-spec", "K = {}"), ("stock-ngram", "{}")):
            if s.startswith(group) and not any(x.startswith(group) for x in order[order.index(s) + 1:]):
                ks = {x: m for x, m in med_tps.items() if x.startswith(group)}
                if len(ks) > 1:
                    best = max(ks, key=ks.get)
                    name = best.rsplit("-", 1)[1] if group == "stock-spec" else best[len("stock-"):]
                    line(best, f"{group}-best ({what.format(name)})")
    for group, what in (("stock-spec", "the best stock K"), ("stock-ngram", "stock's best n-gram type")):
        spec = [x for x in med_tps if x.startswith(group)]
        if spec:
            best = max(spec, key=med_tps.get)
            for s in med_tps:
                if s.startswith("specdec-") and s != "specdec-plain":
                    print(f"\n{s} / {what} ({best}): {med_tps[s] / med_tps[best]:.2f}x")
import os
if os.path.exists(f"{out}/policy_k.tsv"):  # the speed policy's K at the end of each load
    ks = collections.defaultdict(list)
    for line in open(f"{out}/policy_k.tsv"):
        r, q, t, c, s, k = line.rstrip("\n").split("\t")
        ks[(q, t, c, s)].append(f"{float(k):g}")
    print("\nthe speed policy's K at the end of each load (/metrics llamacpp:specdec_draft_n), by round:")
    for (q, t, c, s), v in ks.items():
        print(f"- {q} T={t}, {c} client(s), {s}: {', '.join(v)}")
print(f"\nraw numbers: {out}/requests.tsv, loads.tsv, summary.tsv; server logs and /metrics in {out}/logs")
EOF

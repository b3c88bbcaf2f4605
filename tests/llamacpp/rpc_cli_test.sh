#!/usr/bin/env bash
# tests/llamacpp/rpc_cli_test.sh SPECDEC_LLAMA RPC_SERVER GGUF_DIR - specdec-llama with the target's
# layers on two ggml-rpc-server processes (--rpc, -ngl 99; the draft model here, -ngld 0), against
# the same binary without RPC: greedy tokens equal with a draft model, n-gram lookup and no
# drafter; with a seed and coupled verification the same tokens with and without a draft model;
# an unreachable --rpc endpoint refused with a message naming it (exit 1, no abort). The servers
# listen on 127.0.0.1, are started and stopped here, and every run is under `timeout`.
# Exits 77 (skipped) without the GGUF models (../shared absent).
set -euo pipefail
[[ $# -eq 3 ]] || { echo "usage: rpc_cli_test.sh SPECDEC_LLAMA RPC_SERVER GGUF_DIR" >&2; exit 2; }
cli=$1 rpc_bin=$2 gguf=$3
[[ -f $gguf/stories.gguf && -f $gguf/stories-draft.gguf ]] ||
  { echo "rpc_cli_test.sh: skipping: no $gguf/stories.gguf (make_gguf.sh needs ../shared/models)"; exit 77; }
work=$(mktemp -d)
pids=()
cleanup() {
  for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
  wait 2>/dev/null || true
  rm -rf "$work"
}
trap cleanup EXIT
free_port() { /usr/bin/python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }
listening() { ss -ltnH "sport = :$1" | grep -q .; }  # not a connection: a probe would be its client

ports=()
for name in a b; do
  port=$(free_port)
  # GGML_RPC_DEBUG: the server logs each command (graph_compute: the target's layers ran there)
  GGML_RPC_DEBUG=1 "$rpc_bin" -H 127.0.0.1 -p "$port" -t 1 >"$work/rpc-$name.log" 2>&1 &
  pids+=($!) ports+=("$port")
  for _ in $(seq 200); do listening "$port" && break; sleep 0.05; done
  listening "$port" || { cat "$work/rpc-$name.log"; echo "rpc_cli_test.sh: ggml-rpc-server did not listen" >&2; exit 1; }
done
rpc="127.0.0.1:${ports[0]},127.0.0.1:${ports[1]}"

run() {  # NAME ARGS...: specdec-llama's --json report's tokens, one line
  local name=$1
  shift
  timeout 120 "$cli" -m "$gguf/stories.gguf" -p "Once upon a time" -n 48 -c 256 -t 1 --json "$@" \
    >"$work/$name.json" 2>"$work/$name.err" ||
    { cat "$work/$name.err" >&2; echo "rpc_cli_test.sh: $name failed" >&2; exit 1; }
  /usr/bin/python3 -c 'import json, sys; print(json.load(open(sys.argv[1]))["tokens"])' "$work/$name.json"
}
fails=0
same() {  # WHAT A B
  if [[ $2 == "$3" ]]; then echo "ok: $1"; else echo "FAILED: $1: $2 != $3"; fails=$((fails + 1)); fi
}

remote=(--rpc "$rpc" -ngl 99 -ngld 0)
draft=(-md "$gguf/stories-draft.gguf")
local_plain=$(run local-plain --temp 0)
same "greedy, draft model (policy), over RPC = plain here" "$(run rpc-draft --temp 0 "${draft[@]}" "${remote[@]}")" "$local_plain"
same "greedy, draft model K = 4, over RPC = plain here" "$(run rpc-k4 --temp 0 "${draft[@]}" -k 4 "${remote[@]}")" "$local_plain"
same "greedy, n-gram lookup, over RPC = plain here" "$(run rpc-ngram --temp 0 --draft ngram -k 4 "${remote[@]}")" "$local_plain"
same "greedy, no drafter, over RPC = plain here" "$(run rpc-plain --temp 0 "${remote[@]}")" "$local_plain"
seeded=(--temp 0.8 -s 7 --verification coupled)
same "seed 7, coupled: a draft model over RPC = no drafter over RPC" \
  "$(run rpc-seeded-draft "${seeded[@]}" "${draft[@]}" -k 4 "${remote[@]}")" "$(run rpc-seeded-plain "${seeded[@]}" "${remote[@]}")"
# the target's layers ran on both RPC servers: each computed graphs (48 tokens a run, 6 runs)
for name in a b; do
  n=$(grep -c "graph_compute\|graph_recompute" "$work/rpc-$name.log" || true)
  if [[ $n -ge 100 ]]; then echo "ok: rpc server $name computed $n graphs"
  else echo "FAILED: rpc server $name computed $n graphs"; fails=$((fails + 1)); fi
done

# Nobody listens at the port: a message naming it, exit 1, no abort.
closed=$(free_port)
set +e
timeout 60 "$cli" -m "$gguf/stories.gguf" -p "Once" -n 4 --rpc "127.0.0.1:$closed" -ngl 99 >/dev/null 2>"$work/closed.err"
rc=$?
set -e
if [[ $rc == 1 ]] && grep -q -- "--rpc: cannot connect to 127.0.0.1:$closed" "$work/closed.err"; then
  echo "ok: an unreachable --rpc endpoint is refused: $(cat "$work/closed.err")"
else
  echo "FAILED: unreachable --rpc: exit $rc, said: $(cat "$work/closed.err")"; fails=$((fails + 1))
fi
[[ $fails == 0 ]] || { echo "rpc_cli_test.sh: $fails check(s) failed"; exit 1; }
echo "rpc_cli_test.sh: all checks passed"

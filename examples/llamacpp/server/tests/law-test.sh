#!/usr/bin/env bash
# examples/llamacpp/server/tests/law-test.sh PATCHED_BIN STOCK_BIN MODEL DRAFT [LAW_TEST_ARGS...]
#
# The law test of llama-server with specdec (law-test.py, next to this script, says what it
# checks): starts seven servers on 127.0.0.1, each on a free port below the ephemeral range, with
# MODEL, 4 slots (-np 4, -c 2048: 512 tokens a slot), one thread (-t 1) and no prompt cache
# (--cache-ram 0: at -lv 4 its listing of the saved prompts grows with every request); "+draft" is
# `-md DRAFT --spec-type draft-simple --spec-draft-n-max 4 --spec-draft-p-min 0`:
#   PATCHED_BIN+draft  LLAMA_ARG_SPEC_SEEDED=coupled, LLAMA_TRACE=1 and -lv 4 (its log shows each
#                      request's rule and every verification step): the law test's server, and
#                      the coupled seeds' with a draft
#   PATCHED_BIN        LLAMA_ARG_SPEC_SEEDED=coupled: the coupled seeds' without a draft
#   STOCK_BIN          (the same llama.cpp without specdec): the reference law; seeds
#   STOCK_BIN+draft    seeds
#   PATCHED_BIN+draft and PATCHED_BIN without LLAMA_ARG_SPEC_SEEDED: the default rule for a seed
#   PATCHED_BIN --spec-type ngram-specdec --spec-draft-n-max 4 (a number: the speed policy, which
#                      would draft less where its drafts are rejected, is off), LLAMA_TRACE=1 and
#                      -lv 4: check [4], the law under
#                      specdec's n-gram drafts (LAW_TEST_NGRAM=0 leaves it out, for a server
#                      without that type)
# then runs law-test.py against them (extra arguments are passed to it, e.g. --n 2000; its default
# N of 10000 requests a sample takes about 2 minutes on 2 idle cores), the whole run under a time
# limit, and always stops the servers. Exits with law-test.py's status (0: every check passed,
# 1: a check failed, 2: an error), or 2 when a server does not come up, 124 on the time limit.
#
# DRAFT must differ from MODEL so that drafts are rejected (not the Q8_0 copy: it keeps nearly
# all): make-law-draft.sh makes stories260K's first layers as a draft.
#
# Environment (all optional):
#   LAW_TEST_TIMEOUT   seconds for the whole run (default 300)
#   LAW_TEST_LOG_DIR   where the servers' logs go (default: a new temporary directory, removed
#                      after a pass, kept after a failure)
#   LAW_TEST_JSON      law-test.py writes its results here
# Needs /usr/bin/python3 with Debian's python3-requests, and curl.
set -euo pipefail
die() { echo "law-test.sh: $*" >&2; exit 2; }
[[ $# -ge 4 ]] || die "usage: law-test.sh PATCHED_BIN STOCK_BIN MODEL DRAFT [LAW_TEST_ARGS...]"
patched=$1 stock=$2 model=$3 draft=$4
shift 4
here=$(cd "$(dirname "$0")" && pwd)
python=/usr/bin/python3
[[ -x $patched ]] || die "PATCHED_BIN '$patched' is not an executable"
[[ -x $stock ]] || die "STOCK_BIN '$stock' is not an executable"
[[ -f $model ]] || die "MODEL '$model' not found"
[[ -f $draft ]] || die "DRAFT '$draft' not found"
[[ $(cmp -s "$model" "$draft" && echo same) != same ]] || die "DRAFT is MODEL: the drafts would all be kept"
command -v curl >/dev/null || die "curl not found"
$python -c 'import requests' 2>/dev/null || die "$python lacks requests (apt-get install -y python3-requests)"
budget=${LAW_TEST_TIMEOUT:-300}
start=$SECONDS

keep_log=1
if [[ -n ${LAW_TEST_LOG_DIR:-} ]]; then
  logdir=$LAW_TEST_LOG_DIR
  mkdir -p "$logdir"
else
  logdir=$(mktemp -d -t specdec-law-test.XXXXXX)
  keep_log=0
fi

pids=()
stop_servers() {
  local pid
  for pid in "${pids[@]}"; do
    kill -0 "$pid" 2>/dev/null && kill -TERM "$pid" 2>/dev/null || true
  done
  for pid in "${pids[@]}"; do
    for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || break; sleep 0.1; done
    if kill -0 "$pid" 2>/dev/null; then
      echo "law-test.sh: server $pid ignored SIGTERM, killing it" >&2
      kill -KILL "$pid" 2>/dev/null || true
    fi
    wait "$pid" 2>/dev/null || true
  done
  pids=()
}
trap stop_servers EXIT
trap 'exit 130' INT TERM

# A port below the ephemeral range that nothing holds now (a race another process could win: the
# server then fails to bind, and the start is retried on another port).
free_port() {
  $python - <<'EOF'
import random, socket
for _ in range(200):
    port = random.randrange(20000, 32000)
    s = socket.socket()
    try:
        s.bind(("127.0.0.1", port))
    except OSError:
        continue
    finally:
        s.close()
    print(port)
    break
else:
    raise SystemExit("no free port")
EOF
}

# start_server NAME LOG [ENV=VALUE...] -- BIN ARGS...: sets $url; the server's pid is in pids
start_server() {
  local name=$1 log=$2 port pid attempt ok
  shift 2
  local envs=()
  while [[ $1 != -- ]]; do envs+=("$1"); shift; done
  shift
  local bin=$1
  shift
  for attempt in 1 2 3; do
    port=$(free_port)
    url=http://127.0.0.1:$port
    env -u LLAMA_ARG_SPEC_SEEDED -u LLAMA_TRACE "${envs[@]}" "$bin" -m "$model" --host 127.0.0.1 --port "$port" -np 4 -c 2048 -t 1 --cache-ram 0 "$@" >"$log" 2>&1 &
    pid=$!
    ok=0
    for _ in $(seq 600); do   # /health answers 200 once the model is loaded; 60 s at most
      kill -0 "$pid" 2>/dev/null || break
      if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/health" || true) == 200 ]]; then ok=1; break; fi
      sleep 0.1
    done
    # our server answered only if it is alive and listening on that port (not another process)
    if (( ok )) && kill -0 "$pid" 2>/dev/null && grep -q "listening on $url" "$log"; then
      pids+=("$pid")
      echo "law-test.sh: $name: pid $pid at $url, log $log"
      return 0
    fi
    kill -TERM "$pid" 2>/dev/null || true
    wait "$pid" 2>/dev/null || true
    if grep -qi 'address already in use\|couldn.t bind' "$log"; then
      echo "law-test.sh: $name: port $port was taken, retrying" >&2
      continue
    fi
    break
  done
  echo "--- last lines of $log ---" >&2
  tail -n 30 "$log" >&2 || true
  die "$name did not come up"
}

dargs=(-md "$draft" --spec-type draft-simple --spec-draft-n-max 4 --spec-draft-p-min 0)
start_server "patched+draft (coupled seeds, traced)" "$logdir/patched-draft.log" \
  LLAMA_TRACE=1 LLAMA_ARG_SPEC_SEEDED=coupled -- "$patched" "${dargs[@]}" -lv 4
draft_url=$url
start_server "patched (coupled seeds)" "$logdir/patched.log" LLAMA_ARG_SPEC_SEEDED=coupled -- "$patched"
nodraft_url=$url
start_server "stock" "$logdir/stock.log" -- "$stock"
stock_url=$url
start_server "stock+draft" "$logdir/stock-draft.log" -- "$stock" "${dargs[@]}"
stock_draft_url=$url
start_server "patched+draft (default seeds)" "$logdir/patched-draft-default.log" -- "$patched" "${dargs[@]}"
seeded_draft_url=$url
start_server "patched (default seeds)" "$logdir/patched-default.log" -- "$patched"
seeded_nodraft_url=$url
ngram_args=()
if [[ ${LAW_TEST_NGRAM:-1} == 1 ]]; then
  start_server "patched+ngram-specdec (traced)" "$logdir/patched-ngram.log" LLAMA_TRACE=1 -- \
    "$patched" --spec-type ngram-specdec --spec-draft-n-max 4 -lv 4
  ngram_args=(--ngram-url "$url" --ngram-log "$logdir/patched-ngram.log")
fi

left=$(( budget - (SECONDS - start) ))
(( left > 0 )) || die "the ${budget}s budget is spent before the test"
json_args=()
[[ -n ${LAW_TEST_JSON:-} ]] && json_args=(--json "$LAW_TEST_JSON")
status=0
timeout --kill-after=5 "$left" $python "$here/law-test.py" --draft-url "$draft_url" \
  --nodraft-url "$nodraft_url" --stock-url "$stock_url" --stock-draft-url "$stock_draft_url" \
  --seeded-draft-url "$seeded_draft_url" --seeded-nodraft-url "$seeded_nodraft_url" \
  --draft-log "$logdir/patched-draft.log" "${ngram_args[@]}" \
  --k 4 "${json_args[@]}" "$@" || status=$?
(( status == 124 || status == 137 )) && { echo "law-test.sh: timed out (the ${budget}s budget)" >&2; status=124; }

for log in "$logdir"/*.log; do
  if grep -qiE 'GGML_ASSERT|segmentation fault|terminate called|core dumped' "$log"; then
    echo "law-test.sh: $log shows a crash or an assertion" >&2
    (( status != 0 )) || status=1
  fi
done
for pid in "${pids[@]}"; do
  kill -0 "$pid" 2>/dev/null || { echo "law-test.sh: server $pid is gone" >&2; (( status != 0 )) || status=1; }
done
stop_servers
if (( status != 0 )); then
  echo "law-test.sh: FAILED (status $status) in $(( SECONDS - start )) s (server logs in $logdir)"
elif (( keep_log )); then
  echo "law-test.sh: PASSED in $(( SECONDS - start )) s (server logs in $logdir)"
else
  rm -rf "$logdir"
  echo "law-test.sh: PASSED in $(( SECONDS - start )) s"
fi
exit $status

#!/usr/bin/env bash
# examples/llamacpp/server/client/run-client-tests.sh SERVER_BIN MODEL_GGUF [EXTRA_SERVER_ARGS...]
#
# Starts SERVER_BIN (a llama-server, stock or with specdec) on 127.0.0.1 and a free port with
# MODEL_GGUF, 4 slots (-np 4, -c 2048: 512 tokens a slot), one thread (-t 1, or
# $CLIENT_TESTS_THREADS), --metrics and --slots, then
# EXTRA_SERVER_ARGS (later arguments win, so e.g. `-md DRAFT.gguf --spec-type draft-simple`, or
# `-c 4096`); waits for /health; runs client-test.mjs (the official OpenAI Node client) and
# load-test.mjs (load, cancellation and faults) against it under one overall timeout
# ($CLIENT_TESTS_TIMEOUT seconds, default 240); always stops the server. Exits with the tests'
# status: 0 when both pass. Runs `npm ci` (network: the npm registry) when node_modules is missing.
# CLIENT_TESTS_SCRIPTS picks the scripts (default "client-test.mjs load-test.mjs"; e.g.
# load-test.mjs alone against a server started with other slot and batch counts).
#
# One thread: the test models are tiny (a token takes ~0.1 ms), and on a small machine shared with
# builds ggml's threads spin-waiting on a descheduled peer made tokens take 150 ms with -t 2.
#
# Needs node 20+ and npm, curl. The server log is kept in $CLIENT_TESTS_LOG_DIR (default: a new
# temporary directory, removed when the tests pass) and its tail printed on failure.
set -euo pipefail

die() { echo "run-client-tests.sh: $*" >&2; exit 2; }

[[ $# -ge 2 ]] || die "usage: run-client-tests.sh SERVER_BIN MODEL_GGUF [EXTRA_SERVER_ARGS...]"
server_bin=$1 model=$2
shift 2
[[ -x $server_bin ]] || die "SERVER_BIN '$server_bin' is not an executable"
[[ -f $model ]] || die "MODEL_GGUF '$model' not found"
command -v node >/dev/null || die "node not found (node 20+ is needed)"
command -v curl >/dev/null || die "curl not found"
node_major=$(node -p 'process.versions.node.split(".")[0]')
(( node_major >= 20 )) || die "node $(node --version) is too old, 20+ is needed"

here=$(cd "$(dirname "$0")" && pwd)
budget=${CLIENT_TESTS_TIMEOUT:-240}
threads=${CLIENT_TESTS_THREADS:-1}
start=$SECONDS

if [[ ! -d $here/node_modules/openai ]]; then
  echo "run-client-tests.sh: npm ci (node_modules is missing)"
  (cd "$here" && npm ci --no-audit --no-fund --loglevel=error) || die "npm ci failed"
fi

keep_log=1
if [[ -n ${CLIENT_TESTS_LOG_DIR:-} ]]; then
  logdir=$CLIENT_TESTS_LOG_DIR
  mkdir -p "$logdir"
else
  logdir=$(mktemp -d -t specdec-client-tests.XXXXXX)
  keep_log=0  # removed after a pass, kept after a failure
fi
log=$logdir/server.log

# A free loopback port: the kernel picks one; the server binds it right after (a race another
# process could win, so a failed start on an address in use is retried with a new port).
free_port() { node -e 'const s=require("net").createServer();s.listen(0,"127.0.0.1",()=>{console.log(s.address().port);s.close()})'; }

server_pid=
stop_server() {
  if [[ -n $server_pid ]] && kill -0 "$server_pid" 2>/dev/null; then
    kill -TERM "$server_pid" 2>/dev/null || true
    for _ in $(seq 50); do kill -0 "$server_pid" 2>/dev/null || break; sleep 0.1; done
    kill -0 "$server_pid" 2>/dev/null && { echo "run-client-tests.sh: the server ignored SIGTERM, killing it" >&2; kill -KILL "$server_pid" 2>/dev/null || true; }
    wait "$server_pid" 2>/dev/null || true
  fi
  server_pid=
}
trap stop_server EXIT
trap 'exit 130' INT TERM

show_log() { echo "--- last lines of $log ---" >&2; tail -n "${1:-40}" "$log" >&2 || true; echo "---" >&2; }

started=0
for attempt in 1 2 3; do
  port=$(free_port)
  url=http://127.0.0.1:$port
  "$server_bin" -m "$model" --host 127.0.0.1 --port "$port" -np 4 -c 2048 -t "$threads" --metrics --slots "$@" >"$log" 2>&1 &
  server_pid=$!
  # wait for /health 200 (503 while the model loads); give up after 60 s or if the server exits
  for _ in $(seq 600); do
    if ! kill -0 "$server_pid" 2>/dev/null; then break; fi
    if [[ $(curl -s -o /dev/null -w '%{http_code}' --max-time 2 "$url/health" || true) == 200 ]]; then started=1; break; fi
    sleep 0.1
  done
  [[ $started -eq 1 ]] && break
  if ! kill -0 "$server_pid" 2>/dev/null && grep -qi 'address already in use\|couldn.t bind' "$log"; then
    wait "$server_pid" 2>/dev/null || true
    server_pid=
    echo "run-client-tests.sh: port $port was taken, retrying" >&2
    continue
  fi
  break
done
if [[ $started -ne 1 ]]; then
  show_log 60
  die "the server did not come up (see $log)"
fi
echo "run-client-tests.sh: server pid $server_pid at $url ($(( SECONDS - start )) s to start), log $log"
echo "run-client-tests.sh: server args: -m $model --host 127.0.0.1 --port $port -np 4 -c 2048 -t $threads --metrics --slots $*"

status=0
run_test() {  # NAME SCRIPT: runs it within what is left of the budget
  local name=$1 script=$2 left rc t0=$SECONDS
  left=$(( budget - (SECONDS - start) ))
  if (( left <= 0 )); then
    echo "run-client-tests.sh: $name: not run, the ${budget}s budget is spent" >&2
    status=1
    return
  fi
  echo "run-client-tests.sh: === $name ==="
  rc=0
  timeout --kill-after=5 "$left" node "$here/$script" "$url" || rc=$?
  if (( rc == 124 || rc == 137 )); then
    echo "run-client-tests.sh: $name: timed out (the ${budget}s budget)" >&2
  fi
  if ! kill -0 "$server_pid" 2>/dev/null; then
    echo "run-client-tests.sh: $name: the server is gone" >&2
    (( rc != 0 )) || rc=1
  fi
  echo "run-client-tests.sh: $name: exit $rc, $(( SECONDS - t0 )) s"
  (( rc == 0 )) || status=1
}

for script in ${CLIENT_TESTS_SCRIPTS:-client-test.mjs load-test.mjs}; do
  [[ -f $here/$script ]] || die "CLIENT_TESTS_SCRIPTS: no $script in $here"
  run_test "${script%.mjs}" "$script"
done

if grep -qiE 'GGML_ASSERT|segmentation fault|terminate called|core dumped' "$log"; then
  echo "run-client-tests.sh: the server log shows a crash or an assertion" >&2
  status=1
fi
stop_server
if (( status != 0 )); then
  show_log 40
  echo "run-client-tests.sh: FAILED in $(( SECONDS - start )) s (server log $log)"
elif (( keep_log )); then
  echo "run-client-tests.sh: PASSED in $(( SECONDS - start )) s (server log $log)"
else
  rm -rf "$logdir"
  echo "run-client-tests.sh: PASSED in $(( SECONDS - start )) s"
fi
exit $status

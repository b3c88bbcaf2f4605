#!/usr/bin/env bash
# examples/llamacpp/server/tests/run-tests.sh SERVER_BIN WORK_DIR
#
# Runs llama.cpp's own server tests (tools/server/tests, from the pinned source), and specdec's own
# (test_specdec_*.py beside this script, copied into the suite's unit/ folder), against the
# llama-server at SERVER_BIN, on local models only: make-models.sh makes the GGUF files in
# WORK_DIR/models from ../shared/models, and the pytest plugin specdec_local_models.py points the
# tests' presets at them, skips (with its reason) a test whose model is only on the hub, and makes
# downloads impossible. The tests run from a copy of the tests folder in WORK_DIR/llama.cpp (the
# source tree is never written to), with /usr/bin/python3 (Debian's pytest, requests, aiohttp, numpy,
# filelock; the `openai` and `wget` packages are stubs from ./stubs), one at a time, servers on
# 127.0.0.1 only, the whole run under a time limit.
#
# Writes WORK_DIR/junit.xml, WORK_DIR/outcomes.txt (one `OUTCOME nodeid[  # reason]` line per
# test), WORK_DIR/summary.txt (counts per test file) and WORK_DIR/pytest.log. Exits non-zero when
# a test fails or errs that expected-failures.txt (next to this script) does not list, or when the
# run does not finish (time limit, crash, nothing collected).
#
# Environment (all optional):
#   SPECDEC_MODELS_DIR      the llama2.c checkpoints (default: ../shared/models of this checkout)
#   LLAMA_SRC               the pinned llama.cpp source (default: build/llama.cpp-src)
#   LLAMA_CONVERT           llama-convert-llama2c-to-ggml (default: found under build/llamacpp)
#   LLAMA_QUANTIZE          llama-quantize (default: found under build/llamacpp)
#   SPECDEC_TESTS_TIMEOUT   seconds for the whole pytest run (default 1500)
#   SPECDEC_TESTS_PORT      the servers' port (default: a free one below the ephemeral range)
#   LLAMA_ARG_THREADS       the servers' threads (default 1)
#   SPECDEC_TESTS_FILES     the test files, space-separated (default: the list below)
#   SPECDEC_EXPECTED_FAILURES  the expected-failures file (default: ./expected-failures.txt)
#   SPECDEC_RPC_SERVER      test_specdec_rpc.py's ggml-rpc-server (default: the one beside SERVER_BIN)
set -euo pipefail
die() { echo "run-tests.sh: $*" >&2; exit 2; }
[[ $# -eq 2 ]] || die "usage: run-tests.sh SERVER_BIN WORK_DIR"
here=$(cd "$(dirname "$0")" && pwd)
root=$(cd "$here/../../../.." && pwd)
python=/usr/bin/python3

server_bin=$1
[[ -x $server_bin ]] || die "no executable llama-server at '$server_bin'"
server_bin=$(cd "$(dirname "$server_bin")" && pwd)/$(basename "$server_bin")
mkdir -p "$2"
work=$(cd "$2" && pwd)

src=${LLAMA_SRC:-$root/build/llama.cpp-src}
[[ -f $src/tools/server/tests/utils.py ]] || die "no llama.cpp server tests under LLAMA_SRC='$src'"
models=${SPECDEC_MODELS_DIR:-$root/../shared/models}
find_tool() {
  local found
  found=$(find "$root/build/llamacpp" -name "$1" -type f -perm -u+x 2>/dev/null | head -n 1)
  [[ -n $found ]] || die "$1 not found under $root/build/llamacpp (set ${2})"
  echo "$found"
}
convert=${LLAMA_CONVERT:-$(find_tool llama-convert-llama2c-to-ggml LLAMA_CONVERT)}
quantize=${LLAMA_QUANTIZE:-$(find_tool llama-quantize LLAMA_QUANTIZE)}
expected=${SPECDEC_EXPECTED_FAILURES:-$here/expected-failures.txt}
[[ -f $expected ]] || die "no expected-failures file at '$expected'"
limit=${SPECDEC_TESTS_TIMEOUT:-1500}
files=${SPECDEC_TESTS_FILES:-"test_basic.py test_completion.py test_chat_completion.py test_stream.py
  test_tokenize.py test_security.py test_ctx_shift.py test_metrics.py test_speculative.py test_ignore_eos.py
  test_slot_save.py test_tool_call.py test_specdec_server.py test_specdec_rpc.py"}

$python -c 'import pytest, requests, aiohttp, numpy, filelock' 2>/dev/null ||
  die "$python lacks pytest/requests/aiohttp/numpy/filelock (apt-get install -y python3-pytest python3-requests python3-aiohttp python3-numpy python3-filelock)"

LLAMA_SRC=$src "$here/make-models.sh" "$models" "$work/models" "$convert" "$quantize"

# A copy of the tests (they write tmp/ next to themselves), in the source's layout with the files
# they read by relative paths (../../../models/templates, ../../../tools/mtmd/*.jpeg).
tree=$work/llama.cpp
tests=$tree/tools/server/tests
rm -rf "$tree"
mkdir -p "$tree/tools/server" "$tree/tools/mtmd" "$tree/models"
cp -r "$src/tools/server/tests" "$tests"
cp -r "$src/models/templates" "$tree/models/templates"
cp "$src"/tools/mtmd/*.jpeg "$tree/tools/mtmd/" 2>/dev/null || true
rm -rf "$tests/tmp" "$tests/.pytest_cache"
# specdec's own tests of the patched server (test_specdec_server.py), run by the same harness.
cp "$here"/test_specdec_*.py "$tests/unit/"
args=()
for f in $files; do
  [[ -f $tests/unit/$f ]] || die "no test file unit/$f in $src/tools/server/tests"
  args+=("unit/$f")
done

# The servers' port: a free one below the kernel's ephemeral range, which the router's children,
# other servers started with port 0 and outgoing connections draw from. The tests start their
# servers one after another on this one port.
port=${SPECDEC_TESTS_PORT:-$($python - <<'PY'
import random, socket
try:
    low = int(open("/proc/sys/net/ipv4/ip_local_port_range").read().split()[0])
except OSError:
    low = 32768
for _ in range(500):
    port = random.randrange(20000, max(low, 20001))
    with socket.socket() as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            s.bind(("127.0.0.1", port))
        except OSError:
            continue
    print(port)
    break
PY
)}
[[ -n $port ]] || die "no free port found"
# One thread per server: stories260K gains nothing from more, and two ggml threads that meet at
# every op stall when the machine is busy (24 ms a token instead of 0.1 ms on 2 loaded cores).
threads=${LLAMA_ARG_THREADS:-1}
# test_specdec_rpc.py's ggml-rpc-server: the one built beside llama-server (GGML_RPC=ON); without
# it those tests skip, saying so.
rpc_server=${SPECDEC_RPC_SERVER:-$(dirname "$server_bin")/ggml-rpc-server}
rm -f "$work/junit.xml" "$work/outcomes.txt" "$work/summary.txt"
echo "run-tests.sh: $server_bin, ${#args[@]} test files, port $port, $threads thread(s), limit ${limit}s, log $work/pytest.log"
start=$(date +%s)
set +e
(
  cd "$tests"
  env PYTHONPATH="$here" PYTHONDONTWRITEBYTECODE=1 LLAMA_SERVER_BIN_PATH="$server_bin" PORT="$port" \
    LLAMA_ARG_THREADS="$threads" \
    SPECDEC_SERVER_MODELS="$work/models" SPECDEC_RPC_SERVER="$rpc_server" \
    timeout --kill-after=30 "$limit" "$python" -m pytest -p specdec_local_models -p no:cacheprovider \
      --specdec-outcomes "$work/outcomes.txt" --junitxml "$work/junit.xml" -o junit_family=xunit2 \
      -v -rfE --durations=15 "${args[@]}"
) >"$work/pytest.log" 2>&1
rc=$?
set -e
elapsed=$(($(date +%s) - start))
tail -n 40 "$work/pytest.log"
echo "run-tests.sh: pytest exited $rc after ${elapsed}s"

# rc 0: all passed; 1: some failed (judged below); anything else: the run itself went wrong
case $rc in
  0|1) ;;
  124|137) die "the run hit its time limit (${limit}s; SPECDEC_TESTS_TIMEOUT)" ;;
  *) die "pytest exited $rc (interrupted, internal or usage error, or no tests collected): see $work/pytest.log" ;;
esac
[[ -s $work/outcomes.txt ]] || die "no outcomes written to $work/outcomes.txt"

$python - "$work/outcomes.txt" "$expected" "$work/summary.txt" "$elapsed" <<'EOF'
import collections, sys
outcomes_path, expected_path, summary_path, elapsed = sys.argv[1:5]
expected = {}
for line in open(expected_path):
    line = line.strip()
    if not line or line.startswith("#"):
        continue
    nodeid, _, reason = line.partition("  # ")
    expected[nodeid.strip()] = reason.strip()
outcomes = {}
for line in open(outcomes_path):
    outcome, _, rest = line.rstrip("\n").partition(" ")
    nodeid = rest.partition("  # ")[0]
    outcomes[nodeid] = outcome
per_file = collections.defaultdict(collections.Counter)
for nodeid, outcome in outcomes.items():
    per_file[nodeid.split("::")[0]][outcome] += 1
kinds = ["PASSED", "FAILED", "ERROR", "SKIPPED", "XFAILED", "XPASSED"]
total = collections.Counter()
rows = []
for f in sorted(per_file):
    total.update(per_file[f])
    rows.append(f"{f:<32}" + " ".join(f"{k.lower()} {per_file[f][k]:>3}" for k in kinds))
rows.append(f"{'total':<32}" + " ".join(f"{k.lower()} {total[k]:>3}" for k in kinds) + f"   {elapsed}s")
open(summary_path, "w").write("\n".join(rows) + "\n")
print("\n".join(rows))
bad = [n for n, o in outcomes.items() if o in ("FAILED", "ERROR") and n not in expected]
known = [n for n, o in outcomes.items() if o in ("FAILED", "ERROR") and n in expected]
fixed = [n for n, o in outcomes.items() if o == "PASSED" and n in expected]
for n in known:
    print(f"expected failure: {n}  # {expected[n]}")
for n in fixed:
    print(f"note: passed although expected to fail: {n}")
for n in sorted(set(expected) - set(outcomes)):
    print(f"note: listed in expected-failures.txt but not run: {n}")
for n in bad:
    print(f"UNEXPECTED {outcomes[n]}: {n}")
print(f"run-tests.sh: {len(bad)} unexpected failure(s), {len(known)} expected, {len(fixed)} expected but passed")
sys.exit(1 if bad else 0)
EOF

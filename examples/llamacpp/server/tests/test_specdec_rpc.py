"""The patched llama-server with the target's layers on llama.cpp's RPC servers (--rpc).

Two ggml-rpc-server processes (SPECDEC_RPC_SERVER, the one built beside llama-server; run-tests.sh
sets it) on 127.0.0.1, started and stopped by each test; the target's layers split across them
(-ngl 99, split by their free memory), the draft model on this machine (-ngld 0). A
ggml-rpc-server serves one client at a time: the next llama-server connects once the last one
has stopped. Every wait is bounded.
"""

import os
import socket
import subprocess
import threading
import time

import pytest
import requests
from specdec_env import environment
from utils import *

MODELS = os.environ.get("SPECDEC_SERVER_MODELS", "")
TARGET = os.path.join(MODELS, "stories260K.gguf")
DRAFT = os.path.join(MODELS, "stories260K-q8_0.gguf")
RPC_SERVER = os.environ.get("SPECDEC_RPC_SERVER", "")
PROMPTS = ["Once upon a time", "Lily and Ben", "The little dog"]

pytestmark = pytest.mark.skipif(
    not (RPC_SERVER and os.access(RPC_SERVER, os.X_OK)),
    reason="no ggml-rpc-server (SPECDEC_RPC_SERVER; llama.cpp built without GGML_RPC)")


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def listening(port: int) -> bool:
    # ss, not a connection: a probe would be the server's one client until it closed
    out = subprocess.run(["ss", "-ltnH", f"sport = :{port}"], capture_output=True, text=True).stdout
    return str(port) in out


class RpcServer:
    """One ggml-rpc-server on 127.0.0.1, its output in a file."""

    def __init__(self, tmp_path, name: str):
        self.port = free_port()
        self.log = tmp_path / f"{name}.log"
        self.process = None

    def start(self):
        self.process = subprocess.Popen([RPC_SERVER, "-H", "127.0.0.1", "-p", str(self.port), "-t", "1"],
                                        stdout=open(self.log, "w"), stderr=subprocess.STDOUT)
        deadline = time.time() + 10
        while not listening(self.port):
            assert self.process.poll() is None, self.log.read_text()
            assert time.time() < deadline, "ggml-rpc-server did not listen within 10 s"
            time.sleep(0.05)

    def kill(self):
        if self.process and self.process.poll() is None:
            self.process.kill()
            self.process.wait(timeout=10)

    @property
    def endpoint(self) -> str:
        return f"127.0.0.1:{self.port}"


@pytest.fixture
def rpc(tmp_path):
    servers = [RpcServer(tmp_path, "rpc-a"), RpcServer(tmp_path, "rpc-b")]
    for s in servers:
        s.start()
    yield servers
    for s in servers:
        s.kill()


def make_server(tmp_path, name: str, rpc_servers=None, draft: bool = True) -> ServerProcess:
    s = ServerProcess()
    s.model_file = TARGET
    s.n_ctx = 1024
    s.n_slots = 2
    s.fa = "off"
    s.log_path = str(tmp_path / f"{name}.log")
    if draft:
        s.model_draft = DRAFT
        s.spec_type = "draft-simple"  # the speed policy plans K (the length is auto)
    if rpc_servers:
        s.n_gpu_layer = 99
    return s


def start(s: ServerProcess, rpc_servers=None):
    env = {}
    if rpc_servers:
        env = {"LLAMA_ARG_RPC": ",".join(r.endpoint for r in rpc_servers), "LLAMA_ARG_N_GPU_LAYERS_DRAFT": "0",
               "LLAMA_ARG_LOG_VERBOSITY": "4"}  # the load_tensors lines: where each model's layers are
    with environment(**env):
        s.start(timeout_seconds=60)


def complete(s: ServerProcess, prompt: str, **body) -> dict:
    data = {"prompt": prompt, "n_predict": 48, "cache_prompt": False, "return_tokens": True, **body}
    res = s.make_request("POST", "/completion", data=data, timeout=60)
    assert res.status_code == 200, res.body
    return res.body


def serve(s: ServerProcess, rpc_servers, reqs) -> list[dict]:
    start(s, rpc_servers)
    try:
        return [complete(s, **r) for r in reqs]
    finally:
        s.stop()


def test_rpc_layers_on_both_servers_greedy_equal_to_local(tmp_path, rpc):
    reqs = [dict(prompt=p, temperature=0.0, n_predict=64) for p in PROMPTS]
    local = serve(make_server(tmp_path, "local", draft=False), None, reqs)
    s = make_server(tmp_path, "rpc-draft", rpc)
    remote = serve(s, rpc, reqs)
    log = open(s.log_path).read()
    # the target's weights on both RPC devices, the draft model's on this machine's CPU
    assert f"[{rpc[0].endpoint}] model buffer size" in log and f"[{rpc[1].endpoint}] model buffer size" in log
    assert "offloaded 0/" in log  # the draft model (-ngld 0)
    assert [b["tokens"] for b in remote] == [b["tokens"] for b in local]
    assert sum(b["timings"]["draft_n"] for b in remote) > 0  # it drafted
    plain_remote = serve(make_server(tmp_path, "rpc-plain", rpc, draft=False), rpc, reqs)
    assert [b["tokens"] for b in plain_remote] == [b["tokens"] for b in local]


def test_rpc_same_seed_same_tokens_with_and_without_draft(tmp_path, rpc):
    reqs = [dict(prompt=p, seed=seed, temperature=0.8, spec_seeded="coupled")
            for p in PROMPTS[:2] for seed in (1, 2)]
    with_draft = serve(make_server(tmp_path, "rpc-draft", rpc), rpc, reqs)
    without = serve(make_server(tmp_path, "rpc-plain", rpc, draft=False), rpc, reqs)
    assert [b["tokens"] for b in with_draft] == [b["tokens"] for b in without]
    assert sum(b["timings"]["draft_n_accepted"] for b in with_draft) > 0


def test_rpc_server_killed_mid_request(tmp_path, rpc):
    # ggml's RPC backend ends llama-server when a server is lost (the layers it held are gone);
    # the patched server first answers every waiting request with an error that says so. Once the
    # RPC server is back, a new llama-server (a supervisor's restart) serves as before.
    s = make_server(tmp_path, "rpc-killed", rpc)
    s.enable_ctx_shift = True  # the requests run until the server ends
    start(s, rpc)
    answers = {}
    streaming = threading.Event()

    def stream():
        try:
            r = requests.post(f"http://{s.server_host}:{s.server_port}/completion", timeout=30, stream=True,
                              json={"prompt": PROMPTS[0], "n_predict": 100000, "ignore_eos": True,
                                    "temperature": 0.8, "stream": True})
            text = ""
            for chunk in r.iter_content(chunk_size=None, decode_unicode=True):
                text += chunk
                if text.count("data: ") >= 20:
                    streaming.set()
            answers["stream"] = (r.status_code, text)
        except requests.RequestException as e:
            answers["stream"] = (None, repr(e))
        streaming.set()

    def whole():
        try:
            r = requests.post(f"http://{s.server_host}:{s.server_port}/completion", timeout=30,
                              json={"prompt": PROMPTS[1], "n_predict": 100000, "ignore_eos": True, "temperature": 0.8})
            answers["whole"] = (r.status_code, r.text)
        except requests.RequestException as e:
            answers["whole"] = (None, repr(e))

    threads = [threading.Thread(target=stream), threading.Thread(target=whole)]
    for t in threads:
        t.start()
    assert streaming.wait(timeout=20), "no tokens streamed within 20 s"
    time.sleep(0.2)  # both requests are generating
    assert s.process.poll() is None
    rpc[0].kill()
    for t in threads:
        t.join(timeout=20)
        assert not t.is_alive(), "a client still waits 20 s after the RPC server was killed"
    try:
        s.process.wait(timeout=20)
    except subprocess.TimeoutExpired:
        pytest.fail("llama-server still runs 20 s after losing an RPC server")
    assert s.process.returncode != 0
    s.stop()
    status, text = answers["whole"]
    assert status == 503, answers["whole"]
    assert "RPC server given by --rpc exited or cannot be reached" in text
    status, text = answers["stream"]
    assert status == 200 and "data: {\"error\"" in text and "restart the RPC servers" in text, answers["stream"]
    assert "restart the RPC servers, then llama-server" in open(s.log_path).read()

    rpc[0].start()  # back: a new llama-server serves again, the same greedy tokens as before
    reqs = [dict(prompt=PROMPTS[0], temperature=0.0)]
    again = serve(make_server(tmp_path, "rpc-again", rpc), rpc, reqs)
    local = serve(make_server(tmp_path, "local", draft=False), None, reqs)
    assert again[0]["tokens"] == local[0]["tokens"]


def test_rpc_server_absent_at_start(tmp_path):
    # nobody listens there: llama-server ends at once with llama.cpp's message, nothing hangs
    s = make_server(tmp_path, "rpc-absent", draft=False)
    s.n_gpu_layer = 99
    try:
        with environment(LLAMA_ARG_RPC=f"127.0.0.1:{free_port()}"), pytest.raises(RuntimeError, match="died"):
            s.start(timeout_seconds=20)
    finally:
        s.stop()
    assert "Failed to connect to" in open(s.log_path).read()

"""pytest plugin: llama.cpp's server tests (tools/server/tests) on local models, never the network.

Loaded with `-p specdec_local_models` (run-tests.sh puts this folder on PYTHONPATH), it changes no
file of llama.cpp's; at configure time it patches the tests' `utils` module:

- every server a test starts (`ServerProcess.start`) has its Hugging Face model (`model_hf_repo`,
  `model_hf_file`) or `model_url` replaced by a local GGUF from --specdec-models (made by
  make-models.sh) when HUB_MODELS has an equivalent; otherwise the test is SKIPPED, its reason
  naming the hub model. A server with a vision projector to fetch (`mmproj_url`) is skipped too;
- a router server (no model of its own) given no models preset or directory by its test gets
  ROUTER_MODELS, a models preset naming local GGUFs by the hub names the tests route to;
- a server whose port another process holds fails its test (utils' start() would take the other
  process's /health answer for its own);
- `download_file` (a model fetched by URL, e.g. the speculative tests' draft) returns the local
  equivalent from DOWNLOADS, or skips the test;
- `ServerPreset.load_all` (the session fixture that downloads every preset's model) only checks
  that the local models exist;
- every server runs with --offline, LLAMA_CACHE in an empty folder and MODEL_ENDPOINT/HF_ENDPOINT
  at a closed local port, so nothing can be downloaded even by a router's child; and a server
  asked to listen elsewhere than on loopback fails its test.

It also puts ./stubs on sys.path, after every other entry: `openai` and `wget` stubs for the
Python packages Debian does not have (a real one, if installed, wins; the header says which).

Local models (--specdec-models DIR, or env SPECDEC_SERVER_MODELS):
  stories260K.gguf       karpathy's stories260K (llama2.c checkpoint, tok512 vocabulary, n_ctx 512)
  stories260K-q8_0.gguf  the same, Q8_0: the draft model

--specdec-outcomes FILE writes one line per test: `OUTCOME nodeid` (PASSED, FAILED, ERROR,
SKIPPED, XFAILED, XPASSED), then `  # reason` for a skip or a failure's last line (node ids hold
spaces and `|`, from parameters such as regexes, but none here holds `  # `).
"""

from __future__ import annotations

import os
import socket
import sys
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
STUBS = os.path.join(HERE, "stubs")
if STUBS not in sys.path:
    sys.path.append(STUBS)

MAIN = "stories260K.gguf"
DRAFT = "stories260K-q8_0.gguf"

# (hf repo, hf file) -> (local file, note); a note says what is substituted for what
HUB_MODELS: dict[tuple[str, str | None], tuple[str, str | None]] = {
    ("ggml-org/test-model-stories260K", None): (MAIN, None),
    ("ggml-org/models", "tinyllamas/stories260K.gguf"): (MAIN, None),
    ("ggml-org/stories15M_MOE", "stories15M_MOE-F16.gguf"):
        (MAIN, "stories15m_moe (stories15M MoE, F16) -> stories260K F32: the speculative tests' main model"),
}

# url -> (local file, note), for utils.download_file
DOWNLOADS: dict[str, tuple[str, str | None]] = {
    "https://huggingface.co/ggml-org/tiny-llamas/resolve/main/stories15M-q4_0.gguf":
        (DRAFT, "draft stories15M-q4_0 -> stories260K Q8_0 (same vocabulary as the main model)"),
}

# models a router lists when its test gives it none: name -> (local file, note)
ROUTER_MODELS: dict[str, tuple[str, str | None]] = {
    "ggml-org/tinygemma3-GGUF:Q8_0":
        (MAIN, "router model ggml-org/tinygemma3-GGUF:Q8_0 -> stories260K (text chat only: the "
               "stream tests route to it by its slashed name)"),
}

# why a hub model has no local equivalent (the skip reason); others get a generic one
NO_LOCAL: dict[tuple[str, str | None], str] = {
    ("ggml-org/models", "bert-bge-small/ggml-model-f16.gguf"): "an embedding model (BERT bge-small)",
    ("ggml-org/models", "jina-reranker-v1-tiny-en/ggml-model-f16.gguf"): "a reranking model (jina-reranker-v1-tiny)",
    ("ggml-org/test-model-stories260K-infill", None): "stories260K with fill-in-the-middle tokens",
    ("ggml-org/tinygemma3-GGUF:Q8_0", None): "a vision model with its projector (tinygemma3 + mmproj)",
    ("ggml-org/models", "tinyllamas/split/stories15M-q8_0-00001-of-00003.gguf"): "a model split in 3 GGUF files (stories15M Q8_0)",
}

LOOPBACK = {"127.0.0.1", "::1", "[::1]", "localhost"}
DEAD_ENDPOINT = "http://127.0.0.1:9/"  # the discard port: nothing listens, a fetch fails at once

_models_dir: str = ""
_substitutions: set[str] = set()
_outcomes: dict[str, tuple[str, str]] = {}  # nodeid -> (outcome, reason)


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("specdec", "specdec: llama.cpp server tests on local models")
    group.addoption("--specdec-models", default=os.environ.get("SPECDEC_SERVER_MODELS", ""),
                    help="folder with stories260K.gguf and stories260K-q8_0.gguf (make-models.sh)")
    group.addoption("--specdec-outcomes", default="", help="write one `OUTCOME nodeid` line per test here")


def _local(name: str) -> str:
    return os.path.join(_models_dir, name)


def _use(entry: tuple[str, str | None]) -> str:
    name, note = entry
    if note:
        _substitutions.add(note)
    return _local(name)


def _hub_name(repo: str | None, file: str | None) -> str:
    return f"{repo}/{file}" if file else str(repo)


def _skip_hub(repo: str | None, file: str | None) -> None:
    what = NO_LOCAL.get((repo, file))  # type: ignore[arg-type]
    why = f"{what}, only on the Hugging Face hub" if what else "only on the Hugging Face hub"
    pytest.skip(f"specdec local models: {_hub_name(repo, file)} is {why}; no local equivalent, no network")


def _localize(server) -> None:
    """Points a server at local files, or skips the test; forbids any download."""
    hosts = [h.strip() for h in str(server.server_host).split(",")]
    off_loopback = [h for h in hosts if h not in LOOPBACK]
    if off_loopback:
        pytest.fail(f"specdec local models: servers listen on loopback only, not {off_loopback}")
    if server.mmproj_url:
        pytest.skip(f"specdec local models: the projector {server.mmproj_url} is only on the hub; no local equivalent")
    if server.model_hf_repo:
        key = (server.model_hf_repo, server.model_hf_file)
        if key not in HUB_MODELS:
            _skip_hub(*key)
        server.model_file = _use(HUB_MODELS[key])
        server.model_hf_repo = None
        server.model_hf_file = None
    if server.model_url:
        if server.model_url not in DOWNLOADS:
            pytest.skip(f"specdec local models: {server.model_url} is only on the network; no local equivalent")
        server.model_file = _use(DOWNLOADS[server.model_url])
        server.model_url = None
    if not server.model_file and not server.models_dir and not server.models_preset:
        server.models_preset = _router_preset()
    server.offline = True


def _port_free(host: str, port: int) -> bool:
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    with socket.socket(family) as s:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the server's listener
        try:
            s.bind((host.strip("[]"), port))
        except OSError:
            return False
    return True


def _wait_for_port(server, seconds: float = 10.0) -> None:
    """Fails the test when another process holds the port (its /health would pass for ours)."""
    if getattr(server, "external_server", False):
        return
    hosts = [h.strip() for h in str(server.server_host).split(",")]
    deadline = time.monotonic() + seconds
    while not all(_port_free(h, int(server.server_port)) for h in hosts if h != "localhost"):
        if time.monotonic() > deadline:
            pytest.fail(f"specdec local models: port {server.server_port} is held by another process")
        time.sleep(0.1)


def _router_preset() -> str:
    path = os.path.join(_models_dir, "router-models.ini")
    lines = ["; made by specdec_local_models.py: local models under the names the router tests use", "version = 1", ""]
    for name, (file, note) in ROUTER_MODELS.items():
        lines += [f"; {note}" if note else "", f"[{name}]", f"model = {_local(file)}", ""]
        if note:
            _substitutions.add(note)
    with open(path, "w") as f:
        f.write("\n".join(lines))
    return path


def _download_file(url: str, output_file_path: str | None = None) -> str:
    if url not in DOWNLOADS:
        pytest.skip(f"specdec local models: {url} is only on the network; no local equivalent")
    return _use(DOWNLOADS[url])


def _load_all() -> None:
    missing = [n for n in (MAIN, DRAFT) if not os.path.isfile(_local(n))]
    if missing:
        pytest.exit(f"specdec local models: {missing} not in {_models_dir!r} (make-models.sh makes them)", 2)


def pytest_configure(config: pytest.Config) -> None:
    global _models_dir
    _models_dir = os.path.abspath(config.getoption("--specdec-models") or "")
    if not config.getoption("--specdec-models"):
        raise pytest.UsageError("specdec_local_models: give --specdec-models DIR (or SPECDEC_SERVER_MODELS)")
    if str(config.rootpath) not in sys.path:
        sys.path.insert(0, str(config.rootpath))
    import utils  # llama.cpp's tools/server/tests/utils.py (its conftest imported it already)

    for name in ("ServerProcess", "ServerPreset", "download_file"):
        if not hasattr(utils, name):
            raise pytest.UsageError(f"specdec_local_models: utils.{name} is gone; this plugin needs updating")

    original_start = utils.ServerProcess.start

    def start(self, *args, **kwargs):
        _localize(self)
        _wait_for_port(self)
        original_start(self, *args, **kwargs)
        # utils' start() returns when /health answers on the port: make sure it was this server
        if self.process is not None and self.process.poll() is not None:
            pytest.fail(f"specdec local models: the server exited ({self.process.returncode}) at start, "
                        f"yet something answered on port {self.server_port}")

    utils.ServerProcess.start = start
    utils.ServerPreset.load_all = staticmethod(_load_all)
    utils.download_file = _download_file  # test modules import it with `from utils import *`, later

    cache = os.path.join(_models_dir, "empty-llama-cache")
    os.makedirs(cache, exist_ok=True)
    os.environ["LLAMA_CACHE"] = cache
    os.environ["MODEL_ENDPOINT"] = DEAD_ENDPOINT
    os.environ["HF_ENDPOINT"] = DEAD_ENDPOINT
    os.environ.pop("HF_TOKEN", None)


def pytest_report_header(config: pytest.Config) -> list[str]:
    import openai
    import wget
    def which(m) -> str:
        return f"STUB ({m.__file__})" if getattr(m, "IS_SPECDEC_STUB", False) else f"{m.__version__} ({m.__file__})"
    return [f"specdec local models: {_models_dir}",
            f"specdec: openai {which(openai)}; wget {which(wget)}"]


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    nodeid = report.nodeid
    reason = ""
    if report.skipped:
        if hasattr(report, "wasxfail"):
            outcome = "XFAILED"
        else:
            outcome = "SKIPPED"
            if isinstance(report.longrepr, tuple):
                reason = str(report.longrepr[2]).removeprefix("Skipped: ")
    elif report.failed:
        outcome = "FAILED" if report.when == "call" else "ERROR"
        crash = getattr(report.longrepr, "reprcrash", None)
        if crash is not None:
            message = (crash.message.strip().splitlines() or [""])[0]
            reason = f"{os.path.basename(crash.path)}:{crash.lineno}: {message}"
        else:
            reason = (report.longreprtext.strip().splitlines() or [""])[-1]
    elif report.when == "call":
        outcome = "XPASSED" if hasattr(report, "wasxfail") else "PASSED"
    else:
        return
    previous = _outcomes.get(nodeid)
    if previous and previous[0] in ("FAILED", "ERROR", "SKIPPED", "XFAILED"):
        if outcome in ("FAILED", "ERROR") and previous[0] != "ERROR":
            outcome = "ERROR"  # a test that failed, then failed its teardown
        else:
            return
    _outcomes[nodeid] = (outcome, reason.replace("\n", " "))


def pytest_sessionfinish(session: pytest.Session) -> None:
    path = session.config.getoption("--specdec-outcomes")
    if not path:
        return
    with open(path, "w") as f:
        for nodeid, (outcome, reason) in _outcomes.items():
            f.write(f"{outcome} {nodeid}" + (f"  # {reason}" if reason else "") + "\n")


def pytest_terminal_summary(terminalreporter) -> None:
    if _substitutions:
        terminalreporter.write_sep("-", "specdec local models: substitutions used")
        for note in sorted(_substitutions):
            terminalreporter.write_line(note)

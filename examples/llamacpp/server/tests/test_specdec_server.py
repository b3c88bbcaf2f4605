"""specdec's own tests of the patched llama-server, at the edges llama.cpp's suite does not reach.

run-tests.sh copies this file into the copied suite's unit/ folder and runs it with llama.cpp's
own harness (utils.ServerProcess: one server at a time on the run's loopback port, stopped by the
test). Models: SPECDEC_SERVER_MODELS (make-models.sh): stories260K.gguf (the target, F32),
stories260K-q8_0.gguf (a draft that keeps most tokens), stories260K-v448.gguf (the target's
weights with the last 64 of its 512 tokens cut: a draft with a smaller vocabulary).

Server options the harness has no field for are given by their LLAMA_ARG_ environment twins
(so the twins are what is tested; --help is checked for the flags themselves).
"""

import os
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
SMALL_VOCAB_DRAFT = os.path.join(MODELS, "stories260K-v448.gguf")
PROMPT = "Once upon a time, there was a little girl named Lily. She"

server: ServerProcess


def make_server(draft: str | None = DRAFT, n_max: int | None = 4, slots: int = 2) -> ServerProcess:
    s = ServerProcess()
    s.model_file = TARGET
    s.n_ctx = 512 * slots
    s.n_slots = slots
    s.server_slots = True  # GET /slots
    s.fa = "off"
    if draft:
        s.model_draft = draft
        s.spec_type = "draft-simple"
        s.spec_draft_n_max = n_max
    return s


@pytest.fixture(autouse=True)
def fixture_create_server():
    global server
    server = make_server()
    yield
    server.stop()


def start(s: ServerProcess, **env):
    with environment(**env):
        s.start()


def complete(s: ServerProcess, **body) -> dict:
    data = {"prompt": PROMPT, "n_predict": 32, "cache_prompt": False, "return_tokens": True, **body}
    res = s.make_request("POST", "/completion", data=data)
    assert res.status_code == 200, res.body
    return res.body


def slot_info(s: ServerProcess) -> list[dict]:
    res = s.make_request("GET", "/slots")
    assert res.status_code == 200
    return res.body


def run_on(s: ServerProcess, requests_: list[dict], **env) -> list[dict]:
    start(s, **env)
    try:
        return [complete(s, **r) for r in requests_]
    finally:
        s.stop()


# --- the seeded rule: --spec-seeded, LLAMA_ARG_SPEC_SEEDED and the request's spec_seeded ---------


def test_spec_seeded_in_help():
    out = subprocess.run([os.environ["LLAMA_SERVER_BIN_PATH"], "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    assert "--spec-seeded {stream,coupled}" in out
    assert "LLAMA_ARG_SPEC_SEEDED" in out
    assert "--spec-draft-n-max N|auto" in out


def test_spec_seeded_default_is_stream_and_echoed():
    global server
    start(server)
    body = complete(server, seed=42, temperature=0.8)
    assert body["generation_settings"]["spec_seeded"] == "stream"
    assert slot_info(server)[body["id_slot"]]["specdec"]["rule"] == "sample-and-match"
    body = complete(server, seed=42, temperature=0.8, spec_seeded="coupled")
    assert body["generation_settings"]["spec_seeded"] == "coupled"
    assert slot_info(server)[body["id_slot"]]["specdec"]["rule"] == "coupled"
    body = complete(server, seed=-1, temperature=0.8)  # no seed: rejection sampling
    assert slot_info(server)[body["id_slot"]]["specdec"]["rule"] == "rejection"


def test_spec_seeded_server_default_from_environment():
    global server
    start(server, LLAMA_ARG_SPEC_SEEDED="coupled")
    body = complete(server, seed=42, temperature=0.8)
    assert body["generation_settings"]["spec_seeded"] == "coupled"
    body = complete(server, seed=42, temperature=0.8, spec_seeded="stream")
    assert body["generation_settings"]["spec_seeded"] == "stream"


def test_spec_seeded_bad_values():
    global server
    server.stop()
    bad = make_server()
    with pytest.raises(RuntimeError):  # the server refuses to start, naming the option
        start(bad, LLAMA_ARG_SPEC_SEEDED="sometimes")
    bad.stop()
    start(server)
    res = server.make_request("POST", "/completion", data={"prompt": PROMPT, "seed": 1, "spec_seeded": "bogus"})
    assert res.status_code == 400
    assert "spec_seeded" in json.dumps(res.body)
    complete(server, seed=1)  # no slot lost


def test_coupled_same_tokens_with_and_without_draft():
    global server
    reqs = [dict(seed=s, temperature=t, spec_seeded="coupled", n_predict=48)
            for s in (1, 2, 3) for t in (0.8, 1.0)]
    with_draft = run_on(server, reqs)
    without = run_on(make_server(draft=None), reqs)
    assert all(b["generation_settings"]["spec_seeded"] == "coupled" for b in with_draft + without)
    assert [b["tokens"] for b in with_draft] == [b["tokens"] for b in without]
    assert sum(b["timings"]["draft_n_accepted"] for b in with_draft) > 0


# --- log-probabilities of drafted tokens ------------------------------------------------------------


def same_probs(a: dict, b: dict, post: bool):
    # A row of a batch of drafts and the same row decoded alone differ in their last bits: a
    # log-probability of -8.57 came out 0.002 apart. Probabilities are compared to 2e-3, logs to 1e-2.
    key = "prob" if post else "logprob"
    tops = "top_probs" if post else "top_logprobs"
    tol = 2e-3 if post else 1e-2
    for x, y in zip(a["completion_probabilities"], b["completion_probabilities"]):
        assert x["id"] == y["id"]
        assert x[key] == pytest.approx(y[key], abs=tol)
        assert [t["id"] for t in x[tops]] == [t["id"] for t in y[tops]], (x, y)
        for s, t in zip(x[tops], y[tops]):
            assert s[key] == pytest.approx(t[key], abs=tol)


@pytest.mark.parametrize("post", [True, False])
def test_drafted_tokens_have_stocks_probabilities_greedy(post):
    global server
    reqs = [dict(temperature=0.0, n_probs=5, post_sampling_probs=post, n_predict=40)]
    [with_draft] = run_on(server, reqs)
    [without] = run_on(make_server(draft=None), reqs)
    assert with_draft["tokens"] == without["tokens"]
    assert with_draft["timings"]["draft_n_accepted"] > 0  # drafted tokens were emitted
    assert len(with_draft["completion_probabilities"]) == 40
    same_probs(with_draft, without, post)


@pytest.mark.parametrize("post", [True, False])
def test_drafted_tokens_have_stocks_probabilities_sampled(post):
    # A seed with the stream rule: the tokens are llama.cpp's own draws with and without the draft
    # (up to the last bits of a batched row), so their probabilities can be compared token by token.
    global server
    reqs = [dict(temperature=0.8, seed=s, n_probs=5, post_sampling_probs=post, n_predict=24) for s in (5, 6, 7)]
    with_draft = run_on(server, reqs)
    without = run_on(make_server(draft=None), reqs)
    assert sum(b["timings"]["draft_n_accepted"] for b in with_draft) > 0
    compared = 0
    for a, b in zip(with_draft, without):
        n = 0
        while n < min(len(a["tokens"]), len(b["tokens"])) and a["tokens"][n] == b["tokens"][n]:
            n += 1
        a["completion_probabilities"] = a["completion_probabilities"][:n]
        b["completion_probabilities"] = b["completion_probabilities"][:n]
        same_probs(a, b, post)
        compared += n
    assert compared >= 30


def test_drafted_tokens_probabilities_rejection_rule():
    # Unseeded: every token, drafted or not, has its distribution from the processed row.
    global server
    start(server)
    for _ in range(4):
        body = complete(server, seed=-1, temperature=0.8, n_probs=4, post_sampling_probs=True, n_predict=32)
        for tok in body["completion_probabilities"]:
            assert 0.0 < tok["prob"] <= 1.0
            assert 1 <= len(tok["top_probs"]) <= 4
            listed = {t["id"]: t["prob"] for t in tok["top_probs"]}
            if tok["id"] in listed:
                assert listed[tok["id"]] == pytest.approx(tok["prob"])
            assert sum(listed.values()) <= 1.0 + 1e-5
    assert slot_info(server)[body["id_slot"]]["specdec"]["rule"] == "rejection"


# --- a draft model with a smaller vocabulary ---------------------------------------------------------


def test_smaller_draft_vocabulary():
    # The 64 ids the draft lacks are banned for the target too: llama.cpp's draft-simple decodes
    # every emitted token into the draft's context, which fails (stock's as well) for an id the draft
    # model does not have. Within that, drafts come from the draft's 448 ids only.
    global server
    ban = [[i, False] for i in range(448, 512)]
    reqs = [dict(temperature=0.0, logit_bias=ban, n_predict=48)] + \
           [dict(seed=-1, temperature=t, logit_bias=ban, n_predict=48) for t in (0.8, 1.0, 1.5) for _ in range(3)]
    with_draft = run_on(make_server(draft=SMALL_VOCAB_DRAFT), reqs)
    without = run_on(make_server(draft=None), reqs[:1])
    assert with_draft[0]["tokens"] == without[0]["tokens"]
    assert sum(b["timings"]["draft_n_accepted"] for b in with_draft) > 0
    assert all(t < 448 for b in with_draft for t in b["tokens"])


# --- the speed policy: where it runs, and n_min ------------------------------------------------------


def test_policy_runs_only_when_the_length_is_auto():
    s = make_server(n_max=None)  # draft-simple, no number: auto
    start(s)
    assert slot_info(s)[0]["specdec"]["policy"] is True
    s.stop()
    s = make_server(n_max=4)  # a number: llama.cpp's own length
    start(s)
    assert slot_info(s)[0]["specdec"]["policy"] is False
    s.stop()


def test_policy_in_metrics():
    s = make_server(n_max=None)
    s.server_metrics = True
    start(s)
    for _ in range(3):
        complete(s, temperature=0.0, n_predict=48)
    res = s.make_request("GET", "/metrics")
    s.stop()
    assert res.status_code == 200
    lines = res.body.splitlines() if isinstance(res.body, str) else []
    k = [l for l in lines if l.startswith("llamacpp:specdec_draft_n ")]
    assert len(k) == 1 and 0 <= float(k[0].split()[1]) <= 8
    depth1 = [l for l in lines if l.startswith('llamacpp:specdec_acceptance{depth="1"} ')]
    assert len(depth1) == 1 and 0.0 <= float(depth1[0].split()[1]) <= 1.0


def test_policy_cost_fitted_on_the_steps_served():
    # The step cost the policy plans with is fitted on the steps the server runs: after a few
    # requests /slots shows how many steps it rests on and the predicted step time at each K,
    # positive, and a step drafting 8 tokens costs more than one drafting none.
    s = make_server(n_max=None)
    start(s)
    for t in (0.0, 0.8):
        complete(s, temperature=t, n_predict=48)
    info = slot_info(s)[0]["specdec"]
    s.stop()
    assert info["steps_fitted"] > 10
    by_k = info["step_seconds_by_k"]
    assert len(by_k) == 9
    assert all(x > 0 for x in by_k)
    assert by_k[8] > by_k[0]


def test_greedy_equal_to_plain_with_the_draft_caught_up_at_draft_time():
    # The draft model catches up when a slot drafts and keeps its drafted tokens: greedy output is
    # plain greedy's at a fixed K and under the policy (which drafts, then stops, then probes),
    # over several requests reusing a slot's cache (cache_prompt) and two slots at once.
    prompts = [PROMPT, "Lily and Ben", PROMPT + " was happy", "Once upon a time"]
    reqs = [{"prompt": p, "temperature": 0.0, "n_predict": 40, "cache_prompt": True} for p in prompts]
    plain = [r["tokens"] for r in run_on(make_server(draft=None), reqs)]
    for n_max in (4, None):
        res = run_on(make_server(n_max=n_max), reqs)
        assert [r["tokens"] for r in res] == plain, n_max
        if n_max == 4:
            # The draft is the target's Q8_0 copy: with its cache caught up right it agrees with
            # the target nearly always (a draft model missing its context would not).
            drafted = sum(r["timings"]["draft_n"] for r in res)
            kept = sum(r["timings"]["draft_n_accepted"] for r in res)
            assert drafted > 0 and kept / drafted > 0.8, (kept, drafted)


def test_policy_off_for_a_number_from_the_environment_or_config_file(tmp_path):
    global server
    s = make_server(n_max=None)
    start(s, LLAMA_ARG_SPEC_DRAFT_N_MAX="5")
    assert slot_info(s)[0]["specdec"]["policy"] is False
    s.stop()
    config = tmp_path / "llama.cpp"
    config.mkdir()
    (config / "config.ini").write_text("[*]\nspec-draft-n-max = 5\n")
    s = make_server(n_max=None)
    start(s, XDG_CONFIG_HOME=str(tmp_path))
    assert slot_info(s)[0]["specdec"]["policy"] is False
    s.stop()
    s = make_server(n_max=None)
    start(s, LLAMA_ARG_SPEC_DRAFT_N_MAX="auto")
    assert slot_info(s)[0]["specdec"]["policy"] is True
    s.stop()


def test_policy_off_for_other_spec_types():
    s = make_server(draft=None)
    s.spec_type = "ngram-mod"
    s.spec_draft_n_max = None
    start(s)
    assert slot_info(s)[0]["specdec"]["policy"] is False
    s.stop()


# --- ngram-specdec: specdec's n-gram drafter as a spec type --------------------------------------

REPEAT = "Lily had a red ball. Lily had a red ball. Lily had a red ball. Lily had a"


def ngram_server(types: str = "ngram-specdec", draft: str | None = None, slots: int = 2) -> ServerProcess:
    s = make_server(draft=draft, n_max=4 if draft else None, slots=slots)
    s.spec_type = types
    return s


def drafts(res: list[dict]) -> tuple[int, int]:
    return (sum(r["timings"]["draft_n"] for r in res), sum(r["timings"]["draft_n_accepted"] for r in res))


def test_ngram_specdec_in_help():
    out = subprocess.run([os.environ["LLAMA_SERVER_BIN_PATH"], "--help"], capture_output=True, text=True,
                         timeout=60).stdout
    for flag in ("ngram-specdec", "--spec-ngram-specdec-n-max", "--spec-ngram-specdec-n-min",
                 "--spec-ngram-specdec-adaptive", "--spec-ngram-specdec-shared",
                 "--spec-ngram-specdec-shared-mb"):
        assert flag in out, flag


def test_ngram_specdec_greedy_equal_to_plain_alone_and_chained():
    # Greedy output is plain greedy's with ngram-specdec alone and chained before the draft model
    # (the n-gram draft where the slot's text has a match, the draft model where it has none),
    # over requests that repeat their prompt and requests that do not, two slots at once.
    prompts = [REPEAT, PROMPT, PROMPT + " was happy", "Once upon a time"]
    reqs = [{"prompt": p, "temperature": 0.0, "n_predict": 48} for p in prompts]
    plain = [r["tokens"] for r in run_on(make_server(draft=None), reqs)]
    for types, draft in (("ngram-specdec", None), ("ngram-specdec,draft-simple", DRAFT)):
        res = run_on(ngram_server(types, draft), reqs)
        assert [r["tokens"] for r in res] == plain, types
        drafted, kept = drafts(res)
        assert drafted > 0 and kept > 0, (types, drafted, kept)


def test_policy_plans_ngram_specdec_alone_at_auto():
    # ngram-specdec alone at the default draft length: the speed policy plans its K (its drafts
    # cost nothing); a number given, or a chain with the draft model, leaves it off.
    for types, draft, env, on in (("ngram-specdec", None, {}, True),
                                  ("ngram-specdec", None, {"LLAMA_ARG_SPEC_DRAFT_N_MAX": "5"}, False),
                                  ("ngram-specdec,draft-simple", DRAFT, {}, False)):
        s = ngram_server(types, draft)
        s.spec_draft_n_max = None
        start(s, **env)
        try:
            assert slot_info(s)[0]["specdec"]["policy"] is on, (types, env)
        finally:
            s.stop()


def test_ngram_specdec_bad_values_refused_at_start_up():
    for env in ({"LLAMA_ARG_SPEC_NGRAM_SPECDEC_N_MIN": "0"}, {"LLAMA_ARG_SPEC_NGRAM_SPECDEC_N_MAX": "0"},
                {"LLAMA_ARG_SPEC_NGRAM_SPECDEC_SHARED_MB": "0"}, {"LLAMA_ARG_SPEC_NGRAM_SPECDEC_ADAPTIVE": "-1"}):
        s = ngram_server()
        with pytest.raises(RuntimeError):  # the server refuses to start
            start(s, **env)
        s.stop()


def test_ngram_specdec_no_request_text_reaches_another_requests_drafts():
    # The same greedy request twice on one slot. Without the cross-request cache the second
    # request drafts from its own text only, which is the first's, so it drafts and keeps exactly
    # as many tokens; with --spec-ngram-specdec-shared it also reads the first request's output
    # and keeps more (the control: the test sees a draft that reads another request's text).
    # (A fixed draft length: the speed policy would plan the second request from the first's.)
    req = {"prompt": PROMPT, "temperature": 0.0, "n_predict": 64}
    fixed = {"LLAMA_ARG_SPEC_DRAFT_N_MAX": "16"}
    off = run_on(ngram_server(slots=1), [req, req], **fixed)
    assert off[0]["tokens"] == off[1]["tokens"]
    assert drafts(off[:1]) == drafts(off[1:])
    on = run_on(ngram_server(slots=1), [req, req], LLAMA_ARG_SPEC_NGRAM_SPECDEC_SHARED="1", **fixed)
    assert [r["tokens"] for r in on] == [r["tokens"] for r in off]
    assert drafts(on[:1]) == drafts(off[:1])
    assert drafts(on[1:])[1] > drafts(off[1:])[1], (drafts(on[1:]), drafts(off[1:]))


def test_policy_with_n_min_above_its_k():
    # --spec-draft-n-min 12 with the policy: its cap rises to 12 and it plans K = 0 or K = 12 (a K
    # between 1 and 11 would be dropped by llama.cpp). Its first steps draft the cap, so the first
    # request drafts; later ones draft where the policy predicts a gain (on stories260K with its Q8_0
    # copy as the draft, drafting costs about what it saves, so K = 0 is a fair answer there).
    s = make_server(n_max=None)
    start(s, LLAMA_ARG_SPEC_DRAFT_N_MIN="12")
    bodies = [complete(s, temperature=0.0, n_predict=64) for _ in range(4)]
    s.stop()
    first = bodies[0]["timings"]
    assert first.get("draft_n", 0) >= 12 and first.get("draft_n_accepted", 0) > 0
    for b in bodies:
        assert b["timings"].get("draft_n", 0) % 12 == 0  # every draft is 12 long


# --- under load: unseeded T = 0.8 with cancellations and a context shift -----------------------------


def test_unseeded_load_with_cancellations_and_context_shift():
    s = make_server(n_max=None, slots=4)
    s.n_ctx = 4 * 160  # 160 tokens a slot
    s.enable_ctx_shift = True
    start(s)
    errors: list[str] = []
    counts = {"done": 0, "cancelled": 0, "shifted": 0}
    lock = threading.Lock()

    def worker(i: int):
        try:
            body = {"prompt": PROMPT, "seed": -1, "temperature": 0.8, "n_predict": 240 if i % 4 == 0 else 48,
                    "stream": True, "cache_prompt": i % 2 == 0}
            with requests.post(s.make_url("/completion"), json=body, stream=True, timeout=120) as r:
                if r.status_code != 200:
                    raise RuntimeError(f"status {r.status_code}: {r.text[:200]}")
                n = 0
                for line in r.iter_lines():
                    if not line.startswith(b"data: "):
                        continue
                    n += 1
                    if i % 3 == 1 and n == 6:  # the client goes away mid-generation
                        with lock:
                            counts["cancelled"] += 1
                        return
                    chunk = json.loads(line[6:])
                    if chunk.get("stop"):
                        with lock:
                            counts["done"] += 1
                            if chunk.get("tokens_predicted", 0) > 160:
                                counts["shifted"] += 1
                        return
            raise RuntimeError("stream ended without a final chunk")
        except Exception as e:  # noqa: BLE001 - reported below
            with lock:
                errors.append(f"request {i}: {e}")

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(24)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=180)
    assert not errors, errors
    assert counts["cancelled"] == 8
    assert counts["done"] == 16
    assert counts["shifted"] > 0  # a 240-token answer in a 160-token slot: the context shifted
    deadline = time.time() + 10
    while any(x["is_processing"] for x in slot_info(s)) and time.time() < deadline:
        time.sleep(0.1)
    assert not any(x["is_processing"] for x in slot_info(s))  # no slot lost
    # The server still gives plain greedy output afterwards.
    after = complete(s, temperature=0.0, n_predict=32)
    s.stop()
    [plain] = run_on(make_server(draft=None), [dict(temperature=0.0, n_predict=32)])
    assert after["tokens"] == plain["tokens"]

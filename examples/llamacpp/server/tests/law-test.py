#!/usr/bin/python3
"""examples/llamacpp/server/tests/law-test.py: the law of llama-server's tokens with specdec's drafts.

Run by law-test.sh (which starts the six servers); by hand, every option below is required:

  --draft-url           PATCHED, with a draft model that differs from the target (a cut-layer
                        draft: rejections and residual draws must happen): -np 4, `-md DRAFT
                        --spec-type draft-simple --spec-draft-n-max K --spec-draft-p-min 0 -lv 4`,
                        and in its environment LLAMA_ARG_SPEC_SEEDED=coupled and LLAMA_TRACE=1, its log
                        in --draft-log (the "accepted a/L draft tokens" line of every verification
                        step shows which positions were drafted; -lv 4, each request's rule)
  --nodraft-url         PATCHED, no draft, LLAMA_ARG_SPEC_SEEDED=coupled
  --stock-url           STOCK llama-server (the same llama.cpp without specdec), no draft: its own
                        sampling is the reference law
  --stock-draft-url     STOCK with the same draft options
  --seeded-draft-url    PATCHED with the draft, no LLAMA_ARG_SPEC_SEEDED (the default rule for a seed)
  --seeded-nodraft-url  PATCHED, no draft, no LLAMA_ARG_SPEC_SEEDED

Checks (each one's verdict is printed; exit 0 only if all pass):

1. Law under drafts. For a fixed prompt, N unseeded requests (n_predict 6) to the patched server
   with the draft and N to the stock server without one, at three settings:
     t1:       temperature 1, top-k 0, top-p 1, min-p 0, no penalty
     defaults: llama.cpp's defaults: temperature 0.8, top-k 40, top-p 0.95, min-p 0.05, and a
               repeat penalty of 1.1 over the last 64 tokens
     grammar:  the defaults with a GBNF grammar forbidding spaces (most likely tokens start with one):
               stock draws from the chain and redraws under the grammar only when its draw is
               invalid, and that law, not the grammar-first chain's, is what the patched server
               must give
   An unseeded request is verified by rejection sampling with the draft's q (the log's
   "specdec rule: rejection" for every one of them is checked). The features
   compared, each by a two-sample chi-square test of homogeneity (cells whose pooled count is
   under 10 merged into one): the token at positions 0, 1, 2, 3 and the joint of the tokens at
   positions 1 and 2 (an absent token, after an end of generation, is a category of its own).
   The family's p-value is Bonferroni's (5 x the smallest); the check passes when it is above
   --alpha (default 0.001). Position 0 is never drafted (llama-server samples the first token
   from the prompt's batch): it checks the harness itself. Positions 1..3 must each have been
   proposed by the draft in EVERY request (read from the log; with n_predict 6 and K 4 the
   server's schedule drafts positions 1..4 whatever is rejected; a draft shorter than that
   schedule, e.g. ended early, is counted and printed), and the acceptance
   (timings.draft_n_accepted / draft_n, summed) must be above 0 and well below 1
   (<= --max-acceptance, default 0.8).
   N (--n) defaults to 10000 a sample: 70000 requests, about 160 s on 2 idle cores (about 460
   requests a second over the two servers); at that N the stock server at temperature 1.05
   against the patched one at 1.0 gives a family p of about 0.003, so distortions of a token's
   probability by 5 to 10% are at the edge of what is seen, larger ones are rejected.
2. A biased control: the same test, the same N, patched at temperature 1 against stock at
   temperature --control-temp (default 1.3): it must be rejected (family p <= alpha), or the
   test has no power.
3. Same seed, same tokens: --seeds seeds (default 20), at temperature 0.8 (the defaults above)
   and 1.0 (t1 above), n_predict 32, return_tokens, cache_prompt off, each server's requests one
   at a time. With LLAMA_ARG_SPEC_SEEDED=coupled (coupled draws keyed by seed and output index) the patched
   server without and with the draft must return identical token lists, the draft must have had
   tokens kept, and the tokens must not all be stock's (else the variable was not seen).
3b. The default rule for a seed (since the patch series' seeded requests keep llama.cpp's own
   stream): the patched server's tokens must be stock's, without a draft and with the draft
   (patched+draft against stock+draft). Stock with against without the draft is printed for
   reference only: llama.cpp's rows differ in the last bits between a batch of a draft and one
   token, so its own draws there can differ (seen: about 5% of such requests at n_predict 32).

4. With --ngram-url (law-test.sh starts that server): the law under ngram-specdec's drafts, which
   are deterministic (verified with a one-hot q), at t1 on a prompt that repeats itself
   (--ngram-prompt) so that the slot's own text has matches, against the stock server on the same
   prompt: the same features and family test as 1, every request verified by rejection, and each
   position 1..3 drafted in at least half of the requests (an n-gram draft depends on the tokens
   drawn, so there is no schedule to check).

Needs only Debian's python3-requests; the chi-square p-value is computed here (the regularized
upper incomplete gamma function), checked against tabulated quantiles at start.
"""

from __future__ import annotations

import argparse
import collections
import json
import math
import random
import re
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import requests

T1 = {"temperature": 1.0, "top_k": 0, "top_p": 1.0, "min_p": 0.0, "repeat_penalty": 1.0}
DEFAULTS = {"temperature": 0.8, "top_k": 40, "top_p": 0.95, "min_p": 0.05,
            "repeat_penalty": 1.1, "repeat_last_n": 64}
# No spaces: most of the story model's likely tokens start with one, so the grammar forbids most
# of what the chain draws. At the defaults' truncation stock llama-server's law is the chain's
# draw where it is valid and the grammar's redraw otherwise, which is not the grammar-first
# chain's law (stock_row.hpp): the truncations among all tokens and among the valid ones differ.
GRAMMAR = dict(DEFAULTS, grammar="root ::= [^ ]*\n")
COMMON = {"typical_p": 1.0, "dry_multiplier": 0.0, "xtc_probability": 0.0,
          "presence_penalty": 0.0, "frequency_penalty": 0.0, "mirostat": 0, "n_probs": 0,
          "return_tokens": True, "stream": False, "cache_prompt": True}
N_PREDICT = 6            # positions 0..5; with K 4 the drafts propose positions 1..4
TESTED_POSITIONS = (0, 1, 2, 3)
DRAFTED_POSITIONS = (1, 2, 3)   # the tested positions a draft must have proposed
MIN_POOLED = 10
# [4]'s prompt repeats itself, so that most requests draft positions 1..3 from the slot's own text
NGRAM_PROMPT = ("Once upon a time, there was a little girl named Lily. "
                "Once upon a time, there was a little girl named Lily. Once upon a")
NGRAM_MIN_SHARE = 0.5    # [4]: each tested position drafted in at least this share of requests


# ---------------------------------------------------------------- chi-square
def _gamma_p_series(a: float, x: float) -> float:
    term = total = 1.0 / a
    ap = a
    for _ in range(100000):
        ap += 1.0
        term *= x / ap
        total += term
        if abs(term) < abs(total) * 1e-16:
            break
    return total * math.exp(-x + a * math.log(x) - math.lgamma(a))


def _gamma_q_fraction(a: float, x: float) -> float:
    tiny = 1e-300
    b = x + 1.0 - a
    c = 1.0 / tiny
    d = 1.0 / b
    h = d
    for i in range(1, 100000):
        an = -i * (i - a)
        b += 2.0
        d = an * d + b
        d = tiny if abs(d) < tiny else d
        c = b + an / c
        c = tiny if abs(c) < tiny else c
        d = 1.0 / d
        delta = d * c
        h *= delta
        if abs(delta - 1.0) < 1e-16:
            break
    return math.exp(-x + a * math.log(x) - math.lgamma(a)) * h


def gamma_q(a: float, x: float) -> float:
    """The regularized upper incomplete gamma function Q(a, x) = Gamma(a, x) / Gamma(a)."""
    if x <= 0.0:
        return 1.0
    if x < a + 1.0:
        return max(0.0, 1.0 - _gamma_p_series(a, x))
    return _gamma_q_fraction(a, x)


def chi2_sf(x: float, df: int) -> float:
    return gamma_q(df / 2.0, x / 2.0) if df > 0 else 1.0


def self_check_chi2() -> None:
    # tabulated 95% and 99.9% quantiles of the chi-square law
    for x, df, p in ((3.841458820694124, 1, 0.05), (18.307038053275146, 10, 0.05),
                     (124.34211340400407, 100, 0.05), (10.827566170662733, 1, 0.001),
                     (29.588298445074418, 10, 0.001), (149.44925277903877, 100, 0.001)):
        got = chi2_sf(x, df)
        if abs(got - p) > 1e-7 * max(1.0, p * 1e4):
            raise SystemExit(f"law-test: chi2_sf({x}, {df}) = {got}, expected {p}")


def chi2_two_sample(xs: list, ys: list) -> tuple[float, int, float, int]:
    """Two-sample chi-square test of homogeneity: (statistic, df, p-value, cells)."""
    cx, cy = collections.Counter(xs), collections.Counter(ys)
    pooled = cx + cy
    kept = sorted((c for c in pooled if pooled[c] >= MIN_POOLED), key=lambda c: -pooled[c])
    cells = [[cx[c], cy[c]] for c in kept]
    rest = [sum(cx[c] for c in pooled if pooled[c] < MIN_POOLED),
            sum(cy[c] for c in pooled if pooled[c] < MIN_POOLED)]
    if sum(rest) >= MIN_POOLED or (sum(rest) > 0 and not cells):
        cells.append(rest)
    elif sum(rest) > 0:
        cells[-1][0] += rest[0]   # too few for a cell of their own: into the smallest kept cell
        cells[-1][1] += rest[1]
    nx, ny = len(xs), len(ys)
    if len(cells) < 2:
        return 0.0, 0, 1.0, len(cells)
    stat = 0.0
    for ox, oy in cells:
        total = ox + oy
        ex, ey = total * nx / (nx + ny), total * ny / (nx + ny)
        stat += (ox - ex) ** 2 / ex + (oy - ey) ** 2 / ey
    df = len(cells) - 1
    return stat, df, chi2_sf(stat, df), len(cells)


def features(samples: list[list[int]]) -> dict[str, list]:
    def at(tokens, p):
        return tokens[p] if p < len(tokens) else -1   # -1: generation had ended
    out = {f"pos{p}": [at(t, p) for t in samples] for p in TESTED_POSITIONS}
    out["pos1+2"] = [(at(t, 1), at(t, 2)) for t in samples]
    return out


def compare(a: list[list[int]], b: list[list[int]]) -> dict:
    fa, fb = features(a), features(b)
    rows = {}
    for name in fa:
        stat, df, p, cells = chi2_two_sample(fa[name], fb[name])
        rows[name] = {"chi2": stat, "df": df, "p": p, "cells": cells}
    family = min(1.0, len(rows) * min(r["p"] for r in rows.values()))
    return {"features": rows, "family_p": family}


def show(label: str, res: dict) -> None:
    parts = ", ".join(f"{k} p={v['p']:.3g} (chi2 {v['chi2']:.1f}, df {v['df']})"
                      for k, v in res["features"].items())
    print(f"  {label}: family p = {res['family_p']:.3g}; {parts}")


# ---------------------------------------------------------------- requests
class Client:
    def __init__(self, timeout: float):
        self.local = threading.local()
        self.timeout = timeout

    def completion(self, url: str, body: dict) -> dict:
        sessions = getattr(self.local, "sessions", None)
        if sessions is None:
            sessions = self.local.sessions = {}
        s = sessions.get(url)
        if s is None:
            s = sessions[url] = requests.Session()
        r = s.post(url + "/completion", json=body, timeout=self.timeout)
        if r.status_code != 200:
            raise RuntimeError(f"{url}: HTTP {r.status_code}: {r.text[:300]}")
        j = r.json()
        if "tokens" not in j:
            raise RuntimeError(f"{url}: no tokens in the answer: {str(j)[:300]}")
        return j


def run_jobs(client: Client, jobs: list[tuple[str, dict]], workers: int) -> list[dict]:
    with ThreadPoolExecutor(workers) as ex:
        return list(ex.map(lambda job: client.completion(*job), jobs))


# ---------------------------------------------------------------- the draft server's log
STEP = re.compile(r"\| task (\d+) \| accepted\s+(\d+)/\s*(\d+) draft tokens")
EVAL = re.compile(r"\| task (\d+) \|\s+eval time =\s+[-\d.]+ ms /\s+(\d+) tokens")
RULE = re.compile(r"launch_slot_: id\s+(\d+) \| task -1 \| specdec rule: (\S+)")
LAUNCH = re.compile(r"launch_slot_: id\s+(\d+) \| task (\d+) \| processing task")


def read_log(path: str) -> tuple[dict, dict, dict]:
    """Per task: its verification steps (accepted, drafted), its generated tokens, its rule (the
    trace-level "specdec rule" line of the slot launched next with that task)."""
    steps: dict[int, list[tuple[int, int]]] = collections.defaultdict(list)
    n_gen: dict[int, int] = {}
    rules: dict[int, str] = {}
    pending: dict[int, str] = {}
    with open(path, errors="replace") as f:
        for line in f:
            if "task" not in line:
                continue
            m = STEP.search(line)
            if m:
                steps[int(m.group(1))].append((int(m.group(2)), int(m.group(3))))
                continue
            m = EVAL.search(line)
            if m:
                n_gen[int(m.group(1))] = int(m.group(2))
                continue
            m = RULE.search(line)
            if m:
                pending[int(m.group(1))] = m.group(2)
                continue
            m = LAUNCH.search(line)
            if m:
                rules[int(m.group(2))] = pending.pop(int(m.group(1)), "?")
    return steps, n_gen, rules


def coverage(path: str, n_tasks: int, k: int, wait_s: float = 10.0) -> dict:
    """Per task: the positions its drafts proposed (each tested position must be one), and the
    drafts shorter than the server's schedule says (min(K, n_predict - generated - 1)); drafts
    proposed and kept per position."""
    deadline = time.time() + wait_s
    while True:
        steps, n_gen, rules = read_log(path)
        if len(n_gen) >= n_tasks or time.time() > deadline:
            break
        time.sleep(0.2)   # the server's log is written by a thread of its own
    res = {"tasks": len(n_gen), "rules": collections.Counter(rules.get(t, "?") for t in n_gen),
           "steps": 0, "short_drafts": 0, "uncovered": 0,
           "proposed": collections.Counter(), "accepted": collections.Counter(),
           "requests_drafting": collections.Counter(), "bad": []}
    for task, n in n_gen.items():
        gen, drafted = 1, set()
        for a, length in steps.get(task, []):
            res["steps"] += 1
            if length != min(k, N_PREDICT - gen - 1):
                res["short_drafts"] += 1
                if len(res["bad"]) < 5:
                    res["bad"].append(f"task {task}: steps {steps.get(task)}, {n} tokens")
            for p in range(gen, gen + length):
                drafted.add(p)
                res["proposed"][p] += 1
            for p in range(gen, gen + a):
                res["accepted"][p] += 1
            gen += a + 1
        res["requests_drafting"].update(drafted)
        missing = [p for p in DRAFTED_POSITIONS if p < n and p not in drafted]
        if missing:
            res["uncovered"] += 1
            if len(res["bad"]) < 5:
                res["bad"].append(f"task {task}: positions {missing} not drafted; steps {steps.get(task)}")
    return res


def check_ngram(args, tokens: dict, drafts: dict, report: dict, failures: list[str]) -> None:
    """[4] The law under ngram-specdec's drafts (deterministic, verified with a one-hot q) at
    temperature 1, on a prompt that repeats itself so that the slot's own text has matches: the
    same features and family test as [1] against the reference, every unseeded request verified
    by rejection, and each tested position 1..3 drafted in at least NGRAM_MIN_SHARE of the
    requests (n-gram drafts depend on the tokens drawn: there is no fixed schedule)."""
    n = len(tokens["ngram/t1"])
    cov = coverage(args.ngram_log, n, args.k)
    share = {p: cov["requests_drafting"][p] / max(1, cov["tasks"]) for p in DRAFTED_POSITIONS}
    n_draft, n_acc = drafts["ngram/t1"]
    acc = n_acc / n_draft if n_draft else 0.0
    res = compare(tokens["ngram/t1"], tokens["stock/ngram-t1"])
    res.update(draft_n=n_draft, draft_n_accepted=n_acc, acceptance=acc,
               drafted_share={str(p): v for p, v in share.items()}, rules=dict(cov["rules"]))
    report["ngram"] = res
    verdict = "PASS" if res["family_p"] > args.alpha else "FAIL"
    print(f"[4] law under ngram-specdec's drafts, t1, prompt {args.ngram_prompt!r}: {verdict}: "
          f"acceptance {acc:.3f} ({n_acc}/{n_draft}); requests drafting position "
          + ", ".join(f"{p}: {v:.0%}" for p, v in share.items()))
    show("patched+ngram vs stock", res)
    if res["family_p"] <= args.alpha:
        failures.append(f"law (ngram): family p {res['family_p']:.3g} <= {args.alpha}")
    if cov["rules"].get("rejection", 0) != cov["tasks"] or cov["tasks"] != n:
        failures.append(f"ngram: {cov['tasks']} requests in its log (of {n}), rules {dict(cov['rules'])}")
    if min(share.values()) < NGRAM_MIN_SHARE:
        failures.append(f"ngram: a tested position was drafted in under {NGRAM_MIN_SHARE:.0%} of requests")
    if not 0 < acc <= args.max_acceptance:
        failures.append(f"law (ngram): acceptance {acc:.3f} not in (0, {args.max_acceptance}]")


# ---------------------------------------------------------------- main
def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--draft-url", required=True)
    ap.add_argument("--nodraft-url", required=True)
    ap.add_argument("--stock-url", required=True)
    ap.add_argument("--stock-draft-url", required=True)
    ap.add_argument("--seeded-nodraft-url", required=True)
    ap.add_argument("--seeded-draft-url", required=True)
    ap.add_argument("--draft-log", required=True)
    ap.add_argument("--n", type=int, default=10000, help="requests per sample (default 10000)")
    ap.add_argument("--alpha", type=float, default=0.001)
    ap.add_argument("--control-temp", type=float, default=1.3)
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--k", type=int, default=4, help="the draft server's --spec-draft-n-max")
    ap.add_argument("--prompt", default="The")
    ap.add_argument("--max-acceptance", type=float, default=0.8)
    ap.add_argument("--workers", type=int, default=8)
    ap.add_argument("--timeout", type=float, default=60.0, help="seconds per request")
    ap.add_argument("--json", help="write the results here")
    ap.add_argument("--ngram-url", help="PATCHED with --spec-type ngram-specdec (traced, -lv 4): check [4]")
    ap.add_argument("--ngram-log", help="that server's log")
    ap.add_argument("--ngram-prompt", default=NGRAM_PROMPT)
    args = ap.parse_args()
    if bool(args.ngram_url) != bool(args.ngram_log):
        ap.error("--ngram-url and --ngram-log go together")
    if not 1 <= args.k <= N_PREDICT - 2:
        ap.error(f"--k must be in 1..{N_PREDICT - 2}")
    self_check_chi2()
    t_start = time.time()
    client = Client(args.timeout)
    failures: list[str] = []
    report: dict = {"n": args.n, "alpha": args.alpha, "prompt": args.prompt, "k": args.k}

    # ---- checks 1 and 2: one pool of interleaved requests
    def body(setting: dict, **extra) -> dict:
        return {"prompt": args.prompt, "n_predict": N_PREDICT, **COMMON, **setting, **extra}
    control = dict(T1, temperature=args.control_temp)
    samples = {  # name -> (url, body)
        "draft/t1": (args.draft_url, body(T1)),
        "stock/t1": (args.stock_url, body(T1)),
        "draft/defaults": (args.draft_url, body(DEFAULTS)),
        "stock/defaults": (args.stock_url, body(DEFAULTS)),
        "draft/grammar": (args.draft_url, body(GRAMMAR)),
        "stock/grammar": (args.stock_url, body(GRAMMAR)),
        "stock/control": (args.stock_url, body(control)),
    }
    if args.ngram_url:  # check [4]: n-gram drafts, on a prompt that repeats itself
        samples["ngram/t1"] = (args.ngram_url, body(T1, prompt=args.ngram_prompt))
        samples["stock/ngram-t1"] = (args.stock_url, body(T1, prompt=args.ngram_prompt))
    jobs = [name for name in samples for _ in range(args.n)]
    random.Random(12345).shuffle(jobs)   # interleaved: the samples are drawn over the same time
    t0 = time.time()
    answers = run_jobs(client, [samples[name] for name in jobs], args.workers)
    t_law = time.time() - t0
    tokens: dict[str, list[list[int]]] = collections.defaultdict(list)
    drafts: dict[str, list[int]] = collections.defaultdict(lambda: [0, 0])
    for name, ans in zip(jobs, answers):
        tokens[name].append(ans["tokens"])
        if name.startswith(("draft/", "ngram/")):
            timings = ans.get("timings", {})
            drafts[name][0] += int(timings.get("draft_n", 0))
            drafts[name][1] += int(timings.get("draft_n_accepted", 0))
    print(f"law-test: {len(jobs)} requests ({args.n} a sample, prompt {args.prompt!r}, n_predict "
          f"{N_PREDICT}) in {t_law:.1f} s ({len(jobs) / t_law:.0f}/s)")

    n_draft_samples = sum(1 for name in samples if name.startswith("draft/"))
    cov = coverage(args.draft_log, n_draft_samples * args.n, args.k)
    per_pos = ", ".join(f"{p}: {cov['accepted'][p]}/{cov['proposed'][p]}"
                        for p in sorted(cov["proposed"]))
    print(f"  draft server log: {cov['tasks']} requests, {cov['steps']} verification steps, "
          f"{cov['short_drafts']} drafts off the schedule, {cov['uncovered']} requests with a tested "
          f"position (1..3) not drafted; accepted/proposed by position: {per_pos}")
    print(f"  rules of those requests (the trace log): {dict(cov['rules'])}")
    for line in cov["bad"]:
        print(f"    {line}")
    if cov["rules"].get("rejection", 0) != cov["tasks"]:
        failures.append("not every unseeded request was verified by specdec's rejection rule"
                        " (was the server started with -lv 4?)")
    if cov["tasks"] != n_draft_samples * args.n:
        failures.append(f"the draft server's log shows {cov['tasks']} requests, not {n_draft_samples * args.n}"
                        " (was it started with LLAMA_TRACE=1 and its log in --draft-log?)")
    if cov["uncovered"]:
        failures.append("drafts did not cover every tested position in every request")
    if cov["short_drafts"]:   # the law check stands; the server's schedule is not what K 4 says
        print(f"  note: {cov['short_drafts']} drafts were not min(K, n_predict - generated - 1) long")
    report["coverage"] = {k: (dict(v) if isinstance(v, collections.Counter) else v) for k, v in cov.items()}

    report["law"] = {}
    for setting in ("t1", "defaults", "grammar"):
        n_draft, n_acc = drafts[f"draft/{setting}"]
        acc = n_acc / n_draft if n_draft else 0.0
        res = compare(tokens[f"draft/{setting}"], tokens[f"stock/{setting}"])
        res.update(draft_n=n_draft, draft_n_accepted=n_acc, acceptance=acc)
        report["law"][setting] = res
        verdict = "PASS" if res["family_p"] > args.alpha else "FAIL"
        print(f"[1] law under drafts, {setting}: {verdict}: acceptance {acc:.3f} "
              f"({n_acc}/{n_draft} draft tokens)")
        show("patched+draft vs stock", res)
        if res["family_p"] <= args.alpha:
            failures.append(f"law ({setting}): family p {res['family_p']:.3g} <= {args.alpha}")
        if not 0 < acc <= args.max_acceptance:
            failures.append(f"law ({setting}): acceptance {acc:.3f} not in (0, {args.max_acceptance}]")

    if args.ngram_url:
        check_ngram(args, tokens, drafts, report, failures)

    ctl = compare(tokens["draft/t1"], tokens["stock/control"])
    report["control"] = ctl
    verdict = "PASS (rejected)" if ctl["family_p"] <= args.alpha else "FAIL (not rejected: no power)"
    print(f"[2] biased control, patched T 1.0 vs stock T {args.control_temp}: {verdict}")
    show("patched+draft vs stock (biased)", ctl)
    if ctl["family_p"] > args.alpha:
        failures.append(f"control: family p {ctl['family_p']:.3g} > {args.alpha}: the test has no power")

    # ---- check 3: same seed, same tokens (each server's requests one at a time: a slot's logits
    # depend on what shares its batch, so concurrency would perturb the comparison)
    seeded = []
    for setting_name, setting in (("T0.8", DEFAULTS), ("T1.0", T1)):
        for i in range(args.seeds):
            seed = 1000 + 7919 * i
            seeded.append((setting_name, seed, {"prompt": args.prompt, "n_predict": 32, **COMMON,
                                                **setting, "seed": seed, "cache_prompt": False}))
    urls = {"coupled": args.nodraft_url, "coupled+draft": args.draft_url,
            "stock": args.stock_url, "stock+draft": args.stock_draft_url,
            "default": args.seeded_nodraft_url, "default+draft": args.seeded_draft_url}
    with ThreadPoolExecutor(len(urls)) as ex:
        futures = {name: ex.submit(lambda u: [client.completion(u, b) for _, _, b in seeded], url)
                   for name, url in urls.items()}
        out = {name: f.result() for name, f in futures.items()}

    def differ(a: str, b: str) -> list[str]:
        res = []
        for (setting_name, seed, _), x, y in zip(seeded, out[a], out[b]):
            if x["tokens"] != y["tokens"]:
                first = next((i for i, (u, v) in enumerate(zip(x["tokens"], y["tokens"])) if u != v),
                             min(len(x["tokens"]), len(y["tokens"])))
                res.append(f"{setting_name} seed {seed}: first difference at token {first}")
        return res

    def drafted(name: str) -> tuple[int, int]:
        return (sum(int(a.get("timings", {}).get("draft_n", 0)) for a in out[name]),
                sum(int(a.get("timings", {}).get("draft_n_accepted", 0)) for a in out[name]))

    n_seeded = len(seeded)
    coupled_mm = differ("coupled", "coupled+draft")
    c_draft, c_acc = drafted("coupled+draft")
    coupled_is_stock = n_seeded - len(differ("coupled", "stock"))
    ok3 = not coupled_mm and c_acc > 0 and coupled_is_stock < n_seeded
    print(f"[3] same seed, same tokens (LLAMA_ARG_SPEC_SEEDED=coupled): {'PASS' if ok3 else 'FAIL'}: "
          f"{n_seeded} seeded requests (T 0.8 and 1.0, {args.seeds} seeds, n_predict 32), "
          f"{len(coupled_mm)} differ with the draft; acceptance {c_acc}/{c_draft}; "
          f"{coupled_is_stock}/{n_seeded} equal stock's tokens (coupled draws are not llama.cpp's)")
    for m in coupled_mm[:10]:
        print(f"    {m}")
    if coupled_mm:
        failures.append(f"seeded (coupled): {len(coupled_mm)} of {n_seeded} requests differ with the draft")
    if c_acc == 0:
        failures.append("seeded (coupled): no draft token was kept")
    if coupled_is_stock == n_seeded:
        failures.append("seeded (coupled): every answer is stock's: was LLAMA_ARG_SPEC_SEEDED=coupled set?")

    # the default for a seed: llama.cpp's own draws, stock llama-server's tokens
    plain_mm = differ("default", "stock")
    draft_mm = differ("default+draft", "stock+draft")
    d_draft, d_acc = drafted("default+draft")
    stock_mm = differ("stock", "stock+draft")
    ok3b = not plain_mm and not draft_mm and d_draft > 0
    print(f"[3b] same seed, stock's tokens (default rule): {'PASS' if ok3b else 'FAIL'}: "
          f"patched vs stock {len(plain_mm)}/{n_seeded} differ, patched+draft vs stock+draft "
          f"{len(draft_mm)}/{n_seeded} differ (acceptance {d_acc}/{d_draft}); for reference, stock "
          f"with vs without the draft: {len(stock_mm)}/{n_seeded} differ (llama.cpp's own rule)")
    for m in (plain_mm + draft_mm)[:10]:
        print(f"    {m}")
    if plain_mm or draft_mm:
        failures.append(f"seeded (default): {len(plain_mm) + len(draft_mm)} answers differ from stock's")
    if d_draft == 0:
        failures.append("seeded (default): the draft server drafted nothing")
    report["seeded"] = {"requests": n_seeded, "coupled_mismatches": coupled_mm,
                        "coupled_draft_n": c_draft, "coupled_draft_n_accepted": c_acc,
                        "coupled_equal_stock": coupled_is_stock,
                        "default_vs_stock": plain_mm, "default_draft_vs_stock_draft": draft_mm,
                        "stock_vs_stock_draft": stock_mm}

    elapsed = time.time() - t_start
    report.update(runtime_s=elapsed, failures=failures)
    if args.json:
        with open(args.json, "w") as f:
            json.dump(report, f, indent=1, default=str)
    law = report["law"]
    print(f"law-test: N={args.n} a sample, alpha {args.alpha}: law p t1 {law['t1']['family_p']:.3g} "
          f"(acceptance {law['t1']['acceptance']:.3f}), defaults {law['defaults']['family_p']:.3g} "
          f"(acceptance {law['defaults']['acceptance']:.3f}), grammar {law['grammar']['family_p']:.3g} "
          f"(acceptance {law['grammar']['acceptance']:.3f}); control p {ctl['family_p']:.3g}; "
          + (f"ngram {report['ngram']['family_p']:.3g} (acceptance {report['ngram']['acceptance']:.3f}); "
             if "ngram" in report else "")
          + f"seeded (coupled) {n_seeded - len(coupled_mm)}/{n_seeded} identical with the draft, "
          f"(default) {2 * n_seeded - len(plain_mm) - len(draft_mm)}/{2 * n_seeded} stock's; "
          f"{elapsed:.0f} s")
    if failures:
        for f in failures:
            print(f"law-test: FAIL: {f}")
        return 1
    print("law-test: PASS")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except (requests.RequestException, RuntimeError, OSError) as e:
        print(f"law-test: error: {e}", file=sys.stderr)
        sys.exit(2)

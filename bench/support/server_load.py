#!/usr/bin/python3
# bench/support/server_load.py URL CLIENTS REQUESTS TEMP [--n-predict N] [--tag TEXT]
#   [--seeds request|none] [--prompts default|stories] [--prompts-file FILE] - the load of bench/llamacpp_server_race.sh: CLIENTS clients, each
# sending /completion requests back to back (stream off) until REQUESTS requests have completed in
# all. Request i (0-based, handed out in order to whichever client is free) is prompt
# PROMPTS[i % len(PROMPTS)] (of the --prompts list, or FILE's JSON list) with seed i (--seeds none: no seed, the server draws one), N tokens
# (default 100) with end of text ignored, at temperature TEMP with top-k 40, top-p 0.95 and
# min-p 0.05 (llama-server's defaults, sent explicitly), so two servers serve the same requests.
#
# Prints one line per request on stdout, tab-separated, after TAG (default empty):
#   request seed prompt status latency_s predicted_n predicted_per_second draft_n draft_n_accepted sha1
# (sha1: of the completion's text, to compare outputs between servers), then one line
#   TAG load wall_s total_predicted_n errors
# where wall_s is the load phase's wall time (first request sent to last answer). Exits 1 when
# every request failed. Needs aiohttp: run by /usr/bin/python3 (Debian's python3-aiohttp).
import argparse
import asyncio
import hashlib
import json
import sys
import time

import aiohttp

PROMPT_SETS = {
    # The default (aidreams260K's race), as before.
    "default": [
        "The machine",
        "I dreamed of",
        "Once upon a time",
        "The old house",
        "She opened the door",
        "In the morning",
    ],
    # stories260K (TinyStories English).
    "stories": [
        "Once upon a time",
        "Lily and Ben",
        "The little dog",
        "One day",
        "Tom had a red ball",
        "The sun was shining",
    ],
}


async def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("url")
    ap.add_argument("clients", type=int)
    ap.add_argument("requests", type=int)
    ap.add_argument("temp", type=float)
    ap.add_argument("--n-predict", type=int, default=100)
    ap.add_argument("--tag", default="")
    ap.add_argument("--seeds", choices=["request", "none"], default="request",
                    help="request: seed i for request i; none: no seed (the server draws one)")
    ap.add_argument("--timeout", type=float, default=900)
    ap.add_argument("--prompts", choices=sorted(PROMPT_SETS), default="default",
                    help="the prompt list: default, or stories (stories260K's race)")
    ap.add_argument("--prompts-file", default="",
                    help="a JSON list of prompts (bench/support/resend_prompts.py makes one), in place of --prompts")
    a = ap.parse_args()
    PROMPTS = PROMPT_SETS[a.prompts]
    if a.prompts_file:
        with open(a.prompts_file) as f:
            PROMPTS = json.load(f)

    next_request = 0
    rows = []
    errors = 0

    async def client(session):
        nonlocal next_request, errors
        while next_request < a.requests:
            i = next_request
            next_request += 1
            body = {
                "prompt": PROMPTS[i % len(PROMPTS)],
                "n_predict": a.n_predict,
                "ignore_eos": True,
                "temperature": a.temp,
                # llama-server's defaults, sent so that the load means the same whatever they are.
                "top_k": 40,
                "top_p": 0.95,
                "min_p": 0.05,
                "stream": False,
            }
            if a.seeds == "request":
                body["seed"] = i
            t0 = time.perf_counter()
            try:
                async with session.post(a.url + "/completion", json=body) as r:
                    status = r.status
                    j = await r.json(content_type=None) if status == 200 else {}
                    if status != 200:
                        print(f"server_load.py: request {i}: HTTP {status}: {(await r.text())[:300]}",
                              file=sys.stderr)
            except Exception as e:  # a failed request is a row too, not the end of the load
                status, j = 0, {}
                print(f"server_load.py: request {i}: {type(e).__name__}: {e}", file=sys.stderr)
            latency = time.perf_counter() - t0
            t = j.get("timings", {})
            if status != 200:
                errors += 1
            rows.append((i, i if a.seeds == "request" else -1, i % len(PROMPTS), status, latency, t.get("predicted_n", j.get("tokens_predicted", 0)),
                         t.get("predicted_per_second", float("nan")), t.get("draft_n", 0),
                         t.get("draft_n_accepted", 0),
                         hashlib.sha1(j.get("content", "").encode()).hexdigest()[:12] if status == 200 else "-"))

    timeout = aiohttp.ClientTimeout(total=a.timeout)
    async with aiohttp.ClientSession(timeout=timeout,
                                     connector=aiohttp.TCPConnector(limit=a.clients)) as session:
        t0 = time.perf_counter()
        await asyncio.gather(*(client(session) for _ in range(a.clients)))
        wall = time.perf_counter() - t0

    prefix = a.tag + "\t" if a.tag else ""
    for row in sorted(rows):
        print(prefix + "\t".join(f"{x:.4f}" if isinstance(x, float) else str(x) for x in row))
    total = sum(r[5] for r in rows if r[3] == 200)
    print(f"{prefix}load\t{wall:.4f}\t{total}\t{errors}")
    return 1 if errors == a.requests else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))

#!/usr/bin/python3
# bench/support/resend_prompts.py URL SET N_ANSWER OUT - the prompts of the n-gram race's
# repeating requests (bench/llamacpp_server_race.sh, PROMPTS=resend): for each base prompt of SET
# (server_load.py's lists), the server at URL answers it greedily with N_ANSWER tokens, and the
# request re-sends the conversation with the model's own answer, then the base prompt again:
# base + answer + "\n\n" + base, as a chat client re-sends a conversation. A model continuing it
# repeats its earlier answer (word for word at temperature 0, in part at 0.8), which an n-gram
# drafter can copy. Writes OUT, the JSON list of these prompts (server_load.py --prompts-file).
# Asked once per model and quantization, before the loads; not timed.
import json
import sys
import urllib.request

sys.path.insert(0, __import__("os").path.dirname(__file__))
from server_load import PROMPT_SETS  # noqa: E402


def answer(url: str, prompt: str, n: int) -> str:
    body = json.dumps({"prompt": prompt, "n_predict": n, "temperature": 0.0, "ignore_eos": True,
                       "cache_prompt": False}).encode()
    req = urllib.request.Request(url + "/completion", data=body, headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)["content"]


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit("usage: resend_prompts.py URL SET N_ANSWER OUT")
    url, name, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    bases = PROMPT_SETS[name]
    repeating = [b + answer(url, b, n) + "\n\n" + b for b in bases]
    with open(out, "w") as f:
        json.dump(repeating, f, indent=1)


if __name__ == "__main__":
    main()

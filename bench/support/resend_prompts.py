#!/usr/bin/python3
# bench/support/resend_prompts.py URL SET N_ANSWER OUT - the prompts of the n-gram race's
# repeating requests (bench/llamacpp_server_race.sh, PROMPTS=resend): for each base prompt of SET
# (server_load.py's lists), the server at URL answers it greedily with N_ANSWER tokens, and the
# request re-sends the conversation with the model's own answer, then the base prompt again, as a
# chat client re-sends a conversation. A model that continues it as it did the first time repeats
# its earlier answer, which an n-gram drafter can copy.
# The prompts are token ids (BOS, the base prompt's tokens, the answer's tokens as the model
# generated them, "\n\n", the base prompt's tokens), not text: a small model generates token
# sequences its tokenizer would not make from the same text (" L" "ily" where the tokenizer says
# " Lily"), and re-sent as text its answer would no longer match its own tokens. Writes OUT, the
# JSON list of these prompts (server_load.py --prompts-file). Asked once per model and
# quantization, before the loads; not timed.
import json
import sys
import urllib.request

sys.path.insert(0, __import__("os").path.dirname(__file__))
from server_load import PROMPT_SETS  # noqa: E402


def post(url: str, path: str, body: dict) -> dict:
    req = urllib.request.Request(url + path, data=json.dumps(body).encode(),
                                 headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(req, timeout=300) as r:
        return json.load(r)


def tokens(url: str, text: str, special: bool) -> list[int]:
    return post(url, "/tokenize", {"content": text, "add_special": special})["tokens"]


def main() -> None:
    if len(sys.argv) != 5:
        sys.exit("usage: resend_prompts.py URL SET N_ANSWER OUT")
    url, name, n, out = sys.argv[1], sys.argv[2], int(sys.argv[3]), sys.argv[4]
    prompts = []
    for base in PROMPT_SETS[name]:
        first = tokens(url, base, True)
        answer = post(url, "/completion", {"prompt": first, "n_predict": n, "temperature": 0.0,
                                           "ignore_eos": True, "cache_prompt": False,
                                           "return_tokens": True})["tokens"]
        prompts.append(first + answer + tokens(url, "\n\n", False) + tokens(url, base, False))
    with open(out, "w") as f:
        json.dump(prompts, f)


if __name__ == "__main__":
    main()

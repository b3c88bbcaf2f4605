"""A STUB of the `wget` Python package, NOT the real one: llama.cpp's tools/server/tests/utils.py
imports `wget` for `download_file`, and Debian does not package it. This harness runs with local
models only (no network), so every download is refused: specdec_local_models.py replaces
`download_file` with a lookup of local files, and this `download` is the backstop that raises.
"""

__version__ = "0.0.0-specdec-stub"
IS_SPECDEC_STUB = True


def download(url, out=None, bar=None):
    raise RuntimeError(f"wget stub: downloads are disabled in this harness (local models only): {url}")

"""Shared by specdec's server tests (run-tests.sh puts this folder on PYTHONPATH)."""

import contextlib
import os


@contextlib.contextmanager
def environment(**values):
    """Sets environment variables (the servers' LLAMA_ARG_ twins) for a server's start, and puts
    back what was there before."""
    old = {k: os.environ.get(k) for k in values}
    os.environ.update({k: str(v) for k, v in values.items()})
    try:
        yield
    finally:
        for k, v in old.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v

"""A STUB of the `openai` Python client, NOT the real package.

Debian does not package `openai`, and the machine that runs llama.cpp's server tests here has no
access to PyPI, so examples/llamacpp/server/tests/specdec_local_models.py puts this module on
sys.path (after every other entry: an installed `openai` wins). It implements only what those
tests use, over plain HTTP with `requests`:

- `OpenAI(api_key=..., base_url=..., timeout=..., default_headers=...)` (api_key and base_url
  also from OPENAI_API_KEY / OPENAI_BASE_URL, as in the real client);
- `client.completions.create(**params)` and `client.chat.completions.create(**params)`: a POST of
  the parameters given (None and NOT_GIVEN left out; `extra_body`, `extra_headers`,
  `extra_query`, `timeout` as in the real client) to `{base_url}/completions` and
  `{base_url}/chat/completions`, with `Authorization: Bearer {api_key}`;
- `stream=True` returns an iterable `Stream` of chunks parsed from the server-sent events
  (`data: {...}` lines up to `data: [DONE]`; an event carrying `error` raises `APIError`);
- responses are attribute-style objects built from the JSON: a key the server did not send
  reads as None (as the real client's optional fields do), `model_dump()` / `to_dict()` give the
  JSON back;
- errors: an HTTP status >= 400 raises the real client's class for it (BadRequestError 400,
  AuthenticationError 401, PermissionDeniedError 403, NotFoundError 404, ConflictError 409,
  UnprocessableEntityError 422, RateLimitError 429, InternalServerError >= 500, else
  APIStatusError) with .status_code, .response and .body; a connection failure raises
  APIConnectionError, a timeout APITimeoutError.

Differences from the real client: no retries (the real one retries connection errors, 408, 409,
429 and 5xx twice), no typed models (no validation of the response's shape), no async client,
and no other resources (models, embeddings, files, ...).
"""

from __future__ import annotations

import json
import os
from typing import Any, Iterator

import requests

__version__ = "0.0.0-specdec-stub"
IS_SPECDEC_STUB = True


class _NotGiven:
    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = _NotGiven()
NotGiven = _NotGiven


# --- errors, named as in the real client ---------------------------------------------------------

class OpenAIError(Exception):
    pass


class APIError(OpenAIError):
    def __init__(self, message: str, request: Any = None, *, body: Any = None) -> None:
        super().__init__(message)
        self.message = message
        self.request = request
        self.body = body
        err = body.get("error") if isinstance(body, dict) else None
        err = err if isinstance(err, dict) else (body if isinstance(body, dict) else {})
        self.code = err.get("code")
        self.param = err.get("param")
        self.type = err.get("type")


class APIConnectionError(APIError):
    def __init__(self, *, message: str = "Connection error.", request: Any = None) -> None:
        super().__init__(message, request, body=None)


class APITimeoutError(APIConnectionError):
    def __init__(self, request: Any = None) -> None:
        super().__init__(message="Request timed out.", request=request)


class APIStatusError(APIError):
    def __init__(self, message: str, *, response: requests.Response, body: Any) -> None:
        super().__init__(message, response.request, body=body)
        self.response = response
        self.status_code = response.status_code


class BadRequestError(APIStatusError):
    pass


class AuthenticationError(APIStatusError):
    pass


class PermissionDeniedError(APIStatusError):
    pass


class NotFoundError(APIStatusError):
    pass


class ConflictError(APIStatusError):
    pass


class UnprocessableEntityError(APIStatusError):
    pass


class RateLimitError(APIStatusError):
    pass


class InternalServerError(APIStatusError):
    pass


_STATUS_ERRORS = {
    400: BadRequestError,
    401: AuthenticationError,
    403: PermissionDeniedError,
    404: NotFoundError,
    409: ConflictError,
    422: UnprocessableEntityError,
    429: RateLimitError,
}


def _status_error(response: requests.Response) -> APIStatusError:
    try:
        body: Any = response.json()
    except ValueError:
        body = response.text
    cls = _STATUS_ERRORS.get(response.status_code)
    if cls is None:
        cls = InternalServerError if response.status_code >= 500 else APIStatusError
    message = f"Error code: {response.status_code} - {body}"
    return cls(message, response=response, body=body)


# --- responses ---------------------------------------------------------------------------------

def _wrap(value: Any) -> Any:
    if isinstance(value, dict):
        return BaseModel(value)
    if isinstance(value, list):
        return [_wrap(v) for v in value]
    return value


class BaseModel:
    """Attribute access to a JSON object; a key the server did not send reads as None."""

    def __init__(self, data: dict) -> None:
        object.__setattr__(self, "_data", data)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _wrap(self._data.get(name))

    def __getitem__(self, key: str) -> Any:
        return _wrap(self._data[key])

    def __contains__(self, key: str) -> bool:
        return key in self._data

    def __eq__(self, other: object) -> bool:
        return isinstance(other, BaseModel) and other._data == self._data

    def __repr__(self) -> str:
        return f"{type(self).__name__}({json.dumps(self._data)})"

    def model_dump(self, **_: Any) -> dict:
        return json.loads(json.dumps(self._data))

    to_dict = model_dump

    def model_dump_json(self, **_: Any) -> str:
        return json.dumps(self._data)

    to_json = model_dump_json


class Stream:
    """The chunks of a `stream=True` request, parsed from its server-sent events."""

    def __init__(self, response: requests.Response) -> None:
        self.response = response
        self._iterator = self._events()

    def _events(self) -> Iterator[BaseModel]:
        try:
            data_lines: list[str] = []
            for raw in self.response.iter_lines(decode_unicode=False):
                line = raw.decode("utf-8")
                if line.startswith("data:"):
                    data_lines.append(line[5:].lstrip(" ") if line[5:6] == " " else line[5:])
                    continue
                if line != "" or not data_lines:
                    continue  # event:, id:, retry:, comments; blank lines between events
                data, data_lines = "\n".join(data_lines), []
                if data.startswith("[DONE]"):
                    break
                chunk = json.loads(data)
                if isinstance(chunk, dict) and chunk.get("error"):
                    err = chunk["error"]
                    message = err.get("message") if isinstance(err, dict) else str(err)
                    raise APIError(message or "An error occurred during streaming", self.response.request, body=chunk)
                yield _wrap(chunk)
            else:
                if data_lines:  # a last event without its blank line
                    data = "\n".join(data_lines)
                    if not data.startswith("[DONE]"):
                        yield _wrap(json.loads(data))
        finally:
            self.response.close()

    def __iter__(self) -> Iterator[BaseModel]:
        return self._iterator

    def __next__(self) -> BaseModel:
        return next(self._iterator)

    def __enter__(self) -> "Stream":
        return self

    def __exit__(self, *_: Any) -> None:
        self.close()

    def close(self) -> None:
        self.response.close()


# --- the client --------------------------------------------------------------------------------

_REQUEST_OPTIONS = ("extra_headers", "extra_query", "extra_body", "timeout")


class _Resource:
    def __init__(self, client: "OpenAI", path: str) -> None:
        self._client = client
        self._path = path

    def create(self, **params: Any) -> Any:
        options = {k: params.pop(k) for k in _REQUEST_OPTIONS if k in params}
        body = {k: v for k, v in params.items() if v is not None and not isinstance(v, _NotGiven)}
        body.update(options.get("extra_body") or {})
        return self._client._post(self._path, body, bool(body.get("stream")), options)


class _Chat:
    def __init__(self, client: "OpenAI") -> None:
        self.completions = _Resource(client, "/chat/completions")


class OpenAI:
    def __init__(self, *, api_key: str | None = None, base_url: str | None = None,
                 timeout: float | None = 600.0, max_retries: int = 2,
                 default_headers: dict | None = None, **_: Any) -> None:
        if api_key is None:
            api_key = os.environ.get("OPENAI_API_KEY")
        if api_key is None:
            raise OpenAIError("The api_key client option must be set either by passing api_key to the client "
                              "or by setting the OPENAI_API_KEY environment variable")
        if base_url is None:
            base_url = os.environ.get("OPENAI_BASE_URL") or "https://api.openai.com/v1"
        self.api_key = api_key
        self.base_url = str(base_url).rstrip("/")
        self.timeout = timeout
        self.max_retries = max_retries  # accepted, not used: the stub never retries
        self.default_headers = dict(default_headers or {})
        self.completions = _Resource(self, "/completions")
        self.chat = _Chat(self)

    def _post(self, path: str, body: dict, stream: bool, options: dict) -> Any:
        headers = {
            "Authorization": f"Bearer {self.api_key}",
            "Content-Type": "application/json",
            "Accept": "text/event-stream" if stream else "application/json",
            **self.default_headers,
            **(options.get("extra_headers") or {}),
        }
        timeout = options.get("timeout", self.timeout)
        try:
            response = requests.post(self.base_url + path, json=body, headers=headers,
                                     params=options.get("extra_query"), stream=stream, timeout=timeout)
        except requests.exceptions.Timeout as e:
            raise APITimeoutError(getattr(e, "request", None)) from e
        except requests.exceptions.RequestException as e:
            raise APIConnectionError(request=getattr(e, "request", None)) from e
        if response.status_code >= 400:
            raise _status_error(response)
        if stream:
            return Stream(response)
        try:
            return _wrap(response.json())
        except ValueError as e:
            raise APIError(f"the response is not JSON: {response.text[:200]!r}", response.request,
                           body=response.text) from e


Client = OpenAI

"""Request hygiene: refuse oversized or hostile bodies before any expensive work.

The checks the envelope (``api.envelope``) applies to every request, with one body
rule per surface (``body_rules``):

- ``/v2`` (and ``/v1``): ``max_inference_request_bytes``;
- ``/api``: ``max_api_body_bytes``, except ``/api/uploads``, whose chunks have
  their own limit (``max_chunk_bytes``).

A declared ``Content-Length`` above the limit is refused at once, before the
application runs and without reading the body. A body streamed without one is
counted as the application reads it and refused as soon as it passes the limit.
JSON bodies (and the JSON header of a binary ``/v2`` request) are checked for
nesting deeper than ``max_json_depth`` once their last byte arrived, before
the application parses them. Refusals: 413 ``payload_too_large``, 400
``json_too_deep``. Compressed bodies are checked by the route after
decompression, under ``max_decompressed_request_bytes``. A body without a
``Content-Type`` is JSON, as FastAPI reads it.

NUL is refused in every string that could reach the database as text
(PostgreSQL cannot store it, and the driver's error was a 500): control
characters in the path (400 ``invalid_path``), NUL in the query string, and NUL
in any string (or key) of an ``/api`` JSON body (400 ``invalid_request``).
Inference bodies (``/v2``, ``:predict``) are left alone: a ``BYTES`` tensor may
hold any byte.

The other limits live where the data is understood: tensor elements in the v2
codec (``max_tensor_elements``, 400 ``tensor_too_large``), decompressed size in
``modelport.api.v2.compression``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np
from starlette.datastructures import Headers
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.types import Message, Receive, Scope

from modelport.api.context import is_inference
from modelport.api.problems import BODY_REFUSAL, status_of
from modelport.api.v2.types import INFERENCE_HEADER
from modelport.errors import InvalidInput, ModelportError, PayloadTooLarge

if TYPE_CHECKING:
    from modelport.config import Settings

_CONTROL = re.compile(r"[\x00-\x1f\x7f]")
_ESCAPED_NUL = re.compile(rb"(?<!\\)(?:\\\\)*\\u0000")
"""``\\u0000`` after an even number of backslashes (``\\\\u0000`` is a backslash and text)."""
_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"', re.DOTALL)
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_OPENERS = np.zeros(256, dtype=np.int8)
_OPENERS[list(b"[{")] = 1
_OPENERS[list(b"]}")] = -1


def has_control_characters(path: str) -> bool:
    """No name in modelport contains control characters, and PostgreSQL refuses NUL in
    text: such paths are refused before they reach a query."""
    return _CONTROL.search(path) is not None


def has_nul_query(query_string: bytes) -> bool:
    """Whether a raw query string decodes to text holding NUL (``%00``)."""
    return b"%00" in query_string or b"\x00" in query_string


def check_json_text(raw: bytes) -> None:
    """Raise ``InvalidInput`` (code ``invalid_request``) for a JSON text with NUL in a
    string: no text column stores it, and it has no use in names or descriptions."""
    if b"\x00" in raw or (b"\\u0000" in raw and _ESCAPED_NUL.search(raw) is not None):
        raise InvalidInput(
            "a string in the body contains a NUL character (\\u0000)", code="invalid_request"
        )


def json_depth(raw: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (0 for a scalar).

    Vectorised: strings are cut out by one regular expression, every byte but
    brackets is dropped, and the running depth is a cumulative sum, so a large
    tensor body costs a few passes in C, never a Python loop per byte.
    """
    if raw.count(b"[") + raw.count(b"{") == 0:
        return 0
    if b'"' in raw:
        raw = _STRING.sub(b"", raw)
    brackets = raw.translate(None, _NOT_BRACKETS)
    if not brackets:
        return 0
    steps = _OPENERS[np.frombuffer(brackets, dtype=np.uint8)].astype(np.int64)
    return int(np.cumsum(steps).max())


def check_json_depth(raw: bytes, max_depth: int) -> None:
    """Raise ``InvalidInput`` (code ``json_too_deep``) for JSON nested deeper than allowed."""
    if raw.count(b"[") + raw.count(b"{") <= max_depth:
        return  # cannot nest deeper than it has openers: two scans in C, no parse
    depth = json_depth(raw)
    if depth > max_depth:
        raise InvalidInput(
            f"JSON body is nested {depth} levels deep, above the limit of {max_depth}",
            code="json_too_deep",
            max_depth=max_depth,
        )


def check_inference_json(body: bytes, header_length: str | None, max_depth: int) -> None:
    """``check_json_depth`` on an inference body's JSON part (all of it, or the first
    ``Inference-Header-Content-Length`` bytes); for bodies the middleware could not
    check because they arrived compressed."""
    if header_length is not None and header_length.strip().isdigit():
        body = body[: int(header_length)]
    check_json_depth(body, max_depth)


@dataclass(frozen=True)
class BodyRule:
    """Requests under ``prefix`` may carry at most ``max_bytes`` of body."""

    prefix: str
    max_bytes: int | None
    """None: not limited here (the route has its own limit)."""
    text_only: bool = False
    """JSON bodies may not hold NUL in a string (``check_json_text``)."""


class BodyRefused(ModelportError, StarletteHTTPException):
    """Raised from ``receive`` when a body breaks a rule. A Starlette HTTP error too,
    so that FastAPI's body parsing lets it through instead of turning it into a 400;
    the modelport handler renders it (it comes first in the MRO)."""

    def __init__(self, error: ModelportError) -> None:
        ModelportError.__init__(self, error.message, code=error.code, **error.extra)
        self.kind = error.kind  # type: ignore[misc]
        self.status_code = status_of(error)
        self.detail = error.message
        self.headers = None


def path_refusal(scope: Scope) -> ModelportError | None:
    """Why a request's path or query string is refused before anything reads it, if it
    is: control characters in the path, NUL in the query string."""
    if has_control_characters(scope["path"]):
        return InvalidInput("the path contains control characters", code="invalid_path")
    if has_nul_query(scope.get("query_string", b"")):
        return InvalidInput(
            "the query string contains a NUL character (%00)", code="invalid_request"
        )
    return None


def body_rules(settings: Settings) -> list[BodyRule]:
    """The body rule of each surface, first matching prefix wins (module docstring)."""
    inference = settings.requests.max_inference_request_bytes
    return [
        BodyRule("/api/uploads", None),
        BodyRule("/api/", settings.requests.max_api_body_bytes, text_only=True),
        BodyRule("/v2/", inference),
        # A file's own limit is checked by its route; the form around it is small.
        BodyRule("/v1/files", settings.uploads.max_file_bytes + (1 << 20)),
        BodyRule("/v1/", inference),
    ]


def _json_prefix(headers: Headers) -> int | None:
    """How many leading bytes of the body are JSON to check: -1 all of it, None none."""
    encoding = headers.get("content-encoding", "identity").strip().lower()
    if encoding != "identity":
        return None  # checked by the route once decompressed
    header_length = headers.get(INFERENCE_HEADER)
    if header_length is not None:
        text = header_length.strip()
        return int(text) if text.isdigit() else None
    content_type = headers.get("content-type", "").split(";")[0].strip().lower()
    if content_type in ("", "application/json") or content_type.endswith("+json"):
        return -1  # no content type: FastAPI (and the v2 codec) read JSON
    return None


class BodyGuard:
    """Counts one request's body as the application reads it; a refusal is raised from
    ``receive`` and left on the request's state (``BODY_REFUSAL``)."""

    def __init__(
        self,
        limit: int,
        json_prefix: int | None,
        state: dict[str, Any],
        *,
        text_only: bool = False,
    ) -> None:
        self.limit = limit
        self.json_prefix = json_prefix
        self.text_only = text_only
        self.state = state
        self.size = 0
        self.chunks: list[bytes] = []
        self.refusal: ModelportError | None = None

    @classmethod
    def for_request(cls, rule: BodyRule, headers: Headers, scope: Scope) -> BodyGuard:
        assert rule.max_bytes is not None
        text_only = rule.text_only and not is_inference(scope["path"])
        return cls(rule.max_bytes, _json_prefix(headers), scope["state"], text_only=text_only)

    def _refuse(self, error: ModelportError) -> BodyRefused:
        self.refusal = self.state[BODY_REFUSAL] = error
        return BodyRefused(error)

    def wrap(self, receive: Receive, max_depth: int) -> Receive:
        async def guarded() -> Message:
            if self.refusal is not None:
                raise BodyRefused(self.refusal)
            message = await receive()
            if message["type"] != "http.request":
                return message
            body: bytes = message.get("body", b"")
            self.size += len(body)
            if self.size > self.limit:
                raise self._refuse(too_large(self.limit, None))
            if self.json_prefix is not None:
                self.chunks.append(body)
                if not message.get("more_body", False):
                    raw = b"".join(self.chunks)
                    self.chunks.clear()
                    if self.json_prefix >= 0:
                        raw = raw[: self.json_prefix]
                    try:
                        check_json_depth(raw, max_depth)
                        if self.text_only:
                            check_json_text(raw)
                    except InvalidInput as error:
                        raise self._refuse(error) from None
            return message

        return guarded


def too_large(limit: int, declared: int | None) -> PayloadTooLarge:
    size = f"of {declared} bytes " if declared is not None else ""
    return PayloadTooLarge(
        f"request body {size}is above the limit of {limit} bytes",
        code="payload_too_large",
        max_bytes=limit,
    )

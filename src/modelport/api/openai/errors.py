"""OpenAI's error object for ``/v1``: ``{"error": {"message", "type", "param", "code"}}``.

``code`` is the platform's stable machine code (the one an ``/api`` problem carries),
``type`` OpenAI's class of error for the status, ``param`` the request field at fault
where the error names one. ``api.problems`` renders every error of a ``/v1`` path
(the routes', authentication's, the middlewares', unknown paths) this way.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import orjson

from modelport.errors import ModelportError

V1_PREFIX = "/v1"

TYPE_BY_STATUS = {
    400: "invalid_request_error",
    401: "authentication_error",
    402: "insufficient_quota",
    403: "permission_error",
    404: "invalid_request_error",
    408: "timeout_error",
    409: "invalid_request_error",
    413: "invalid_request_error",
    415: "invalid_request_error",
    422: "invalid_request_error",
    429: "rate_limit_error",
    504: "timeout_error",
}
"""OpenAI's ``type`` by HTTP status; anything else of 500 and above is ``server_error``."""


def is_v1(path: str) -> bool:
    return path == V1_PREFIX or path.startswith(V1_PREFIX + "/")


def error_type(status: int) -> str:
    return TYPE_BY_STATUS.get(status, "server_error" if status >= 500 else "invalid_request_error")


def error_object(
    status: int, code: str, message: str, extra: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The ``error`` member; ``param`` from the error's ``param`` or ``field``."""
    extra = extra or {}
    param = extra.get("param", extra.get("field"))
    return {
        "message": message,
        "type": error_type(status),
        "param": str(param) if param is not None else None,
        "code": code,
    }


def error_body(
    status: int, code: str, message: str, extra: Mapping[str, Any] | None = None
) -> bytes:
    """A whole error answer's body."""
    return orjson.dumps({"error": error_object(status, code, message, extra)}, default=str)


def error_of(exc: BaseException) -> dict[str, Any]:
    """The ``error`` member for an exception raised mid-stream (sent as an SSE event)."""
    from modelport.api.problems import status_of

    if isinstance(exc, ModelportError):
        return error_object(status_of(exc), exc.code, exc.message, exc.extra)
    return error_object(500, "internal_error", "internal error")

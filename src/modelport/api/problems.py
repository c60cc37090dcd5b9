"""Render errors once per surface: RFC 9457 problem+json on ``/api``, ``{"error", "code"}``
on ``/v2``: the protocol's ``error`` message, and beside it the same stable machine ``code``
an ``/api`` problem carries; OpenAI's error object on ``/v1`` (``api.openai.errors``),
with that code as its ``code``."""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.api.openai.errors import error_body, is_v1
from modelport.errors import ModelportError

STATUS_BY_KIND = {
    "invalid": 400,
    "unauthenticated": 401,
    "payment_required": 402,
    "forbidden": 403,
    "not_found": 404,
    "request_timeout": 408,
    "conflict": 409,
    "gone": 410,
    "too_large": 413,
    "range": 416,
    "unprocessable": 422,
    "overloaded": 429,
    "unavailable": 503,
    "deadline": 504,
    "internal": 500,
}
CODE_BY_STATUS = {
    400: "invalid_request",
    401: "unauthenticated",
    402: "payment_required",
    403: "forbidden",
    404: "not_found",
    405: "method_not_allowed",
    408: "request_timeout",
    409: "conflict",
    410: "gone",
    411: "length_required",
    413: "payload_too_large",
    415: "unsupported_media_type",
    416: "range_not_satisfiable",
    422: "unprocessable",
    429: "overloaded",
    500: "internal_error",
    503: "unavailable",
    504: "deadline_exceeded",
}
PROBLEM_TYPE = "https://modelport.dev/problems/"
_log = logging.getLogger(__name__)


def status_of(exc: ModelportError) -> int:
    return STATUS_BY_KIND.get(exc.kind, 500)


def headers_of(exc: ModelportError) -> dict[str, str]:
    headers: dict[str, str] = {}
    if "retry_after" in exc.extra:
        headers["Retry-After"] = str(max(1, round(float(exc.extra["retry_after"]))))
    if exc.kind == "range" and "offset" in exc.extra:
        offset = int(exc.extra["offset"])
        headers["Range"] = f"0-{offset - 1}" if offset > 0 else "0-0"
        headers["Upload-Offset"] = str(offset)
    if exc.kind == "unauthenticated":
        headers["WWW-Authenticate"] = 'Bearer realm="modelport"'
    return headers


def problem_response(
    request: Request,
    status: int,
    code: str,
    detail: str,
    extra: dict[str, Any] | None = None,
    headers: dict[str, str] | None = None,
) -> Response:
    path = request.url.path
    if path.startswith("/v2"):
        body: dict[str, Any] = {"error": detail, "code": code}
        return Response(orjson.dumps(body), status, headers=headers, media_type="application/json")
    if is_v1(path):
        return Response(
            error_body(status, code, detail, extra),
            status,
            headers=headers,
            media_type="application/json",
        )
    problem: dict[str, Any] = {
        "type": PROBLEM_TYPE + code,
        "title": code.replace("_", " "),
        "status": status,
        "detail": detail,
        "code": code,
        "instance": path,
    }
    for key, value in (extra or {}).items():
        problem.setdefault(key, value)
    return Response(
        _dumps(problem),
        status,
        headers=headers,
        media_type="application/problem+json",
    )


def _dumps(problem: dict[str, Any]) -> bytes:
    try:
        return orjson.dumps(problem, default=str)
    except TypeError:  # an integer past 64 bits (an id given in a path): the slow way
        return json.dumps(problem, default=str).encode()


BODY_REFUSAL = "body_refusal"
"""Where a request's body refusal is left (``request.state``, by ``hygiene.BodyGuard``)."""


def error_response(request: Request, exc: Exception) -> Response:
    """The response for an error that ended a request, in the surface's format."""
    if isinstance(exc, ModelportError):
        return problem_response(
            request, status_of(exc), exc.code, exc.message, exc.extra, headers_of(exc)
        )
    if isinstance(exc, StarletteHTTPException):
        code = CODE_BY_STATUS.get(exc.status_code, "http_error")
        return problem_response(
            request, exc.status_code, code, str(exc.detail), headers=dict(exc.headers or {})
        )
    refused = request.scope.get("state", {}).get(BODY_REFUSAL)
    if isinstance(refused, ModelportError):
        # The body was refused while the application read it, and the application turned
        # that into an error of its own: the refusal is the answer.
        return error_response(request, refused)
    # A bug: the caller gets the surface's error format and the request id to quote,
    # never the exception's text; the server still logs the traceback.
    request_id = getattr(request.state, "request_id", None)
    detail = "internal error" + (f" (request id {request_id})" if request_id else "")
    return problem_response(request, 500, "internal_error", detail)


class ErrorBoundary:
    """ASGI middleware: an exception that escapes the application is answered here, and
    goes no further once the client has its whole answer.

    Starlette's outermost error middleware renders the 500 but raises the exception
    again, for the server to log; uvicorn then closes the connection, and the client's
    next request on it (keep-alive) was reset. Here the traceback is logged and the
    500 is the surface's error (``error_response``). Only an answer cut short (the
    exception came after its first bytes, e.g. mid-stream) still raises: then the
    connection must close, the client cannot tell the answer was incomplete otherwise.
    """

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = complete = False

        async def watched(message: Message) -> None:
            nonlocal started, complete
            if message["type"] == "http.response.start":
                started = True
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                complete = True
            await send(message)

        try:
            await self.app(scope, receive, watched)
        except Exception as exc:
            if started and not complete:
                raise
            _log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            if not started:
                await error_response(Request(scope), exc)(scope, receive, send)


def _malformed_json(exc: RequestValidationError) -> str | None:
    """The message ``/v1`` and ``/v2`` give a body that is not JSON (orjson's, with its
    line and column), where FastAPI would name the byte offset as if it were a field."""
    if not any(e.get("type") == "json_invalid" for e in exc.errors()):
        return None
    body = exc.body
    try:
        orjson.loads(body if isinstance(body, str | bytes) else b"")
    except orjson.JSONDecodeError as error:
        return f"request body is not valid JSON: {error}"
    return "request body is not valid JSON"


def install_error_handlers(app: FastAPI) -> None:
    async def on_error(request: Request, exc: Exception) -> Response:
        return error_response(request, exc)

    async def on_validation_error(request: Request, exc: Exception) -> Response:
        assert isinstance(exc, RequestValidationError)
        malformed = _malformed_json(exc)
        if malformed is not None:
            return problem_response(request, 400, "invalid_json", malformed)
        errors = [
            {"field": ".".join(str(p) for p in e["loc"] if p != "body"), "error": e["msg"]}
            for e in exc.errors()
        ]
        first = errors[0] if errors else {"field": "", "error": "invalid request"}
        detail = f"{first['field']}: {first['error']}" if first["field"] else first["error"]
        return problem_response(request, 400, "invalid_request", detail, {"errors": errors})

    app.add_exception_handler(Exception, on_error)
    app.add_exception_handler(ModelportError, on_error)
    app.add_exception_handler(RequestValidationError, on_validation_error)
    app.add_exception_handler(StarletteHTTPException, on_error)

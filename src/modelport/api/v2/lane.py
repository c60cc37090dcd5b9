"""The inference fast lane: ``POST /v2/models/…/infer`` past the general stack.

Every other request goes through FastAPI's middleware and router: request ids,
request hygiene, rate-limit headers, exception handlers, then route matching
against every route. For an inference call those layers cost more event-loop
time than the rest of the platform together, so this middleware, in front of
the whole stack (``api.app.ModelportAPI``), answers it directly: it matches the
infer paths (a model's, a version's, an endpoint's), then does what those layers would have done for it, once and
inline:

- the request id (honoured from ``X-Request-Id`` or made), returned on the answer;
- the path and body hygiene (control characters, the body limit before reading,
  JSON depth: the route checks the last two itself);
- the route, ``routes.infer``, called as the router would call it;
- errors rendered by ``problems.error_response``, as the exception handlers would;
- ``RateLimit-*`` headers from the limiter's decision, and the audit record of a
  refused (403) call.

Anything that is not an infer call passes through untouched, so the answers are
the same as without the lane; only the path to them is shorter.
"""

from __future__ import annotations

import logging
import re
from typing import Any

from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from modelport.api.context import REQUEST_ID_HEADER, audit_outcome, request_id_of
from modelport.api.hygiene import has_control_characters
from modelport.api.limiting import STATE_KEY, rate_headers
from modelport.api.problems import error_response
from modelport.api.v2.routes import infer
from modelport.errors import ModelportError
from modelport.logs import REQUEST_ID
from modelport.tenancy.limits import RateDecision

_INFER = re.compile(r"/v2/models/([^/]+)/([^/]+)(?:/versions/([^/]+))?/infer")
_ENDPOINT_INFER = re.compile(r"/v2/models/([^/]+)/infer")
_REQUEST_ID = REQUEST_ID_HEADER.lower().encode()
_EXPECTED = (ModelportError, HTTPException)
_log = logging.getLogger(__name__)


def infer_path_params(path: str) -> dict[str, str] | None:
    """The route's path parameters when ``path`` is a ``/v2`` infer call, else None."""
    if not path.endswith("/infer") or not path.startswith("/v2/models/"):
        return None
    match = _INFER.fullmatch(path)
    if match is None:
        single = _ENDPOINT_INFER.fullmatch(path)  # an endpoint, by its name alone
        return None if single is None else {"name": single.group(1)}
    owner, name, version = match.groups()
    if version is None:
        return {"owner": owner, "name": name}
    return {"owner": owner, "name": name, "version": version}


class InferenceLane:
    """ASGI middleware answering ``/v2`` infer calls itself (see the module docstring)."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["method"] != "POST":
            await self.app(scope, receive, send)
            return
        params = infer_path_params(_route_path(scope))
        if params is None or has_control_characters(scope["path"]):
            await self.app(scope, receive, send)  # not an infer call, or refused there
            return
        request_id = request_id_of(scope)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        REQUEST_ID.set(request_id)
        scope["path_params"] = params
        scope["endpoint"] = infer
        request = Request(scope, receive)
        try:
            response = await infer(request)
        except Exception as exc:
            if not isinstance(exc, _EXPECTED):
                _log.exception("inference call %s failed", request_id)
            response = error_response(request, exc)
        headers = response.raw_headers
        headers.append((_REQUEST_ID, request_id.encode()))
        decision = state.get(STATE_KEY)
        if isinstance(decision, RateDecision):
            headers.extend(rate_headers(decision))
        await audit_outcome(scope, state, response.status_code)
        await response(scope, receive, send)


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path

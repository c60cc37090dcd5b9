"""The one HTTP envelope of every request to the platform's application.

A pure ASGI middleware in front of FastAPI's whole stack (``api.app.ModelportAPI``)
that does, for every request, once:

- the request id: a well-formed ``X-Request-Id`` honoured or one made, on
  ``request.state.request_id``, on the request's log records (``logs.REQUEST_ID``)
  and on the answer;
- request hygiene (``api.hygiene``): control characters in the path and NUL in the
  query refused, the surface's body rule (size before and while reading, JSON depth,
  NUL in ``/api`` JSON);
- error rendering: an exception that escapes is answered by ``problems.error_response``
  in the surface's format (a bug: a 500 with the request id only, its traceback
  logged); an answer cut short still raises, so that the connection closes;
- ``RateLimit-*`` headers from the limiter's decision (``api.limiting``);
- the audit record of the request's outcome (``api.context.audit_outcome``),
  committed before the answer starts.

The ``/v2`` infer calls are then routed straight to their route (``v2.routes.infer``)
instead of through FastAPI's middleware and router, which cost more event-loop time
than the rest of the platform for a short call (``bench/v2_loop_cpu.py``): a routing
shortcut only. Their body is read by the route's one reader (``api.body.read_body``,
limit checked while reading) and its JSON depth checked after decompression, so the
envelope does not wrap their ``receive``; their answer's headers are added to the
response before it is sent, not by wrapping ``send``.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any

from starlette.datastructures import Headers
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.api.context import audit_outcome, request_id_of
from modelport.api.hygiene import BodyGuard, BodyRule, path_refusal, too_large
from modelport.api.limiting import STATE_KEY, rate_headers
from modelport.api.problems import error_response
from modelport.errors import ModelportError
from modelport.logs import REQUEST_ID
from modelport.tenancy.limits import RateDecision

_REQUEST_ID = b"x-request-id"
_EXPECTED = (ModelportError, HTTPException)
_log = logging.getLogger(__name__)

Shortcut = Callable[[str], "tuple[Callable[[Request], Any], dict[str, str]] | None"]
"""A route reached past FastAPI's router: for a POST path, the endpoint and its path
parameters, or None."""


class Envelope:
    """ASGI middleware: the cross-cutting concerns of every request (module docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        rules: Sequence[BodyRule],
        max_json_depth: int,
        shortcut: Shortcut | None = None,
    ) -> None:
        self.app = app
        self.rules = tuple(rules)
        self.max_json_depth = max_json_depth
        self.shortcut = shortcut

    def rule_for(self, path: str) -> BodyRule | None:
        return next((r for r in self.rules if path.startswith(r.prefix)), None)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        request_id = request_id_of(scope)
        state: dict[str, Any] = scope.setdefault("state", {})
        state["request_id"] = request_id
        REQUEST_ID.set(request_id)  # on every log record of the request (``logs``)
        refusal = path_refusal(scope)
        if refusal is not None:
            await self._answer(scope, receive, send, state, error_response(Request(scope), refusal))
            return
        if self.shortcut is not None and scope["method"] == "POST":
            found = self.shortcut(_route_path(scope))
            if found is not None:
                endpoint, params = found
                scope["path_params"] = params
                scope["endpoint"] = endpoint
                request = Request(scope, receive)
                try:
                    response = await endpoint(request)
                except Exception as exc:
                    if not isinstance(exc, _EXPECTED):
                        _log.exception("unhandled error on request %s", request_id)
                    response = error_response(request, exc)
                await self._answer(scope, receive, send, state, response)
                return
        await self._through(scope, receive, send, state)

    async def _answer(
        self, scope: Scope, receive: Receive, send: Send, state: dict[str, Any], response: Response
    ) -> None:
        """Send an answer made here (the shortcut's, or a refusal) with the envelope's
        headers and audit record."""
        headers = response.raw_headers
        headers.append((_REQUEST_ID, state["request_id"].encode()))
        decision = state.get(STATE_KEY)
        if isinstance(decision, RateDecision):
            headers.extend(rate_headers(decision))
        await audit_outcome(scope, state, response.status_code)
        await response(scope, receive, send)

    async def _through(
        self, scope: Scope, receive: Receive, send: Send, state: dict[str, Any]
    ) -> None:
        """The request through the application, its body under the surface's rule."""
        rule = self.rule_for(scope["path"])
        guard: BodyGuard | None = None
        if rule is not None and rule.max_bytes is not None:
            headers = Headers(scope=scope)
            declared = headers.get("content-length")
            if (
                declared is not None
                and declared.strip().isdigit()
                and int(declared) > rule.max_bytes
            ):
                refused = too_large(rule.max_bytes, int(declared))
                await self._answer(
                    scope, receive, send, state, error_response(Request(scope), refused)
                )
                return
            guard = BodyGuard.for_request(rule, headers, scope)
            receive = guard.wrap(receive, self.max_json_depth)
        started = complete = False
        request_id = state["request_id"].encode()

        async def enveloped(message: Message) -> None:
            nonlocal started, complete
            if message["type"] == "http.response.start":
                started = True
                headers = [h for h in message.get("headers", ()) if h[0] != _REQUEST_ID]
                headers.append((_REQUEST_ID, request_id))
                decision = state.get(STATE_KEY)
                if isinstance(decision, RateDecision):
                    headers.extend(rate_headers(decision))
                message = {**message, "headers": headers}
                await audit_outcome(scope, state, message["status"])
            elif message["type"] == "http.response.body" and not message.get("more_body"):
                complete = True
            await send(message)

        try:
            await self.app(scope, receive, enveloped)
        except Exception as exc:
            if started and not complete:
                raise  # an answer cut short: the connection must close
            if started:
                # Starlette's error middleware answered and raised it again, for the server
                # to log: logged here, the connection kept.
                _log.exception("unhandled error on %s %s", scope["method"], scope["path"])
                return
            if guard is None or guard.refusal is None:
                _log.exception("unhandled error on %s %s", scope["method"], scope["path"])
            # A body refusal the application wrapped is answered as the refusal.
            await error_response(Request(scope), exc)(scope, receive, enveloped)


def _route_path(scope: Scope) -> str:
    path: str = scope["path"]
    root: str = scope.get("root_path", "")
    return path[len(root) :] if root and path.startswith(root) else path

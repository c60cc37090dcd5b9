"""The server span of every call on the HTTP surfaces (``/v2``, ``/v1``, ``/api``, an
endpoint's ``:predict`` among them), as a pure ASGI middleware.

It continues the caller's trace from the W3C ``traceparent`` and ``tracestate``
headers (a malformed one is ignored: the trace starts here), and keeps the span current
for everything the request does, a streamed answer's body included, so the pipeline's
step spans are its children and every log record of the request carries its ids. The
span is named by the route template (``POST /v2/models/{owner}/{name}/infer``), carries
the request id and the status, and is an error for a 5xx answer.

Installed by ``api.app`` only when the process has a tracer: with tracing off, requests
do not pass through it at all. A request with no caller's trace is sampled here, once,
where the sampler allows it (``tracing.RootSampler``): one sampled out gets a bare
non-recording span (its ids on its log records and on what it sends on), and no span
or attribute is built for it here or in any later step.
"""

from __future__ import annotations

from typing import Any

from opentelemetry import context, trace
from opentelemetry.trace import SpanKind, StatusCode, Tracer
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from modelport.api.request_metrics import RouteTemplates
from modelport.observability import tracing

_TRACED = ("/v2/", "/v1/", "/api/")


class TraceMiddleware:
    """One ``SERVER`` span per request on the traced surfaces (see the module
    docstring)."""

    def __init__(
        self,
        app: ASGIApp,
        tracer: Tracer,
        templates: RouteTemplates,
        roots: tracing.RootSampler | None = None,
    ) -> None:
        self.app = app
        self.tracer = tracer
        self.templates = templates
        self.roots = roots

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        path: str = scope.get("path", "")
        if scope["type"] != "http" or not path.startswith(_TRACED):
            await self.app(scope, receive, send)
            return
        headers = _trace_headers(scope)
        parent = tracing.context_of(headers) if headers else None
        if parent is None and self.roots is not None:
            unsampled = self.roots.root()
            if unsampled is not None:
                token = context.attach(trace.set_span_in_context(unsampled))
                try:
                    await self.app(scope, receive, send)
                finally:
                    context.detach(token)
                return
        method: str = scope["method"]
        route = self.templates.template(path)
        state: dict[str, Any] = scope.setdefault("state", {})
        span = self.tracer.start_span(
            f"{method} {route}",
            context=parent,
            kind=SpanKind.SERVER,
            attributes={"http.request.method": method, "http.route": route, "url.path": path},
        )

        async def send_traced(message: Message) -> None:
            if message["type"] == "http.response.start":
                status: int = message["status"]
                span.set_attribute("http.response.status_code", status)
                request_id = state.get("request_id")
                if request_id:
                    span.set_attribute(tracing.REQUEST_ID, request_id)
                if status >= 500:
                    span.set_status(StatusCode.ERROR)
            await send(message)

        # Made current by hand: the context manager's layers cost more than the span
        # itself for a request sampled out, and every request pays them.
        token = context.attach(trace.set_span_in_context(span))
        try:
            await self.app(scope, receive, send_traced)
        except BaseException as exc:
            span.record_exception(exc)
            span.set_status(StatusCode.ERROR, type(exc).__name__)
            raise
        finally:
            context.detach(token)
            span.end()


def _trace_headers(scope: Scope) -> dict[str, str]:
    found: dict[str, str] = {}
    for name, value in scope.get("headers", ()):
        if name in (b"traceparent", b"tracestate"):
            found[name.decode()] = value.decode("latin-1")
    return found

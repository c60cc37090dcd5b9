"""Build the ASGI application from wired services."""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

from fastapi import APIRouter, FastAPI
from starlette.routing import BaseRoute
from starlette.types import ASGIApp

from modelport import __version__
from modelport.api.billing import include_billing
from modelport.api.body_timeout import BodyReadTimeout
from modelport.api.envelope import Envelope
from modelport.api.hygiene import BodyRule, body_rules
from modelport.api.openai import batches as v1_batches
from modelport.api.openai import files as v1_files
from modelport.api.openai import routes as v1
from modelport.api.openapi import describe_api
from modelport.api.openapi.ui import install_docs
from modelport.api.openapi.v2 import install_v2_document
from modelport.api.problems import install_error_handlers
from modelport.api.request_metrics import RequestMetrics, RouteTemplates
from modelport.api.routes import (
    aliases,
    assets,
    backends,
    blobs,
    costs,
    datasets,
    degradation,
    endpoint_traffic,
    endpoints,
    evaluations,
    formats,
    health,
    jobs,
    limits,
    metrics,
    models,
    moderation,
    monitoring,
    oidc,
    predict,
    prediction_sampling,
    predictions,
    prices,
    retention,
    runtime,
    slos,
    uploads,
    usage_authorizations,
    usage_events,
    versions,
    webhooks,
)
from modelport.api.routes import templates as prompt_templates
from modelport.api.tenancy import include_tenancy
from modelport.api.tracing import TraceMiddleware
from modelport.api.v2 import routes as v2
from modelport.api.v2.lane import infer_shortcut
from modelport.console.mount import install_console
from modelport.observability.tracing import RootSampler

if TYPE_CHECKING:
    from opentelemetry.trace import Tracer

    from modelport.app import Services
    from modelport.observability.http_metrics import HttpMetrics


class ModelportAPI(FastAPI):
    """FastAPI with the one envelope (``api.envelope``: request id, hygiene, error
    rendering, rate headers, audit) in front of its whole middleware stack, the body
    read timeout in front of that (it guards every request, infer calls too), and the
    request metrics outermost.

    ``add_middleware`` would put the envelope inside the middlewares FastAPI itself
    installs around the user's (server errors, exception telemetry, the body
    limit): layers every ``/v2`` infer call, which the envelope routes straight to its
    route, would cross for nothing."""

    def __init__(
        self,
        *,
        body_read_timeout_seconds: float = 10.0,
        body_rules: tuple[BodyRule, ...] = (),
        max_json_depth: int = 64,
        http_metrics: HttpMetrics | None = None,
        tracer: Tracer | None = None,
        roots: RootSampler | None = None,
        **options: Any,
    ) -> None:
        self.body_read_timeout_seconds = body_read_timeout_seconds
        self.body_rules = body_rules
        self.max_json_depth = max_json_depth
        self.http_metrics = http_metrics
        self.tracer = tracer
        self.roots = roots
        self._described: tuple[dict[str, Any], dict[str, Any]] | None = None
        super().__init__(**options)

    def openapi(self) -> dict[str, Any]:
        """FastAPI's generated document as ``openapi.describe_api`` corrects it (made again
        only when FastAPI's is)."""
        generated = super().openapi()
        if self._described is None or self._described[0] is not generated:
            self._described = (generated, describe_api(generated))
        return self._described[1]

    def build_middleware_stack(self) -> ASGIApp:
        # Outside Starlette's own error middleware, which raises what it rendered once
        # more: the envelope logs it and keeps the connection.
        envelope = Envelope(
            super().build_middleware_stack(),
            rules=self.body_rules,
            max_json_depth=self.max_json_depth,
            shortcut=infer_shortcut,
        )
        guarded: ASGIApp = BodyReadTimeout(envelope, seconds=self.body_read_timeout_seconds)
        # The templates come from the routes, not the OpenAPI document: generating that
        # costs far more than the rest of an application's start.
        templates = RouteTemplates.of(self.router.routes)
        if self.tracer is not None:
            # The server span around all the rest, so that a request's every log record
            # and step is in it (tracing off: not installed at all).
            guarded = TraceMiddleware(guarded, self.tracer, templates, self.roots)
        if self.http_metrics is None:
            return guarded
        # Outermost: every request counts, the ones refused by the layers above too.
        return RequestMetrics(guarded, self.http_metrics, templates)


def create_app(services: Services) -> FastAPI:
    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        # What starts, in which order, is the composition root's (``Services.lifecycle``).
        async with services.lifecycle.running():
            yield

    app = ModelportAPI(
        title="modelport",
        lifespan=lifespan,
        version=__version__,
        openapi_url="/api/openapi.json",
        docs_url=None,  # served from the package by install_docs, not from a CDN
        redoc_url=None,
        # Tracing is modelport's own to do; FastAPI's probe for a configured provider
        # otherwise runs on every request.
        telemetry={"tracing": False, "metrics": False, "logs": False},
        body_read_timeout_seconds=services.settings.requests.body_read_timeout_seconds,
        body_rules=tuple(body_rules(services.settings)),
        max_json_depth=services.settings.requests.max_json_depth,
        http_metrics=services.http_metrics,
        tracer=services.tracing.tracer,
        roots=services.tracing.roots,
    )
    app.state.services = services
    install_error_handlers(app)
    install_docs(app, "/api/openapi.json")
    install_v2_document(app)
    app.router.routes.extend(_platform_routes())
    if services.oidc is not None:  # sign-in with the OpenID provider (docs/oidc.md)
        app.include_router(oidc.router)
    app.router.routes.extend(_account_routes())
    install_console(app, services.console_sessions, oidc=services.oidc)
    # First: the hot inference path should not be matched against every /api route.
    app.router.routes[:0] = [
        *v2.routes,
        *predict.routes,
        *v1.routes,
        *v1_files.routes,
        *v1_batches.routes,
    ]
    return app


# The routes are built once a process and shared by every application: FastAPI works
# out a route's state (its signature, models, dependencies) on an application's first
# request, once per included router, which cost more than the rest of an application's
# start. They hold no state of an application's: handlers read the services from
# ``request.app.state``.


@functools.cache
def _platform_routes() -> tuple[BaseRoute, ...]:
    """The probes, the ``/api`` resources and the metrics."""
    router = APIRouter()
    router.include_router(health.router)
    for module in (
        uploads,
        blobs,
        models,
        versions,
        formats,
        aliases,
        limits,
        prices,
        usage_events,
        usage_authorizations,
        costs,
        endpoints,
        slos,
        degradation,
        backends,
        runtime,
        predictions,
        retention,
        prediction_sampling,
        endpoint_traffic,
        webhooks,
        moderation,
        jobs,
        datasets,
        assets,
        evaluations,
        monitoring,
        prompt_templates,
    ):
        router.include_router(module.router, prefix="/api")
    router.include_router(metrics.router)
    return tuple(router.routes)


@functools.cache
def _account_routes() -> tuple[BaseRoute, ...]:
    """Tenancy's and billing's ``/api`` routes."""
    router = APIRouter()
    include_tenancy(router)
    include_billing(router)
    return tuple(router.routes)

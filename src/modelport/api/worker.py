"""The HTTP surface of a ``worker`` process: the ``/v2`` data plane of its model host,
for the operator's key alone.

A gateway reaches a worker as a ``remote_v2`` backend (declared with the worker's URL
and the operator's key) and does everything else itself: tenants' keys, access,
limits, metering, the prediction log. So a worker answers only what that backend
calls: health, a version's readiness, the repository ``load`` it prepares a
deployment with, and ``infer`` on ``/v2/models/{owner}/{name}/versions/{version}``,
through the serving layer's local backend; and ``/metrics`` for the operator (its key
or the metrics token). Anything else is not served here.
"""

from __future__ import annotations

import asyncio
import hmac
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import orjson
from fastapi import FastAPI, Request
from starlette.responses import Response
from starlette.routing import Route

from modelport import __version__
from modelport.api.body import read_body
from modelport.api.problems import ErrorBoundary, install_error_handlers
from modelport.api.request_metrics import RouteTemplates
from modelport.api.tracing import TraceMiddleware
from modelport.api.v2.codec import encode_infer_response, parse_infer_request
from modelport.api.v2.options import (
    TIMEOUT_HEADER,
    model_parameters,
    priority_of,
    timeout_seconds,
)
from modelport.api.v2.types import INFERENCE_HEADER
from modelport.api.v2.validate import validate_request
from modelport.errors import InvalidInput, Unauthenticated
from modelport.observability.metrics import exposition
from modelport.serving.backends.local import LocalBackend
from modelport.serving.placement import key_of
from modelport.serving.types import BackendRequest, VersionRef

if TYPE_CHECKING:
    from modelport.app import WorkerServices


def _json(doc: Any, status: int = 200) -> Response:
    return Response(orjson.dumps(doc), status, media_type="application/json")


class WorkerSurface:
    """The routes of a worker, over its services."""

    def __init__(self, services: WorkerServices) -> None:
        self.services = services
        settings = services.settings
        self.backend = LocalBackend(
            services.host,
            services.blob_store,
            load_on_demand=settings.runtime.load_on_demand,
            processing=services.processing,
        )
        self._admin_key = settings.security.admin_key.encode()
        self._versions: dict[tuple[str, str, str], VersionRef] = {}
        """Resolved versions: immutable once published, so kept for good."""

    def _authenticate(self, request: Request, *, scraper: bool = False) -> None:
        """The operator's key, or (``scraper``) the metrics token, else 401."""
        header = request.headers.get("authorization", "")
        scheme, _, raw = header.partition(" ")
        token = raw.strip().encode()
        keys = [self._admin_key]
        if scraper and self.services.settings.security.metrics_token:
            keys.append(self.services.settings.security.metrics_token.encode())
        if not (
            scheme.lower() == "bearer"
            and any(key and hmac.compare_digest(token, key) for key in keys)
        ):
            raise Unauthenticated("a worker answers the operator's key only")

    async def _version(self, request: Request, version: str | None = None) -> VersionRef:
        """The version the path names (``version``: the one the body names instead)."""
        params = request.path_params
        wanted = (params["owner"], params["name"], version or params["version"])
        found = self._versions.get(wanted)
        if found is None:
            stored = await asyncio.to_thread(self.services.registry.get_version, *wanted)
            found = VersionRef(
                model=f"{wanted[0]}/{wanted[1]}",
                version=stored.version,
                manifest_digest=stored.manifest_digest,
                manifest=stored.manifest,
            )
            self._versions[wanted] = found
        return found

    async def live(self, request: Request) -> Response:
        return _json({"live": True})

    async def ready(self, request: Request) -> Response:
        return _json({"ready": True})

    async def model_ready(self, request: Request) -> Response:
        self._authenticate(request)
        ref = await self._version(request)
        status = self.services.host.status(key_of(ref))
        if status is None or not self.services.host.is_ready(key_of(ref)):
            state = status.state.value if status else "not loaded"
            body = {"error": f"{ref.ref} is not ready: {state}", "code": "model_not_ready"}
            return _json(body, 503)
        return _json({"name": ref.model, "version": ref.version, "ready": True})

    async def load(self, request: Request) -> Response:
        """Repository extension: load ``parameters.version`` of ``owner/name``."""
        self._authenticate(request)
        body = orjson.loads(await request.body() or b"{}")
        version = (body.get("parameters") or {}).get("version") if isinstance(body, dict) else None
        if not isinstance(version, str) or not version:
            raise InvalidInput("parameters.version is required", code="invalid_request")
        ref = await self._version(request, version)
        host = self.services.host
        await host.ensure_loaded(key_of(ref), ref.manifest, self.services.blob_store)
        return _json({"name": ref.model, "version": ref.version, "loaded": True})

    async def infer(self, request: Request) -> Response:
        self._authenticate(request)
        settings = self.services.settings
        ref = await self._version(request)
        limit = settings.requests.max_inference_request_bytes
        body = await read_body(request, limit)
        parsed = parse_infer_request(
            body,
            request.headers.get(INFERENCE_HEADER),
            max_elements=settings.requests.max_tensor_elements,
        )
        validate_request(parsed, ref.manifest.inputs, ref.manifest.outputs, max_input_bytes=limit)
        timeout = timeout_seconds(
            request.headers.get(TIMEOUT_HEADER),
            parsed.parameters,
            settings.runtime.infer_timeout_seconds,
        )
        answer = await self.backend.infer(
            BackendRequest(
                version=ref,
                inputs=parsed.arrays(),
                deadline=self.backend.host.clock.monotonic() + timeout,
                priority=priority_of(parsed.parameters),
                parameters=model_parameters(parsed.parameters),
                request_id=parsed.id or "",
            )
        )
        encoded = encode_infer_response(
            answer.outputs,
            model_name=ref.model,
            model_version=ref.version,
            request_id=parsed.id,
            requested=parsed.outputs,
            binary_data_output=parsed.binary_data_output,
        )
        return Response(encoded.body, headers=encoded.headers)

    async def metrics(self, request: Request) -> Response:
        """This worker's runtime metrics (its host's loads, queues, latencies)."""
        self._authenticate(request, scraper=True)
        body, content_type = exposition(
            self.services.metrics.registry, request.headers.get("accept", "")
        )
        return Response(body, headers={"Content-Type": content_type})

    def routes(self) -> list[Route]:
        model = "/v2/models/{owner}/{name}/versions/{version}"
        return [
            Route("/healthz", self.live, methods=["GET"]),
            Route("/metrics", self.metrics, methods=["GET"]),
            Route("/v2/health/live", self.live, methods=["GET"]),
            Route("/v2/health/ready", self.ready, methods=["GET"]),
            Route(f"{model}/ready", self.model_ready, methods=["GET"]),
            Route(f"{model}/infer", self.infer, methods=["POST"]),
            Route("/v2/repository/models/{owner}/{name}/load", self.load, methods=["POST"]),
        ]


def create_worker_app(services: WorkerServices) -> FastAPI:
    """The application of a ``worker`` process (see the module docstring)."""

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        async with services.running():  # its pool membership, if any
            yield

    app = FastAPI(
        title="modelport worker",
        version=__version__,
        openapi_url=None,
        docs_url=None,
        redoc_url=None,
        lifespan=lifespan,
    )
    app.state.services = services
    install_error_handlers(app)
    app.add_middleware(ErrorBoundary)
    app.router.routes.extend(WorkerSurface(services).routes())
    tracer = services.tracing.tracer
    if tracer is not None:  # a gateway's call continues its trace here (W3C traceparent)
        templates = RouteTemplates.of(app.router.routes)
        app.add_middleware(TraceMiddleware, tracer=tracer, templates=templates)
    return app

"""The OIP gRPC server of a ``worker`` in the pool: what a gateway calls.

Only gateways may call it: every method but liveness wants metadata
``authorization: Bearer <MODELPORT_WORKER_TOKEN>`` (not the admin key, and not a
tenant's key). A worker does no metering, limits or access checks of its own: the
gateway did them before the call. ``ModelInfer`` names a version as ``owner/name`` with
its exact ``model_version``; a version not ready on this worker is refused as
UNAVAILABLE with the trailer ``modelport-error-scope: version``, so the gateway tries
another replica without holding it against this worker. The call's deadline is the
gRPC deadline the gateway set (its caller's remaining time).

``ModelStreamInfer`` is server streaming here (one request, the chunks back: see
``worker_stream``) for a generative version held on this worker. The gateway cancelling
the call (its caller left, its deadline passed) cancels the handler, which closes the
local stream: the engine stops working for it. A failure after the first chunk aborts
the call with its status and code trailer, as before it.

With TLS (``pool_tls``) the server listens on TLS only, mutual when it has an authority.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import logging
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import TYPE_CHECKING, Any

import grpc

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.codec import encode_infer_response, parse_infer_request
from modelport.api.grpc.pool_tls import PoolTls, server_credentials
from modelport.api.grpc.service import SERVICE_NAME
from modelport.api.grpc.status import message_of, status_of, trailers_of
from modelport.api.grpc.worker_backend import CALL_ID_KEY, SCOPE_KEY
from modelport.api.grpc.worker_stream import (
    STREAM_METHOD,
    encode_chunk,
    parse_stream_request,
)
from modelport.api.v2.options import model_parameters, priority_of, timeout_seconds
from modelport.api.v2.validate import validate_request
from modelport.errors import (
    Internal,
    InvalidInput,
    ModelportError,
    Unauthenticated,
    Unavailable,
)
from modelport.serving.backends.local import LocalBackend
from modelport.serving.placement import key_of
from modelport.serving.pool.agent import WorkerAgent
from modelport.serving.pool.generative import GenerativeHolds
from modelport.serving.types import BackendRequest, VersionRef

if TYPE_CHECKING:
    from modelport.app import WorkerServices

_log = logging.getLogger(__name__)


class WorkerServicer:
    """``ModelInfer``, ``ModelStreamInfer``, ``ModelReady``, ``ServerLive`` and
    ``ServerReady`` of a worker."""

    def __init__(self, services: WorkerServices, token: str) -> None:
        if not token:
            raise ValueError("a worker's gRPC server needs the worker token")
        self.services = services
        self.backend = LocalBackend(
            services.host,
            services.blob_store,
            load_on_demand=False,
            processing=services.processing,
            engines=services.engines,
        )
        self._token = token.encode()
        self._versions: dict[tuple[str, str], VersionRef] = {}

    def _authenticate(self, context: grpc.aio.ServicerContext) -> None:
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                scheme, _, raw = str(value).partition(" ")
                if scheme.lower() == "bearer" and hmac.compare_digest(
                    raw.strip().encode(), self._token
                ):
                    return
        raise Unauthenticated("a worker answers its gateways only", code="worker_token_invalid")

    async def _version(self, name: str, version: str) -> VersionRef:
        owner, sep, model = name.partition("/")
        if not sep or not owner or not model or not version:
            raise InvalidInput(
                "name a version as owner/name with its model_version", code="invalid_request"
            )
        found = self._versions.get((name, version))
        if found is None:
            stored = await asyncio.to_thread(
                self.services.registry.get_version, owner, model, version
            )
            found = VersionRef(name, stored.version, stored.manifest_digest, stored.manifest)
            self._versions[(name, version)] = found
        return found

    async def _run(self, context: grpc.aio.ServicerContext, call: Any) -> Any:
        try:
            self._authenticate(context)
            return await call()
        except Exception as exc:
            await self._abort(context, exc)
        raise AssertionError("abort returns by raising")  # pragma: no cover

    async def _abort(self, context: grpc.aio.ServicerContext, exc: Exception) -> None:
        """End the call with ``exc``'s status and code trailer (raises ``AbortError``)."""
        if isinstance(exc, grpc.aio.AbortError):
            raise exc
        if not isinstance(exc, ModelportError):
            _log.exception("worker gRPC call failed", exc_info=exc)
            exc = Internal("internal error")
        trailers = trailers_of(exc)
        if exc.extra.get("scope") == "version":
            trailers = (*trailers, (SCOPE_KEY, "version"))
        await context.abort(status_of(exc), message_of(exc), trailers)

    def _call_id(self, context: grpc.aio.ServicerContext) -> str:
        for key, value in context.invocation_metadata() or ():
            if key == CALL_ID_KEY:
                return str(value)
        return ""

    async def _ready_version(self, name: str, version: str) -> VersionRef:
        ref = await self._version(name, version)
        key = key_of(ref)
        engines = self.services.engines
        if not (self.services.host.is_ready(key) or (engines is not None and engines.engine(key))):
            raise Unavailable(
                f"{ref.ref} is not ready on this worker", code="model_not_ready", scope="version"
            )
        return ref

    async def ServerLive(
        self, request: pb.ServerLiveRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerLiveResponse:
        return pb.ServerLiveResponse(live=True)

    async def ServerReady(
        self, request: pb.ServerReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ServerReadyResponse:
        async def ready() -> pb.ServerReadyResponse:
            return pb.ServerReadyResponse(ready=True)

        result: pb.ServerReadyResponse = await self._run(context, ready)
        return result

    async def ModelReady(
        self, request: pb.ModelReadyRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelReadyResponse:
        async def ready() -> pb.ModelReadyResponse:
            try:
                await self._ready_version(request.name, request.version)
            except Unavailable:
                return pb.ModelReadyResponse(ready=False)
            return pb.ModelReadyResponse(ready=True)

        result: pb.ModelReadyResponse = await self._run(context, ready)
        return result

    async def ModelInfer(
        self, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext
    ) -> pb.ModelInferResponse:
        async def infer() -> pb.ModelInferResponse:
            ref = await self._ready_version(request.model_name, request.model_version)
            settings = self.services.settings
            parsed = parse_infer_request(
                request, max_elements=settings.requests.max_tensor_elements
            )
            manifest = ref.manifest
            validate_request(parsed, manifest.inputs, manifest.outputs)
            remaining = context.time_remaining()
            timeout = timeout_seconds(
                None, parsed.parameters, settings.runtime.infer_timeout_seconds
            )
            if remaining is not None:
                timeout = min(timeout, remaining)
            call_id = self._call_id(context)
            answer = await self.backend.infer(
                BackendRequest(
                    version=ref,
                    inputs=parsed.arrays(),
                    deadline=self.services.clock.monotonic() + timeout,
                    priority=priority_of(parsed.parameters),
                    parameters=model_parameters(parsed.parameters),
                    request_id=parsed.id or "",
                    call_id=call_id,
                )
            )
            return encode_infer_response(
                answer.outputs,
                model_name=ref.model,
                model_version=ref.version,
                request_id=parsed.id,
                requested=parsed.outputs,
                declared=manifest.outputs,
            )

        result: pb.ModelInferResponse = await self._run(context, infer)
        return result

    async def ModelStreamInfer(
        self, request: pb.ModelInferRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.ModelStreamInferResponse]:
        try:
            self._authenticate(context)
            ref = await self._ready_version(request.model_name, request.model_version)
            remaining = context.time_remaining()
            timeout = self.services.settings.runtime.infer_timeout_seconds
            if remaining is not None:
                timeout = min(timeout, remaining)
            stream = parse_stream_request(
                request,
                ref,
                self.services.clock.monotonic() + timeout,
                self._call_id(context),
            )
            # Closed however the call ends: the gateway cancelling it stops the engine.
            async with contextlib.aclosing(self.backend.stream(stream)) as chunks:  # type: ignore[type-var]
                async for chunk in chunks:
                    yield encode_chunk(chunk, ref)
        except asyncio.CancelledError:
            raise
        except Exception as exc:
            await self._abort(context, exc)


_UNARY: dict[str, tuple[Any, Any]] = {
    "ServerLive": (pb.ServerLiveRequest, pb.ServerLiveResponse),
    "ServerReady": (pb.ServerReadyRequest, pb.ServerReadyResponse),
    "ModelReady": (pb.ModelReadyRequest, pb.ModelReadyResponse),
    "ModelInfer": (pb.ModelInferRequest, pb.ModelInferResponse),
}


class WorkerGrpcServer:
    """The worker's gRPC server, on the serving process's event loop, for the block of
    ``running``; ``port`` once bound (port 0 in the settings: one the system picks)."""

    def __init__(
        self,
        servicer: WorkerServicer,
        host: str,
        port: int,
        max_message_bytes: int,
        tls: PoolTls | None = None,
    ) -> None:
        self.servicer = servicer
        self.tls = tls
        """TLS only when set (see ``pool_tls``)."""
        self.host = host
        self.requested_port = port
        self.max_message_bytes = max_message_bytes
        self.port: int | None = None
        self.grpc_server: grpc.aio.Server | None = None
        """The running server (None outside ``running``)."""

    @asynccontextmanager
    async def running(self) -> AsyncIterator[WorkerGrpcServer]:
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", self.max_message_bytes),
                ("grpc.max_send_message_length", self.max_message_bytes),
                ("grpc.so_reuseport", 0),
            ]
        )
        handlers = {
            name: grpc.unary_unary_rpc_method_handler(
                getattr(self.servicer, name),
                request_deserializer=req.FromString,
                response_serializer=resp.SerializeToString,
            )
            for name, (req, resp) in _UNARY.items()
        }
        handlers[STREAM_METHOD] = grpc.unary_stream_rpc_method_handler(
            self.servicer.ModelStreamInfer,
            request_deserializer=pb.ModelInferRequest.FromString,
            response_serializer=pb.ModelStreamInferResponse.SerializeToString,
        )
        server.add_generic_rpc_handlers(
            (grpc.method_handlers_generic_handler(SERVICE_NAME, handlers),)
        )
        try:
            address = f"{self.host}:{self.requested_port}"
            if self.tls is None:
                port = server.add_insecure_port(address)
            else:
                port = server.add_secure_port(address, server_credentials(self.tls))
        except RuntimeError:
            port = 0
        if port == 0:
            raise InvalidInput(
                f"cannot listen for gRPC on {self.host}:{self.requested_port}",
                code="port_unavailable",
            )
        await server.start()
        self.port, self.grpc_server = port, server
        try:
            yield self
        finally:
            self.grpc_server = None
            await server.stop(2.0)


class PoolMember:
    """A worker's part in the pool for the block of ``running``: its gRPC server
    listening first, then its agent announcing it (with the port bound) and loading
    what is placed on it; on leaving, withdrawn from the registry before the server
    stops."""

    def __init__(
        self,
        server: WorkerGrpcServer,
        agent_of: Callable[[Callable[[], str]], WorkerAgent],
        advertise_host: str,
        generative: GenerativeHolds | None = None,
    ) -> None:
        self.server = server
        self.generative = generative
        self.advertise_host = advertise_host
        self.agent = agent_of(self.address)

    def address(self) -> str:
        return f"{self.advertise_host}:{self.server.port or self.server.requested_port}"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[PoolMember]:
        async with self.server.running():
            if self.generative is not None:
                # Its engines load and stream on this loop.
                self.generative.bind(asyncio.get_running_loop())
            await asyncio.to_thread(self.agent.start)
            try:
                yield self
            finally:
                await asyncio.to_thread(self.agent.stop)

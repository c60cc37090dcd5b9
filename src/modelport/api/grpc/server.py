"""The gRPC server of the Open Inference Protocol surface: a ``grpc.aio`` server on the
serving process's event loop, started and stopped by the process's lifecycle
(``GrpcSurface.running``, registered by ``modelport.app``).

The methods are registered by hand under the protocol's service name
(``inference.GRPCInferenceService``): the messages' proto package is modelport's own (see
``oip.proto``), so the generated code has no servicer base to register with.
"""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import grpc

from modelport.api.grpc import oip_pb2 as pb
from modelport.api.grpc.service import SERVICE_NAME, InferenceServicer
from modelport.errors import InvalidInput
from modelport.logs import log_event

_log = logging.getLogger(__name__)

_UNARY: dict[str, tuple[Any, Any]] = {
    "ServerLive": (pb.ServerLiveRequest, pb.ServerLiveResponse),
    "ServerReady": (pb.ServerReadyRequest, pb.ServerReadyResponse),
    "ModelReady": (pb.ModelReadyRequest, pb.ModelReadyResponse),
    "ServerMetadata": (pb.ServerMetadataRequest, pb.ServerMetadataResponse),
    "ModelMetadata": (pb.ModelMetadataRequest, pb.ModelMetadataResponse),
    "ModelInfer": (pb.ModelInferRequest, pb.ModelInferResponse),
    "ModelStatistics": (pb.ModelStatisticsRequest, pb.ModelStatisticsResponse),
    "RepositoryIndex": (pb.RepositoryIndexRequest, pb.RepositoryIndexResponse),
    "RepositoryModelLoad": (pb.RepositoryModelLoadRequest, pb.RepositoryModelLoadResponse),
    "RepositoryModelUnload": (pb.RepositoryModelUnloadRequest, pb.RepositoryModelUnloadResponse),
}


def handler(servicer: InferenceServicer) -> grpc.GenericRpcHandler:
    """Every method of the service, bound to ``servicer``."""
    methods: dict[str, grpc.RpcMethodHandler] = {
        name: grpc.unary_unary_rpc_method_handler(
            getattr(servicer, name),
            request_deserializer=request.FromString,
            response_serializer=response.SerializeToString,
        )
        for name, (request, response) in _UNARY.items()
    }
    methods["ModelStreamInfer"] = grpc.stream_stream_rpc_method_handler(
        servicer.ModelStreamInfer,
        request_deserializer=pb.ModelInferRequest.FromString,
        response_serializer=pb.ModelStreamInferResponse.SerializeToString,
    )
    return grpc.method_handlers_generic_handler(SERVICE_NAME, methods)


@dataclass(frozen=True)
class GrpcOptions:
    """Where and how the surface listens (from ``Settings``: ``grpc_host``,
    ``grpc_port``, the TLS pair, ``max_inference_request_bytes``, ``workers``)."""

    host: str
    port: int
    max_message_bytes: int
    tls_cert_path: Path | None = None
    tls_key_path: Path | None = None
    shared_port: bool = False
    """Several serving processes listen on the port (``SO_REUSEPORT``); otherwise a port
    another process holds fails the start."""
    grace_seconds: float = 5.0
    """How long calls in flight may finish once stopping."""


class GrpcSurface:
    """The OIP gRPC surface of one process (see the module)."""

    def __init__(self, servicer: InferenceServicer, options: GrpcOptions) -> None:
        self.servicer = servicer
        self.options = options
        self.port: int | None = None
        """The port listened on, once started."""

    @property
    def address(self) -> str:
        return f"{self.options.host}:{self.options.port}"

    @asynccontextmanager
    async def running(self) -> AsyncIterator[GrpcSurface]:
        """Listen while the block runs; on leaving, stop taking calls and give those in
        flight ``grace_seconds`` to finish."""
        options = self.options
        server = grpc.aio.server(
            options=[
                ("grpc.max_receive_message_length", options.max_message_bytes),
                ("grpc.max_send_message_length", options.max_message_bytes),
                ("grpc.so_reuseport", 1 if options.shared_port else 0),
            ]
        )
        server.add_generic_rpc_handlers((handler(self.servicer),))
        try:
            if options.tls_cert_path is not None and options.tls_key_path is not None:
                credentials = grpc.ssl_server_credentials(
                    [(options.tls_key_path.read_bytes(), options.tls_cert_path.read_bytes())]
                )
                port = server.add_secure_port(self.address, credentials)
            else:
                port = server.add_insecure_port(self.address)
        except RuntimeError:
            port = 0
        if port == 0:
            raise InvalidInput(
                f"cannot listen for gRPC on {self.address}: the port is taken or the address "
                "is not this machine's",
                code="port_unavailable",
            )
        await server.start()
        self.port = port
        log_event(_log, "grpc.listening", address=f"{options.host}:{port}")
        try:
            yield self
        finally:
            await server.stop(options.grace_seconds)
            self.port = None

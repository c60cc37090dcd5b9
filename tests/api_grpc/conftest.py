"""gRPC surface fixtures: the platform of ``tests/api_v2`` (services on SQLite, a
publisher of real ONNX models) served by a live server whose lifespan starts the OIP gRPC
surface on a free port, and the official ``tritonclient.grpc`` client against it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import pytest
import tritonclient.grpc as triton

from modelport.app import Services
from tests.api_v2.conftest import Publisher, V2Factory
from tests.conftest import ADMIN_KEY, LiveServer
from tests.isolation import free_port

pytest_plugins = ["tests.api_v2.conftest"]  # make_v2

ADMIN = {"authorization": f"Bearer {ADMIN_KEY}"}


def key(token: str = ADMIN_KEY) -> dict[str, str]:
    return {"authorization": f"Bearer {token}"}


@dataclass
class GrpcWorld:
    address: str
    """host:port of the gRPC surface."""
    http: str
    """The HTTP base URL of the same process."""
    services: Services
    publisher: Publisher
    client: triton.InferenceServerClient


@pytest.fixture
def grpc_world(make_v2: V2Factory) -> Iterator[GrpcWorld]:
    port = free_port()
    _, services, publisher = make_v2(lifespan=False, grpc_port=port)
    server = LiveServer(services).start()
    assert services.grpc is not None and services.grpc.port == port
    address = f"127.0.0.1:{port}"
    client = triton.InferenceServerClient(address)
    try:
        yield GrpcWorld(address, server.url, services, publisher, client)
    finally:
        client.close()
        server.stop()

"""gRPC surface fixtures: the platform of ``tests/api_v2`` (services on SQLite, a
publisher of real ONNX models) served by a live server whose lifespan starts the OIP gRPC
surface on a free port, and the official ``tritonclient.grpc`` client against it."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import tritonclient.grpc as triton

from modelport.app import Services
from modelport.errors import ModelportError
from tests.api_v2.conftest import Publisher, V2Factory, make_v2  # noqa: F401  (fixture)
from tests.conftest import ADMIN_KEY, LiveServer
from tests.isolation import free_port
from tests.metering.conftest import approve
from tests.polling import eventually

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
def grpc_world(make_v2: V2Factory) -> Iterator[GrpcWorld]:  # noqa: F811
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


def deploy(world: GrpcWorld, endpoint: str, ref: str, tenant: str = "acme") -> None:
    """Make ``endpoint`` and deploy ``ref`` (``owner/name:version``) to it through the live
    server, whose controller rolls it out; returns once it is active and routed."""
    admin = httpx.Client(base_url=world.http, headers={"Authorization": f"Bearer {ADMIN_KEY}"})
    with admin:
        created = admin.post("/api/endpoints", json={"name": endpoint, "tenant": tenant})
        assert created.status_code == 201, created.text
        model, version = ref.split(":")
        owner, name = model.split("/")
        approve(world.services, owner, name, version)
        deployed = admin.post(
            f"/api/endpoints/{endpoint}/deployments",
            json={"versions": [{"model": model, "version": version, "weight": 100}]},
        )
        assert deployed.status_code == 202, deployed.text
        ident = deployed.json()["id"]
        router = world.services.serving.router

        def routed() -> bool:
            state = admin.get(f"/api/endpoints/{endpoint}/deployments/{ident}").json()["state"]
            assert state in ("pending", "active"), state
            route = router.table.find(endpoint)
            return state == "active" and route is not None and route.deployment == ident

        assert eventually(routed, 30), "the deployment was never routed"


def consumer_key(services: Services, tenant: str, member: str = "app") -> str:
    """A new key of a ``consumer`` member of ``tenant`` (made if absent)."""
    tenancy = services.tenancy
    with contextlib.suppress(ModelportError):  # made already (the publisher makes its own)
        tenancy.create_tenant(tenant, actor="admin")
    tenancy.add_member(tenant, member, roles=["consumer"], actor="admin")
    return tenancy.create_key(tenant, member, name="test", actor="admin").secret

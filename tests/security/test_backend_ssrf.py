"""Remote backends are not a way into the platform's network: a backend URL at a
loopback, private, link-local or unique-local address (or a name resolving to one) is
refused when declared (400 ``backend_url_not_allowed``, nothing stored), and every
connection the platform makes to a declared backend is checked again, so a name that
resolves to an internal address by then (DNS rebinding) is never contacted. The
operator's ``backend_allow_hosts`` lets a private host through."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

import numpy as np
import pytest
from fastapi.testclient import TestClient
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.config import Settings
from modelport.errors import Unavailable
from modelport.manifest import Manifest
from modelport.serving.backends.base import Backend
from modelport.serving.backends.remote_v2 import RemoteV2Backend
from modelport.serving.types import (
    BackendRequest,
    Health,
    StreamChunk,
    StreamRequest,
    VersionRef,
)
from modelport.store.tables import RemoteBackendRow
from tests.conftest import ADMIN_KEY, ThreadedServer, ensure_tenant

T = TypeVar("T")

PUBLIC = "93.184.216.34"
ADMIN = {"Authorization": f"Bearer {ADMIN_KEY}"}


class Canary:
    """A loopback HTTP server that answers like a ready backend and records every
    request it gets: what must never be reached."""

    def __init__(self) -> None:
        self.seen: list[str] = []

        async def anything(request: Request) -> JSONResponse:
            self.seen.append(f"{request.method} {request.url.path}")
            return JSONResponse({"ready": True, "data": []})

        app = Starlette(routes=[Route("/{path:path}", anything, methods=["GET", "POST"])])
        self.server = ThreadedServer(app, lifespan="off")
        self.port = self.server.port


@dataclass
class Platform:
    client: TestClient
    services: Services
    canary: Canary
    names: dict[str, list[str]]
    """What the platform's resolver answers, by host name (a test changes it)."""

    def declare(self, name: str, url: str, kind: str = "remote_v2") -> dict[str, Any]:
        response = self.client.post(
            "/api/backends", json={"name": name, "tenant": "acme", "kind": kind, "url": url}
        )
        return {"status": response.status_code, **response.json()}

    def built(self, name: str) -> Backend:
        backend = self.services.serving.router.remotes(name)
        assert backend is not None
        return backend

    def run(self, call: Callable[[], Awaitable[T]]) -> T:
        """Run a backend's coroutine on the application's own event loop (where the
        health prober uses the same backend objects)."""
        portal = self.client.portal
        assert portal is not None
        return portal.call(call)


@pytest.fixture
def platform(tmp_path: Path, database_url: str) -> Iterator[Platform]:
    canary = Canary()
    canary.server.start()
    names: dict[str, list[str]] = {}

    def resolve(host: str, port: int) -> Sequence[str]:
        if host not in names:
            raise OSError(f"{host}: no such host")
        return names[host]

    settings = Settings(
        home=tmp_path / "home",
        database_url=database_url,
        admin_key=ADMIN_KEY,
        auto_migrate=database_url.startswith("sqlite"),
        runtime_intra_op_threads=1,
        # The control: the canary's own address and port, nothing else.
        backend_allow_hosts=(f"127.0.0.1:{canary.port}",),
    )
    services = build_services(settings, resolver=resolve)
    try:
        with TestClient(create_app(services), headers=ADMIN) as client:
            ensure_tenant(client, "acme")
            yield Platform(client, services, canary, names)
    finally:
        services.close()
        canary.server.stop()


def stored(platform: Platform) -> int:
    with platform.services.database.transaction() as session:
        return session.query(RemoteBackendRow).count()


def version_ref(task: str | None = None) -> VersionRef:
    runtime = {} if task is None else {"protocol": "openai", "task": task}
    manifest = Manifest.model_validate(
        {
            "format": "onnx",
            "files": [{"path": "model.onnx", "digest": "sha256:" + "0" * 64, "size": 1}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
            "runtime": runtime,
        }
    )
    return VersionRef("acme/adder", "1", "sha256:" + "0" * 64, manifest)


@pytest.mark.slow
@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",  # loopback, but not on the allow-listed port
        "127.9.9.9",
        "10.0.0.5",
        "172.16.0.1",
        "192.168.1.1",
        "169.254.169.254",  # the cloud metadata service
        "100.64.0.1",
        "0.0.0.0",
        "[::1]",
        "[fd00::1]",
        "[fe80::1]",
        "[::ffff:127.0.0.1]",
        "internal.test",  # resolves to the canary's address
        "mixed.test",  # resolves to a public and a private address
        "nowhere.test",  # does not resolve
    ],
)
def test_a_backend_at_an_internal_address_is_refused_stored_nowhere_and_never_contacted(
    platform: Platform, host: str
) -> None:
    platform.names.update({"internal.test": ["127.0.0.1"], "mixed.test": [PUBLIC, "10.1.2.3"]})
    port = platform.canary.port if host.endswith(".test") else platform.canary.port + 1
    for kind in ("remote_v2", "remote_openai"):
        answer = platform.declare("sneaky", f"http://{host}:{port}", kind)
        assert answer["status"] == 400, answer
        assert answer["code"] == "backend_url_not_allowed"
    assert stored(platform) == 0
    assert platform.services.serving.router.remotes("sneaky") is None
    assert platform.client.get("/api/backends").json()["items"] == []
    assert platform.canary.seen == []


@pytest.mark.slow
def test_an_allow_listed_host_is_declared_and_reached(platform: Platform) -> None:
    """The control: the operator's allow-list lets a loopback host through, and the
    canary records what reaches it (so its silence in the other tests means something)."""
    answer = platform.declare("control", f"http://127.0.0.1:{platform.canary.port}")
    assert answer["status"] == 201, answer
    backend = platform.built("control")
    assert platform.run(backend.health) is Health.HEALTHY
    assert "GET /v2/health/ready" in platform.canary.seen


@pytest.mark.slow
def test_a_name_rebound_to_loopback_after_its_declaration_is_never_contacted(
    platform: Platform,
) -> None:
    """``localhost``: a name the system itself resolves to the canary, so a connection
    the policy did not check and pin would reach it."""
    port = platform.canary.port
    platform.names["localhost"] = [PUBLIC]  # public when declared...
    for name, kind in (("v2-rebind", "remote_v2"), ("oa-rebind", "remote_openai")):
        answer = platform.declare(name, f"http://localhost:{port}", kind)
        assert answer["status"] == 201, answer
    platform.names["localhost"] = ["127.0.0.1"]  # ...the canary's address by the call
    v2, openai = platform.built("v2-rebind"), platform.built("oa-rebind")

    # Health probes.
    assert platform.run(v2.health) is Health.UNHEALTHY
    assert platform.run(openai.health) is Health.UNHEALTHY
    # Loading a version there (a deployment's preparation).
    assert isinstance(v2, RemoteV2Backend)
    why = platform.run(lambda: v2.prepare(version_ref(), timeout=30))
    assert why is not None and "unreachable" in why
    # Inference.
    request = BackendRequest(
        version_ref(), {"x": np.ones((1, 4), dtype=np.float32)}, time.monotonic() + 30
    )
    with pytest.raises(Unavailable) as inferred:
        platform.run(lambda: v2.infer(request))
    assert inferred.value.code == "backend_unreachable"
    assert "loopback address (127.0.0.1)" in inferred.value.message
    # Streaming.
    stream = StreamRequest(
        version_ref("completions"), prompt="hi", max_tokens=4, deadline=time.monotonic() + 30
    )

    async def first_chunk() -> StreamChunk | None:
        async for chunk in openai.stream(stream):
            return chunk
        return None

    with pytest.raises(Unavailable) as streamed:
        platform.run(first_chunk)
    assert streamed.value.code == "backend_unreachable"
    assert "loopback address (127.0.0.1)" in streamed.value.message

    assert platform.canary.seen == []

"""Remote backends declared through /api/backends and named by deployments: a version
served by a second modelport process alone, a version served by the remote then the
local host (the remote killed: the local one answers), unknown and other tenants'
backends refused."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from modelport.store.tables import RemoteBackendRow
from tests.models import add_one
from tests.serving.backends.conftest import ModelportProcess
from tests.serving.conftest import ROW, Serving, ServingFactory
from tests.serving.test_deployments import key_for

X = [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
Y = [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
PLUS_ONE = [[v + 1 for v in ROW[0]]]


@pytest.fixture
def remote(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ModelportProcess]:
    """A second modelport serving ``acme/adder:1`` (y = x + 1); killed by one test."""
    server = ModelportProcess(tmp_path_factory.mktemp("remote-home"))
    server.start()
    try:
        server.publish(
            "acme/adder", "1", add_one().SerializeToString(), {"inputs": X, "outputs": Y}
        )
        yield server
    finally:
        server.kill()


@pytest.fixture
def plane(make_serving: ServingFactory, database_url: str) -> Serving:
    serving = make_serving(database_url)
    serving.publish("acme/adder", "1")  # the same model here, for the local replica
    serving.ensure_tenant("acme")
    return serving


def declare(
    serving: Serving,
    remote: ModelportProcess,
    name: str = "gpu-pool-a",
    capabilities: dict[str, Any] | None = None,
) -> None:
    response = serving.client.post(
        "/api/backends",
        json={
            "name": name,
            "tenant": "acme",
            "kind": "remote_v2",
            "url": remote.url,
            "api_key": remote.key,
            "capabilities": capabilities or {"formats": ["onnx"], "hardware": ["gpu"]},
        },
    )
    assert response.status_code == 201, response.text
    body = response.json()
    assert body["has_api_key"] is True and "api_key" not in body
    assert remote.key not in response.text


def deploy(serving: Serving, endpoint: str, backends: list[str]) -> dict[str, object]:
    serving.endpoint(endpoint)
    version = {"model": "acme/adder", "version": "1", "weight": 100, "backends": backends}
    response = serving.client.post(
        f"/api/endpoints/{endpoint}/deployments", json={"versions": [version]}
    )
    assert response.status_code == 202, response.text
    return serving.wait(endpoint, response.json()["id"])


@pytest.mark.slow
def test_a_version_served_by_a_remote_backend_alone(plane: Serving, remote: ModelportProcess):
    declare(plane, remote)
    listed = plane.client.get("/api/backends").json()["items"]
    assert [b["name"] for b in listed] == ["gpu-pool-a"]
    assert plane.services.serving.router.remotes("gpu-pool-a") is not None
    assert "gpu-pool-a" in [b.name for b in plane.services.health.board.backends()]

    deployment = deploy(plane, "adder", ["gpu-pool-a"])
    assert deployment["state"] == "active", deployment
    assert deployment["versions"][0]["backends"] == ["gpu-pool-a"]
    assert not plane.services.host.statuses()  # nothing was loaded here

    answer = plane.predict("adder")
    assert answer.status_code == 200, answer.text
    body = answer.json()
    assert body["backend"] == "gpu-pool-a"
    assert body["outputs"]["y"] == PLUS_ONE

    in_use = plane.client.delete("/api/backends/gpu-pool-a")
    assert in_use.status_code == 409 and in_use.json()["code"] == "backend_in_use"


@pytest.mark.slow
def test_remote_then_local_survives_the_remote_dying(plane: Serving, remote: ModelportProcess):
    declare(plane, remote)
    deployment = deploy(plane, "adder", ["gpu-pool-a", "local"])
    assert deployment["state"] == "active", deployment
    first = plane.predict("adder").json()
    assert first["backend"] == "gpu-pool-a" and first["outputs"]["y"] == PLUS_ONE

    remote.kill()
    for _ in range(5):
        answer = plane.predict("adder")
        assert answer.status_code == 200, answer.text
        assert answer.json()["backend"] == "local:acme/adder:1"
        assert answer.json()["outputs"]["y"] == PLUS_ONE


def test_a_remote_only_version_the_remote_cannot_serve_fails(plane: Serving, tmp_path: Path):
    plane.client.post(
        "/api/backends",
        json={"name": "gone", "tenant": "acme", "kind": "remote_v2", "url": "http://127.0.0.1:9"},
    ).raise_for_status()
    deployment = deploy(plane, "adder", ["gone"])
    assert deployment["state"] == "failed"
    assert "unreachable" in deployment["cause"]


def test_unknown_and_other_tenants_backends_are_refused(plane: Serving):
    plane.client.post(
        "/api/backends",
        json={"name": "pool", "tenant": "acme", "kind": "remote_v2", "url": "http://127.0.0.1:9"},
    ).raise_for_status()
    plane.endpoint("adder")
    version = {"model": "acme/adder", "version": "1", "weight": 100}
    unknown = plane.client.post(
        "/api/endpoints/adder/deployments",
        json={"versions": [{**version, "backends": ["nowhere"]}]},
    )
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_backend"

    outsider = key_for(plane, "globex", "owner")
    assert plane.client.get("/api/backends/pool", headers=outsider).status_code == 404
    assert plane.client.delete("/api/backends/pool", headers=outsider).status_code == 404
    assert plane.client.get("/api/backends", headers=outsider).json()["items"] == []
    # globex's own endpoint cannot run on acme's backend.
    plane.publish("globex/adder", "1")
    plane.endpoint("globex-adder", tenant="globex")
    refused = plane.client.post(
        "/api/endpoints/globex-adder/deployments",
        json={"versions": [{**version, "model": "globex/adder", "backends": ["pool"]}]},
        headers=outsider,
    )
    assert refused.status_code == 400 and refused.json()["code"] == "unknown_backend"

    consumer = key_for(plane, "acme", "consumer")
    assert plane.client.delete("/api/backends/pool", headers=consumer).status_code == 403
    duplicate = plane.client.post(
        "/api/backends",
        json={"name": "pool", "tenant": "acme", "kind": "remote_v2", "url": "http://x"},
    )
    assert duplicate.status_code == 409
    assert plane.client.delete("/api/backends/pool").status_code == 204
    with plane.services.database.transaction() as session:
        assert session.query(RemoteBackendRow).count() == 0
    assert plane.services.serving.router.remotes("pool") is None


@pytest.mark.slow
def test_more_rows_than_any_replica_takes_is_413_naming_the_largest(
    plane: Serving, remote: ModelportProcess
) -> None:
    """Two replicas (the same remote, declared with max batch sizes 2 and 3): 3 rows go
    to the one that takes them; 4 rows, more than either takes, are 413 before any work,
    not a 503 that clients retry."""
    for name, size in (("small", 2), ("larger", 3)):
        declare(plane, remote, name, {"formats": ["onnx"], "max_batch_size": size})
    deployment = deploy(plane, "adder", ["small", "larger"])
    assert deployment["state"] == "active", deployment

    three = plane.predict("adder", {"inputs": {"x": ROW * 3}})
    assert three.status_code == 200, three.text
    assert three.json()["backend"] == "larger"

    four = plane.predict("adder", {"inputs": {"x": ROW * 4}})
    assert four.status_code == 413, four.text
    problem = four.json()
    assert problem["code"] == "payload_too_large"
    assert "4 rows" in problem["detail"] and "(3 rows)" in problem["detail"]
    assert four.headers.get("retry-after") is None

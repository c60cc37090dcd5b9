"""Roles of a process: a gateway builds no model host and answers what needs one with
503 ``role_lacks_service``; a worker serves its host's ``/v2`` for the operator's key
only; a gateway and a worker on the same database serve an endpoint together."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from fastapi.testclient import TestClient

from modelport.api.worker import create_worker_app
from modelport.app import WorkerServices, build_services, build_worker_services
from modelport.config import Role, Settings
from modelport.runtime.host import ModelHost
from modelport.serving.backends.absent import AbsentBackend
from modelport.serving.placement import RemotePlacement
from modelport.serving.routing.router import Router
from tests.conftest import ADMIN_KEY, free_port
from tests.serving.conftest import AUTH, ROW, Serving, ServingFactory

PLUS_ONE = [[v + 1 for v in ROW[0]]]
INFER = {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW[0]}]}


@pytest.fixture
def gateway(make_serving: ServingFactory, monkeypatch: pytest.MonkeyPatch) -> Serving:
    def no_host(*args: object, **kwargs: object) -> None:
        raise AssertionError("a gateway must not build a model host")

    monkeypatch.setattr(ModelHost, "__init__", no_host)
    serving = make_serving(role=Role.GATEWAY)
    monkeypatch.undo()
    serving.publish("acme/adder", "1")
    serving.ensure_tenant("acme")
    return serving


def test_a_gateway_builds_no_model_host(gateway: Serving) -> None:
    services = gateway.services
    assert services.settings.role is Role.GATEWAY
    assert services.host is None
    assert isinstance(services.serving.controller.placement, RemotePlacement)
    local = [b for b in services.health.board.backends() if b.name == "local"]
    assert len(local) == 1 and isinstance(local[0], AbsentBackend)
    # The rest of the platform is there: auth, tenancy, metering, the API.
    assert gateway.client.get("/api/models/acme/adder").status_code == 200


def test_v2_on_a_gateway_answers_role_lacks_service(gateway: Serving) -> None:
    for response in (
        gateway.client.post("/v2/models/acme/adder/versions/1/infer", json=INFER),
        gateway.client.post("/v2/models/acme/adder/infer", json=INFER),
        gateway.client.get("/v2/models/acme/adder/versions/1/ready"),
    ):
        assert response.status_code == 503, response.text
        body = response.json()
        assert body["code"] == "role_lacks_service"
        assert "hosts no models" in body["error"]
    assert gateway.client.get("/v2/health/ready").status_code == 200


def test_a_gateway_refuses_a_deployment_held_locally(gateway: Serving) -> None:
    gateway.endpoint("adder")
    version = {"model": "acme/adder", "version": "1", "weight": 100}
    response = gateway.client.post("/api/endpoints/adder/deployments", json={"versions": [version]})
    assert response.status_code == 503, response.text
    assert response.json()["code"] == "role_lacks_service"
    assert "acme/adder:1" in response.json()["detail"]


def test_build_services_refuses_the_worker_role(tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, admin_key=ADMIN_KEY, role=Role.WORKER)
    with pytest.raises(ValueError, match="WorkerServices"):
        build_services(settings)


def test_the_shadow_recorder_is_given_to_the_router() -> None:
    def record(result: object) -> None:
        return None

    router = Router(None, lambda ref: [], record_shadow=record)  # type: ignore[arg-type]
    assert router.shadow.record is record


@pytest.fixture
def worker(serving: Serving) -> Iterator[tuple[TestClient, WorkerServices]]:
    """A worker on the home (database, blobs) of ``serving``, where acme/adder:1 is."""
    serving.publish("acme/adder", "1")
    settings = serving.services.settings.model_copy(update={"role": Role.WORKER})
    services = build_worker_services(settings)
    assert not hasattr(services, "metering") and not hasattr(services, "tenancy")
    with TestClient(create_worker_app(services), headers=AUTH) as client:
        yield client, services
    services.close()


def test_a_worker_serves_its_hosts_v2_for_the_operators_key(
    worker: tuple[TestClient, WorkerServices],
) -> None:
    client, services = worker
    model = "/v2/models/acme/adder/versions/1"
    assert client.get("/v2/health/ready").status_code == 200
    not_ready = client.get(f"{model}/ready")
    assert not_ready.status_code == 503 and not_ready.json()["code"] == "model_not_ready"
    answer = client.post(f"{model}/infer", json=INFER)
    assert answer.status_code == 200, answer.text
    assert answer.json()["outputs"][0]["data"] == PLUS_ONE[0]
    assert client.get(f"{model}/ready").status_code == 200
    assert [s.key.ref for s in services.host.statuses()] == ["acme/adder:1"]

    anonymous = client.post(f"{model}/infer", json=INFER, headers={"Authorization": ""})
    assert anonymous.status_code == 401 and anonymous.json()["code"] == "unauthenticated"
    tenant_key = client.post(
        f"{model}/infer", json=INFER, headers={"Authorization": "Bearer mp_some_tenant_key"}
    )
    assert tenant_key.status_code == 401
    missing = client.post("/v2/models/acme/adder/versions/9/infer", json=INFER)
    assert missing.status_code == 404
    metrics = client.get("/metrics")
    assert metrics.status_code == 200 and 'model="acme/adder"' in metrics.text
    assert client.get("/metrics", headers={"Authorization": ""}).status_code == 401
    # Nothing of the platform's API is served by a worker.
    assert client.get("/api/models").status_code == 404
    bad = client.post(f"{model}/infer", json={"inputs": [{"name": "x"}]})
    assert bad.status_code == 400


def test_a_worker_loads_through_the_repository_extension(
    worker: tuple[TestClient, WorkerServices],
) -> None:
    client, _ = worker
    loaded = client.post(
        "/v2/repository/models/acme/adder/load", json={"parameters": {"version": "1"}}
    )
    assert loaded.status_code == 200, loaded.text
    assert client.get("/v2/models/acme/adder/versions/1/ready").status_code == 200
    no_version = client.post("/v2/repository/models/acme/adder/load", json={})
    assert no_version.status_code == 400 and no_version.json()["code"] == "invalid_request"


class WorkerProcess:
    """``modelport serve --role worker`` on a gateway's database and blobs."""

    def __init__(self, settings: Settings) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {k: v for k, v in os.environ.items() if not k.startswith("MODELPORT_")}
        env |= {
            "MODELPORT_HOME": str(settings.store.home),
            "MODELPORT_DATABASE_URL": settings.store.resolved_database_url,
            "MODELPORT_AUTO_MIGRATE": "false",
            "MODELPORT_ADMIN_KEY": ADMIN_KEY,
            "MODELPORT_RUNTIME_EXECUTION": "manifest",  # threads, as the suite's (tests/conftest.py)
            "MODELPORT_RUNTIME_INTRA_OP_THREADS": "1",
        }
        if settings.store.redis_url:
            env["MODELPORT_REDIS_URL"] = settings.store.redis_url
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "modelport.cli", "serve", "--role", "worker",
             "--port", str(self.port), "--log-level", "warning"],
            env=env,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )  # fmt: skip
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            assert self.proc.poll() is None, f"the worker exited with {self.proc.returncode}"
            try:
                if httpx.get(f"{self.url}/v2/health/ready", timeout=1).status_code == 200:
                    return
            except httpx.TransportError:
                pass
            time.sleep(0.05)
        raise RuntimeError("the worker did not become ready")

    def kill(self) -> None:
        self.proc.kill()
        self.proc.wait(timeout=30)


@pytest.mark.slow
def test_a_gateway_and_a_worker_serve_an_endpoint_together(
    make_serving: ServingFactory, database_url: str
) -> None:
    redis_url = os.environ.get("MODELPORT_TEST_REDIS_URL")
    gateway = make_serving(database_url, role=Role.GATEWAY, redis_url=redis_url)
    assert gateway.services.host is None
    gateway.publish("acme/adder", "1")
    gateway.ensure_tenant("acme")
    worker = WorkerProcess(gateway.services.settings)
    try:
        declared = gateway.client.post(
            "/api/backends",
            json={
                "name": "worker-1",
                "tenant": "acme",
                "kind": "remote_v2",
                "url": worker.url,
                "api_key": ADMIN_KEY,
                "capabilities": {"formats": ["onnx"]},
            },
        )
        assert declared.status_code == 201, declared.text
        gateway.endpoint("adder")
        version = {"model": "acme/adder", "version": "1", "weight": 100, "backends": ["worker-1"]}
        created = gateway.client.post(
            "/api/endpoints/adder/deployments", json={"versions": [version]}
        )
        assert created.status_code == 202, created.text
        deployment = gateway.wait("adder", created.json()["id"])
        assert deployment["state"] == "active", deployment

        answer = gateway.predict("adder")
        assert answer.status_code == 200, answer.text
        assert answer.json()["backend"] == "worker-1"
        assert answer.json()["outputs"]["y"] == PLUS_ONE
        # /v2 on the gateway still has no host of its own to serve the model from.
        direct = gateway.client.post("/v2/models/acme/adder/versions/1/infer", json=INFER)
        assert direct.status_code == 503 and direct.json()["code"] == "role_lacks_service"
    finally:
        worker.kill()


def test_a_worker_refuses_a_body_over_the_limit(serving: Serving) -> None:
    serving.publish("acme/adder", "1")
    settings = serving.services.settings.model_copy(
        update={"role": Role.WORKER, "max_inference_request_bytes": 64}
    )
    services = build_worker_services(settings)
    try:
        with TestClient(create_worker_app(services), headers=AUTH) as client:
            big = client.post("/v2/models/acme/adder/versions/1/infer", json=INFER)
            assert big.status_code == 413 and big.json()["code"] == "payload_too_large"
            assert not services.host.statuses()  # refused before anything was loaded
    finally:
        services.close()


def test_the_role_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MODELPORT_ROLE", raising=False)
    assert Settings().role is Role.ALL
    monkeypatch.setenv("MODELPORT_ROLE", "gateway")
    assert Settings().role is Role.GATEWAY
    monkeypatch.setenv("MODELPORT_ROLE", "pool")
    with pytest.raises(ValueError, match="role"):
        Settings()


def test_build_app_builds_the_settings_role(tmp_path: Path) -> None:
    from modelport.app import build_app

    worker = build_app(Settings(home=tmp_path, admin_key=ADMIN_KEY, role=Role.WORKER))
    try:
        assert isinstance(worker.state.services, WorkerServices)
        with TestClient(worker) as client:
            assert client.get("/v2/health/ready").status_code == 200
            assert client.get("/api/models", headers=AUTH).status_code == 404
    finally:
        worker.state.services.close()

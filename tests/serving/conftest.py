"""Endpoint and deployment fixtures: wired services with a manual clock, real ONNX versions
published and approved through the registry, and helpers to deploy and predict."""

from __future__ import annotations

import shutil
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.registry import repository as registry_repo
from modelport.registry.types import LifecycleState
from modelport.runtime.formats.onnx import OnnxModel
from tests.conftest import ADMIN_KEY
from tests.models import add_one
from tests.registry.helpers import put_blob

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}
X = [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
Y = [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]
ROW = [[1.0, 2.0, 3.0, 4.0]]
LOOPBACK_BACKENDS = ("127.0.0.1", "x")
"""``backend_allow_hosts`` of the tests' installations: loopback servers, and ``x``,
a name declared where a test never calls it."""


def before_executions_of(
    monkeypatch: pytest.MonkeyPatch, graph: str, before: Callable[[], None]
) -> None:
    """Call ``before`` ahead of every execution of an ONNX model whose graph is named
    ``graph`` (a gate, or a floor on its latency, that a loaded machine cannot undo)."""
    execute = OnnxModel.execute

    def hooked(self: OnnxModel, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        if self.session.get_modelmeta().graph_name == graph:
            before()
        return execute(self, inputs)

    monkeypatch.setattr(OnnxModel, "execute", hooked)


def add_constant(value: float, name: str = "add") -> onnx.ModelProto:
    """x [-1, 4] FP32 -> y = x + value."""
    constant = numpy_helper.from_array(np.full(4, value, dtype=np.float32), "c")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "c"], ["y"])],
        name,
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[constant],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def failing() -> onnx.ModelProto:
    """x [-1, 4] -> y [-1, 4] that fails at every execution (reshape to 3 elements)."""
    shape = numpy_helper.from_array(np.array([3], dtype=np.int64), "shape")
    graph = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "failing",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def slow(n: int = 384) -> onnx.ModelProto:
    """y = x + 1, after matrix products that take milliseconds (they depend on x, so
    onnxruntime cannot fold them away)."""
    a = numpy_helper.from_array(np.full((n, n), 1.0 / n, dtype=np.float32), "a")
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nil"]),
        helper.make_node("Add", ["a", "nil"], ["b"]),
        helper.make_node("MatMul", ["b", "b"], ["m0"]),
        *[helper.make_node("MatMul", [f"m{i - 1}", "b"], [f"m{i}"]) for i in range(1, 8)],
        helper.make_node("ReduceMean", ["m7"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["x", "nothing"], ["x0"]),
        helper.make_node("Add", ["x0", "one"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slow",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[
            a,
            numpy_helper.from_array(np.zeros((), np.float32), "zero"),
            numpy_helper.from_array(np.ones((), np.float32), "one"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def example(plus: float) -> dict[str, Any]:
    return {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW[0]}],
        "outputs": [
            {"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [v + plus for v in ROW[0]]}
        ],
    }


@dataclass
class Serving:
    """Services on a temporary home with a manual clock, an admin client, and helpers."""

    client: TestClient
    services: Services
    clock: ManualClock

    # ---- registry
    def publish(
        self,
        ref: str,
        version: str,
        model: onnx.ModelProto | None = None,
        *,
        state: str = "approved",
        inputs: list[dict[str, Any]] | None = None,
        outputs: list[dict[str, Any]] | None = None,
        examples: list[dict[str, Any]] | None = None,
        visibility: str = "private",
        **extra: Any,
    ) -> str:
        """Publish ``ref:version`` (add-one by default) and move it to ``state``."""
        owner, name = ref.split("/")
        registry = self.services.registry
        try:
            registry.get_model(owner, name)
        except Exception:
            registry.create_model(owner, name, actor="test", license="MIT", visibility=visibility)
        data = (model or add_one()).SerializeToString()
        digest = put_blob(self.services.blob_store, data)
        manifest = {
            "format": "onnx",
            "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
            "inputs": inputs or X,
            "outputs": outputs or Y,
            "license": "MIT",
            "examples": examples if examples is not None else [],
            **extra,
        }
        registry.publish(owner, name, version, manifest, actor="test")
        self.force_state(owner, name, version, state)
        return f"{ref}:{version}"

    def force_state(self, owner: str, name: str, version: str, state: str) -> None:
        path = {"candidate": [], "validated": ["validated"], "approved": ["validated", "approved"]}
        path["rejected"] = ["rejected"]
        with self.services.database.transaction() as session:
            vid = registry_repo.version_id(session, owner, name, version, lock=True)
            for step in path[state]:
                current = registry_repo.current_state(session, vid)
                registry_repo.append_event(
                    session, vid, current, LifecycleState(step), actor="test", reason="test"
                )

    # ---- endpoints
    def endpoint(self, name: str = "fraud", tenant: str = "acme", **fields: Any) -> dict[str, Any]:
        self.ensure_tenant(tenant)
        response = self.client.post(
            "/api/endpoints", json={"name": name, "tenant": tenant, **fields}
        )
        assert response.status_code == 201, response.text
        return response.json()

    def ensure_tenant(self, tenant: str) -> None:
        tenancy = self.services.tenancy
        try:
            tenancy.get_tenant(tenant)
        except Exception:
            tenancy.create_tenant(tenant, actor="admin", name=tenant.title())

    def deploy(
        self, endpoint: str, versions: list[tuple[str, int]], *, wait: bool = True, **spec: Any
    ) -> dict[str, Any]:
        """Deploy ``[(ref, weight)]``; with ``wait``, until it is active (or failed)."""
        body = {
            "versions": [
                {"model": ref.split(":")[0], "version": ref.split(":")[1], "weight": weight}
                for ref, weight in versions
            ],
            **spec,
        }
        response = self.client.post(f"/api/endpoints/{endpoint}/deployments", json=body)
        assert response.status_code == 202, response.text
        deployment = response.json()
        return self.wait(endpoint, deployment["id"]) if wait else deployment

    def deployment(self, endpoint: str, ident: int) -> dict[str, Any]:
        response = self.client.get(f"/api/endpoints/{endpoint}/deployments/{ident}")
        assert response.status_code == 200, response.text
        return response.json()

    def wait(
        self, endpoint: str, ident: int, until: Callable[[dict[str, Any]], bool] | None = None
    ) -> dict[str, Any]:
        done = until or (lambda d: d["state"] != "pending")
        deadline = time.monotonic() + 30
        while True:
            body = self.deployment(endpoint, ident)
            if done(body) and self.routed(endpoint, body):
                return body
            assert time.monotonic() < deadline, body
            time.sleep(0.01)

    def routed(self, endpoint: str, deployment: dict[str, Any]) -> bool:
        """Whether this process's router already routes as the database says (the switch
        is committed first, then swapped into the router)."""
        route = self.services.serving.router.table.find(endpoint)
        if deployment["state"] != "active":
            return True
        weights = [v["weight"] for v in deployment["versions"]]
        return (
            route is not None
            and route.deployment == deployment["id"]
            and (list(route.weights) == weights)
        )

    def predict(self, endpoint: str, body: Any = None, **kwargs: Any) -> Any:
        return self.client.post(
            f"/api/endpoints/{endpoint}:predict", json=body or {"inputs": {"x": ROW}}, **kwargs
        )


ServingFactory = Callable[..., Serving]


@pytest.fixture
def make_serving(tmp_path: Path, sqlite_template: Path) -> Iterator[ServingFactory]:
    """Build services (SQLite unless ``database_url`` is given) with settings overridden."""
    opened: list[tuple[TestClient, Services]] = []

    def factory(
        database_url: str | None = None, *, home: Path | None = None, **overrides: Any
    ) -> Serving:
        """A new process's services; on the ``home`` of an earlier one to share its state."""
        home = home or tmp_path / f"home{len(opened)}"
        url = database_url
        if url is None:
            url = f"sqlite:///{home / 'modelport.db'}"
            if not (home / "modelport.db").exists():
                home.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(sqlite_template, home / "modelport.db")  # migrated once
        # The tests' remote backends (other processes, stub servers) listen on loopback.
        overrides.setdefault("backend_allow_hosts", LOOPBACK_BACKENDS)
        settings = Settings(
            home=home,
            database_url=url,
            admin_key=ADMIN_KEY,
            auto_migrate=False,
            runtime_intra_op_threads=1,
            **overrides,
        )
        clock = ManualClock()
        services = build_services(settings, clock=clock)
        client = TestClient(create_app(services), headers=dict(AUTH))
        client.__enter__()
        opened.append((client, services))
        return Serving(client, services, clock)

    yield factory
    for client, services in opened:
        client.__exit__(None, None, None)
        services.close()


@pytest.fixture
def serving(make_serving: ServingFactory) -> Serving:
    return make_serving()


@pytest.fixture
def serving_db(make_serving: ServingFactory, database_url: str) -> Serving:
    """The same, once on SQLite and once on PostgreSQL."""
    return make_serving(database_url)

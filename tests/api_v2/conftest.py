"""/v2 surface fixtures: wired services on SQLite with runtime settings a test chooses,
and a publisher that puts real ONNX models in the registry through its API."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from starlette.testclient import TestClient

from modelport.api import create_app
from modelport.app import Services, build_services
from modelport.clock import Clock
from modelport.config import Settings
from tests.conftest import ADMIN_KEY, ensure_tenant
from tests.databases import migrated_sqlite
from tests.models import add_one, mlp
from tests.registry.helpers import put_blob

AUTH = {"Authorization": f"Bearer {ADMIN_KEY}"}


class Publisher:
    """Publishes versions the way a publisher would: blob first, then the manifest."""

    def __init__(self, client: TestClient, services: Services) -> None:
        self.client = client
        self.services = services
        self.models: set[str] = set()

    def publish(
        self,
        ref: str,
        version: str,
        model: onnx.ModelProto,
        *,
        inputs: list[dict[str, Any]],
        outputs: list[dict[str, Any]],
        examples: list[dict[str, Any]] | None = None,
        **extra: Any,
    ) -> dict[str, Any]:
        data = model.SerializeToString()
        digest = put_blob(self.services.blob_store, data)
        if ref not in self.models:
            owner, name = ref.split("/")
            ensure_tenant(self.client, owner)
            created = self.client.post(
                "/api/models", json={"owner": owner, "name": name, "license": "MIT"}
            )
            assert created.status_code == 201, created.text
            self.models.add(ref)
        manifest = {
            "format": "onnx",
            "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
            "inputs": inputs,
            "outputs": outputs,
            "license": "MIT",
            "examples": examples or [],
            **extra,
        }
        response = self.client.post(
            f"/api/models/{ref}/versions", json={"version": version, "manifest": manifest}
        )
        assert response.status_code == 201, response.text
        return manifest

    def adder(self, ref: str = "acme/adder", version: str = "1", **extra: Any) -> dict[str, Any]:
        example = {
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [2, 3, 4, 5]}],
        }
        return self.publish(
            ref,
            version,
            add_one(),
            inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            examples=[example],
            **extra,
        )

    def mlp(self, ref: str = "acme/mlp", version: str = "1", **extra: Any) -> dict[str, Any]:
        return self.publish(
            ref,
            version,
            mlp(),
            inputs=[{"name": "features", "datatype": "FP32", "shape": [-1, 8]}],
            outputs=[{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
            **extra,
        )

    def slow(self, ref: str = "acme/slow", version: str = "1", n: int = 1024, **extra: Any):
        """y = x + sum(A @ A @ A ...): an adder that takes tens of milliseconds per call."""
        return self.publish(
            ref,
            version,
            slow_add(n),
            inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            **extra,
        )


def slow_add(n: int) -> onnx.ModelProto:
    a = numpy_helper.from_array(np.full((n, n), 1.0 / n, dtype=np.float32), "a")
    nodes = [
        # b depends on x, so onnxruntime cannot fold the products at load time.
        helper.make_node("ReduceSum", ["x"], ["total"], keepdims=0),
        helper.make_node("Mul", ["total", "zero"], ["nil"]),
        helper.make_node("Add", ["a", "nil"], ["b"]),
        helper.make_node("MatMul", ["b", "b"], ["m0"]),
    ]
    for i in range(1, 6):
        nodes.append(helper.make_node("MatMul", [f"m{i - 1}", "b"], [f"m{i}"]))
    nodes += [
        helper.make_node("ReduceMean", ["m5"], ["mean"], keepdims=0),
        helper.make_node("Mul", ["mean", "zero"], ["nothing"]),
        helper.make_node("Add", ["x", "nothing"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "slow_add",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[a, numpy_helper.from_array(np.zeros((), np.float32), "zero")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


V2Factory = Callable[..., tuple[TestClient, Services, Publisher]]


@pytest.fixture
def make_v2(tmp_path: Path) -> Iterator[V2Factory]:
    """Build services on SQLite with runtime settings overridden (and the clock, for a test
    that moves time itself); yields (client, services, publisher). The client sends the
    admin key."""
    opened: list[tuple[TestClient, Services, bool]] = []

    def factory(
        *, lifespan: bool = True, clock: Clock | None = None, **overrides: Any
    ) -> tuple[TestClient, Services, Publisher]:
        home = tmp_path / f"home{len(opened)}"
        settings = Settings(
            home=home,
            database_url=migrated_sqlite(home / "modelport.db"),
            admin_key=ADMIN_KEY,
            auto_migrate=True,
            runtime_intra_op_threads=1,
            **overrides,
        )
        services = build_services(settings, clock=clock)
        client = TestClient(create_app(services), headers=dict(AUTH))
        if lifespan:  # off when a live server will run the application's lifespan instead
            client.__enter__()
        opened.append((client, services, lifespan))
        return client, services, Publisher(client, services)

    yield factory
    for client, services, entered in opened:
        if entered:
            client.__exit__(None, None, None)
        services.close()


@pytest.fixture
def v2(make_v2: V2Factory) -> tuple[TestClient, Services, Publisher]:
    return make_v2()


def infer_body(
    name: str, array: np.ndarray, datatype: str = "FP32", **extra: Any
) -> dict[str, Any]:
    return {
        "inputs": [
            {
                "name": name,
                "datatype": datatype,
                "shape": list(array.shape),
                "data": array.ravel().tolist(),
            }
        ],
        **extra,
    }


@pytest.fixture
def live_v2(make_v2: V2Factory) -> Iterator[tuple[str, Publisher]]:
    """A uvicorn server on a loopback port for services built by ``make_v2``."""
    from tests.conftest import LiveServer

    _, services, publisher = make_v2(lifespan=False)
    server = LiveServer(services).start()
    yield server.url, publisher
    server.stop()

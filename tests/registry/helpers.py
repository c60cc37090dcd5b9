"""Registry test helpers: real ONNX files put in the blob store, manifests, publishing."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import numpy as np
import onnx
from starlette.testclient import TestClient

from modelport.app import Services
from modelport.blobs import BlobStore
from modelport.digests import sha256_digest
from tests.conftest import ensure_tenant
from tests.models import add_one

ADD_ONE_INPUT = [[1.0, 2.0, 3.0, 4.0]]


def put_blob(store: BlobStore, data: bytes) -> str:
    """Store ``data`` through the staging API; return its digest."""
    upload_id = uuid.uuid4().hex
    writer = store.open_staging(upload_id, 0)
    writer.write(data)
    writer.publish()
    digest = sha256_digest(data)
    store.commit_staging(upload_id, digest, len(data))
    store.discard_staging(upload_id)
    return digest


def onnx_bytes(model: onnx.ModelProto | None = None) -> bytes:
    return (model or add_one()).SerializeToString()


def add_one_example(expected: list[list[float]] | None = None) -> dict[str, Any]:
    want = expected if expected is not None else (np.array(ADD_ONE_INPUT) + 1).tolist()
    return {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ADD_ONE_INPUT}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": want}],
    }


def manifest_for(
    data: bytes,
    *,
    path: str = "model.onnx",
    fmt: str = "onnx",
    license: str = "MIT",
    examples: list[dict[str, Any]] | None = None,
    parents: list[dict[str, str]] | None = None,
    description: str = "",
    size: int | None = None,
) -> dict[str, Any]:
    """A manifest for the add_one graph stored as ``data`` (not stored by this call)."""
    return {
        "format": fmt,
        "files": [
            {
                "path": path,
                "digest": sha256_digest(data),
                "size": len(data) if size is None else size,
            }
        ],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": license,
        "examples": [add_one_example()] if examples is None else examples,
        "lineage": {"parents": parents or []},
        "description": description,
    }


class Registry:
    """Drives the registry API the way a publisher would."""

    def __init__(self, client: TestClient, services: Services) -> None:
        self.client = client
        self.services = services
        self.data = onnx_bytes()
        self.digest = self.upload(self.data)

    def upload(self, data: bytes) -> str:
        """Upload a blob the way a publisher does (monolithic upload); its digest."""
        digest = sha256_digest(data)
        response = self.client.post("/api/uploads", params={"digest": digest}, content=data)
        assert response.status_code == 201, response.text
        return digest

    def create_model(self, ref: str = "acme/adder", **fields: Any) -> dict[str, Any]:
        owner, name = ref.split("/")
        body = {"owner": owner, "name": name, "license": "MIT", **fields}
        ensure_tenant(self.client, owner)
        response = self.client.post("/api/models", json=body)
        assert response.status_code == 201, response.text
        return response.json()

    def publish(
        self, ref: str, version: str, manifest: dict[str, Any] | None = None, status: int = 201
    ) -> dict[str, Any]:
        response = self.client.post(
            f"/api/models/{ref}/versions",
            json={"version": version, "manifest": manifest or manifest_for(self.data)},
        )
        assert response.status_code == status, response.text
        return response.json()

    def accept_format(self, fmt: str) -> None:
        """The operator's decision that versions of ``fmt`` (not run here) may be approved."""
        response = self.client.put(f"/api/formats/{fmt}", json={"reason": "tests"})
        assert response.status_code == 200, response.text

    def transition(self, ref: str, version: str, to: str, reason: str = "") -> Any:
        return self.client.post(
            f"/api/models/{ref}/versions/{version}/transitions", json={"to": to, "reason": reason}
        )


def memory_bomb(n: int = 16384) -> onnx.ModelProto:
    """x [-1, 4] -> y = x + sum(ones(n, n)): a tiny file that needs n*n*4 bytes to run."""
    from onnx import TensorProto, helper, numpy_helper

    shape = numpy_helper.from_array(np.array([n, n], dtype=np.int64), "shape")
    one = helper.make_tensor("one", TensorProto.FLOAT, [1], [1.0])
    graph = helper.make_graph(
        [
            helper.make_node("ConstantOfShape", ["shape"], ["big"], value=one),
            helper.make_node("ReduceSum", ["big"], ["total"], keepdims=0),
            helper.make_node("Add", ["x", "total"], ["y"]),
        ],
        "memory_bomb",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[shape],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def find_blob_file(home: Path, digest: str) -> Path:
    """The local blob store's file holding ``digest`` (to corrupt it on purpose)."""
    hex_part = digest.split(":", 1)[1]
    matches = [p for p in (home / "blobs").rglob(hex_part) if p.is_file()]
    assert len(matches) == 1, matches
    return matches[0]

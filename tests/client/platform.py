"""A live server with a tenant (acme: an owner and a consumer), and a real ONNX model
(y = x + 1) published, validated and approved through the client."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from modelport.app import Services
from modelport.client import Client
from modelport.client.transfer import LocalFile, UploadState, digest_file
from modelport.testing import add_one, save
from tests.conftest import ADMIN_KEY, LiveServer

MODEL = "acme/adder"
ROW = [[1.0, 2.0, 3.0, 4.0]]


def example(expected: list[list[float]]) -> dict[str, Any]:
    return {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": ROW}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": expected}],
    }


@dataclass
class Platform:
    server: LiveServer
    services: Services
    admin: Client
    owner_key: str
    consumer_key: str
    folder: Path

    def client(self, key: str) -> Client:
        return Client(self.server.url, key)

    def publish(self, version: str, expected: list[list[float]] | None = None) -> str:
        """Upload the model file and publish it as ``version`` (candidate); its ref."""
        path = self.folder / "model.onnx"
        file = LocalFile("model.onnx", path, path.stat().st_size, digest_file(path, _ignore))
        uploader = self.admin.uploader(state=UploadState(self.folder / "uploads.json"))
        if not uploader.has(file.digest):
            uploader.upload(file, _ignore)
        manifest = {
            "format": "onnx",
            "files": [{"path": file.path, "digest": file.digest, "size": file.size}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
            "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
            "license": "MIT",
            "examples": [example(expected or [[2.0, 3.0, 4.0, 5.0]])],
        }
        return self.admin.versions.publish(MODEL, version, manifest).ref

    def approved(self, version: str) -> str:
        ref = self.publish(version)
        self.admin.versions.transition(ref, "validated", "tests")
        self.admin.versions.transition(ref, "approved", "tests")
        return ref


def _ignore(_: int) -> None:
    pass


@pytest.fixture
def platform(live_server: LiveServer, services: Services, tmp_path: Path) -> Iterator[Platform]:
    tenancy = services.tenancy
    tenancy.create_tenant("acme", actor="admin", name="Acme")
    tenancy.create_tenant("globex", actor="admin", name="Globex")
    tenancy.add_member("acme", "olga", roles=["owner"], actor="admin")
    tenancy.add_member("acme", "carl", roles=["consumer"], actor="admin")
    owner = tenancy.create_key("acme", "olga", name="t", actor="admin").secret
    consumer = tenancy.create_key("acme", "carl", name="t", actor="admin").secret
    save(add_one(), tmp_path / "model.onnx")
    admin = Client(live_server.url, ADMIN_KEY)
    admin.models.create(MODEL, task="regression", license="MIT")
    yield Platform(live_server, services, admin, owner, consumer, tmp_path)
    admin.close()

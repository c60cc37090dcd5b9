"""Runtime fixtures: a dict-backed blob source, manifests built around real ONNX models,
fake formats whose loads and executions the tests control, and a host factory."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest

from modelport.digests import sha256_digest
from modelport.manifest import Manifest, manifest_digest
from modelport.runtime.admission import MemoryBudget
from modelport.runtime.cache import ModelCache
from modelport.runtime.formats import FormatRegistry
from modelport.runtime.formats.base import LoadedModel, ModelFormat
from modelport.runtime.host import ModelHost
from modelport.runtime.types import BatchingConfig, VersionKey
from tests.models import add_one, mlp


class DictBlobSource:
    """Blobs in a dict; ``reads`` counts how often each digest was streamed."""

    def __init__(self) -> None:
        self.blobs: dict[str, bytes] = {}
        self.reads: dict[str, int] = {}

    def add(self, data: bytes) -> str:
        digest = sha256_digest(data)
        self.blobs[digest] = data
        return digest

    def size(self, digest: str) -> int | None:
        data = self.blobs.get(digest)
        return None if data is None else len(data)

    def read(self, digest: str, start: int = 0, end: int | None = None) -> Iterator[bytes]:
        self.reads[digest] = self.reads.get(digest, 0) + 1
        data = self.blobs[digest][start:end]
        for i in range(0, len(data), 4096):
            yield data[i : i + 4096]


def onnx_manifest(
    source: DictBlobSource,
    model: onnx.ModelProto,
    *,
    inputs: list[dict[str, Any]],
    outputs: list[dict[str, Any]],
    example: dict[str, Any] | None = None,
    **extra: Any,
) -> tuple[Manifest, str]:
    data = model.SerializeToString()
    digest = source.add(data)
    raw: dict[str, Any] = {
        "format": "onnx",
        "files": [{"path": "model.onnx", "digest": digest, "size": len(data)}],
        "inputs": inputs,
        "outputs": outputs,
        "license": "MIT",
        "examples": [example] if example else [],
        **extra,
    }
    manifest = Manifest.model_validate(raw)
    return manifest, manifest_digest(manifest)


def add_one_manifest(
    source: DictBlobSource, *, with_example: bool = True, **extra: Any
) -> tuple[Manifest, str]:
    example = {
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [1, 4], "data": [2, 3, 4, 5]}],
    }
    return onnx_manifest(
        source,
        add_one(),
        inputs=[{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        outputs=[{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        example=example if with_example else None,
        **extra,
    )


def mlp_manifest(source: DictBlobSource, **extra: Any) -> tuple[Manifest, str]:
    return onnx_manifest(
        source,
        mlp(),
        inputs=[{"name": "features", "datatype": "FP32", "shape": [-1, 8]}],
        outputs=[{"name": "probabilities", "datatype": "FP32", "shape": [-1, 3]}],
        **extra,
    )


def key_for(model: str, version: str, digest: str) -> VersionKey:
    return VersionKey(model, version, digest)


class CountingModel:
    """A loaded model that adds one, counts executions and can be held at a gate."""

    def __init__(self, delay: float = 0.0) -> None:
        self.delay = delay
        self.executions: list[int] = []  # rows of each execution
        self.gate = threading.Event()
        self.gate.set()
        self.started = threading.Event()
        self.fail_with: Exception | None = None
        self.unloaded = False
        self.lock = threading.Lock()

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        self.started.set()
        self.gate.wait(60)
        if self.delay:
            time.sleep(self.delay)
        (array,) = inputs.values()
        with self.lock:
            self.executions.append(int(array.shape[0]))
        if self.fail_with is not None:
            raise self.fail_with
        return {"y": array + 1}

    def memory_bytes(self) -> int:
        return 0

    def unload(self) -> None:
        self.unloaded = True


class FakeFormat:
    """Loads ``CountingModel``s; a load can be made to hang or raise."""

    name = "fake"

    def __init__(self) -> None:
        self.models: list[CountingModel] = []
        self.hang = threading.Event()  # set: loads block until released
        self.release = threading.Event()
        self.fail_with: Exception | None = None
        self.estimate = 1 << 20

    def estimate_memory(self, manifest: Manifest) -> int:
        return self.estimate

    def load(self, files: dict[str, Path], manifest: Manifest) -> LoadedModel:
        if self.hang.is_set():
            self.release.wait(30)
        if self.fail_with is not None:
            raise self.fail_with
        model = CountingModel()
        self.models.append(model)
        return model


def fake_manifest(source: DictBlobSource, tag: str = "a", **extra: Any) -> tuple[Manifest, str]:
    data = f"fake model {tag}".encode()
    digest = source.add(data)
    raw: dict[str, Any] = {
        "format": "fake",
        "files": [{"path": "model.bin", "digest": digest, "size": len(data)}],
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}],
        "license": "MIT",
        **extra,
    }
    manifest = Manifest.model_validate(raw)
    return manifest, manifest_digest(manifest)


@pytest.fixture
def source() -> DictBlobSource:
    return DictBlobSource()


@pytest.fixture
def fake_format() -> FakeFormat:
    return FakeFormat()


HostFactory = Callable[..., ModelHost]


@pytest.fixture
def make_host(tmp_path: Path, fake_format: FakeFormat) -> Iterator[HostFactory]:
    hosts: list[ModelHost] = []
    real = FormatRegistry({"onnx": {"intra_op_threads": 1}})

    def formats(name: str) -> ModelFormat:
        return fake_format if name == "fake" else real(name)

    def factory(**options: Any) -> ModelHost:
        options.setdefault("budget", MemoryBudget(host_bytes=None))
        options.setdefault("batching", BatchingConfig(max_batch_size=32))
        options.setdefault("formats", formats)
        host = ModelHost(cache=ModelCache(tmp_path / "cache"), **options)
        hosts.append(host)
        return host

    yield factory
    fake_format.release.set()
    for host in hosts:
        host.close()

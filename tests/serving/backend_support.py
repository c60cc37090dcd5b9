"""Serving test helpers: versions with manifests built in code, and requests for them."""

from __future__ import annotations

import time
from typing import Any

import numpy as np

from modelport.digests import sha256_digest
from modelport.manifest import Manifest, manifest_digest
from modelport.serving.types import BackendRequest, VersionRef

X4 = [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}]
Y4 = [{"name": "y", "datatype": "FP32", "shape": [-1, 4]}]


def version_ref(
    model: str = "acme/adder",
    version: str = "1",
    *,
    fmt: str = "onnx",
    inputs: list[dict[str, Any]] | None = None,
    outputs: list[dict[str, Any]] | None = None,
    **extra: Any,
) -> VersionRef:
    """A version whose manifest names one (unstored) file; ``extra`` goes in the manifest."""
    data = f"{model}:{version}".encode()
    manifest = Manifest.model_validate(
        {
            "format": fmt,
            "files": [{"path": "model.bin", "digest": sha256_digest(data), "size": len(data)}],
            "inputs": inputs or X4,
            "outputs": outputs or Y4,
            "license": "MIT",
            **extra,
        }
    )
    return VersionRef(model, version, manifest_digest(manifest), manifest)


def request_for(
    version: VersionRef,
    x: np.ndarray | None = None,
    *,
    timeout: float = 2.0,
    name: str = "x",
    **extra: Any,
) -> BackendRequest:
    array = np.array([[1, 2, 3, 4]], dtype=np.float32) if x is None else x
    return BackendRequest(
        version=version, inputs={name: array}, deadline=time.monotonic() + timeout, **extra
    )

"""Server and model metadata documents of the Open Inference Protocol."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from modelport.manifest import TensorSpec

SERVER_EXTENSIONS = ("binary_tensor_data",)
"""Protocol extensions this server implements, as reported in server metadata."""


def server_metadata(
    version: str, *, name: str = "modelport", extensions: Iterable[str] = SERVER_EXTENSIONS
) -> dict[str, Any]:
    """``GET /v2``: ``{"name", "version", "extensions"}``."""
    return {"name": name, "version": version, "extensions": list(extensions)}


def model_metadata(
    name: str,
    versions: Sequence[str],
    platform: str,
    inputs: Sequence[TensorSpec],
    outputs: Sequence[TensorSpec],
) -> dict[str, Any]:
    """``GET /v2/models/{name}[/versions/{v}]``: names, versions, platform and tensor specs.

    ``platform`` is the model format, e.g. ``onnx`` (Triton says ``onnxruntime_onnx``;
    the protocol leaves it free). Variable dimensions stay ``-1``.
    """
    return {
        "name": name,
        "versions": list(versions),
        "platform": platform,
        "inputs": [tensor_metadata(spec) for spec in inputs],
        "outputs": [tensor_metadata(spec) for spec in outputs],
    }


def tensor_metadata(spec: TensorSpec) -> dict[str, Any]:
    """One ``$metadata_tensor``: ``{"name", "datatype", "shape"}``."""
    return {"name": spec.name, "datatype": spec.datatype, "shape": list(spec.shape)}

"""Server and model metadata documents of the Open Inference Protocol."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

from modelport.manifest import Manifest, TensorSpec
from modelport.observability.types import Timed, VersionStatistics

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


# ---- Triton's model configuration and statistics extensions
PLATFORMS = {"onnx": ("onnxruntime_onnx", "onnxruntime")}
"""Triton's (platform, backend) for a model format; any other format names both."""


def model_config(name: str, manifest: Manifest) -> dict[str, Any]:
    """``GET /v2/models/{name}[/versions/{v}]/config``: the model configuration Triton
    answers (``model_config.proto`` as JSON).

    As in Triton, a model whose every tensor's first dimension is ``-1`` (the runtime
    merges requests along it) declares ``max_batch_size`` (the manifest's, at least 1)
    and its tensors' ``dims`` without that batch dimension; any other model declares
    ``max_batch_size`` 0 and its whole shapes, where ``-1`` is a variable dimension."""
    tensors = [*manifest.inputs, *manifest.outputs]
    batched = bool(tensors) and all(t.shape and t.shape[0] == -1 for t in tensors)
    platform, backend = PLATFORMS.get(manifest.format, (manifest.format, manifest.format))
    return {
        "name": name,
        "platform": platform,
        "backend": backend,
        "max_batch_size": max(1, manifest.resources.max_batch_size) if batched else 0,
        "input": [_config_tensor(t, batched) for t in manifest.inputs],
        "output": [_config_tensor(t, batched) for t in manifest.outputs],
    }


def _config_tensor(spec: TensorSpec, batched: bool) -> dict[str, Any]:
    # Triton names BYTES tensors TYPE_STRING; every other datatype is TYPE_ + its name.
    datatype = "STRING" if spec.datatype == "BYTES" else spec.datatype
    dims = list(spec.shape[1:] if batched else spec.shape)
    return {"name": spec.name, "data_type": f"TYPE_{datatype}", "dims": dims}


def model_statistics(found: Sequence[VersionStatistics]) -> dict[str, Any]:
    """``GET /v2/models[/{name}[/versions/{v}]]/stats``: Triton's statistics document.

    ``inference_count`` counts rows (a batch of 8 is 8 inferences) and
    ``execution_count`` batches, as Triton does. ``compute_infer`` is per executed batch;
    the runtime times a batch as a whole, so ``compute_input`` and ``compute_output``
    (inside it) count the requests answered with no time of their own."""
    return {"model_stats": [_version_statistics(s) for s in found]}


def _version_statistics(found: VersionStatistics) -> dict[str, Any]:
    def timed(value: Timed) -> dict[str, int]:
        return {"count": value.count, "ns": value.ns}

    untimed = timed(Timed(found.success.count, 0))
    return {
        "name": found.model,
        "version": found.version,
        "last_inference": found.last_inference_ms,
        "inference_count": found.rows,
        "execution_count": found.execution.count,
        "inference_stats": {
            "success": timed(found.success),
            "fail": timed(found.fail),
            "queue": timed(found.queue),
            "compute_input": untimed,
            "compute_infer": timed(found.execution),
            "compute_output": untimed,
        },
        "batch_stats": [],
    }

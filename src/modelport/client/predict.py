"""Predictions over the Open Inference Protocol's JSON (``/v2``): numpy arrays in,
numpy arrays out. A target is a model (``owner/name``, ``owner/name:V``) or an endpoint
(a name without ``/``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelport.client.family import AsyncFamily, Family
from modelport.client.transport import Call, segment, split_model
from modelport.client.types import InferResult, Json
from modelport.errors import InvalidInput
from modelport.runtime.tensors import OIP_TO_NUMPY, oip_datatype

Inputs = Mapping[str, Any]
"""Input tensors by name: numpy arrays (sent in their dtype) or nested lists (sent in the
datatype the model declares)."""


def target_path(target: str) -> str:
    """``/v2/models/...`` of a model ref or an endpoint name."""
    if "/" not in target:
        return f"/v2/models/{segment(target)}"
    model, _, version = target.partition(":")
    owner, name = split_model(model)
    path = f"/v2/models/{segment(owner)}/{segment(name)}"
    return f"{path}/versions/{segment(version)}" if version else path


def metadata_call(target: str) -> Call[Json]:
    return Call("GET", target_path(target), lambda body: dict(body))


def needs_metadata(inputs: Inputs) -> bool:
    return any(not isinstance(value, np.ndarray) for value in inputs.values())


def encode_inputs(inputs: Inputs, declared: Json | None = None) -> list[Json]:
    """OIP JSON tensors; values that are not arrays take the declared datatype."""
    datatypes = {t["name"]: t["datatype"] for t in (declared or {}).get("inputs", [])}
    tensors = []
    for name, value in inputs.items():
        array = value if isinstance(value, np.ndarray) else _as_array(name, value, datatypes)
        try:
            datatype = oip_datatype(array)
        except InvalidInput as exc:
            raise ValueError(f"input {name!r}: {exc.message}") from None
        data = array.reshape(-1).tolist()
        if datatype == "BYTES":
            data = [x.decode() if isinstance(x, bytes) else str(x) for x in data]
        tensors.append(
            {"name": name, "datatype": datatype, "shape": list(array.shape), "data": data}
        )
    return tensors


def _as_array(name: str, value: Any, datatypes: dict[str, str]) -> np.ndarray:
    datatype = datatypes.get(name)
    if datatype == "BYTES":
        return np.array(value, dtype=np.object_)
    dtype = OIP_TO_NUMPY.get(datatype) if datatype else None
    try:
        return np.asarray(value, dtype=dtype)
    except (ValueError, TypeError) as exc:
        raise ValueError(f"input {name!r}: not a {datatype or 'numeric'} tensor ({exc})") from None


def decode_outputs(body: Json) -> dict[str, np.ndarray]:
    outputs = {}
    for tensor in body.get("outputs", []):
        datatype = tensor["datatype"]
        dtype = np.dtype(np.object_) if datatype == "BYTES" else OIP_TO_NUMPY[datatype]
        array = np.array(tensor["data"], dtype=dtype).reshape(tensor["shape"])
        outputs[tensor["name"]] = array
    return outputs


def _result(body: Json) -> InferResult:
    return InferResult(
        body.get("model_name", ""),
        body.get("model_version"),
        body.get("id"),
        decode_outputs(body),
        body,
    )


def infer_call(
    target: str,
    inputs: Inputs,
    *,
    declared: Json | None = None,
    outputs: Sequence[str] | None = None,
    parameters: Json | None = None,
) -> Call[InferResult]:
    body: Json = {"inputs": encode_inputs(inputs, declared)}
    if outputs:
        body["outputs"] = [{"name": name} for name in outputs]
    if parameters:
        body["parameters"] = dict(parameters)
    return Call("POST", f"{target_path(target)}/infer", _result, json=body)


class Predict(Family):
    """``client.predict``."""

    def metadata(self, target: str) -> Json:
        """The target's inputs and outputs (names, datatypes, shapes)."""
        return self._t.run(metadata_call(target))

    def infer(
        self,
        target: str,
        inputs: Inputs,
        *,
        outputs: Sequence[str] | None = None,
        parameters: Json | None = None,
    ) -> InferResult:
        """One prediction; ``outputs`` names the outputs to return (default: all)."""
        declared = self.metadata(target) if needs_metadata(inputs) else None
        call = infer_call(target, inputs, declared=declared, outputs=outputs, parameters=parameters)
        return self._t.run(call)


class AsyncPredict(AsyncFamily):
    async def metadata(self, target: str) -> Json:
        return await self._t.run(metadata_call(target))

    async def infer(
        self,
        target: str,
        inputs: Inputs,
        *,
        outputs: Sequence[str] | None = None,
        parameters: Json | None = None,
    ) -> InferResult:
        declared = await self.metadata(target) if needs_metadata(inputs) else None
        call = infer_call(target, inputs, declared=declared, outputs=outputs, parameters=parameters)
        return await self._t.run(call)

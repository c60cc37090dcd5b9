"""JSON of ``POST /api/endpoints/{name}:predict``: pure parsing and encoding.

Two request forms, told apart by the type of ``inputs``:

- tensors, as in the Open Inference Protocol (a list)::

      {"inputs": [{"name": "x", "datatype": "FP32", "shape": [1, 4], "data": [1, 2, 3, 4]}],
       "outputs": [{"name": "y"}], "parameters": {"priority": "batch"}}

- simple (an object of nested arrays; datatypes come from the endpoint's schema)::

      {"inputs": {"x": [[1, 2, 3, 4]]}, "outputs": ["y"]}

Either may carry ``subject`` (the sticky-routing key, also ``X-Subject-Key``),
``id`` and ``parameters`` (``timeout`` in microseconds, ``priority``, and
parameters for the model). Outputs come back in the request's form: a list of
tensors, or an object of nested arrays.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelport.errors import Internal, InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import decode_json_tensor, encode_json_data, oip_datatype

TENSORS = "tensors"
SIMPLE = "simple"
MAX_SUBJECT = 256


@dataclass(frozen=True)
class PredictRequest:
    form: str
    """``tensors`` or ``simple``: the response answers in the same form."""
    inputs: dict[str, np.ndarray]
    outputs: tuple[str, ...] | None = None
    subject: str | None = None
    id: str | None = None
    parameters: dict[str, Any] = field(default_factory=dict)
    declared: tuple[TensorSpec, ...] | None = None
    """The endpoint's outputs: only these are answered, in their datatypes."""


def parse_predict(
    doc: Any, inputs: Sequence[TensorSpec], outputs: Sequence[TensorSpec], *, max_elements: int
) -> PredictRequest:
    """Decode and check a predict body against the endpoint's schema (400 on any mismatch)."""
    if not isinstance(doc, dict):
        raise InvalidInput("request body must be a JSON object", code="invalid_request")
    specs = {spec.name: spec for spec in inputs}
    raw = doc.get("inputs")
    if isinstance(raw, list):
        form, arrays = TENSORS, _tensor_inputs(raw, specs, max_elements)
    elif isinstance(raw, dict):
        form, arrays = SIMPLE, _simple_inputs(raw, specs, max_elements)
    else:
        raise InvalidInput(
            "'inputs' must be a list of tensors or an object of arrays by input name",
            code="invalid_request",
        )
    for name, spec in specs.items():
        array = arrays.get(name)
        if array is None:
            raise InvalidInput(
                f"missing input '{name}'; the endpoint takes {_names(specs)}",
                code="invalid_input",
                input=name,
            )
        if not _fits(spec.shape, array.shape):
            raise InvalidInput(
                f"input '{name}': expected shape {list(spec.shape)}, got {list(array.shape)}",
                code="invalid_input",
                input=name,
            )
    subject = doc.get("subject")
    if subject is not None and (
        not isinstance(subject, str) or not 0 < len(subject) <= MAX_SUBJECT
    ):
        raise InvalidInput(
            f"'subject' must be a string of 1-{MAX_SUBJECT} characters", code="invalid_request"
        )
    request_id = doc.get("id")
    if request_id is not None and not isinstance(request_id, str):
        raise InvalidInput("'id' must be a string", code="invalid_request")
    parameters = doc.get("parameters") or {}
    if not isinstance(parameters, dict):
        raise InvalidInput("'parameters' must be an object", code="invalid_request")
    return PredictRequest(
        form=form,
        inputs=arrays,
        outputs=_requested(doc.get("outputs"), outputs),
        subject=subject,
        id=request_id,
        declared=tuple(outputs),
        parameters=parameters,
    )


def _tensor_inputs(
    items: list[Any], specs: Mapping[str, TensorSpec], max_elements: int
) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for item in items:
        if not isinstance(item, dict):
            raise InvalidInput("each input must be an object", code="invalid_request")
        name, datatype, shape = item.get("name"), item.get("datatype"), item.get("shape")
        spec = _spec(specs, name, arrays)
        if datatype != spec.datatype:
            raise InvalidInput(
                f"input '{name}': expected datatype {spec.datatype}, got {datatype}",
                code="invalid_input",
                input=name,
            )
        if not isinstance(shape, list) or not all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape
        ):
            raise InvalidInput(
                f"input '{name}': shape must be a list of non-negative integers",
                code="invalid_tensor_shape",
            )
        total += math.prod(shape)
        _check_elements(total, max_elements)
        arrays[spec.name] = decode_json_tensor(spec.name, spec.datatype, shape, item.get("data"))
    return arrays


def _simple_inputs(
    items: dict[str, Any], specs: Mapping[str, TensorSpec], max_elements: int
) -> dict[str, np.ndarray]:
    arrays: dict[str, np.ndarray] = {}
    total = 0
    for name, data in items.items():
        spec = _spec(specs, name, arrays)
        shape = _nested_shape(data)
        total += math.prod(shape)
        _check_elements(total, max_elements)
        nested = data if isinstance(data, list) else [data]
        arrays[spec.name] = decode_json_tensor(spec.name, spec.datatype, shape, nested)
    return arrays


def _spec(specs: Mapping[str, TensorSpec], name: Any, seen: Mapping[str, Any]) -> TensorSpec:
    spec = specs.get(name) if isinstance(name, str) else None
    if spec is None:
        raise InvalidInput(
            f"unknown input {name!r}; the endpoint takes {_names(specs)}",
            code="invalid_input",
            input=str(name),
        )
    if name in seen:
        raise InvalidInput(f"input '{name}' is given twice", code="duplicate_input")
    return spec


def _nested_shape(data: Any) -> list[int]:
    """The shape of nested lists, read along their first elements (ragged data is then
    refused by the element count)."""
    shape = []
    while isinstance(data, list):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return shape


def _check_elements(total: int, limit: int) -> None:
    if total > limit:
        raise InvalidInput(
            f"inputs declare {total} elements, above the limit of {limit}",
            code="tensor_too_large",
        )


def _fits(declared: Sequence[int], actual: Sequence[int]) -> bool:
    return len(declared) == len(actual) and all(
        want in (-1, got) for want, got in zip(declared, actual, strict=True)
    )


def _requested(raw: Any, outputs: Sequence[TensorSpec]) -> tuple[str, ...] | None:
    if raw is None:
        return None
    if not isinstance(raw, list):
        raise InvalidInput("'outputs' must be a list", code="invalid_request")
    declared = {spec.name for spec in outputs}
    names: list[str] = []
    for item in raw:
        name = item.get("name") if isinstance(item, dict) else item
        if name not in declared:  # so every name kept is one of the declared strings
            raise InvalidInput(
                f"unknown output {name!r}; the endpoint gives {', '.join(sorted(declared))}",
                code="unknown_output",
                output=str(name),
            )
        names.append(name)
    return tuple(names) or None


def encode_outputs(
    form: str, outputs: Mapping[str, np.ndarray], declared: Sequence[TensorSpec] | None = None
) -> Any:
    """Outputs in the request's form. With ``declared``, only declared outputs are
    answered (those the model gave, in declared order), each in its declared datatype:
    another raises ``Internal`` ``output_datatype_mismatch``."""
    if declared is not None:
        outputs = _declared_only(outputs, declared)
    if form == SIMPLE:
        return {name: _nested(np.asarray(array)) for name, array in outputs.items()}
    return [
        {
            "name": name,
            "datatype": oip_datatype(array := np.asarray(value)),
            "shape": list(array.shape),
            "data": encode_json_data(array),
        }
        for name, value in outputs.items()
    ]


def _declared_only(
    outputs: Mapping[str, np.ndarray], declared: Sequence[TensorSpec]
) -> dict[str, np.ndarray]:
    kept: dict[str, np.ndarray] = {}
    for spec in declared:
        if spec.name not in outputs:
            continue  # not requested
        array = np.asarray(outputs[spec.name])
        try:
            datatype = oip_datatype(array)
        except InvalidInput:
            datatype = str(array.dtype)
        if datatype != spec.datatype:
            raise Internal(
                f"output '{spec.name}' is declared {spec.datatype}, but the model produced "
                f"{datatype}",
                code="output_datatype_mismatch",
                output=spec.name,
                declared=spec.datatype,
            )
        kept[spec.name] = array
    return kept


def _nested(array: np.ndarray) -> Any:
    if array.dtype.kind in ("O", "S", "U"):
        return np.array(encode_json_data(array), dtype=object).reshape(array.shape).tolist()
    return array.tolist()


def _names(specs: Mapping[str, TensorSpec]) -> str:
    return ", ".join(f"'{name}'" for name in specs)

"""A job's tensors as documents: OIP-v2-style JSON tensors (``{"name", "datatype",
"shape", "data"}``), decoded to numpy against a target's declared tensors, and encoded
back. Pure: no I/O."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import decode_json_tensor, encode_json_data, oip_datatype

MAX_RANK = 16


def loads(raw: bytes) -> dict[str, Any]:
    """A stage's document (a JSON object)."""
    try:
        doc = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        raise InvalidInput(f"not JSON: {exc}", code="invalid_job_input") from exc
    if not isinstance(doc, dict):
        raise InvalidInput("a job's input must be a JSON object", code="invalid_job_input")
    return doc


def dumps(doc: Mapping[str, Any]) -> bytes:
    """Canonical bytes (sorted keys): the same document has the same digest."""
    return orjson.dumps(doc, option=orjson.OPT_SORT_KEYS | orjson.OPT_SERIALIZE_NUMPY)


def decode_inputs(items: Any, inputs: Sequence[TensorSpec]) -> dict[str, np.ndarray]:
    """``items`` (a list of JSON tensors) as arrays, checked against the declared
    ``inputs``: each declared one present, no other; datatype and rank equal, each fixed
    dimension equal (``invalid_input``)."""
    if not isinstance(items, list) or not items:
        raise InvalidInput("'inputs' must be a non-empty list of tensors", code="invalid_input")
    specs = {spec.name: spec for spec in inputs}
    arrays: dict[str, np.ndarray] = {}
    for item in items:
        if not isinstance(item, dict):
            raise InvalidInput("each input must be a JSON object", code="invalid_input")
        name, datatype, shape = item.get("name"), item.get("datatype"), item.get("shape")
        if not isinstance(name, str) or name not in specs:
            raise InvalidInput(
                f"unknown input {name!r}; the target takes {_names(specs)}", code="invalid_input"
            )
        if name in arrays:
            raise InvalidInput(f"input '{name}' given twice", code="invalid_input")
        spec = specs[name]
        if datatype != spec.datatype:
            raise InvalidInput(
                f"input '{name}': expected datatype {spec.datatype}, got {datatype}",
                code="invalid_input",
            )
        if (
            not isinstance(shape, list)
            or len(shape) > MAX_RANK
            or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape)
        ):
            raise InvalidInput(f"input '{name}': invalid shape {shape!r}", code="invalid_input")
        if len(shape) != len(spec.shape) or any(
            want != -1 and want != got for want, got in zip(spec.shape, shape, strict=True)
        ):
            raise InvalidInput(
                f"input '{name}': expected shape {list(spec.shape)}, got {shape}",
                code="invalid_input",
            )
        arrays[name] = decode_json_tensor(name, spec.datatype, shape, item.get("data"))
    missing = [name for name in specs if name not in arrays]
    if missing:
        raise InvalidInput(
            f"missing input '{missing[0]}'; the target takes {_names(specs)}",
            code="invalid_input",
        )
    return arrays


def check_outputs(asked: Any, outputs: Sequence[TensorSpec]) -> tuple[str, ...] | None:
    """The output names asked for (None: every one), each declared (``unknown_output``)."""
    if asked is None:
        return None
    if not isinstance(asked, list) or not all(isinstance(name, str) for name in asked):
        raise InvalidInput("'outputs' must be a list of names", code="invalid_input")
    declared = {spec.name for spec in outputs}
    for name in asked:
        if name not in declared:
            raise InvalidInput(
                f"unknown output '{name}'; the target gives "
                f"{', '.join(repr(n) for n in sorted(declared))}",
                code="unknown_output",
            )
    return tuple(asked)


def encode_tensor(name: str, array: np.ndarray) -> dict[str, Any]:
    return {
        "name": name,
        "datatype": oip_datatype(array),
        "shape": list(array.shape),
        "data": encode_json_data(array),
    }


def _names(specs: Mapping[str, TensorSpec]) -> str:
    return ", ".join(f"'{name}'" for name in specs)

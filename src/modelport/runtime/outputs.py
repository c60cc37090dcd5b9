"""A model's outputs as its manifest declares them: only declared outputs, in their
declared datatypes.

What a format plugin returns is whatever its library gives; what leaves the runtime is
what the manifest promises. ``conform_outputs`` keeps the declared outputs (in declared
order, others dropped), and gives each its declared datatype where that loses nothing
the value holds: the same dtype as is; a safe numpy cast (``INT32`` to ``INT64``...);
integers to a narrower integer type when every value fits; floats to a narrower float
type when every finite value is within its range. Anything else (floats declared as
integers, numbers as ``BYTES``, Python objects such as dicts as anything) is an error,
``Internal`` with code ``output_datatype_mismatch``; an output the model did not give is
``missing_output``. Never a silent ``repr``.

``DeclaredOutputs`` wraps a loaded model so every batch it executes is conformed; the
host serves, warms up and validates models through it.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from modelport.errors import Internal
from modelport.manifest import TensorSpec
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.tensors import OIP_TO_NUMPY


def conform_outputs(
    outputs: Mapping[str, Any], specs: Sequence[TensorSpec]
) -> dict[str, np.ndarray]:
    """The declared outputs of ``outputs`` in their declared datatypes (see the module)."""
    conformed: dict[str, np.ndarray] = {}
    for spec in specs:
        if spec.name not in outputs:
            raise Internal(f"the model produced no output '{spec.name}'", code="missing_output")
        conformed[spec.name] = as_declared(spec, outputs[spec.name])
    return conformed


def as_declared(spec: TensorSpec, value: Any) -> np.ndarray:
    """``value`` as an array of ``spec.datatype``, or ``output_datatype_mismatch``."""
    array = value if isinstance(value, np.ndarray) else _array(spec, value)
    target = OIP_TO_NUMPY[spec.datatype]
    if array.dtype == target:
        if target.kind == "O" and not _all_text(array):
            raise _mismatch(spec, "Python objects that are neither bytes nor text")
        return array
    kind = array.dtype.kind
    if spec.datatype == "BYTES":
        if kind in ("S", "U"):
            out = np.empty(array.shape, dtype=np.object_)
            out[...] = array
            return out
        raise _mismatch(spec, _described(array))
    if kind == "O" or kind in ("S", "U") or kind not in ("b", "i", "u", "f"):
        raise _mismatch(spec, _described(array))
    if np.can_cast(array.dtype, target, "safe"):
        return array.astype(target)
    if kind in ("i", "u") and target.kind in ("i", "u"):
        info = np.iinfo(target)
        if array.size == 0 or (int(array.min()) >= info.min and int(array.max()) <= info.max):
            return array.astype(target)
        raise _mismatch(spec, f"{array.dtype} values outside the range of {spec.datatype}")
    if kind == "f" and target.kind == "f":
        finite = array[np.isfinite(array)]
        limit = float(np.finfo(target).max)
        if finite.size == 0 or float(np.abs(finite).max()) <= limit:
            return array.astype(target)
        raise _mismatch(spec, f"{array.dtype} values outside the range of {spec.datatype}")
    raise _mismatch(spec, _described(array))


class DeclaredOutputs:
    """A loaded model whose ``execute`` answers its manifest's declared outputs only, in
    their declared datatypes."""

    def __init__(self, model: LoadedModel, specs: Sequence[TensorSpec]) -> None:
        self.model = model
        self.specs = tuple(specs)

    def execute(self, inputs: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
        return conform_outputs(self.model.execute(inputs), self.specs)

    def memory_bytes(self) -> int:
        return self.model.memory_bytes()

    def unload(self) -> None:
        self.model.unload()


def _array(spec: TensorSpec, value: Any) -> np.ndarray:
    try:
        return np.asarray(value)
    except (ValueError, TypeError):
        raise _mismatch(spec, f"a {type(value).__name__} that is not a regular array") from None


def _all_text(array: np.ndarray) -> bool:
    return all(isinstance(item, (bytes, str)) for item in array.reshape(-1).tolist())


def _described(array: np.ndarray) -> str:
    if array.dtype.kind == "O":
        kinds = sorted({type(item).__name__ for item in array.reshape(-1).tolist()[:16]})
        return "Python objects (" + ", ".join(kinds or ["none"]) + ")"
    return f"{array.dtype} values"


def _mismatch(spec: TensorSpec, found: str) -> Internal:
    return Internal(
        f"output '{spec.name}' is declared {spec.datatype}, but the model produced {found}, "
        f"which {spec.datatype} cannot represent",
        code="output_datatype_mismatch",
        output=spec.name,
        declared=spec.datatype,
    )

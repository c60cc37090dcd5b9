"""``push --example-input FILE``: an example for the manifest, its expected outputs
computed here by the runtime that will serve the model.

``FILE`` is JSON, an object by input name whose values are nested lists
(``{"X": [[5.1, 3.5, 1.4, 0.2]]}``, the shape read from the nesting) or explicit
tensors (``{"X": {"shape": [1, 4], "data": [5.1, 3.5, 1.4, 0.2]}}``); or a NumPy
``.npy`` array (no pickles) for a model with a single input. Each input takes its
declared datatype: data that does not fit it, or data that disagrees with its shape,
is refused (``invalid_example_input``). The model is then loaded with the format's own
plugin (the one the server runs, ``modelport.runtime.formats``) and executed once; its
declared outputs, in their declared datatypes, become the example's expected outputs.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orjson

from modelport.errors import InvalidInput, ModelportError
from modelport.manifest import Manifest, TensorSpec
from modelport.registry.service import parse_manifest
from modelport.runtime.formats import get_format, known_formats
from modelport.runtime.outputs import DeclaredOutputs
from modelport.runtime.tensors import bytes_as_text, decode_json_tensor, numpy_dtype

ROLE = "example input"


def read_example_input(path: Path, inputs: list[TensorSpec]) -> dict[str, np.ndarray]:
    """The example's input arrays from ``path`` (JSON or ``.npy``), in declared datatypes."""
    if path.suffix == ".npy":
        return _read_npy(path, inputs)
    try:
        doc = orjson.loads(path.read_bytes())
    except (OSError, orjson.JSONDecodeError) as exc:
        raise _invalid(f"{path} is not a readable JSON file: {exc}") from None
    if not isinstance(doc, dict):
        raise _invalid(f"{path} must hold a JSON object of input name -> data")
    specs = {spec.name: spec for spec in inputs}
    unknown = [name for name in doc if name not in specs]
    if unknown:
        raise _invalid(f"{path}: unknown input '{unknown[0]}'; the model takes {_names(specs)}")
    missing = [name for name in specs if name not in doc]
    if missing:
        raise _invalid(f"{path}: input '{missing[0]}' is missing; the model takes {_names(specs)}")
    return {name: _from_json(specs[name], doc[name], path) for name in specs}


def compute_example(
    manifest: Manifest, files: dict[str, Path], inputs: dict[str, np.ndarray]
) -> dict[str, Any]:
    """Run the model on ``inputs``; the manifest example (inputs and expected outputs)."""
    if manifest.format not in known_formats():
        raise InvalidInput(
            f"--example-input needs a format this machine can run "
            f"({', '.join(sorted(known_formats()))}), not '{manifest.format}'",
            code="format_not_runnable",
        )
    model = DeclaredOutputs(get_format(manifest.format).load(files, manifest), manifest.outputs)
    try:
        try:
            outputs = model.execute(inputs)
        except ModelportError:
            raise
        except Exception as exc:  # the model's own library refused the example
            raise InvalidInput(
                f"the model failed on the example input: {exc}", code="example_failed"
            ) from None
    finally:
        model.unload()
    return {
        "inputs": [_tensor(spec, inputs[spec.name]) for spec in manifest.inputs],
        "outputs": [_tensor(spec, outputs[spec.name]) for spec in manifest.outputs],
    }


def _from_json(spec: TensorSpec, value: Any, path: Path) -> np.ndarray:
    if isinstance(value, dict):
        shape, data = value.get("shape"), value.get("data")
        if set(value) - {"shape", "data"} or not isinstance(shape, list) or data is None:
            raise _invalid(
                f"{path}: input '{spec.name}' must be a nested list, or an object with "
                "'shape' and 'data'"
            )
        if not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in shape):
            raise _invalid(f"{path}: input '{spec.name}': shape {shape} must hold sizes")
    else:
        shape, data = _nesting_shape(value), value
    try:
        return decode_json_tensor(spec.name, spec.datatype, shape, data, role=ROLE)
    except InvalidInput as exc:
        raise _invalid(f"{path}: {exc.message}") from None


def _nesting_shape(data: Any) -> list[int]:
    """The shape nested lists claim, read down their first elements (a ragged list then
    fails the element count or the regularity check)."""
    shape: list[int] = []
    while isinstance(data, list):
        shape.append(len(data))
        if not data:
            break
        data = data[0]
    return shape


def _read_npy(path: Path, inputs: list[TensorSpec]) -> dict[str, np.ndarray]:
    if len(inputs) != 1:
        raise _invalid(
            f"{path}: a .npy file gives one input, the model takes {len(inputs)}; "
            "use a JSON file of input name -> data"
        )
    spec = inputs[0]
    try:
        array = np.load(path, allow_pickle=False)
    except (OSError, ValueError) as exc:
        raise _invalid(f"{path} is not a readable .npy array without pickles: {exc}") from None
    return {spec.name: _cast(spec, array, path)}


def _cast(spec: TensorSpec, array: np.ndarray, path: Path) -> np.ndarray:
    """``array`` in ``spec``'s datatype where no value changes kind: floats and integers
    to a float type, integers to an integer type whose range holds them."""
    if spec.datatype == "BYTES":
        if array.dtype.kind in ("S", "U"):
            items = [v.encode() if isinstance(v, str) else bytes(v) for v in array.reshape(-1)]
            out = np.empty(len(items), dtype=np.object_)
            out[:] = items
            return out.reshape(array.shape)
        raise _invalid(f"{path} holds {array.dtype} values; input '{spec.name}' is BYTES")
    dtype = numpy_dtype(spec.name, spec.datatype, role=ROLE)
    kind = array.dtype.kind
    fits = (
        array.dtype == dtype
        or (dtype.kind == "f" and kind in ("f", "i", "u"))
        or (dtype.kind in ("i", "u") and kind in ("i", "u") and _in_range(array, dtype))
        or (dtype.kind == "b" and kind == "b")
    )
    if not fits:
        raise _invalid(
            f"{path} holds {array.dtype} values, which input '{spec.name}' "
            f"({spec.datatype}) cannot take unchanged"
        )
    return array.astype(dtype)


def _in_range(array: np.ndarray, dtype: np.dtype[Any]) -> bool:
    info = np.iinfo(dtype)
    return array.size == 0 or (int(array.min()) >= info.min and int(array.max()) <= info.max)


def _tensor(spec: TensorSpec, array: np.ndarray) -> dict[str, Any]:
    if spec.datatype == "BYTES":
        data: list[Any] | None = bytes_as_text(array)
        if data is None:
            raise InvalidInput(
                f"{spec.name}: BYTES that are not UTF-8 text cannot be written in an "
                "example; pick an example whose values are text",
                code="invalid_example_input",
            )
    else:
        flat = array.reshape(-1)
        if flat.dtype.kind == "f" and not bool(np.isfinite(flat).all()):
            raise InvalidInput(
                f"{spec.name}: the model gives NaN or infinite values on this example, which "
                "JSON cannot hold; pick another example",
                code="invalid_example_input",
            )
        data = flat.tolist()
    return {"name": spec.name, "datatype": spec.datatype, "shape": list(array.shape), "data": data}


def _names(specs: dict[str, TensorSpec]) -> str:
    return ", ".join(f"'{name}'" for name in specs)


def _invalid(message: str) -> InvalidInput:
    return InvalidInput(message, code="invalid_example_input")


def add_example(
    manifest_data: dict[str, Any], files: dict[str, Path], path: Path
) -> dict[str, Any]:
    """``manifest_data`` with the example read from ``path`` and computed by the model as
    its first example (warm-up runs that one), checked as publishing will check it."""
    manifest = parse_manifest(manifest_data)
    inputs = read_example_input(path, list(manifest.inputs))
    given = [_tensor(spec, inputs[spec.name]) for spec in manifest.inputs]
    # The inputs alone first, as publishing checks them: a shape the model does not
    # declare is refused in the server's words, before the model runs on it.
    parse_manifest({**manifest_data, "examples": [{"inputs": given}]})
    example = compute_example(manifest, files, inputs)
    completed = {**manifest_data, "examples": [example, *manifest_data.get("examples", [])]}
    parse_manifest(completed)
    return completed

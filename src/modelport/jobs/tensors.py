"""A job's tensors as documents: OIP-v2-style JSON tensors (``{"name", "datatype",
"shape", "data"}``), decoded to numpy against a target's declared tensors, and encoded
back. Pure: no I/O.

``dump_chunks`` encodes a document whose tensors are still arrays (``FlatData``) a
slice at a time: the same bytes as ``dumps`` of the fully encoded document, in pieces
of about ``CHUNK_BYTES``, never as one Python list of numbers or one ``bytes``; a
``Verbatim`` value is JSON text copied in as it is.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import orjson

from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec
from modelport.runtime.tensors import decode_json_tensor, encode_json_data, oip_datatype

MAX_RANK = 16
CHUNK_BYTES = 1 << 18
"""About how many bytes ``dump_chunks`` hands out at once."""
_SLICE_ITEMS = 1 << 15
"""Numbers encoded at once: a slice's copy and its text stay well under a few MB."""


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


@dataclass(frozen=True)
class FlatData:
    """An array to be written as a tensor's flat, row-major JSON ``data`` by
    ``dump_chunks`` (what ``encode_json_data`` makes of it, a slice at a time)."""

    array: np.ndarray


@dataclass(frozen=True)
class Verbatim:
    """JSON text that ``dump_chunks`` writes as it is, piece by piece (a value copied
    from a stored document without parsing it)."""

    chunks: Callable[[], Iterator[bytes]]


def streamed_tensor(name: str, array: np.ndarray) -> dict[str, Any]:
    """``encode_tensor`` for ``dump_chunks``: the data stays an array until written."""
    return {
        "name": name,
        "datatype": oip_datatype(array),
        "shape": list(array.shape),
        "data": FlatData(array),
    }


def dump_chunks(doc: Mapping[str, Any]) -> Iterator[bytes]:
    """``dumps`` in pieces (see the module docstring): canonical bytes, the same digest.
    CPU-bound: iterate it on a worker thread."""
    pending: list[bytes] = []
    size = 0
    for piece in _pieces(doc):
        pending.append(piece)
        size += len(piece)
        if size >= CHUNK_BYTES:
            yield b"".join(pending)
            pending, size = [], 0
    if pending:
        yield b"".join(pending)


def _pieces(value: Any) -> Iterator[bytes]:
    if isinstance(value, FlatData):
        yield from _flat_data(value.array)
    elif isinstance(value, Verbatim):
        yield from value.chunks()
    elif isinstance(value, Mapping):
        yield b"{"
        for i, key in enumerate(sorted(value)):
            yield (b"," if i else b"") + orjson.dumps(key) + b":"
            yield from _pieces(value[key])
        yield b"}"
    elif isinstance(value, list | tuple):
        yield b"["
        for i, item in enumerate(value):
            if i:
                yield b","
            yield from _pieces(item)
        yield b"]"
    else:
        # a number, a string, a bool or null: as ``dumps`` writes it
        yield orjson.dumps(value, option=orjson.OPT_SERIALIZE_NUMPY)


def _flat_data(array: np.ndarray) -> Iterator[bytes]:
    """``array`` as ``encode_json_data`` then ``dumps`` would write it, by slices of
    rows (a slice is copied alone, even from a non-contiguous array)."""
    if array.ndim == 0:
        array = array.reshape(1)
    per_row = max(1, int(np.prod(array.shape[1:], dtype=np.int64)))
    rows = max(1, _SLICE_ITEMS // per_row)
    yield b"["
    first = True
    for start in range(0, array.shape[0], rows):
        flat = array[start : start + rows].reshape(-1)
        if not flat.size:
            continue
        text = _slice_text(flat)
        yield (b"" if first else b",") + text[1:-1]
        first = False
    yield b"]"


def _slice_text(flat: np.ndarray) -> bytes:
    kind = flat.dtype.kind
    if kind == "f":
        # orjson writes a float64 as Python writes the float ``tolist`` gives (shortest
        # round trip; NaN and infinities as null), without a Python object per number.
        return orjson.dumps(flat.astype(np.float64), option=orjson.OPT_SERIALIZE_NUMPY)
    if kind in "biu":
        return orjson.dumps(np.ascontiguousarray(flat), option=orjson.OPT_SERIALIZE_NUMPY)
    return orjson.dumps(encode_json_data(flat))


def _names(specs: Mapping[str, TensorSpec]) -> str:
    return ", ".join(f"'{name}'" for name in specs)

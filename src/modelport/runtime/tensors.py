"""Open Inference Protocol tensors <-> numpy arrays (plain functions, no I/O)."""

from __future__ import annotations

import json
import math
import struct
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import orjson

from modelport.errors import Internal, InvalidInput

OIP_TO_NUMPY: dict[str, np.dtype[Any]] = {
    "BOOL": np.dtype(np.bool_),
    "UINT8": np.dtype(np.uint8),
    "UINT16": np.dtype(np.uint16),
    "UINT32": np.dtype(np.uint32),
    "UINT64": np.dtype(np.uint64),
    "INT8": np.dtype(np.int8),
    "INT16": np.dtype(np.int16),
    "INT32": np.dtype(np.int32),
    "INT64": np.dtype(np.int64),
    "FP16": np.dtype(np.float16),
    "FP32": np.dtype(np.float32),
    "FP64": np.dtype(np.float64),
    "BYTES": np.dtype(np.object_),
}
NUMPY_TO_OIP: dict[np.dtype[Any], str] = {v: k for k, v in OIP_TO_NUMPY.items()}

ONNX_TO_OIP = {
    "tensor(bool)": "BOOL",
    "tensor(uint8)": "UINT8",
    "tensor(uint16)": "UINT16",
    "tensor(uint32)": "UINT32",
    "tensor(uint64)": "UINT64",
    "tensor(int8)": "INT8",
    "tensor(int16)": "INT16",
    "tensor(int32)": "INT32",
    "tensor(int64)": "INT64",
    "tensor(float16)": "FP16",
    "tensor(float)": "FP32",
    "tensor(double)": "FP64",
    "tensor(string)": "BYTES",
}


def oip_datatype(array: np.ndarray) -> str:
    if array.dtype.kind in ("O", "S", "U"):
        return "BYTES"
    try:
        return NUMPY_TO_OIP[array.dtype]
    except KeyError:
        raise InvalidInput(f"unsupported dtype {array.dtype}", code="invalid_datatype") from None


def decode_json_tensor(
    name: str, datatype: str, shape: list[int], data: Any, *, role: str = "input"
) -> np.ndarray:
    """Build an array from OIP JSON ``data`` (flat or nested, row-major).

    ``shape`` must already be a list of non-negative ints. Values are checked,
    not coerced: integers for INT/UINT (within range), numbers for FP, JSON
    booleans for BOOL, strings for BYTES (returned as UTF-8 ``bytes`` objects).
    Errors name the tensor as ``{role} '{name}'`` (``role`` is what the tensor is
    to the caller: an ``input``, an ``output``, an ``example output``...).
    """
    dtype = numpy_dtype(name, datatype, role=role)
    if isinstance(data, list) and datatype != "BYTES":
        array = decode_json_numbers_fast(dtype, shape, math.prod(shape), data)
        if array is not None:
            return array
    return _decode_json(f"{role} '{name}'", datatype, dtype, shape, data)


def decode_json_numbers_fast(
    dtype: np.dtype[Any], shape: Sequence[int], count: int, data: list[Any]
) -> np.ndarray | None:
    """The common case of :func:`decode_json_tensor`, or None to take the general path.

    Handles a regular, non-empty list of plain numbers whose values fit ``dtype``
    without a cast warning. It returns an array only where the general path would
    return the same one and raise nothing; anything unusual (wrong element count,
    strings, None, big or out-of-range values) gets None, and the general path
    then answers, or raises, exactly as it always has.
    """
    if not count:
        return None
    try:
        raw = np.asarray(data)
    except Exception:  # ragged, too deep: the general path names the problem
        return None
    if raw.size != count or raw.ndim > max(len(shape), 1):
        return None
    kind = raw.dtype.kind
    if kind == "f":
        # The general path's range check, minus the branch that casts under errstate.
        if dtype.kind != "f":
            return None
        if raw.dtype.itemsize > dtype.itemsize and not (
            _MAX(np.abs(raw), axis=None) <= _FLOAT_MAX.get(dtype, -1.0)
        ):
            return None
    elif kind == "i":
        bounds = _FAST_INT_BOUNDS.get(dtype)
        if bounds is None:
            return None
        if bounds and (
            int(_MIN(raw, axis=None)) < bounds[0] or int(_MAX(raw, axis=None)) > bounds[1]
        ):
            return None
    elif kind != "b" or dtype.kind != "b":
        return None
    return raw.astype(dtype, copy=False).reshape(shape)


def _decode_json(
    label: str, datatype: str, dtype: np.dtype[Any], shape: list[int], data: Any
) -> np.ndarray:
    if not isinstance(data, list):
        raise InvalidInput(f"{label}: data must be an array", code="invalid_tensor_data")
    expected = math.prod(shape)
    if _nesting(data) > max(len(shape), 1):
        raise InvalidInput(
            f"{label}: data is nested deeper than shape {list(shape)}",
            code="invalid_tensor_shape",
        )
    if datatype == "BYTES":
        flat = _decode_json_bytes(label, data)
    else:
        flat = _decode_json_numbers(label, datatype, dtype, data)
    if flat.size != expected:
        raise InvalidInput(
            f"{label}: shape {list(shape)} needs {expected} elements, got {flat.size}",
            code="invalid_tensor_shape",
        )
    return flat.reshape(shape)


def numpy_dtype(name: str, datatype: str, *, role: str = "input") -> np.dtype[Any]:
    """The numpy dtype of an OIP datatype; unknown names are refused naming the tensor."""
    try:
        return OIP_TO_NUMPY[datatype]
    except (KeyError, TypeError):
        raise InvalidInput(
            f"{role} '{name}': unsupported datatype {datatype!r}", code="invalid_datatype"
        ) from None


def decode_binary_tensor(
    name: str, datatype: str, shape: list[int], buffer: bytes | memoryview, *, role: str = "input"
) -> np.ndarray:
    """Build an array from its binary tensor data (little-endian, row-major, no padding).

    BOOL is one byte of 0 or 1; BYTES elements are each a 4-byte little-endian
    length followed by the bytes. Fixed-size types are read without copying, so
    the array is a read-only view of ``buffer``.
    """
    dtype = numpy_dtype(name, datatype, role=role)
    label = f"{role} '{name}'"
    count = math.prod(shape)
    if datatype == "BYTES":
        return _decode_binary_bytes(label, count, buffer).reshape(shape)
    needed = count * dtype.itemsize
    if len(buffer) != needed:
        raise InvalidInput(
            f"{label}: binary data is {len(buffer)} bytes, but {datatype} of shape "
            f"{list(shape)} needs {needed}",
            code="invalid_binary_data",
        )
    if datatype == "BOOL":
        raw = np.frombuffer(buffer, dtype=np.uint8, count=count)
        if count and int(raw.max()) > 1:
            raise InvalidInput(
                f"{label}: BOOL binary data holds bytes other than 0 and 1",
                code="invalid_binary_data",
            )
        return raw.view(np.bool_).reshape(shape)
    array = np.frombuffer(buffer, dtype=dtype.newbyteorder("<"), count=count)
    if not array.dtype.isnative:  # only on big-endian hosts
        array = array.astype(dtype)
    return array.reshape(shape)


def encode_binary_tensor(array: np.ndarray) -> bytes:
    """The binary tensor data of an array: the inverse of :func:`decode_binary_tensor`."""
    if array.dtype.kind in ("O", "S", "U"):
        parts: list[bytes] = []
        for item in array.reshape(-1).tolist():
            raw = _as_bytes(item)
            parts.append(_LENGTH.pack(len(raw)))
            parts.append(raw)
        return b"".join(parts)
    if array.dtype.byteorder == ">" or (array.dtype.byteorder == "=" and sys.byteorder == "big"):
        array = array.astype(array.dtype.newbyteorder("<"))
    return array.tobytes(order="C")


def bytes_as_text(array: np.ndarray) -> list[str] | None:
    """Flat BYTES elements as strings for JSON, or None when one is not valid UTF-8."""
    out: list[str] = []
    for item in array.reshape(-1).tolist():
        if isinstance(item, str):
            out.append(item)
            continue
        try:
            out.append(_as_bytes(item).decode("utf-8"))
        except UnicodeDecodeError:
            return None
    return out


_LENGTH = struct.Struct("<I")
_INT_KINDS = ("i", "u")
_NUMBER_KINDS = ("i", "u", "f")


def _as_bytes(item: Any) -> bytes:
    if isinstance(item, bytes):
        return item
    if isinstance(item, str):
        return item.encode("utf-8")
    # A BYTES tensor of other objects (a classifier's dicts...) has no wire form: its
    # repr would reach callers as if it were data.
    raise Internal(
        f"a BYTES element is a {type(item).__name__}, neither bytes nor text",
        code="output_datatype_mismatch",
    )


_MIN, _MAX = np.minimum.reduce, np.maximum.reduce
_FLOAT_MAX = {np.dtype(t): float(np.finfo(t).max) for t in (np.float16, np.float32, np.float64)}
# The fast path's integer targets: (low, high) to check, or () when every value of
# an integer array fits. FP16 is left out: a big integer overflows it, with a warning.
_FAST_INT_BOUNDS: dict[np.dtype[Any], tuple[int, ...]] = {
    np.dtype(t): (int(np.iinfo(t).min), int(np.iinfo(t).max))
    for t in (np.int8, np.int16, np.int32, np.uint8, np.uint16, np.uint32, np.uint64)
}
_FAST_INT_BOUNDS.update(dict.fromkeys(map(np.dtype, (np.int64, np.float32, np.float64)), ()))


def _nesting(data: Any) -> int:
    """Depth of the first path through nested lists (numpy finds ragged ones)."""
    depth = 0
    while isinstance(data, list):
        depth += 1
        if not data:
            break
        data = data[0]
    return depth


def _decode_json_numbers(label: str, datatype: str, dtype: np.dtype[Any], data: list[Any]) -> Any:
    try:
        raw = np.asarray(data)
    except (ValueError, TypeError):
        raise InvalidInput(
            f"{label}: data is not a regular array of {datatype} values",
            code="invalid_tensor_data",
        ) from None
    if raw.size == 0:
        return np.zeros(0, dtype=dtype)
    kind = raw.dtype.kind
    if dtype.kind in _INT_KINDS and kind not in _INT_KINDS:
        # numpy infers float64 when big unsigned and other integers mix; redo exactly.
        return _decode_json_big_ints(label, datatype, dtype, data)
    if datatype == "BOOL":
        ok = kind == "b"
        wanted = "true/false"
    else:
        ok = kind in (_INT_KINDS if dtype.kind in _INT_KINDS else _NUMBER_KINDS)
        wanted = "integers" if dtype.kind in _INT_KINDS else "numbers"
    if not ok:
        raise InvalidInput(f"{label}: {datatype} data must be {wanted}", code="invalid_tensor_data")
    if dtype.kind in _INT_KINDS:
        info = np.iinfo(dtype)
        if int(raw.min()) < info.min or int(raw.max()) > info.max:
            raise InvalidInput(
                f"{label}: value out of range for {datatype}", code="invalid_tensor_data"
            )
    if dtype.kind == "f" and raw.dtype.kind == "f" and raw.dtype.itemsize > dtype.itemsize:
        # Floats beyond the target's range become +-inf, as any IEEE cast would; numpy
        # would warn. ``errstate`` costs more than the cast, so only where it is needed.
        limit = _FLOAT_MAX[dtype]
        # The ufuncs' own reductions: ndarray.min/max go through a Python wrapper first.
        if not (-limit <= _MIN(raw, axis=None) and _MAX(raw, axis=None) <= limit):
            with np.errstate(over="ignore", invalid="ignore"):
                return raw.astype(dtype).reshape(-1)
    return raw.astype(dtype, copy=False).reshape(-1)


def _decode_json_big_ints(
    label: str, datatype: str, dtype: np.dtype[Any], data: list[Any]
) -> np.ndarray:
    items = np.asarray(data, dtype=np.object_).reshape(-1).tolist()
    if not all(type(item) is int for item in items):
        raise InvalidInput(f"{label}: {datatype} data must be integers", code="invalid_tensor_data")
    try:
        return np.array(items, dtype=dtype)
    except OverflowError:
        raise InvalidInput(
            f"{label}: value out of range for {datatype}", code="invalid_tensor_data"
        ) from None


def _decode_json_bytes(label: str, data: list[Any]) -> np.ndarray:
    items: list[bytes] = []
    stack = [iter(data)]  # iterative: JSON nesting must not exhaust the Python stack
    while stack:
        for item in stack[-1]:
            if isinstance(item, list):
                stack.append(iter(item))
                break
            if isinstance(item, str):
                try:
                    items.append(item.encode("utf-8"))
                except UnicodeEncodeError:
                    raise InvalidInput(
                        f"{label}: BYTES element is not valid UTF-8",
                        code="invalid_tensor_data",
                    ) from None
            elif isinstance(item, bytes):
                items.append(item)
            else:
                raise InvalidInput(
                    f"{label}: BYTES data must be strings", code="invalid_tensor_data"
                )
        else:
            stack.pop()
    out = np.empty(len(items), dtype=np.object_)
    out[:] = items
    return out


def _decode_binary_bytes(label: str, count: int, buffer: bytes | memoryview) -> np.ndarray:
    size = len(buffer)
    if count * _LENGTH.size > size:
        raise InvalidInput(
            f"{label}: binary data is {size} bytes, too short for {count} BYTES elements",
            code="invalid_binary_data",
        )
    view = memoryview(buffer)
    out = np.empty(count, dtype=np.object_)
    offset = 0
    for i in range(count):
        if offset + _LENGTH.size > size:
            break
        (length,) = _LENGTH.unpack_from(view, offset)
        offset += _LENGTH.size
        if offset + length > size:
            raise InvalidInput(
                f"{label}: BYTES element {i} claims {length} bytes, only {size - offset} remain",
                code="invalid_binary_data",
            )
        out[i] = bytes(view[offset : offset + length])
        offset += length
    else:
        if offset == size:
            return out
        raise InvalidInput(
            f"{label}: {size - offset} bytes left after {count} BYTES elements",
            code="invalid_binary_data",
        )
    raise InvalidInput(
        f"{label}: binary data ends after {i} of {count} BYTES elements",
        code="invalid_binary_data",
    )


def encode_json_data(array: np.ndarray) -> list[Any]:
    """Flat row-major JSON data for an array (BYTES as UTF-8 strings where possible)."""
    if array.dtype.kind in ("O", "S", "U"):
        out: list[Any] = []
        for x in array.reshape(-1):
            if isinstance(x, bytes):
                try:
                    out.append(x.decode())
                except UnicodeDecodeError:
                    out.append(list(x))
            else:
                out.append(str(x))
        return out
    return array.reshape(-1).tolist()


# ---- non-finite floats in JSON
# JSON has no NaN or infinities. Triton parses and writes them as the literals
# NaN, Infinity and -Infinity (rapidjson's NaN-and-Inf flags), and so do
# tritonclient (python-rapidjson) and Python's json module; modelport does the same
# on /v2, so a float tensor round-trips through JSON as it does as binary data.
_NON_FINITE_LITERALS = (b"NaN", b"Infinity")


def loads_json(raw: bytes | memoryview) -> Any:
    """Parse JSON, accepting the ``NaN``, ``Infinity`` and ``-Infinity`` literals.

    Strict JSON (the common case) is parsed by orjson; only a text that orjson
    refuses and that holds one of the literals is parsed again, by the standard
    library. Raises ``ValueError`` (orjson's message) when neither can parse it."""
    try:
        return orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        error = exc
    data = bytes(raw)
    if any(literal in data for literal in _NON_FINITE_LITERALS):
        try:
            return json.loads(data.decode("utf-8"))
        except (ValueError, RecursionError):
            pass
    raise ValueError(str(error))


def json_float_data(flat: np.ndarray) -> np.ndarray | orjson.Fragment:
    """A flat float array as orjson writes it, except that NaN and infinities are the
    literals ``NaN``, ``Infinity`` and ``-Infinity`` rather than ``null``: the array
    itself when every value is finite, else the JSON text as an ``orjson.Fragment``."""
    finite = np.isfinite(flat)
    if finite.all():
        return flat
    tokens = orjson.dumps(flat, option=orjson.OPT_SERIALIZE_NUMPY)[1:-1].split(b",")
    for index in np.flatnonzero(~finite).tolist():
        value = float(flat[index])
        tokens[index] = b"NaN" if value != value else b"Infinity" if value > 0 else b"-Infinity"
    return orjson.Fragment(b"[" + b",".join(tokens) + b"]")

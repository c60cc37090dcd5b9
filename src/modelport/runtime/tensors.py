"""Open Inference Protocol tensors <-> numpy arrays (plain functions, no I/O)."""

from __future__ import annotations

from typing import Any

import numpy as np

from modelport.errors import InvalidInput

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


def decode_json_tensor(name: str, datatype: str, shape: list[int], data: Any) -> np.ndarray:
    """Build an array from OIP JSON ``data`` (flat or nested, row-major)."""
    if datatype not in OIP_TO_NUMPY:
        raise InvalidInput(f"input '{name}': unknown datatype {datatype}", code="invalid_datatype")
    expected = int(np.prod(shape)) if shape else 1
    if datatype == "BYTES":
        flat = np.array(_flatten(data), dtype=np.object_)
        flat = np.array(
            [x.encode() if isinstance(x, str) else bytes(x) for x in flat], dtype=np.object_
        )
    else:
        try:
            flat = np.asarray(data, dtype=OIP_TO_NUMPY[datatype]).reshape(-1)
        except (ValueError, TypeError) as exc:
            raise InvalidInput(
                f"input '{name}': data is not valid {datatype}: {exc}", code="invalid_tensor_data"
            ) from None
    if flat.size != expected:
        raise InvalidInput(
            f"input '{name}': shape {shape} needs {expected} elements, got {flat.size}",
            code="invalid_tensor_shape",
        )
    return flat.reshape(shape)


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


def _flatten(data: Any) -> list[Any]:
    if isinstance(data, (list, tuple)):
        out: list[Any] = []
        for item in data:
            out.extend(_flatten(item))
        return out
    return [data]

"""Frames between the server and a warm sandboxed worker, over its standard input and
output: tensors travel as their raw buffers, never pickled.

A frame is a 4-byte big-endian header length, the header (a JSON object), then the
buffers of the tensors the header lists, in order::

    {...fields of the message..., "tensors": [{"name", "dtype", "shape", "nbytes"}]}

``dtype`` is a numpy type string (``<f4``, ``<i8``, ``|b1``...) for booleans and
numbers, or ``bytes`` for a tensor of byte strings (text is sent UTF-8 encoded), whose
buffer is each element as a 4-byte little-endian length and its bytes, as the Open
Inference Protocol's binary extension has it.

Standard library and numpy only: the worker imports this before the publisher's code.
"""

from __future__ import annotations

import json
import struct
from collections.abc import Callable, Mapping
from typing import Any

import numpy as np

MAX_HEADER_BYTES = 1 << 20
MAX_TENSOR_BYTES = 1 << 31
_LENGTH = struct.Struct(">I")
_ITEM = struct.Struct("<I")
_KINDS = frozenset("biuf")


class FrameError(ValueError):
    """A frame that cannot be read or written (truncated, malformed, an unsupported
    tensor); the message says which."""


def encode(header: Mapping[str, Any], tensors: Mapping[str, Any]) -> list[bytes | memoryview]:
    """The parts of one frame (write them in order)."""
    specs: list[dict[str, Any]] = []
    buffers: list[bytes | memoryview] = []
    for name, value in tensors.items():
        dtype, shape, buffer = _tensor_bytes(str(name), value)
        specs.append({"name": str(name), "dtype": dtype, "shape": shape, "nbytes": len(buffer)})
        buffers.append(buffer)
    head = json.dumps({**header, "tensors": specs}, separators=(",", ":")).encode()
    if len(head) > MAX_HEADER_BYTES:
        raise FrameError(f"frame header of {len(head)} bytes is over {MAX_HEADER_BYTES}")
    return [_LENGTH.pack(len(head)), head, *buffers]


def decode(read_exact: Callable[[int], bytes]) -> tuple[dict[str, Any], dict[str, np.ndarray]]:
    """Read one frame through ``read_exact(n)`` (which returns exactly n bytes or raises):
    its header (without ``tensors``) and its tensors by name."""
    (size,) = _LENGTH.unpack(read_exact(_LENGTH.size))
    if size > MAX_HEADER_BYTES:
        raise FrameError(f"frame header of {size} bytes is over {MAX_HEADER_BYTES}")
    try:
        header = json.loads(read_exact(size))
        specs = header.pop("tensors")
        assert isinstance(header, dict) and isinstance(specs, list)
    except (ValueError, KeyError, AssertionError, AttributeError):
        raise FrameError("frame header is not a JSON object with 'tensors'") from None
    tensors: dict[str, np.ndarray] = {}
    for spec in specs:
        try:
            name, dtype = str(spec["name"]), str(spec["dtype"])
            shape = tuple(int(d) for d in spec["shape"])
            nbytes = int(spec["nbytes"])
        except (KeyError, TypeError, ValueError):
            raise FrameError("a tensor of the frame has no name, dtype, shape or nbytes") from None
        if not 0 <= nbytes <= MAX_TENSOR_BYTES or any(d < 0 for d in shape):
            raise FrameError(f"tensor {name!r}: bad size or shape")
        tensors[name] = _tensor(name, dtype, shape, read_exact(nbytes))
    return header, tensors


def _tensor_bytes(name: str, value: Any) -> tuple[str, list[int], bytes | memoryview]:
    array = np.asarray(value)
    shape = [int(d) for d in array.shape]
    if array.dtype.kind in "OSU":
        parts: list[bytes] = []
        for item in array.reshape(-1).tolist():
            raw = item.encode() if isinstance(item, str) else item
            if not isinstance(raw, bytes):
                raise FrameError(
                    f"tensor {name!r}: an element is a {type(item).__name__}, neither "
                    "bytes nor text"
                )
            parts += [_ITEM.pack(len(raw)), raw]
        return "bytes", shape, b"".join(parts)
    if array.dtype.kind not in _KINDS:
        raise FrameError(f"tensor {name!r}: numpy dtype {array.dtype} has no tensor form")
    array = np.ascontiguousarray(array)
    return array.dtype.str, shape, array.reshape(-1).view(np.uint8).data


def _tensor(name: str, dtype: str, shape: tuple[int, ...], buffer: bytes) -> np.ndarray:
    count = 1
    for d in shape:
        count *= d
    if dtype == "bytes":
        items: list[bytes] = []
        offset = 0
        for _ in range(count):
            if offset + _ITEM.size > len(buffer):
                raise FrameError(f"tensor {name!r}: byte strings truncated")
            (length,) = _ITEM.unpack_from(buffer, offset)
            offset += _ITEM.size
            if offset + length > len(buffer):
                raise FrameError(f"tensor {name!r}: byte strings truncated")
            items.append(buffer[offset : offset + length])
            offset += length
        if offset != len(buffer):
            raise FrameError(f"tensor {name!r}: bytes left after its elements")
        array = np.empty(count, dtype=np.object_)
        array[:] = items
        return array.reshape(shape)
    try:
        kind = np.dtype(dtype)
    except TypeError:
        raise FrameError(f"tensor {name!r}: unknown dtype {dtype!r}") from None
    if kind.kind not in _KINDS or kind.itemsize * count != len(buffer):
        raise FrameError(f"tensor {name!r}: {len(buffer)} bytes do not make {shape} of {dtype}")
    return np.frombuffer(buffer, dtype=kind).reshape(shape)

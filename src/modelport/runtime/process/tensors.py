"""Tensors in shared memory: one segment holds many arrays, described by a layout.

The layout (name, datatype, shape, byte offset and byte size of each array) travels in
the small JSON control message; the bytes stay in the segment. Arrays start at 64-byte
offsets so a model reads aligned data. A fixed-size dtype crosses as its raw bytes; a
tensor of strings (``BYTES``: an object array of ``bytes`` or ``str``) crosses in the
Open Inference Protocol's binary form, each element a 4-byte little-endian length and
its bytes. It comes back with the elements' type it left with, so a model host answers
what a thread answers: a tensor whose elements are all ``str`` is marked ``TEXT`` and
read back as ``str`` (UTF-8), any other as ``bytes``.

``read`` trusts nothing of the layout: the host reads layouts its worker wrote, and the
worker runs the publisher's code. Each entry is checked (a known dtype without objects,
a shape of at most ``MAX_DIMS`` non-negative dimensions, a byte size that is the
shape's, a region inside the segment, element lengths inside the region, nothing left
over) before anything is allocated or copied; any fault is a ``LayoutError``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Protocol

import numpy as np

from modelport.errors import Internal, InvalidInput
from modelport.runtime.tensors import decode_binary_tensor, encode_binary_tensor

_ALIGN = 64
BYTES = "BYTES"
"""The layout's dtype of a tensor of strings, read back as ``bytes``."""
TEXT = "TEXT"
"""The layout's dtype of a tensor of strings that were all ``str``, read back so."""
_STRINGS = (BYTES, TEXT)
MAX_DIMS = 32
"""Most dimensions a tensor in a layout may have."""
MAX_ENTRIES = 4096
"""Most tensors one layout may describe."""

Layout = list[list[Any]]
"""``[[name, dtype string or "BYTES", shape, offset, nbytes], ...]`` (JSON-ready)."""


class LayoutError(ValueError):
    """A layout that does not describe its segment (malformed, or out of its bounds)."""


class Buffer(Protocol):
    """A segment: a ``SharedMemory``, or a ``runtime.process.segments.Segment``."""

    @property
    def name(self) -> str: ...

    @property
    def buf(self) -> memoryview | None: ...


@dataclass(frozen=True)
class Plan:
    """Where each array goes (``layout``), the bytes a segment needs (``size``), and the
    encoded form of the tensors of strings (by name)."""

    layout: Layout
    size: int
    encoded: dict[str, bytes] = field(default_factory=dict)


def _aligned(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


def _encode(name: str, array: np.ndarray) -> bytes:
    try:
        return encode_binary_tensor(array)
    except (Internal, UnicodeEncodeError):
        raise InvalidInput(
            f"tensor '{name}' holds objects other than bytes or text: process execution "
            "shares numbers and strings only",
            code="unsupported_tensor",
        ) from None


def plan(arrays: Mapping[str, np.ndarray]) -> Plan:
    """Where each array goes, and the bytes a segment needs to hold them all; an object
    array that is not all bytes or text is refused (``unsupported_tensor``)."""
    layout: Layout = []
    encoded: dict[str, bytes] = {}
    offset = 0
    for name, array in arrays.items():
        offset = _aligned(offset)
        if array.dtype.hasobject:
            data = encoded[name] = _encode(name, array)
            kind = TEXT if array.size and _all_str(array) else BYTES
            layout.append([name, kind, list(array.shape), offset, len(data)])
            offset += len(data)
        else:
            layout.append([name, array.dtype.str, list(array.shape), offset, array.nbytes])
            offset += array.nbytes
    return Plan(layout, max(offset, 1), encoded)


def _buffer(segment: Buffer) -> memoryview:
    buffer = segment.buf
    if buffer is None:
        raise ValueError(f"shared memory segment {segment.name} is closed")
    return buffer


def write(segment: Buffer, arrays: Mapping[str, np.ndarray], planned: Plan) -> None:
    """Copy ``arrays`` into ``segment`` where ``planned`` places them."""
    buffer = _buffer(segment)
    for name, dtype, shape, offset, nbytes in planned.layout:
        if dtype in _STRINGS:
            buffer[offset : offset + nbytes] = planned.encoded[name]
            continue
        target: np.ndarray = np.ndarray(shape, dtype=np.dtype(dtype), buffer=buffer, offset=offset)
        target[...] = arrays[name]


def read(segment: Buffer, layout: Any, *, copy: bool) -> dict[str, np.ndarray]:
    """The arrays ``layout`` describes in ``segment``: views, or copies (``copy``) that
    outlive the segment (tensors of strings are always copies: ``bytes`` objects, or
    ``str`` for ``TEXT``). ``LayoutError`` when the layout is malformed or reaches
    outside the segment (or a ``TEXT`` element is not UTF-8)."""
    buffer = _buffer(segment)
    out: dict[str, np.ndarray] = {}
    for name, dtype, shape, offset, nbytes in _checked(layout, len(buffer)):
        if isinstance(dtype, str):
            region = buffer[offset : offset + nbytes]
            try:
                array = decode_binary_tensor(name, BYTES, shape, region, role="tensor")
                out[name] = _as_text(name, array) if dtype == TEXT else array
            except InvalidInput as exc:
                raise LayoutError(exc.message) from None
            continue
        view: np.ndarray = np.ndarray(shape, dtype=dtype, buffer=buffer, offset=offset)
        out[name] = view.copy() if copy else view
    return out


def _all_str(array: np.ndarray) -> bool:
    return all(isinstance(item, str) for item in array.reshape(-1).tolist())


def _as_text(name: str, array: np.ndarray) -> np.ndarray:
    out = np.empty(array.shape, dtype=np.object_)
    try:
        out.reshape(-1)[:] = [item.decode("utf-8") for item in array.reshape(-1).tolist()]
    except UnicodeDecodeError:
        raise LayoutError(f"tensor '{name}': a TEXT element is not UTF-8") from None
    return out


_Entry = tuple[str, np.dtype[Any] | str, list[int], int, int]


def _checked(layout: Any, size: int) -> list[_Entry]:
    """``layout``'s entries, each checked against a segment of ``size`` bytes (the
    dtype ``BYTES`` or ``TEXT`` for a tensor of strings)."""
    if not isinstance(layout, list) or len(layout) > MAX_ENTRIES:
        raise LayoutError(f"a layout is a list of at most {MAX_ENTRIES} entries")
    entries: list[_Entry] = []
    names: set[str] = set()
    for entry in layout:
        if not isinstance(entry, list) or len(entry) != 5:
            raise LayoutError("a layout entry is [name, dtype, shape, offset, nbytes]")
        name, dtype, shape, offset, nbytes = entry
        if not isinstance(name, str) or name in names:
            raise LayoutError(f"layout entry names {name!r}: not a name, or named twice")
        names.add(name)
        if not (isinstance(shape, list) and len(shape) <= MAX_DIMS and all(map(_count, shape))):
            raise LayoutError(f"tensor '{name}': shape {shape!r} is not a list of dimensions")
        if not (_count(offset) and _count(nbytes)) or offset + nbytes > size:
            raise LayoutError(
                f"tensor '{name}': bytes {offset!r}+{nbytes!r} are not inside the segment "
                f"of {size} bytes"
            )
        if dtype in _STRINGS:
            entries.append((name, dtype, shape, offset, nbytes))
            continue
        numeric = _dtype(name, dtype)
        needed = math.prod(shape) * numeric.itemsize
        if needed != nbytes:
            raise LayoutError(
                f"tensor '{name}': {numeric} of shape {shape} is {needed} bytes, not {nbytes}"
            )
        entries.append((name, numeric, shape, offset, nbytes))
    return entries


def _count(value: Any) -> bool:
    return type(value) is int and value >= 0


def _dtype(name: str, value: Any) -> np.dtype[Any]:
    try:
        dtype = np.dtype(value) if isinstance(value, str) else None
    except (TypeError, ValueError):
        dtype = None
    if dtype is None or dtype.hasobject or dtype.kind not in "biufcSU" or dtype.itemsize == 0:
        raise LayoutError(f"tensor '{name}': {value!r} is not a dtype that crosses")
    return dtype

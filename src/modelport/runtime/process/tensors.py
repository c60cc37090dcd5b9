"""Tensors in shared memory: one segment holds many arrays, described by a layout.

The layout (name, dtype, shape, byte offset of each array) travels in the small JSON
control message; the bytes stay in the segment. Arrays start at 64-byte offsets so a
model reads aligned data. Only fixed-size dtypes cross: an object array (strings) has
no flat bytes to share.
"""

from __future__ import annotations

from collections.abc import Mapping
from multiprocessing.shared_memory import SharedMemory
from typing import Any

import numpy as np

from modelport.errors import InvalidInput

_ALIGN = 64

Layout = list[list[Any]]
"""``[[name, dtype string, shape, offset], ...]`` (JSON-ready)."""


def _aligned(offset: int) -> int:
    return (offset + _ALIGN - 1) // _ALIGN * _ALIGN


def plan(arrays: Mapping[str, np.ndarray]) -> tuple[Layout, int]:
    """Where each array goes, and the bytes a segment needs to hold them all."""
    layout: Layout = []
    offset = 0
    for name, array in arrays.items():
        if array.dtype.hasobject:
            raise InvalidInput(
                f"tensor '{name}' holds objects (strings): process execution shares "
                "numeric tensors only",
                code="unsupported_tensor",
            )
        offset = _aligned(offset)
        layout.append([name, array.dtype.str, list(array.shape), offset])
        offset += array.nbytes
    return layout, max(offset, 1)


def _buffer(segment: SharedMemory) -> memoryview:
    buffer = segment.buf
    if buffer is None:
        raise ValueError(f"shared memory segment {segment.name} is closed")
    return buffer


def write(segment: SharedMemory, arrays: Mapping[str, np.ndarray], layout: Layout) -> None:
    """Copy ``arrays`` into ``segment`` where ``layout`` places them."""
    buffer = _buffer(segment)
    for name, dtype, shape, offset in layout:
        target: np.ndarray = np.ndarray(shape, dtype=np.dtype(dtype), buffer=buffer, offset=offset)
        target[...] = arrays[name]


def read(segment: SharedMemory, layout: Layout, *, copy: bool) -> dict[str, np.ndarray]:
    """The arrays ``layout`` describes in ``segment``: views, or copies (``copy``) that
    outlive the segment."""
    buffer = _buffer(segment)
    out: dict[str, np.ndarray] = {}
    for name, dtype, shape, offset in layout:
        view: np.ndarray = np.ndarray(shape, dtype=np.dtype(dtype), buffer=buffer, offset=offset)
        out[name] = view.copy() if copy else view
    return out

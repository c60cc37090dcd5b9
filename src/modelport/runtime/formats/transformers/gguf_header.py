"""Scalar metadata from a GGUF file's header, read without loading its tensors.

A GGUF file opens with its key/value metadata (architecture, context length, file
type...). Reading only that part answers in milliseconds where a full reader maps and
indexes every tensor first.
"""

from __future__ import annotations

import struct
from collections.abc import Collection
from pathlib import Path
from typing import Any, BinaryIO

from modelport.errors import InvalidInput

_SCALARS = {
    0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?",
    10: "<Q", 11: "<q", 12: "<d",
}  # fmt: skip
_STRING, _ARRAY = 8, 9

FILE_TYPES = {
    0: "F32", 1: "F16", 2: "Q4_0", 3: "Q4_1", 7: "Q8_0", 8: "Q5_0", 9: "Q5_1",
    10: "Q2_K", 11: "Q3_K_S", 12: "Q3_K_M", 13: "Q3_K_L", 14: "Q4_K_S", 15: "Q4_K_M",
    16: "Q5_K_S", 17: "Q5_K_M", 18: "Q6_K", 19: "IQ2_XXS", 20: "IQ2_XS", 24: "IQ1_S",
    25: "IQ4_NL", 26: "IQ3_S", 28: "IQ4_XS", 32: "BF16",
}  # fmt: skip
"""``general.file_type`` values (llama.cpp's ``LLAMA_FTYPE_MOSTLY_*``) by name."""


def _read(stream: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = stream.read(size)
    if len(data) != size:
        raise InvalidInput("the GGUF header is truncated", code="invalid_package")
    return struct.unpack(fmt, data)[0]


def _string(stream: BinaryIO) -> str:
    length = int(_read(stream, "<Q"))
    return stream.read(length).decode("utf-8", errors="replace")


def _value(stream: BinaryIO, kind: int) -> object:
    if kind in _SCALARS:
        return _read(stream, _SCALARS[kind])
    if kind == _STRING:
        return _string(stream)
    if kind == _ARRAY:
        item = int(_read(stream, "<I"))
        count = int(_read(stream, "<Q"))
        if item in _SCALARS:  # skipped whole: only scalars are answered
            stream.seek(struct.calcsize(_SCALARS[item]) * count, 1)
        else:
            for _ in range(count):
                _value(stream, item)
        return None
    raise InvalidInput(f"unknown GGUF value type {kind}", code="invalid_package")


def read_metadata(path: Path, keys: Collection[str]) -> dict[str, object]:
    """The scalar values of ``keys`` found in the header of the GGUF file at ``path``."""
    found: dict[str, object] = {}
    with path.open("rb") as stream:
        if stream.read(4) != b"GGUF":
            raise InvalidInput(f"{path.name} is not a GGUF file", code="invalid_package")
        version = int(_read(stream, "<I"))
        if version < 2:
            raise InvalidInput(f"GGUF version {version} is not supported", code="invalid_package")
        _read(stream, "<Q")  # tensor count
        for _ in range(int(_read(stream, "<Q"))):
            key = _string(stream)
            value = _value(stream, int(_read(stream, "<I")))
            if key in keys:
                found[key] = value
                if len(found) == len(keys):
                    break
    return found


def quantization(path: Path) -> str:
    """The GGUF file's quantization (``Q4_1``...), from ``general.file_type``."""
    value = read_metadata(path, {"general.file_type"}).get("general.file_type")
    if not isinstance(value, int):
        return "unknown"
    return FILE_TYPES.get(value, f"type-{value}")

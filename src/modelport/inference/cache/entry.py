"""A cached answer, and its wire form for the Redis tier.

The wire form is plain data, never a pickle: a 4-byte little-endian header length, a
JSON header (the tenant that produced the answer, when, and each tensor's name,
datatype, shape and byte length), then each tensor's binary tensor data.
"""

from __future__ import annotations

import struct
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import orjson

from modelport.runtime.tensors import decode_binary_tensor, encode_binary_tensor, oip_datatype

_LENGTH = struct.Struct("<I")


class Unreadable(ValueError):
    """Bytes that are not a cached answer (another release's, or damaged)."""


@dataclass(frozen=True, slots=True)
class CachedAnswer:
    """An answer as the model gave it, for the question its key names."""

    outputs: Mapping[str, np.ndarray]
    tenant: str
    """The tenant whose call produced it."""
    stored_at: float
    """Wall-clock seconds (``time.time``) when it was computed: comparable across processes."""
    nbytes: int
    """What it weighs in the memory tier."""


def answer(outputs: Mapping[str, np.ndarray], tenant: str, stored_at: float) -> CachedAnswer:
    """A cached answer of private copies: a backend's arrays may view a reused buffer."""
    kept = {name: np.array(value, copy=True) for name, value in outputs.items()}
    for array in kept.values():
        array.setflags(write=False)  # shared by every hit: nobody may change it
    return CachedAnswer(kept, tenant, stored_at, weight(kept))


def weight(outputs: Mapping[str, np.ndarray]) -> int:
    """Bytes an answer holds (for BYTES tensors, their elements' lengths too)."""
    total = 0
    for array in outputs.values():
        total += array.nbytes
        if array.dtype.kind == "O":
            total += sum(
                len(item) for item in array.reshape(-1).tolist() if hasattr(item, "__len__")
            )
    return total


def encode(entry: CachedAnswer) -> bytes:
    payloads = [encode_binary_tensor(array) for array in entry.outputs.values()]
    header = {
        "tenant": entry.tenant,
        "stored_at": entry.stored_at,
        "tensors": [
            {"name": name, "datatype": oip_datatype(array), "shape": list(array.shape), "n": len(p)}
            for (name, array), p in zip(entry.outputs.items(), payloads, strict=True)
        ],
    }
    head = orjson.dumps(header)
    return b"".join([_LENGTH.pack(len(head)), head, *payloads])


def decode(data: bytes) -> CachedAnswer:
    """The answer ``encode`` wrote; ``Unreadable`` for anything else."""
    try:
        (length,) = _LENGTH.unpack_from(data)
        header = orjson.loads(data[4 : 4 + length])
        offset = 4 + length
        outputs = {}
        for tensor in header["tensors"]:
            end = offset + int(tensor["n"])
            if end > len(data):
                raise Unreadable("truncated")
            array = decode_binary_tensor(
                tensor["name"], tensor["datatype"], tensor["shape"], data[offset:end], role="output"
            )
            outputs[str(tensor["name"])] = array
            offset = end
        if offset != len(data):
            raise Unreadable("trailing bytes")
        return CachedAnswer(
            outputs, str(header["tenant"]), float(header["stored_at"]), weight(outputs)
        )
    except Unreadable:
        raise
    except Exception as exc:  # any malformed header or tensor
        raise Unreadable(str(exc)) from None

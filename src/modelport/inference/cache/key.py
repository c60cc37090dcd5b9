"""What makes two calls the same question: a digest over the version and the request.

Two calls share a key only if they name the same version (its manifest digest: the
version's identity), send byte-identical input tensors (name, datatype, shape and the
exact bytes of each, in binary tensor form), pass the same model parameters (those that
reach the model; the surfaces strip scheduling ones such as priority and timeout) and ask
for the same outputs. A cross-tenant hit is therefore a digest hit on byte-identical
content (SHA-256: a collision is not a practical concern).
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

import numpy as np
import orjson

from modelport.runtime.tensors import encode_binary_tensor


def question_digest(
    version_digest: str,
    inputs: Mapping[str, np.ndarray],
    parameters: Mapping[str, Any],
    outputs: tuple[str, ...] | None,
) -> str:
    """The hex SHA-256 naming the question (see the module docstring)."""
    digest = hashlib.sha256()
    digest.update(version_digest.encode())
    digest.update(b"\0")
    for name in sorted(inputs):
        array = np.asarray(inputs[name])
        # The dtype's kind and size, not its byte order: the bytes are little-endian.
        header = f"{name}\0{array.dtype.kind}{array.dtype.itemsize}\0{array.shape}\0"
        digest.update(header.encode())
        payload = encode_binary_tensor(array)
        digest.update(len(payload).to_bytes(8, "little"))
        digest.update(payload)
    extra = {"parameters": dict(parameters), "outputs": None if outputs is None else list(outputs)}
    digest.update(orjson.dumps(extra, option=orjson.OPT_SORT_KEYS, default=str))
    return digest.hexdigest()

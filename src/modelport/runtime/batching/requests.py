"""Pure merge and split of requests into one batch and back (no queues, no I/O).

Requests are merged along dimension 0. Two requests may share a batch only when
they have the same ``batch_group``: the same input names, datatypes, every
dimension but the first, and the same parameters.
"""

from __future__ import annotations

from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import numpy as np
import orjson

from modelport.errors import Internal

Tensors = dict[str, np.ndarray]


def batch_rows(inputs: Mapping[str, np.ndarray]) -> int:
    """Rows a request contributes to a batch: its first input's dimension 0."""
    for array in inputs.values():
        return int(array.shape[0]) if array.ndim else 1
    return 1


def batch_group(inputs: Mapping[str, np.ndarray], parameters: Mapping[str, Any] | None) -> Hashable:
    """A key equal for exactly the requests that can be merged into one batch.

    A request whose inputs disagree on dimension 0, or have no dimension at all, is
    given a key of its own: it can only run alone.
    """
    rows = None
    signature = []
    for name in sorted(inputs):
        array = inputs[name]
        if array.ndim == 0 or (rows is not None and array.shape[0] != rows):
            return object()
        rows = array.shape[0]
        signature.append((name, array.dtype.str, array.shape[1:]))
    return (tuple(signature), _parameters_key(parameters))


def _parameters_key(parameters: Mapping[str, Any] | None) -> Hashable:
    if not parameters:
        return None
    try:
        return frozenset(parameters.items())
    except TypeError:  # nested values: compare their canonical JSON instead
        return orjson.dumps(dict(parameters), option=orjson.OPT_SORT_KEYS, default=str)


def merge(parts: Sequence[Mapping[str, np.ndarray]]) -> tuple[Tensors, list[int]]:
    """Concatenate requests of one batch group along dimension 0; return the row counts."""
    sizes = [batch_rows(p) for p in parts]
    if len(parts) == 1:
        return dict(parts[0]), sizes
    merged = {name: np.concatenate([p[name] for p in parts], axis=0) for name in parts[0]}
    return merged, sizes


def split(outputs: Mapping[str, np.ndarray], sizes: Sequence[int]) -> list[Tensors]:
    """Cut a batch's outputs back into one dict per request, by the merged row counts."""
    if len(sizes) == 1:
        return [dict(outputs)]
    total = sum(sizes)
    for name, array in outputs.items():
        if array.ndim == 0 or array.shape[0] != total:
            raise Internal(
                f"output '{name}' has shape {list(array.shape)}, which does not follow the "
                f"batch's {total} rows; the model cannot be batched (set max_batch_size 1)",
                code="unbatchable_output",
            )
    # Plain slices (views, as np.split gives) cost a third of np.split's bookkeeping.
    items = list(outputs.items())
    pieces, start = [], 0
    for size in sizes:
        end = start + size
        pieces.append({name: array[start:end] for name, array in items})
        start = end
    return pieces

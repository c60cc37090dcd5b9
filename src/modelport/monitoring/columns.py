"""Per-feature samples from logged tensors (Open Inference Protocol JSON). Pure.

A tensor ``x`` of shape ``[rows]`` is the feature ``x``; of shape ``[rows, n]``, the
features ``x[0]`` … ``x[n-1]``, one per column. Numbers are numeric features; BYTES
and BOOL are categorical. Deeper tensors (images, sequences) are not features.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

CATEGORICAL = ("BYTES", "BOOL")


@dataclass
class Samples:
    """Values per feature, gathered over many logged tensors."""

    numeric: dict[str, list[float]] = field(default_factory=lambda: defaultdict(list))
    categorical: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))

    def add(self, tensors: Iterable[Mapping[str, Any]]) -> None:
        for tensor in tensors:
            _add_tensor(self, tensor)

    def numeric_array(self, feature: str) -> np.ndarray:
        return np.asarray(self.numeric.get(feature, []), dtype=float)


def _add_tensor(samples: Samples, tensor: Mapping[str, Any]) -> None:
    name, datatype = str(tensor.get("name")), str(tensor.get("datatype"))
    shape, data = list(tensor.get("shape") or []), list(tensor.get("data") or [])
    if len(shape) not in (1, 2) or not data:
        return
    width = shape[1] if len(shape) == 2 else 1
    if width <= 0 or len(data) % width:
        return
    for column in range(width):
        feature = name if len(shape) == 1 else f"{name}[{column}]"
        values = data[column::width]
        if datatype in CATEGORICAL:
            samples.categorical[feature].extend(str(v) for v in values if v is not None)
        else:
            samples.numeric[feature].extend(float(v) for v in values if v is not None)

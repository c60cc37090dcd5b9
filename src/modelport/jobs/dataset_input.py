"""A dataset split as a tensor batch's input: its feature columns against the target's
inputs (``jobs.tensor_batch``)."""

from __future__ import annotations

from collections.abc import Sequence

from modelport.errors import InvalidInput
from modelport.jobs.types import SplitInput
from modelport.manifest import TensorSpec


def check_features(split: SplitInput, inputs: Sequence[TensorSpec]) -> None:
    """The split's feature columns must be the target's inputs, name for name and
    datatype for datatype (400 ``column_mismatch``)."""
    specs = {spec.name: spec for spec in inputs}
    features = {name: (datatype, shape) for name, datatype, shape in split.features}
    if set(specs) != set(features):
        raise InvalidInput(
            f"the dataset's feature columns {sorted(features)} must be the target's inputs "
            f"{sorted(specs)}",
            code="column_mismatch",
        )
    for name, (datatype, shape) in features.items():
        spec = specs[name]
        row = spec.shape[1:]
        fits = len(row) == len(shape) and all(d in (-1, n) for d, n in zip(row, shape, strict=True))
        if spec.datatype != datatype or not fits:
            raise InvalidInput(
                f"column {name!r} is {datatype} {list(shape)} a row; the target's input is "
                f"{spec.datatype} {spec.shape}",
                code="column_mismatch",
                column=name,
            )

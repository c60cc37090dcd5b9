"""What a version's processing code returned, checked against the tensors the next step
expects (the model's inputs after preprocess, the caller's outputs after postprocess):
the same check where it is served and where validation runs it."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np

from modelport.manifest import TensorSpec
from modelport.runtime.tensors import OIP_TO_NUMPY
from modelport.sandbox.warm import ProcessingFailed


def conform(
    stage: str, answer: Mapping[str, np.ndarray], specs: Sequence[TensorSpec]
) -> dict[str, np.ndarray]:
    """The declared tensors of ``answer`` (what a processing ``stage`` returned), in
    their declared datatypes; ``ProcessingFailed`` for a missing tensor, or one of
    another kind of datatype or rank."""
    conformed: dict[str, np.ndarray] = {}
    for spec in specs:
        array = answer.get(spec.name)
        if array is None:
            raise ProcessingFailed(
                f"{stage} returned no tensor '{spec.name}' (it returned {sorted(answer) or 'none'})"
            )
        want = OIP_TO_NUMPY[spec.datatype]
        if spec.datatype == "BYTES":
            ok = array.dtype.kind == "O"
        else:
            ok = array.dtype.kind in "biuf" and np.can_cast(array.dtype, want, "same_kind")
        if not ok or array.ndim != len(spec.shape):
            raise ProcessingFailed(
                f"{stage} returned '{spec.name}' as {array.dtype}{list(array.shape)}, "
                f"declared {spec.datatype}{spec.shape}"
            )
        conformed[spec.name] = array if spec.datatype == "BYTES" else array.astype(want, copy=False)
    return conformed

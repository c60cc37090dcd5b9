"""Run a manifest's examples against a loaded model and compare within tolerance."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from modelport.manifest import Example
from modelport.runtime.formats.base import LoadedModel
from modelport.runtime.tensors import decode_json_tensor


@dataclass(frozen=True)
class ExampleResult:
    index: int
    passed: bool
    problems: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {"index": self.index, "passed": self.passed, "problems": self.problems}


def example_inputs(example: Example) -> dict[str, np.ndarray]:
    """The example's input tensors, decoded from their JSON form."""
    return {
        t.name: decode_json_tensor(t.name, t.datatype, t.shape, t.data, role="example input")
        for t in example.inputs
    }


def run_example(model: LoadedModel, example: Example, index: int = 0) -> ExampleResult:
    return compare_outputs(example, model.execute(example_inputs(example)), index)


def compare_outputs(example: Example, outputs: Mapping[str, Any], index: int = 0) -> ExampleResult:
    """Whether ``outputs`` (what a model answered to the example's inputs) are the
    example's expected outputs: same shape, byte strings equal (a ``str`` equal to its
    UTF-8 bytes: onnxruntime answers strings as ``str``), numbers within the example's
    tolerance."""
    problems: list[str] = []
    for expected in example.outputs:
        if expected.name not in outputs:
            problems.append(f"output '{expected.name}' missing")
            continue
        want = decode_json_tensor(
            expected.name, expected.datatype, expected.shape, expected.data, role="example output"
        )
        got = np.asarray(outputs[expected.name])
        if list(got.shape) != list(want.shape):
            problems.append(
                f"output '{expected.name}': shape {list(got.shape)} != {expected.shape}"
            )
        elif want.dtype == np.object_:
            if _as_bytes(got) != want.reshape(-1).tolist():
                problems.append(f"output '{expected.name}': values differ")
        elif got.dtype.kind not in "biuf":
            problems.append(f"output '{expected.name}': {got.dtype} values are not numbers")
        elif not np.allclose(
            got.astype(np.float64),
            want.astype(np.float64),
            atol=example.tolerance.atol,
            rtol=example.tolerance.rtol,
        ):
            worst = float(np.max(np.abs(got.astype(np.float64) - want.astype(np.float64))))
            problems.append(
                f"output '{expected.name}': max abs difference {worst:g} exceeds "
                f"atol={example.tolerance.atol:g}, rtol={example.tolerance.rtol:g}"
            )
    return ExampleResult(index=index, passed=not problems, problems=problems)


def _as_bytes(array: np.ndarray) -> list[Any]:
    """The elements of a tensor of strings, ``str`` ones as their UTF-8 bytes."""
    return [
        item.encode("utf-8") if isinstance(item, str) else item
        for item in array.reshape(-1).tolist()
    ]

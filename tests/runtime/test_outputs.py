"""``runtime.outputs``: declared outputs only, in declared datatypes, or an error."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

from modelport.errors import Internal
from modelport.manifest import TensorSpec
from modelport.runtime.outputs import conform_outputs


def spec(datatype: str, name: str = "y") -> TensorSpec:
    return TensorSpec(name=name, datatype=datatype, shape=[-1])  # type: ignore[arg-type]


@pytest.mark.parametrize(
    ("value", "datatype", "want"),
    [
        (np.array([1.5], np.float32), "FP32", np.array([1.5], np.float32)),
        (np.array([1, 2], np.int32), "INT64", np.array([1, 2], np.int64)),  # safe cast
        (np.array([1, 2], np.int64), "INT32", np.array([1, 2], np.int32)),  # values fit
        (np.array([0.25], np.float64), "FP32", np.array([0.25], np.float32)),
        (np.array([1, 2], np.int64), "FP64", np.array([1.0, 2.0])),
        (np.array(["a", "b"]), "BYTES", np.array(["a", "b"], dtype=object)),
        ([[1.0, 2.0]], "FP32", np.array([[1.0, 2.0]], np.float32)),
    ],
)
def test_values_the_declared_datatype_holds_are_given_in_it(
    value: Any, datatype: str, want: np.ndarray
) -> None:
    got = conform_outputs({"y": value}, [spec(datatype)])["y"]
    assert got.dtype == want.dtype
    assert got.tolist() == want.tolist()


@pytest.mark.parametrize(
    ("value", "datatype"),
    [
        (np.array([1.5], np.float32), "INT64"),  # a fraction is no integer
        (np.array([1 << 40], np.int64), "INT32"),  # out of range
        (np.array([1, 2], np.int64), "FP32"),  # not every int64 is an FP32
        (np.array([1.0], np.float32), "BYTES"),  # no repr of numbers as text
        ([{0: 0.9, 1: 0.1}], "FP32"),  # a classifier's ZipMap maps
        ([{0: 0.9, 1: 0.1}], "BYTES"),
        (np.array([1e300]), "FP32"),  # beyond FP32's range
    ],
)
def test_values_it_cannot_hold_are_an_error_with_a_stable_code(value: Any, datatype: str) -> None:
    with pytest.raises(Internal) as caught:
        conform_outputs({"y": value}, [spec(datatype)])
    assert caught.value.code == "output_datatype_mismatch"
    assert f"declared {datatype}" in caught.value.message


def test_undeclared_outputs_are_dropped_and_a_missing_one_is_an_error() -> None:
    outputs = {"y": np.ones(1, np.float32), "extra": np.ones(1, np.float32)}
    assert list(conform_outputs(outputs, [spec("FP32")])) == ["y"]
    with pytest.raises(Internal) as caught:
        conform_outputs(outputs, [spec("FP32", "z")])
    assert caught.value.code == "missing_output"

"""Checking parsed requests against a version's declared tensors."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from modelport.api.v2 import InferenceRequest, parse_infer_request, validate_request
from modelport.errors import InvalidInput
from modelport.manifest import TensorSpec

INPUTS = [
    TensorSpec(name="features", datatype="FP32", shape=[-1, 64]),
    TensorSpec(name="mask", datatype="BOOL", shape=[-1]),
]
OUTPUTS = [
    TensorSpec(name="scores", datatype="FP32", shape=[-1, 2]),
    TensorSpec(name="label", datatype="BYTES", shape=[-1]),
]


def tensor(name: str, datatype: str, shape: list[int]) -> dict[str, Any]:
    count = 1
    for dim in shape:
        count *= dim
    value: Any = {"BOOL": True, "BYTES": "ab"}.get(datatype, 0.5 if "FP" in datatype else 1)
    return {"name": name, "datatype": datatype, "shape": shape, "data": [value] * count}


def request(*tensors: dict[str, Any], outputs: list[str] | None = None) -> InferenceRequest:
    doc: dict[str, Any] = {"inputs": list(tensors)}
    if outputs is not None:
        doc["outputs"] = [{"name": name} for name in outputs]
    return parse_infer_request(orjson.dumps(doc))


def good(**overrides: dict[str, Any]) -> list[dict[str, Any]]:
    tensors = {
        "features": tensor("features", "FP32", [3, 64]),
        "mask": tensor("mask", "BOOL", [3]),
    }
    tensors.update(overrides)
    return list(tensors.values())


def refused(req: InferenceRequest, code: str = "invalid_input", **kwargs: Any) -> InvalidInput:
    with pytest.raises(InvalidInput) as err:
        validate_request(req, INPUTS, OUTPUTS, **kwargs)
    assert err.value.code == code, err.value.message
    return err.value


def test_matching_request_passes() -> None:
    validate_request(request(*good(), outputs=["label", "scores"]), INPUTS, OUTPUTS)


def test_variable_dimension_matches_any_size_including_zero() -> None:
    req = request(
        *good(features=tensor("features", "FP32", [0, 64]), mask=tensor("mask", "BOOL", [0]))
    )
    validate_request(req, INPUTS, OUTPUTS)


def test_input_order_does_not_matter() -> None:
    validate_request(request(*reversed(good())), INPUTS, OUTPUTS)


def test_wrong_datatype() -> None:
    err = refused(request(*good(features=tensor("features", "INT64", [1, 64]))))
    assert err.message == "input 'features': expected datatype FP32, got INT64"
    assert err.extra == {"input": "features"}


@pytest.mark.parametrize(
    ("shape", "shown"),
    [([1, 63], "[1, 63]"), ([64], "[64]"), ([1, 1, 64], "[1, 1, 64]"), ([2, 65], "[2, 65]")],
)
def test_wrong_shape(shape: list[int], shown: str) -> None:
    err = refused(request(*good(features=tensor("features", "FP32", shape))))
    assert err.message == f"input 'features': expected shape [-1, 64], got {shown}"


def test_fixed_dimensions_must_be_equal() -> None:
    specs = [TensorSpec(name="img", datatype="UINT8", shape=[1, 3, 2, 2])]
    validate_request(request(tensor("img", "UINT8", [1, 3, 2, 2])), specs, OUTPUTS)
    with pytest.raises(InvalidInput) as err:
        validate_request(request(tensor("img", "UINT8", [1, 3, 4, 1])), specs, OUTPUTS)
    assert err.value.message == "input 'img': expected shape [1, 3, 2, 2], got [1, 3, 4, 1]"


def test_missing_input() -> None:
    err = refused(request(tensor("features", "FP32", [1, 64])))
    assert err.message == "missing input 'mask'; the model takes 'features', 'mask'"


def test_unknown_input() -> None:
    err = refused(request(*good(), tensor("extra", "FP32", [1])))
    assert err.message == "unknown input 'extra'; the model takes 'features', 'mask'"


def test_unknown_output() -> None:
    err = refused(request(*good(), outputs=["scores", "probabilities"]), code="unknown_output")
    assert err.message == "unknown output 'probabilities'; the model gives 'scores', 'label'"
    assert err.extra == {"output": "probabilities"}


def test_input_byte_limit_counts_every_input() -> None:
    req = request(*good())  # 3*64 FP32 = 768 bytes + 3 BOOL = 771
    validate_request(req, INPUTS, OUTPUTS, max_input_bytes=771)
    err = refused(req, code="inputs_too_large", max_input_bytes=770)
    assert err.message == "inputs hold 771 bytes, above the limit of 770"


def test_input_byte_limit_counts_bytes_elements_by_length() -> None:
    specs = [TensorSpec(name="text", datatype="BYTES", shape=[-1])]
    doc = {"name": "text", "datatype": "BYTES", "shape": [2], "data": ["abc", "\u00e9"]}
    req = request(doc)
    assert req.inputs[0].nbytes == 5
    validate_request(req, specs, OUTPUTS, max_input_bytes=5)
    with pytest.raises(InvalidInput) as err:
        validate_request(req, specs, OUTPUTS, max_input_bytes=4)
    assert err.value.code == "inputs_too_large"

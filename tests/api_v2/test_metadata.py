"""Server and model metadata documents."""

from __future__ import annotations

from modelport.api.v2 import model_metadata, server_metadata
from modelport.manifest import TensorSpec


def test_server_metadata_reports_binary_extension() -> None:
    assert server_metadata("1.2.3") == {
        "name": "modelport",
        "version": "1.2.3",
        "extensions": ["binary_tensor_data"],
    }
    assert server_metadata("1", name="gw", extensions=())["extensions"] == []


def test_model_metadata_keeps_variable_dimensions() -> None:
    doc = model_metadata(
        "acme/iris",
        ["1", "2"],
        "onnx",
        [TensorSpec(name="x", datatype="FP32", shape=[-1, 4])],
        [
            TensorSpec(name="y", datatype="INT64", shape=[-1]),
            TensorSpec(name="p", datatype="FP32", shape=[-1, 3]),
        ],
    )
    assert doc == {
        "name": "acme/iris",
        "versions": ["1", "2"],
        "platform": "onnx",
        "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 4]}],
        "outputs": [
            {"name": "y", "datatype": "INT64", "shape": [-1]},
            {"name": "p", "datatype": "FP32", "shape": [-1, 3]},
        ],
    }

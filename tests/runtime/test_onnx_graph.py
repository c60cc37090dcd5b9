"""``runtime.formats.onnx_graph`` and the ONNX plugin: ZipMap outputs are served as
tensors; other values that are not tensors are refused with a message that says why."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper

from modelport.errors import InvalidInput, Unprocessable
from modelport.manifest import Manifest
from modelport.runtime.formats.onnx import OnnxFormat
from modelport.runtime.formats.onnx_graph import signature, unzip


def zipmap_model(labels: list[str] | None = None) -> onnx.ModelProto:
    """x [N, 2] -> softmax probabilities, zipped by class label (as skl2onnx does)."""
    attrs = (
        {"classlabels_strings": labels} if labels is not None else {"classlabels_int64s": [7, 9]}
    )
    key = TensorProto.STRING if labels is not None else TensorProto.INT64
    graph = helper.make_graph(
        [
            helper.make_node("Softmax", ["x"], ["p"], axis=1),
            helper.make_node("ZipMap", ["p"], ["probs"], domain="ai.onnx.ml", **attrs),
        ],
        "zipped",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [
            helper.make_value_info(
                "probs",
                helper.make_sequence_type_proto(
                    helper.make_map_type_proto(key, helper.make_tensor_type_proto(1, None))
                ),
            )
        ],
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("ai.onnx.ml", 3)]
    model = helper.make_model(graph, opset_imports=opsets)
    model.ir_version = 8
    return model


def sequence_model() -> onnx.ModelProto:
    """x -> a sequence of tensors: nothing a manifest can declare."""
    graph = helper.make_graph(
        [helper.make_node("SequenceConstruct", ["x", "x"], ["seq"])],
        "sequence",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_sequence_value_info("seq", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def manifest(outputs: list[dict[str, object]]) -> Manifest:
    return Manifest.model_validate(
        {
            "format": "onnx",
            "files": [{"path": "m.onnx", "digest": "sha256:" + "0" * 64, "size": 1}],
            "inputs": [{"name": "x", "datatype": "FP32", "shape": [-1, 2]}],
            "outputs": outputs,
            "license": "MIT",
        }
    )


@pytest.mark.parametrize("labels", [None, ["cat", "dog"]])
def test_a_zipmap_output_is_declared_and_served_as_its_probability_tensor(
    tmp_path: Path, labels: list[str] | None
) -> None:
    model = zipmap_model(labels)
    found = signature(model, "m.onnx")
    assert found.outputs == [{"name": "probs", "datatype": "FP32", "shape": [-1, 2]}]
    assert found.class_labels == {"probs": labels or [7, 9]}
    onnx.checker.check_model(unzip(model, {"probs"}))
    onnx.save(model, tmp_path / "m.onnx")
    loaded = OnnxFormat(intra_op_threads=1).load(
        {"m.onnx": tmp_path / "m.onnx"}, manifest(found.outputs)
    )
    x = np.array([[0.0, 0.0], [0.0, 10.0]], np.float32)
    got = loaded.execute({"x": x})["probs"]
    assert got.dtype == np.float32 and got.shape == (2, 2)
    np.testing.assert_allclose(got[0], [0.5, 0.5], atol=1e-6)
    assert got[1, 1] > 0.99


def test_an_output_that_is_no_tensor_is_refused_naming_the_case(tmp_path: Path) -> None:
    with pytest.raises(InvalidInput) as caught:
        signature(sequence_model(), "m.onnx")
    assert caught.value.code == "non_tensor_value"
    assert "output 'seq' is a sequence of tensors, not a tensor" in caught.value.message
    assert "drop the output" in caught.value.message
    onnx.save(sequence_model(), tmp_path / "m.onnx")
    declared = [{"name": "seq", "datatype": "FP32", "shape": [-1, 2]}]
    with pytest.raises(Unprocessable) as loaded:
        OnnxFormat(intra_op_threads=1).load({"m.onnx": tmp_path / "m.onnx"}, manifest(declared))
    assert loaded.value.code == "non_tensor_value"


def test_a_sequence_of_maps_that_is_no_zipmap_points_at_the_zipmap_option() -> None:
    model = zipmap_model()
    del model.graph.node[1].attribute[:]  # no class labels: nothing to unzip by
    with pytest.raises(InvalidInput) as caught:
        signature(model, "m.onnx")
    message = caught.value.message
    assert "a sequence of maps" in message and "'zipmap': False" in message


def test_a_tensor_of_an_element_type_no_datatype_names_is_refused() -> None:
    graph = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["y"], to=TensorProto.BFLOAT16)],
        "bf16",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 2])],
        [helper.make_tensor_value_info("y", TensorProto.BFLOAT16, [None, 2])],
    )
    with pytest.raises(InvalidInput) as caught:
        signature(helper.make_model(graph), "m.onnx")
    assert caught.value.code == "unsupported_datatype"
    assert "output 'y' is a tensor of element type BFLOAT16" in caught.value.message

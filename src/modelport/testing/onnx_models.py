"""Real small ONNX models built with ``onnx.helper`` (deterministic weights)."""

from __future__ import annotations

import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def mlp(
    n_features: int = 8, hidden: int = 16, n_classes: int = 3, seed: int = 0
) -> onnx.ModelProto:
    """features [-1, n_features] FP32 -> probabilities [-1, n_classes] FP32."""
    rng = np.random.default_rng(seed)
    w1 = rng.standard_normal((n_features, hidden)).astype(np.float32) * 0.3
    b1 = rng.standard_normal(hidden).astype(np.float32) * 0.1
    w2 = rng.standard_normal((hidden, n_classes)).astype(np.float32) * 0.3
    b2 = rng.standard_normal(n_classes).astype(np.float32) * 0.1
    nodes = [
        helper.make_node("Gemm", ["features", "w1", "b1"], ["h"]),
        helper.make_node("Relu", ["h"], ["hr"]),
        helper.make_node("Gemm", ["hr", "w2", "b2"], ["logits"]),
        helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
    ]
    graph = helper.make_graph(
        nodes,
        "mlp",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, n_features])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, n_classes])],
        initializer=[
            numpy_helper.from_array(w1, "w1"),
            numpy_helper.from_array(b1, "b1"),
            numpy_helper.from_array(w2, "w2"),
            numpy_helper.from_array(b2, "b2"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def add_one() -> onnx.ModelProto:
    """x [-1, 4] FP32 -> y = x + 1."""
    one = numpy_helper.from_array(np.ones(4, dtype=np.float32), "one")
    graph = helper.make_graph(
        [helper.make_node("Add", ["x", "one"], ["y"])],
        "add_one",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model


def echo_text() -> onnx.ModelProto:
    """text [-1] STRING, x [-1, 4] FP32 -> echo = text (Identity), y = x + 1: strings and
    numbers in one call."""
    one = numpy_helper.from_array(np.ones(4, dtype=np.float32), "one")
    graph = helper.make_graph(
        [
            helper.make_node("Identity", ["text"], ["echo"]),
            helper.make_node("Add", ["x", "one"], ["y"]),
        ],
        "echo_text",
        [
            helper.make_tensor_value_info("text", TensorProto.STRING, [None]),
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4]),
        ],
        [
            helper.make_tensor_value_info("echo", TensorProto.STRING, [None]),
            helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4]),
        ],
        initializer=[one],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def save(model: onnx.ModelProto, path: str | os.PathLike[str]) -> None:
    onnx.save_model(model, os.fspath(path))


def looping_add_one() -> onnx.ModelProto:
    """x [-1, 4] FP32, steps [-1] INT64 -> y = x + 1, after a loop of max(steps) empty
    iterations: a real model whose execution takes as long as a caller asks (a huge
    ``steps`` never ends in practice)."""
    body = helper.make_graph(
        [
            helper.make_node("Identity", ["cond_in"], ["cond_out"]),
            helper.make_node("Identity", ["v_in"], ["v_out"]),
        ],
        "spin",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_in", TensorProto.FLOAT, [None, 4]),
        ],
        [
            helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v_out", TensorProto.FLOAT, [None, 4]),
        ],
    )
    one = numpy_helper.from_array(np.ones(4, dtype=np.float32), "one")
    always = numpy_helper.from_array(np.array(True), "always")
    graph = helper.make_graph(
        [
            helper.make_node("ReduceMax", ["steps"], ["trips"], keepdims=0),
            helper.make_node("Loop", ["trips", "always", "x"], ["looped"], body=body),
            helper.make_node("Add", ["looped", "one"], ["y"]),
        ],
        "looping_add_one",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [None, 4]),
            helper.make_tensor_value_info("steps", TensorProto.INT64, [None]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [None, 4])],
        initializer=[one, always],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model

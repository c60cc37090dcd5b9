"""The demo's classifier: a softmax regression trained on Fisher's iris measurements.

The 150 rows of the iris data set (R. A. Fisher, 1936; the copy scikit-learn and the
UCI repository ship) are embedded below, so the demo trains its model in a few
milliseconds of numpy, deterministically, with nothing downloaded. The trained model
is one ONNX ``Gemm`` and a ``Softmax``: the features' standardisation is folded into
the weights, so the graph takes the raw measurements in centimetres.
"""

from __future__ import annotations

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

CLASSES = ("setosa", "versicolor", "virginica")
FEATURES = ("sepal_length", "sepal_width", "petal_length", "petal_width")

# sepal length, sepal width, petal length, petal width (cm), class index; three rows a line.
_ROWS = """
    5.1 3.5 1.4 0.2 0 | 4.9 3.0 1.4 0.2 0 | 4.7 3.2 1.3 0.2 0
    4.6 3.1 1.5 0.2 0 | 5.0 3.6 1.4 0.2 0 | 5.4 3.9 1.7 0.4 0
    4.6 3.4 1.4 0.3 0 | 5.0 3.4 1.5 0.2 0 | 4.4 2.9 1.4 0.2 0
    4.9 3.1 1.5 0.1 0 | 5.4 3.7 1.5 0.2 0 | 4.8 3.4 1.6 0.2 0
    4.8 3.0 1.4 0.1 0 | 4.3 3.0 1.1 0.1 0 | 5.8 4.0 1.2 0.2 0
    5.7 4.4 1.5 0.4 0 | 5.4 3.9 1.3 0.4 0 | 5.1 3.5 1.4 0.3 0
    5.7 3.8 1.7 0.3 0 | 5.1 3.8 1.5 0.3 0 | 5.4 3.4 1.7 0.2 0
    5.1 3.7 1.5 0.4 0 | 4.6 3.6 1.0 0.2 0 | 5.1 3.3 1.7 0.5 0
    4.8 3.4 1.9 0.2 0 | 5.0 3.0 1.6 0.2 0 | 5.0 3.4 1.6 0.4 0
    5.2 3.5 1.5 0.2 0 | 5.2 3.4 1.4 0.2 0 | 4.7 3.2 1.6 0.2 0
    4.8 3.1 1.6 0.2 0 | 5.4 3.4 1.5 0.4 0 | 5.2 4.1 1.5 0.1 0
    5.5 4.2 1.4 0.2 0 | 4.9 3.1 1.5 0.2 0 | 5.0 3.2 1.2 0.2 0
    5.5 3.5 1.3 0.2 0 | 4.9 3.6 1.4 0.1 0 | 4.4 3.0 1.3 0.2 0
    5.1 3.4 1.5 0.2 0 | 5.0 3.5 1.3 0.3 0 | 4.5 2.3 1.3 0.3 0
    4.4 3.2 1.3 0.2 0 | 5.0 3.5 1.6 0.6 0 | 5.1 3.8 1.9 0.4 0
    4.8 3.0 1.4 0.3 0 | 5.1 3.8 1.6 0.2 0 | 4.6 3.2 1.4 0.2 0
    5.3 3.7 1.5 0.2 0 | 5.0 3.3 1.4 0.2 0 | 7.0 3.2 4.7 1.4 1
    6.4 3.2 4.5 1.5 1 | 6.9 3.1 4.9 1.5 1 | 5.5 2.3 4.0 1.3 1
    6.5 2.8 4.6 1.5 1 | 5.7 2.8 4.5 1.3 1 | 6.3 3.3 4.7 1.6 1
    4.9 2.4 3.3 1.0 1 | 6.6 2.9 4.6 1.3 1 | 5.2 2.7 3.9 1.4 1
    5.0 2.0 3.5 1.0 1 | 5.9 3.0 4.2 1.5 1 | 6.0 2.2 4.0 1.0 1
    6.1 2.9 4.7 1.4 1 | 5.6 2.9 3.6 1.3 1 | 6.7 3.1 4.4 1.4 1
    5.6 3.0 4.5 1.5 1 | 5.8 2.7 4.1 1.0 1 | 6.2 2.2 4.5 1.5 1
    5.6 2.5 3.9 1.1 1 | 5.9 3.2 4.8 1.8 1 | 6.1 2.8 4.0 1.3 1
    6.3 2.5 4.9 1.5 1 | 6.1 2.8 4.7 1.2 1 | 6.4 2.9 4.3 1.3 1
    6.6 3.0 4.4 1.4 1 | 6.8 2.8 4.8 1.4 1 | 6.7 3.0 5.0 1.7 1
    6.0 2.9 4.5 1.5 1 | 5.7 2.6 3.5 1.0 1 | 5.5 2.4 3.8 1.1 1
    5.5 2.4 3.7 1.0 1 | 5.8 2.7 3.9 1.2 1 | 6.0 2.7 5.1 1.6 1
    5.4 3.0 4.5 1.5 1 | 6.0 3.4 4.5 1.6 1 | 6.7 3.1 4.7 1.5 1
    6.3 2.3 4.4 1.3 1 | 5.6 3.0 4.1 1.3 1 | 5.5 2.5 4.0 1.3 1
    5.5 2.6 4.4 1.2 1 | 6.1 3.0 4.6 1.4 1 | 5.8 2.6 4.0 1.2 1
    5.0 2.3 3.3 1.0 1 | 5.6 2.7 4.2 1.3 1 | 5.7 3.0 4.2 1.2 1
    5.7 2.9 4.2 1.3 1 | 6.2 2.9 4.3 1.3 1 | 5.1 2.5 3.0 1.1 1
    5.7 2.8 4.1 1.3 1 | 6.3 3.3 6.0 2.5 2 | 5.8 2.7 5.1 1.9 2
    7.1 3.0 5.9 2.1 2 | 6.3 2.9 5.6 1.8 2 | 6.5 3.0 5.8 2.2 2
    7.6 3.0 6.6 2.1 2 | 4.9 2.5 4.5 1.7 2 | 7.3 2.9 6.3 1.8 2
    6.7 2.5 5.8 1.8 2 | 7.2 3.6 6.1 2.5 2 | 6.5 3.2 5.1 2.0 2
    6.4 2.7 5.3 1.9 2 | 6.8 3.0 5.5 2.1 2 | 5.7 2.5 5.0 2.0 2
    5.8 2.8 5.1 2.4 2 | 6.4 3.2 5.3 2.3 2 | 6.5 3.0 5.5 1.8 2
    7.7 3.8 6.7 2.2 2 | 7.7 2.6 6.9 2.3 2 | 6.0 2.2 5.0 1.5 2
    6.9 3.2 5.7 2.3 2 | 5.6 2.8 4.9 2.0 2 | 7.7 2.8 6.7 2.0 2
    6.3 2.7 4.9 1.8 2 | 6.7 3.3 5.7 2.1 2 | 7.2 3.2 6.0 1.8 2
    6.2 2.8 4.8 1.8 2 | 6.1 3.0 4.9 1.8 2 | 6.4 2.8 5.6 2.1 2
    7.2 3.0 5.8 1.6 2 | 7.4 2.8 6.1 1.9 2 | 7.9 3.8 6.4 2.0 2
    6.4 2.8 5.6 2.2 2 | 6.3 2.8 5.1 1.5 2 | 6.1 2.6 5.6 1.4 2
    7.7 3.0 6.1 2.3 2 | 6.3 3.4 5.6 2.4 2 | 6.4 3.1 5.5 1.8 2
    6.0 3.0 4.8 1.8 2 | 6.9 3.1 5.4 2.1 2 | 6.7 3.1 5.6 2.4 2
    6.9 3.1 5.1 2.3 2 | 5.8 2.7 5.1 1.9 2 | 6.8 3.2 5.9 2.3 2
    6.7 3.3 5.7 2.5 2 | 6.7 3.0 5.2 2.3 2 | 6.3 2.5 5.0 1.9 2
    6.5 3.0 5.2 2.0 2 | 6.2 3.4 5.4 2.3 2 | 5.9 3.0 5.1 1.8 2
"""

STEPS = 2000
LEARNING_RATE = 0.5
L2 = 1e-3
"""A little weight decay keeps the probabilities calibrated rather than all 0 and 1."""


def iris() -> tuple[np.ndarray, np.ndarray]:
    """The data set: features [150, 4] float32 and class indices [150] int64."""
    rows = [r.split() for line in _ROWS.strip().splitlines() for r in line.split("|")]
    features = np.asarray([[float(v) for v in row[:4]] for row in rows], dtype=np.float32)
    labels = np.asarray([int(row[4]) for row in rows], dtype=np.int64)
    return features, labels


def train(features: np.ndarray, labels: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Weights [4, 3] and bias [3] of a softmax regression on raw features, fitted by
    full-batch gradient descent on standardised ones (from zeros: deterministic)."""
    x = features.astype(np.float64)
    mean, std = x.mean(axis=0), x.std(axis=0)
    z = (x - mean) / std
    onehot = np.eye(len(CLASSES))[labels]
    weights = np.zeros((z.shape[1], len(CLASSES)))
    bias = np.zeros(len(CLASSES))
    for _ in range(STEPS):
        logits = z @ weights + bias
        logits -= logits.max(axis=1, keepdims=True)
        p = np.exp(logits)
        p /= p.sum(axis=1, keepdims=True)
        error = (p - onehot) / len(z)
        weights -= LEARNING_RATE * (z.T @ error + L2 * weights)
        bias -= LEARNING_RATE * error.sum(axis=0)
    # (x - mean) / std @ W + b  ==  x @ (W / std) + (b - (mean / std) @ W)
    raw_weights = weights / std[:, None]
    raw_bias = bias - (mean / std) @ weights
    return raw_weights.astype(np.float32), raw_bias.astype(np.float32)


def iris_classifier() -> onnx.ModelProto:
    """features [-1, 4] FP32 (cm) -> probabilities [-1, 3] FP32 (setosa, versicolor,
    virginica), trained on the embedded data."""
    weights, bias = train(*iris())
    graph = helper.make_graph(
        [
            helper.make_node("Gemm", ["features", "weights", "bias"], ["logits"]),
            helper.make_node("Softmax", ["logits"], ["probabilities"], axis=1),
        ],
        "iris",
        [helper.make_tensor_value_info("features", TensorProto.FLOAT, [None, len(FEATURES)])],
        [helper.make_tensor_value_info("probabilities", TensorProto.FLOAT, [None, len(CLASSES)])],
        initializer=[
            numpy_helper.from_array(weights, "weights"),
            numpy_helper.from_array(bias, "bias"),
        ],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model

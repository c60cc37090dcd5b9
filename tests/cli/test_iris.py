"""The demo's classifier is trained on the real iris data and classifies it well, run
by onnxruntime as the platform runs it."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest

from modelport.cli.demo import EXAMPLE_ROWS
from modelport.cli.iris import CLASSES, iris, iris_classifier


def session() -> ort.InferenceSession:
    return ort.InferenceSession(
        iris_classifier().SerializeToString(), providers=["CPUExecutionProvider"]
    )


def test_the_embedded_data_is_fishers_iris() -> None:
    datasets = pytest.importorskip("sklearn.datasets")  # the dev extra
    features, labels = iris()
    reference = datasets.load_iris()
    assert np.allclose(features, reference.data, atol=1e-6)
    assert (labels == reference.target).all()
    assert tuple(reference.target_names) == CLASSES


def test_the_classifier_classifies_the_iris_data() -> None:
    features, labels = iris()
    (probabilities,) = session().run(["probabilities"], {"features": features})
    assert probabilities.shape == (150, 3)
    assert np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-5)
    accuracy = float((probabilities.argmax(axis=1) == labels).mean())
    assert accuracy >= 0.95
    for kind in range(3):  # no class left behind
        assert (probabilities[labels == kind].argmax(axis=1) == kind).mean() >= 0.9


def test_the_demos_example_rows_are_a_setosa_and_a_virginica() -> None:
    (probabilities,) = session().run(
        ["probabilities"], {"features": np.asarray(EXAMPLE_ROWS, dtype=np.float32)}
    )
    assert [CLASSES[i] for i in probabilities.argmax(axis=1)] == ["setosa", "virginica"]
    assert probabilities.max(axis=1).min() > 0.9


def test_training_is_deterministic() -> None:
    assert iris_classifier().SerializeToString() == iris_classifier().SerializeToString()

"""The monitors' statistics: drift found on a shifted sample and not on an unshifted
one, for numbers and categories; quality metrics equal scikit-learn's on the same
pairs; logged tensors split into features."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.metrics import (
    accuracy_score,
    mean_absolute_error,
    mean_squared_error,
    precision_recall_fscore_support,
)

from modelport.monitoring.columns import Samples
from modelport.monitoring.drift import categorical_drift, numeric_drift, psi
from modelport.monitoring.quality import quality

LIMITS = {"psi_limit": 0.2, "p_limit": 0.01}


def test_a_shifted_numeric_feature_drifts_and_an_unshifted_one_does_not() -> None:
    rng = np.random.default_rng(7)
    reference = rng.normal(0, 1, 2000)
    same = numeric_drift("x", reference, rng.normal(0, 1, 500), **LIMITS)
    shifted = numeric_drift("x", reference, rng.normal(0.8, 1, 500), **LIMITS)
    assert not same.drifted and same.psi < 0.1 and same.p_value > 0.01
    assert shifted.drifted and shifted.psi > 0.2 and shifted.p_value < 1e-6
    assert (shifted.test, shifted.kind, shifted.current_count) == ("ks", "numeric", 500)


def test_a_wider_spread_drifts_though_the_mean_stays() -> None:
    rng = np.random.default_rng(8)
    reference = rng.normal(0, 1, 2000)
    wider = numeric_drift("x", reference, rng.normal(0, 3, 500), **LIMITS)
    assert wider.drifted


def test_the_stability_index_of_a_constant_reference_is_finite() -> None:
    constant = np.zeros(100)
    assert psi(constant, np.zeros(50)) == pytest.approx(0.0)
    moved = psi(constant, np.ones(50))
    assert math.isfinite(moved) and moved > 1


def test_category_shares_that_moved_drift_and_a_new_category_drifts() -> None:
    reference = ["card"] * 700 + ["bank"] * 300
    assert not categorical_drift("kind", reference, ["card"] * 70 + ["bank"] * 30, **LIMITS).drifted
    moved = categorical_drift("kind", reference, ["card"] * 30 + ["bank"] * 70, **LIMITS)
    assert moved.drifted and moved.test == "chi_square" and moved.p_value < 1e-6
    new = categorical_drift(
        "kind", reference, ["card"] * 60 + ["bank"] * 30 + ["crypto"] * 10, **LIMITS
    )
    assert new.drifted


def test_label_and_value_metrics_equal_scikit_learns() -> None:
    rng = np.random.default_rng(3)
    truths = [str(v) for v in rng.integers(0, 3, 200)]
    answers = [t if rng.random() < 0.7 else str(rng.integers(0, 3)) for t in truths]
    values = rng.normal(10, 2, 100)
    guesses = values + rng.normal(0, 0.5, 100)
    found = quality(
        "all", list(zip(answers, truths, strict=True)), list(zip(guesses, values, strict=True))
    )
    assert found.accuracy == pytest.approx(accuracy_score(truths, answers))
    labels = sorted(set(truths) | set(answers))
    precision, recall, _, support = precision_recall_fscore_support(
        truths, answers, labels=labels, zero_division=0
    )
    assert [c.label for c in found.classes] == labels
    assert [c.precision for c in found.classes] == pytest.approx(list(precision))
    assert [c.recall for c in found.classes] == pytest.approx(list(recall))
    assert [c.support for c in found.classes] == list(support)
    assert found.mae == pytest.approx(mean_absolute_error(values, guesses))
    assert found.rmse == pytest.approx(math.sqrt(mean_squared_error(values, guesses)))
    assert (found.labelled, found.numeric) == (200, 100)


def test_no_pairs_give_no_metrics() -> None:
    empty = quality(None, [], [])
    assert (empty.accuracy, empty.mae, empty.rmse, empty.classes) == (None, None, None, [])


def test_logged_tensors_become_features_by_column() -> None:
    samples = Samples()
    samples.add(
        [
            {"name": "x", "datatype": "FP32", "shape": [2, 2], "data": [1.0, 10.0, 2.0, 20.0]},
            {"name": "kind", "datatype": "BYTES", "shape": [2], "data": ["card", "bank"]},
            {"name": "image", "datatype": "FP32", "shape": [1, 2, 2], "data": [0, 0, 0, 0]},
            {"name": "bad", "datatype": "FP32", "shape": [2, 3], "data": [1.0]},
        ]
    )
    assert dict(samples.numeric) == {"x[0]": [1.0, 2.0], "x[1]": [10.0, 20.0]}
    assert dict(samples.categorical) == {"kind": ["card", "bank"]}

"""An evaluation job's scores equal scikit-learn's metrics computed directly on the same
data, for a real ONNX classifier and regressor; it is metered and billed as any job's
calls, linked to both digests, and its results never change."""

from __future__ import annotations

import numpy as np
import onnxruntime as ort
import pytest
from sklearn.metrics import (
    accuracy_score,
    f1_score,
    log_loss,
    mean_absolute_error,
    mean_squared_error,
    r2_score,
)

from modelport.evaluations import repository as evaluations_repo
from modelport.metering.types import BalanceScope
from tests.evaluations.conftest import (
    CLASSIFICATION_COLUMNS,
    CLASSIFIER_IO,
    REGRESSION_COLUMNS,
    REGRESSOR_IO,
    Trained,
    World,
)
from tests.metering.conftest import T0

PRICE = 2_000
CREDIT = 10_000_000


def _offline(trained: Trained) -> list[np.ndarray]:
    """The ONNX graph run directly, outside the platform."""
    session = ort.InferenceSession(trained.graph.SerializeToString())
    return list(session.run(None, {"X": trained.x}))


def test_classification_scores_equal_sklearn_on_the_same_data(
    world: World, classifier: Trained
) -> None:
    services = world.services
    world.model("acme/iris", classifier.graph, CLASSIFIER_IO, task="classification")
    dataset = world.dataset(
        "acme/iris-eval",
        {"test": {"X": classifier.x, "y": classifier.y}},
        CLASSIFICATION_COLUMNS,
        task="classification",
    )
    price = world.client.post(
        "/api/prices",
        json={"model": "acme/iris", "unit": "prediction", "unit_price_micros": PRICE},
    )
    assert price.status_code == 201, price.text
    services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")

    done = world.run(model="acme/iris", dataset="acme/iris-eval", output="probabilities")
    assert done["state"] == "succeeded", done["error"]
    labels, probabilities = _offline(classifier)
    normalised = probabilities.astype(np.float64)
    normalised /= normalised.sum(axis=1, keepdims=True)
    expected = {
        "accuracy": accuracy_score(classifier.y, probabilities.argmax(axis=1)),
        "f1_macro": f1_score(classifier.y, probabilities.argmax(axis=1), average="macro"),
        "log_loss": log_loss(classifier.y, normalised, labels=[0, 1, 2]),
    }
    assert done["metrics"] == pytest.approx(expected, rel=1e-6)
    # The ONNX model agrees with the estimator it was converted from.
    assert done["metrics"]["accuracy"] == accuracy_score(
        classifier.y, classifier.estimator.predict(classifier.x)
    )
    assert done["rows"] == 300 and done["latency_ms"] > 0
    assert done["verified"] is True and done["task"] == "classification"
    assert done["dataset_digest"] == dataset["digest"]
    version = services.registry.get_version("acme", "iris", "1")
    assert done["version_digest"] == version.manifest_digest

    # Billed as any job's calls: one metered call per shard of 256 rows, charged once.
    charged = [
        e.event
        for e in world.platform.entries()
        if e.event.prediction_id.startswith(f"eval:{done['job_id']}:")
    ]
    assert sorted(e.prediction_id for e in charged) == [
        f"eval:{done['job_id']}:0",
        f"eval:{done['job_id']}:1",
    ]
    assert all(e.tenant == "beta" and e.amount_micros == PRICE for e in charged)
    balance = services.metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == CREDIT - 2 * PRICE and balance.reserved_micros == 0

    # The predicted labels scored instead: accuracy and F1, no log-loss.
    by_label = world.run(model="acme/iris", dataset="acme/iris-eval", output="label")
    assert by_label["metrics"] == pytest.approx(
        {
            "accuracy": accuracy_score(classifier.y, labels),
            "f1_macro": f1_score(classifier.y, labels, average="macro"),
        }
    )
    # Results are written once: a stage run again (its runner died after the write)
    # changes nothing.
    with services.database.transaction() as session:
        again = evaluations_repo.record_result(
            session, done["id"], metrics={"accuracy": 0.0}, rows=1, latency_ms=1.0, at=T0
        )
    assert again is False
    shown = world.client.get(f"/api/evaluations/{done['id']}", headers=world.bearer())
    assert shown.json()["metrics"] == done["metrics"]


def test_regression_scores_equal_sklearn_on_the_same_data(world: World, regressor: Trained) -> None:
    world.model("acme/diabetes", regressor.graph, REGRESSOR_IO, task="regression")
    world.dataset(
        "acme/diabetes-eval",
        {"test": {"X": regressor.x, "y": regressor.y}},
        REGRESSION_COLUMNS,
        task="regression",
    )
    done = world.run(model="acme/diabetes", dataset="acme/diabetes-eval")
    assert done["state"] == "succeeded", done["error"]
    (predicted,) = _offline(regressor)
    predicted = predicted.astype(np.float64)
    truth = regressor.y.reshape(-1, 1)
    assert done["metrics"] == pytest.approx(
        {
            "mae": mean_absolute_error(truth, predicted),
            "rmse": float(np.sqrt(mean_squared_error(truth, predicted))),
            "r2": r2_score(truth, predicted),
        },
        rel=1e-9,
    )
    assert done["rows"] == len(regressor.y)

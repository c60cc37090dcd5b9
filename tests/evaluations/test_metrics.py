"""The metric suites (``evaluations.metrics``), table-driven against scikit-learn and
rapidfuzz computed directly, and the stable code of an output that cannot be scored."""

from __future__ import annotations

import numpy as np
import pytest
from rapidfuzz import fuzz
from sklearn.metrics import accuracy_score, f1_score

from modelport.errors import InvalidInput
from modelport.evaluations import metrics


def test_chat_scores_exact_match_and_a_judge_free_similarity() -> None:
    references = np.array([b"Paris", b"4", "blue whale"], dtype=object)
    answers = np.array([b"Paris", b"four", " blue whales "], dtype=object)
    scores = metrics.score("chat", references, answers)
    assert scores["exact_match"] == pytest.approx(1 / 3)
    expected = np.mean([100.0, fuzz.ratio("four", "4"), fuzz.ratio("blue whales", "blue whale")])
    assert scores["similarity"] == pytest.approx(expected)


def test_embedding_scores_retrieval_by_cosine_similarity() -> None:
    # Rows 0 and 1 share a label and point the same way; rows 2 and 3 share another, but
    # row 3 is nearest to row 0: retrieved at rank 2 behind it.
    vectors = np.array([[1.0, 0.0], [0.9, 0.1], [0.0, 1.0], [0.7, 0.6]])
    labels = np.array([7, 7, 3, 3])
    scores = metrics.score("embedding", labels, vectors)
    # rows 0, 1: their pair first; row 2: row 3 first (cosine 0.65 against 0.11, 0.0);
    # row 3: row 0 (0.76), then row 1, then row 2 (0.65): rank 3.
    assert scores["recall_at_1"] == pytest.approx(3 / 4)
    assert scores["mrr"] == pytest.approx((1 + 1 + 1 + 1 / 3) / 4)


def test_classification_of_predicted_labels_has_no_log_loss() -> None:
    truth = np.array([0, 1, 2, 2, 1])
    predicted = np.array([0, 2, 2, 2, 1])
    assert metrics.score("classification", truth, predicted) == {
        "accuracy": accuracy_score(truth, predicted),
        "f1_macro": pytest.approx(f1_score(truth, predicted, average="macro")),
    }


@pytest.mark.parametrize(
    ("task", "labels", "outputs"),
    [
        ("classification", np.array([0, 1]), np.zeros((2, 2, 2))),
        ("regression", np.array([1.0, 2.0]), np.zeros((2, 3))),
        ("classification", np.array([0, 1, 1]), np.array([0, 1])),
        ("embedding", np.array([1, 2, 3]), np.eye(3)),
    ],
)
def test_an_output_that_cannot_be_scored_is_output_mismatch(
    task: str, labels: np.ndarray, outputs: np.ndarray
) -> None:
    with pytest.raises(InvalidInput) as refused:
        metrics.score(task, labels, outputs)
    assert refused.value.code == "output_mismatch"

"""The metric suite of each task, computed with well-kept libraries (scikit-learn's
metrics; rapidfuzz for text), pure of the platform: arrays in, a dict of floats out.

| task | metrics (the first is the leaderboard's score) | model output |
|---|---|---|
| classification | accuracy, f1_macro, log_loss (with probabilities, renormalised in float64) | per-class probabilities or scores ``[rows, classes]``, or class indices ``[rows]`` |
| regression | mae (lower is better), rmse, r2 | ``[rows]`` or ``[rows, 1]`` |
| chat | exact_match, similarity (rapidfuzz's normalised Indel ratio, 0 to 100, mean) | texts ``[rows]`` |
| embedding | recall_at_1, mrr (rows retrieving another row of their label by cosine similarity) | vectors ``[rows, dims]`` |
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from modelport.errors import InvalidInput

PRIMARY: dict[str, tuple[str, bool]] = {
    "classification": ("accuracy", True),
    "regression": ("mae", False),
    "chat": ("exact_match", True),
    "embedding": ("recall_at_1", True),
}
"""Each task's leaderboard score and whether higher is better."""


def _mismatch(message: str) -> InvalidInput:
    return InvalidInput(message, code="output_mismatch")


def classification(labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import accuracy_score, f1_score, log_loss

    labels = np.asarray(labels).reshape(-1).astype(np.int64)
    outputs = np.asarray(outputs)
    scores: dict[str, float] = {}
    if outputs.ndim == 2 and outputs.shape[1] > 1:
        predicted = outputs.argmax(axis=1)
        probabilities = outputs.astype(np.float64)
        if np.all(probabilities >= 0) and np.allclose(probabilities.sum(axis=1), 1.0, atol=1e-3):
            # Probabilities in float32 sum to 1 only within its precision: renormalised in
            # float64, as scikit-learn asks.
            probabilities /= probabilities.sum(axis=1, keepdims=True)
            classes = np.arange(outputs.shape[1])
            scores["log_loss"] = float(log_loss(labels, probabilities, labels=classes))
    elif outputs.ndim == 1 or (outputs.ndim == 2 and outputs.shape[1] == 1):
        predicted = outputs.reshape(-1).astype(np.int64)
    else:
        raise _mismatch(
            f"a classifier's output must be [rows] or [rows, classes], not {outputs.shape}"
        )
    scores["accuracy"] = float(accuracy_score(labels, predicted))
    scores["f1_macro"] = float(f1_score(labels, predicted, average="macro", zero_division=0))
    return scores


def regression(labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    from sklearn.metrics import mean_absolute_error, mean_squared_error, r2_score

    truth = np.asarray(labels, dtype=np.float64).reshape(len(labels), -1)
    predicted = np.asarray(outputs, dtype=np.float64).reshape(len(outputs), -1)
    if truth.shape != predicted.shape:
        raise _mismatch(
            f"a regressor's output {predicted.shape} does not match the labels {truth.shape}"
        )
    return {
        "mae": float(mean_absolute_error(truth, predicted)),
        "rmse": float(np.sqrt(mean_squared_error(truth, predicted))),
        "r2": float(r2_score(truth, predicted)) if len(truth) > 1 else 0.0,
    }


def _text(value: Any) -> str:
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else str(value)


def chat(labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    from rapidfuzz import fuzz

    references = [_text(v).strip() for v in np.asarray(labels, dtype=object).reshape(-1)]
    answers = [_text(v).strip() for v in np.asarray(outputs, dtype=object).reshape(-1)]
    if len(references) != len(answers):
        raise _mismatch(f"{len(answers)} answers for {len(references)} references")
    exact = [a == r for a, r in zip(answers, references, strict=True)]
    similar = [fuzz.ratio(a, r) for a, r in zip(answers, references, strict=True)]
    return {"exact_match": float(np.mean(exact)), "similarity": float(np.mean(similar))}


def embedding(labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    from sklearn.metrics.pairwise import cosine_similarity

    groups = np.asarray(labels).reshape(-1)
    vectors = np.asarray(outputs, dtype=np.float64).reshape(len(groups), -1)
    similarity = cosine_similarity(vectors)
    np.fill_diagonal(similarity, -np.inf)  # a row never retrieves itself
    order = np.argsort(-similarity, axis=1, kind="stable")[:, :-1]
    relevant = groups[order] == groups[:, None]
    hits = relevant.any(axis=1)
    if not hits.any():
        raise _mismatch("no two rows share a label: nothing can be retrieved")
    first = np.where(hits, relevant.argmax(axis=1), 0)
    reciprocal = np.where(hits, 1.0 / (first + 1), 0.0)
    asked = hits  # rows with at least one other row of their label
    return {
        "recall_at_1": float(relevant[asked, 0].mean()),
        "mrr": float(reciprocal[asked].mean()),
    }


SUITES: dict[str, Callable[[np.ndarray, np.ndarray], dict[str, float]]] = {
    "classification": classification,
    "regression": regression,
    "chat": chat,
    "embedding": embedding,
}


def score(task: str, labels: np.ndarray, outputs: np.ndarray) -> dict[str, float]:
    """The task's metrics of ``outputs`` against ``labels`` (400 ``output_mismatch``
    where the output cannot be scored for the task)."""
    if len(np.asarray(outputs)) != len(np.asarray(labels)):
        raise _mismatch(f"{len(outputs)} answers for {len(labels)} rows")
    return SUITES[task](labels, outputs)

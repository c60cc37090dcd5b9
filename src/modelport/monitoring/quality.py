"""Accuracy-style metrics of answers joined with their outcomes. Pure.

Labels: accuracy, and precision and recall per class (a class's precision over the
answers that named it, its recall over the outcomes that were it). Numbers: mean
absolute error and root mean squared error.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, field


@dataclass(frozen=True)
class ClassScores:
    label: str
    precision: float | None
    recall: float | None
    support: int
    """Outcomes of this class."""


@dataclass(frozen=True)
class Quality:
    """The metrics of one slice (``slice`` None: every joined prediction)."""

    slice: str | None
    labelled: int = 0
    accuracy: float | None = None
    classes: list[ClassScores] = field(default_factory=list)
    numeric: int = 0
    mae: float | None = None
    rmse: float | None = None


def label_metrics(
    answers: Sequence[str], truths: Sequence[str]
) -> tuple[float | None, list[ClassScores]]:
    """Accuracy and the per-class scores of ``answers`` against ``truths`` (pairs)."""
    if not answers:
        return None, []
    correct = sum(a == t for a, t in zip(answers, truths, strict=True))
    classes = []
    for label in sorted(set(answers) | set(truths)):
        hits = sum(a == t == label for a, t in zip(answers, truths, strict=True))
        named = sum(a == label for a in answers)
        actual = sum(t == label for t in truths)
        classes.append(
            ClassScores(
                label,
                hits / named if named else None,
                hits / actual if actual else None,
                actual,
            )
        )
    return correct / len(answers), classes


def value_metrics(
    answers: Sequence[float], truths: Sequence[float]
) -> tuple[float | None, float | None]:
    """MAE and RMSE of ``answers`` against ``truths`` (pairs)."""
    if not answers:
        return None, None
    errors = [a - t for a, t in zip(answers, truths, strict=True)]
    mae = sum(abs(e) for e in errors) / len(errors)
    rmse = math.sqrt(sum(e * e for e in errors) / len(errors))
    return mae, rmse


def quality(
    slice_name: str | None,
    labels: Sequence[tuple[str, str]],
    values: Sequence[tuple[float, float]],
) -> Quality:
    """The metrics of one slice from its ``(answer, outcome)`` label and value pairs."""
    accuracy, classes = label_metrics([a for a, _ in labels], [t for _, t in labels])
    mae, rmse = value_metrics([a for a, _ in values], [t for _, t in values])
    return Quality(slice_name, len(labels), accuracy, classes, len(values), mae, rmse)

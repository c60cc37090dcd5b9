"""Drift between a reference sample and a current one, for one feature. Pure.

Numbers: the population stability index over the reference's deciles, and the
two-sample Kolmogorov-Smirnov test (``scipy.stats.ks_2samp``). Categories: the index
over the categories seen, and Pearson's chi-square test of the current counts against
the reference's proportions (``scipy.stats.chisquare``).

A feature has drifted when both say so: the index measures how far the distribution
moved, the test whether the samples show it. The index alone is biased upward on small
samples (about ``bins / n`` with nothing moved), and the test alone flags shifts too
small to matter on large ones.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np

BINS = 10
EPSILON = 1e-4
"""The share a bin that one sample leaves empty counts as, so the index stays finite."""


@dataclass(frozen=True)
class Drift:
    """One feature's drift, and whether it passes the policy's limits."""

    feature: str
    kind: Literal["numeric", "categorical"]
    reference_count: int
    current_count: int
    psi: float
    test: Literal["ks", "chi_square"]
    statistic: float
    p_value: float
    drifted: bool


def psi(reference: np.ndarray, current: np.ndarray) -> float:
    """The population stability index of ``current`` against ``reference``, over the
    reference's deciles (ties merged)."""
    edges = np.unique(np.quantile(reference, np.linspace(0, 1, BINS + 1)))
    if len(edges) < 2:  # a constant reference: one bin for it, one for the rest
        same = float(edges[0]) if len(edges) else 0.0
        ref_share = np.array([1.0, 0.0])
        cur_share = np.array([np.mean(current == same), np.mean(current != same)])
        return _index(ref_share, cur_share)
    inner = edges[1:-1]
    ref_counts = np.bincount(
        np.searchsorted(inner, reference, side="right"), minlength=len(edges) - 1
    )
    cur_counts = np.bincount(
        np.searchsorted(inner, current, side="right"), minlength=len(edges) - 1
    )
    return _index(ref_counts / ref_counts.sum(), cur_counts / max(1, cur_counts.sum()))


def _index(reference: np.ndarray, current: np.ndarray) -> float:
    ref = np.maximum(reference, EPSILON)
    cur = np.maximum(current, EPSILON)
    return float(np.sum((cur - ref) * np.log(cur / ref)))


def numeric_drift(
    feature: str, reference: np.ndarray, current: np.ndarray, *, psi_limit: float, p_limit: float
) -> Drift:
    from scipy.stats import ks_2samp

    result = ks_2samp(reference, current)
    index = psi(reference, current)
    p_value = float(result.pvalue)
    return Drift(
        feature, "numeric", len(reference), len(current), index, "ks",
        float(result.statistic), p_value, index > psi_limit and p_value < p_limit,
    )  # fmt: skip


def categorical_drift(
    feature: str,
    reference: Sequence[str],
    current: Sequence[str],
    *,
    psi_limit: float,
    p_limit: float,
) -> Drift:
    from scipy.stats import chisquare

    categories = sorted(set(reference) | set(current))
    ref_counts, cur_counts = Counter(reference), Counter(current)
    ref = np.array([ref_counts[c] for c in categories], dtype=float)
    cur = np.array([cur_counts[c] for c in categories], dtype=float)
    ref_share = ref / ref.sum()
    index = _index(ref_share, cur / cur.sum())
    # Expected counts from the reference's shares, none zero (a category the reference
    # never saw is drift, which the test must be able to show).
    expected = np.maximum(ref_share, EPSILON)
    expected = expected / expected.sum() * cur.sum()
    statistic, p_value = chisquare(cur, expected)
    p = float(p_value) if math.isfinite(float(p_value)) else 0.0
    return Drift(
        feature, "categorical", len(reference), len(current), index, "chi_square",
        float(statistic), p, index > psi_limit and p < p_limit,
    )  # fmt: skip

"""Choosing a version by weight, or by a subject's stable hash. Pure functions.

Weights become cumulative bounds on [0, 1): the stable version first, then the
candidates, so a candidate's slice is always at the top. A request draws a point
(at random, or from its subject's hash) and takes the version whose slice holds
it. A subject's point never changes, so it sees one version while the weights
stay; when a canary's share grows, the subjects it already had stay with it.
"""

from __future__ import annotations

import bisect
import hashlib
from collections.abc import Sequence


def cumulative(weights: Sequence[int]) -> tuple[float, ...]:
    """Upper bounds of each version's slice of [0, 1) (the last is 1.0)."""
    total = sum(weights)
    if total <= 0:
        raise ValueError("weights must add up to more than 0")
    bounds: list[float] = []
    running = 0
    for weight in weights:
        running += weight
        bounds.append(running / total)
    bounds[-1] = 1.0
    return tuple(bounds)


def pick(bounds: Sequence[float], point: float) -> int:
    """Index of the slice holding ``point`` (0 <= point < 1); empty slices are never chosen."""
    return min(bisect.bisect_right(bounds, point), len(bounds) - 1)


def subject_point(endpoint: str, subject: str) -> float:
    """A subject's fixed point in [0, 1): the same on every gateway and every restart."""
    digest = hashlib.blake2b(
        f"{endpoint}\x00{subject}".encode(), digest_size=8, person=b"mp-sticky"
    ).digest()
    return int.from_bytes(digest, "big") / 2.0**64

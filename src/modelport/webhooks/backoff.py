"""When to try a failed delivery again: exponential backoff with full jitter."""

from __future__ import annotations

import random
from collections.abc import Callable


def retry_delay(
    attempts: int,
    *,
    base_seconds: float,
    max_seconds: float,
    uniform: Callable[[float, float], float] = random.uniform,
) -> float:
    """Seconds to wait after ``attempts`` failed tries (1 after the first): a uniform
    draw in ``[0, min(max_seconds, base_seconds * 2**(attempts - 1))]`` ("full
    jitter": receivers that fail together are not hit again together)."""
    ceiling = min(max_seconds, base_seconds * 2 ** min(max(attempts - 1, 0), 62))
    return uniform(0.0, ceiling)

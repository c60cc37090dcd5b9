"""How many replicas a version on the pool should have: pure code over what the pool
reports, so it is tested as a table with no Redis, database or clock.

One step of ``decide`` moves a version's replicas by at most one, within its
deployments' ``min_replicas`` and ``max_replicas``:

1. nobody called it for ``idle_seconds``: its minimum (zero allowed: scale to zero);
2. called since (or woken by a call): at least one replica, whatever its minimum;
3. the predicted queue wait, averaged over its ready replicas, is past
   ``target_wait_seconds`` and every replica placed is ready: one more (a replica
   still loading is not counted twice);
4. the request rate needs more replicas than it has (``target_rate_per_replica``):
   one more;
5. the wait has stayed under half the target for ``scale_down_after_seconds`` and one
   fewer replica would still carry the request rate: one fewer (stabilised, so a
   replica removed does not come straight back).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

LOW_WAIT_FRACTION = 0.5
"""A wait under this fraction of the target counts as calm (room to remove a replica)."""


@dataclass(frozen=True)
class ScalePolicy:
    target_wait_seconds: float = 0.5
    """Past this predicted queue wait a version gets one more replica."""
    target_rate_per_replica: float | None = None
    """Calls per second one replica should carry (None: the rate does not scale)."""
    scale_down_after_seconds: float = 60.0
    """How long the wait must stay calm before a replica is removed."""
    idle_seconds: float = 900.0
    """A version nobody calls this long shrinks to its minimum."""


@dataclass(frozen=True)
class Bounds:
    """The replicas a version's live deployments allow (the widest of them)."""

    min: int = 1
    max: int = 1


@dataclass(frozen=True)
class Demand:
    """What the pool reports of one version at one step."""

    replicas: int
    """Replicas it should have now (the last decision)."""
    ready: int
    """Of them, ready on a live worker."""
    wait_seconds: float
    """Predicted queue wait, averaged over its ready replicas (0.0: none reported)."""
    rate: float
    """Calls per second over the last step, over every gateway."""
    idle_seconds: float
    """Since its last call (or since it was first wanted, if never called)."""
    calm_seconds: float = 0.0
    """How long its wait has stayed under half the target."""


def decide(demand: Demand, bounds: Bounds, policy: ScalePolicy) -> int:
    """The replicas ``demand``'s version should have after this step (see the module)."""
    low = max(0, bounds.min)
    high = max(low, bounds.max, 1)
    if demand.idle_seconds >= policy.idle_seconds:
        return low
    floor = max(low, 1)
    current = min(max(demand.replicas, floor), high)
    by_rate = 0
    if policy.target_rate_per_replica and demand.rate > 0:
        by_rate = math.ceil(demand.rate / policy.target_rate_per_replica)
    if current < high and current == demand.replicas:
        if demand.wait_seconds > policy.target_wait_seconds and demand.ready >= current:
            return current + 1
        if by_rate > current:
            return current + 1
    if (
        current > floor
        and current == demand.replicas
        and demand.calm_seconds >= policy.scale_down_after_seconds
        and by_rate <= current - 1
    ):
        return current - 1
    return current

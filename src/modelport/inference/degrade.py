"""Degradation under load: when a version's predicted queue wait passes a threshold,
the calls that give way (low priorities: ``batch`` and ``offline`` by default; and the
calls of tenants on a tier that gives way: ``free`` by default) are served by a cheaper
fallback model, or shed with 503 ``degraded`` and ``Retry-After``, so that the other
calls (interactive ones of ``standard`` and ``premium`` tenants) keep their latency.

The installation's settings are the default; an endpoint's own policy
(``Endpoint.degradation``) overrides each part it sets, for its calls
(``Degradation.rule``). The predicted wait comes from a ``WaitSource`` (this process's
runtime: a generative version's scheduler, a tensor version's batchers, wired by
``app.build_degradation``; a test's own); a caller's tier from a ``TierSource``. The
pipeline's ``degrade`` step (``inference.steps.degrade``) applies it once the request
is read (its priority is in it; an endpoint's version is chosen) and before admission.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Protocol

from modelport.runtime.types import Priority
from modelport.serving.endpoints.types import DegradePolicy
from modelport.serving.types import VersionRef
from modelport.tenancy.types import Tier

DEGRADED = "degraded"
"""The code of a call shed under load (503)."""

LOW_PRIORITIES = frozenset({Priority.BATCH, Priority.OFFLINE})
"""The priorities that give way unless configured otherwise."""

LOW_TIERS = frozenset({Tier.FREE})
"""The tenant tiers whose calls give way unless configured otherwise."""


class WaitSource(Protocol):
    """How long a new call of a version would wait in its queue now."""

    def predicted_wait(self, version: VersionRef) -> float | None:
        """Seconds, or None where it is not known (never degraded then)."""
        ...


class TierSource(Protocol):
    """A tenant's tier, as the hot path reads it (cached)."""

    async def tier_of(self, tenant: str | None) -> Tier:
        """``tenant``'s tier; the platform operator (None) is never degraded by tier."""
        ...


@dataclass(frozen=True, slots=True)
class Rule:
    """What degrades one call's model: above ``threshold_seconds`` of predicted wait, a
    call whose priority is in ``priorities`` or whose tenant's tier is in ``tiers`` goes
    to ``fallback`` (``owner/name`` or ``owner/name:version``), or is shed."""

    threshold_seconds: float
    fallback: str | None
    priorities: frozenset[Priority]
    tiers: frozenset[Tier]

    def by_priority(self, priority: Priority) -> bool:
        return priority in self.priorities


@dataclass(frozen=True, slots=True)
class Degradation:
    """The installation's policy and the sources it reads. ``threshold_seconds`` None:
    only endpoints with a threshold of their own degrade."""

    waits: WaitSource
    threshold_seconds: float | None
    fallbacks: Mapping[str, str] = field(default_factory=dict)
    priorities: frozenset[Priority] = LOW_PRIORITIES
    tiers: frozenset[Tier] = LOW_TIERS
    tier_source: TierSource | None = None
    """None: tiers are not known here, and no call gives way by its tier."""

    def rule(self, model: str, endpoint: DegradePolicy | None = None) -> Rule | None:
        """The rule for a call of ``model`` (through an endpoint with ``endpoint`` as its
        policy, if any): the endpoint's parts over the installation's; None: never
        degraded."""
        threshold = self.threshold_seconds
        if endpoint is None:
            if threshold is None:
                return None  # the common case, on every call: nothing to build
        elif not endpoint.enabled:
            return None
        fallback = self.fallbacks.get(model)
        priorities, tiers = self.priorities, self.tiers
        if endpoint is not None:
            if endpoint.queue_wait_seconds is not None:
                threshold = endpoint.queue_wait_seconds
            if endpoint.fallback is not None:
                fallback = endpoint.fallback
            if endpoint.priorities is not None:
                priorities = frozenset(endpoint.priorities)
            if endpoint.tiers is not None:
                tiers = frozenset(endpoint.tiers)
        if threshold is None:
            return None
        if self.tier_source is None:
            tiers = frozenset()
        return Rule(threshold, fallback, priorities, tiers)

    def over(self, version: VersionRef, threshold_seconds: float) -> float | None:
        """``version``'s predicted wait where it passes ``threshold_seconds``, else None."""
        wait = self.waits.predicted_wait(version)
        if wait is None or wait <= threshold_seconds:
            return None
        return wait

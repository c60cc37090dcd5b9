"""The two limiter contracts; an in-process and a Redis implementation of each."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from modelport.tenancy.limits.types import Lease, RateDecision, RateItem, SlotDecision, SlotItem


class RateLimiter(Protocol):
    """Allowances that refill continuously (GCRA): ``limit`` units per ``period``.

    ``hit`` charges ``cost`` units to every item at once, all or nothing: when
    any item lacks the units, nothing is charged and the decision says how long
    to wait. A whole period's allowance may be spent at once (burst = limit).
    Safe to call from many threads at once; it never waits for other callers
    longer than one atomic step.
    """

    def hit(self, items: Sequence[RateItem], cost: int = 1) -> RateDecision: ...

    def close(self) -> None: ...


class ConcurrencyLimiter(Protocol):
    """Slots held while a request is in flight.

    Call order: ``acquire`` → (work) → ``release`` exactly once, in a ``finally``.
    ``acquire`` takes one slot in every item at once, all or nothing, and never
    waits: a full item refuses at once. A lease that is not released (its holder
    crashed) frees its slots when it expires; live leases are kept alive by the
    limiter itself.
    """

    def acquire(self, items: Sequence[SlotItem]) -> SlotDecision: ...

    def release(self, lease: Lease) -> None: ...

    def in_use(self, bucket: str) -> int:
        """Slots held now in ``bucket`` (for tests and metrics)."""
        ...

    def close(self) -> None: ...


class Gate(Protocol):
    """Optional: ``RateLimiter.hit`` then ``ConcurrencyLimiter.acquire`` in one step, for
    backends where each step is a network round trip. Same decisions as the two calls."""

    def admit(
        self, rate_items: Sequence[RateItem], cost: int, slot_items: Sequence[SlotItem]
    ) -> tuple[RateDecision, SlotDecision | None]:
        """The rate decision, and the slot decision when the rate passed (else None)."""
        ...

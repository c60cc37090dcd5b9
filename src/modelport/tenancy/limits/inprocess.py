"""Embedded-mode limiters: GCRA and slot counters in this process's memory.

One lock guards each limiter. Nothing inside it waits or awaits, so the
limiters are safe from threads and from the event loop alike, and N callers
racing for the last units see exactly the allowance, never more.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence

from modelport.ids import unique_id
from modelport.tenancy.limits.types import (
    UNLIMITED,
    Lease,
    RateDecision,
    RateItem,
    SlotDecision,
    SlotItem,
)

_PRUNE_EVERY = 4096


class InProcessRateLimiter:
    """GCRA over theoretical arrival times (TAT) in integer microseconds."""

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._tats: dict[str, int] = {}
        self._lock = threading.Lock()
        self._hits = 0

    def hit(self, items: Sequence[RateItem], cost: int = 1) -> RateDecision:
        if not items:
            return UNLIMITED
        with self._lock:
            now = int(self._clock() * 1_000_000)
            decision, new_tats = gcra(items, cost, now, self._tats.get)
            if decision.allowed:
                self._tats.update(new_tats)
            self._hits += 1
            if self._hits % _PRUNE_EVERY == 0:
                self._prune(now)
            return decision

    def _prune(self, now: int) -> None:
        # A bucket whose TAT has passed is whole again: forgetting it changes nothing.
        for bucket in [b for b, tat in self._tats.items() if tat <= now]:
            del self._tats[bucket]

    def close(self) -> None:
        with self._lock:
            self._tats.clear()


def gcra(
    items: Sequence[RateItem], cost: int, now: int, tat_of: Callable[[str], int | None]
) -> tuple[RateDecision, dict[str, int]]:
    """Charge ``cost`` to every item at time ``now`` (µs); pure. The Lua script in
    ``modelport.tenancy.limits.redis`` is the same algorithm."""
    allowed = True
    retry = 0
    new_tats: dict[str, int] = {}
    # The most restrictive item: fewest units left; among refusals, the longest wait.
    best: tuple[int, int, int, RateItem] | None = None  # remaining, limit, reset µs, item
    for item in items:
        interval = item.interval_us()
        capacity = interval * item.limit
        tat = max(tat_of(item.bucket) or now, now)
        new_tat = tat + cost * interval
        allow_at = new_tat - capacity
        if now < allow_at:
            allowed = False
            wait = allow_at - now
            if wait >= retry:
                retry = wait
                best = (-1, item.limit, tat - now, item)
            continue
        new_tats[item.bucket] = new_tat
        remaining = (now - allow_at) // interval
        if allowed and (best is None or remaining < best[0]):
            best = (remaining, item.limit, new_tat - now, item)
    assert best is not None
    remaining, limit, reset, item = best
    return (
        RateDecision(
            allowed=allowed,
            limit=limit,
            remaining=max(0, remaining),
            reset_after=reset / 1_000_000,
            retry_after=retry / 1_000_000,
            bucket=item.bucket,
            label=item.label,
        ),
        new_tats,
    )


class InProcessConcurrencyLimiter:
    """Slot counters per bucket; a lease is released by its holder's ``finally``."""

    def __init__(self) -> None:
        self._held: dict[str, int] = {}
        self._leases: dict[str, tuple[str, ...]] = {}
        self._lock = threading.Lock()

    def acquire(self, items: Sequence[SlotItem]) -> SlotDecision:
        with self._lock:
            for item in items:
                if self._held.get(item.bucket, 0) >= item.limit:
                    return SlotDecision(None, refused=item)
            buckets = tuple(item.bucket for item in items)
            for bucket in buckets:
                self._held[bucket] = self._held.get(bucket, 0) + 1
            lease = Lease(unique_id(), buckets)
            self._leases[lease.id] = buckets
            return SlotDecision(lease)

    def release(self, lease: Lease) -> None:
        with self._lock:
            # Releasing twice must not free someone else's slot.
            if self._leases.pop(lease.id, None) is None:
                return
            for bucket in lease.buckets:
                left = self._held.get(bucket, 0) - 1
                if left > 0:
                    self._held[bucket] = left
                else:
                    self._held.pop(bucket, None)

    def in_use(self, bucket: str) -> int:
        with self._lock:
            return self._held.get(bucket, 0)

    def close(self) -> None:
        with self._lock:
            self._held.clear()
            self._leases.clear()

"""A circuit breaker per backend: a pure state machine on an injected clock.

::

    CLOSED ──failure rate ≥ threshold over the window (and ≥ min_calls)──▶ OPEN
    OPEN ──open_seconds later──▶ HALF_OPEN
    HALF_OPEN ──half_open_calls successes──▶ CLOSED
    HALF_OPEN ──any failure──▶ OPEN (the cool-down starts again)

Callers ask ``try_acquire()`` before a call and then report exactly one of
``on_success()``, ``on_failure()`` or ``on_ignored()`` (a call that says nothing
about the backend: the request was refused as invalid, or cancelled). In
``HALF_OPEN`` only ``half_open_calls`` trial calls may be in flight at once; real
requests and health probes are both trials. Outcomes of calls that started
before the breaker opened are not counted again.

Outcomes are counted in a sliding window of ``buckets`` time slices, so memory
stays constant whatever the traffic. Not thread-safe: one event loop owns it.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum


class BreakerState(StrEnum):
    CLOSED = "closed"
    OPEN = "open"
    HALF_OPEN = "half_open"


@dataclass(frozen=True)
class BreakerConfig:
    """When a breaker opens and how it comes back."""

    window_seconds: float = 30.0
    """Outcomes older than this no longer count."""
    buckets: int = 10
    """Slices of the window (the window slides one slice at a time)."""
    min_calls: int = 5
    """Calls in the window before the failure rate may open the breaker."""
    failure_rate: float = 0.5
    """Failures / calls in the window at or above which it opens (0-1)."""
    open_seconds: float = 10.0
    """Cool-down before trial calls are let through (half-open)."""
    half_open_calls: int = 1
    """Trial calls let through at once in half-open, and successes needed to close."""

    def __post_init__(self) -> None:
        if self.window_seconds <= 0 or self.open_seconds < 0:
            raise ValueError("window_seconds must be positive and open_seconds not negative")
        if self.buckets < 1 or self.min_calls < 1 or self.half_open_calls < 1:
            raise ValueError("buckets, min_calls and half_open_calls must be at least 1")
        if not 0 < self.failure_rate <= 1:
            raise ValueError("failure_rate must be above 0 and at most 1")


@dataclass(frozen=True)
class BreakerSnapshot:
    state: BreakerState
    calls: int
    """Calls counted in the current window."""
    failures: int
    retry_after: float
    """Seconds until an open breaker lets trial calls through (0 otherwise)."""


Listener = Callable[[BreakerState, BreakerState], None]


class CircuitBreaker:
    """One backend's breaker. See the module docstring for the state machine."""

    def __init__(
        self,
        config: BreakerConfig = BreakerConfig(),
        *,
        clock: Callable[[], float] = time.monotonic,
        on_change: Listener | None = None,
    ) -> None:
        self.config = config
        self._clock = clock
        self._on_change = on_change
        self._state = BreakerState.CLOSED
        self._slice = config.window_seconds / config.buckets
        # bucket index (absolute slice number) -> [calls, failures]
        self._counts: dict[int, list[int]] = {}
        self._opened_at = 0.0
        self._trials = 0
        self._trial_successes = 0
        self._epoch = 0
        """Bumped on every transition, so late outcomes of older calls are recognised."""

    # ---- state
    @property
    def state(self) -> BreakerState:
        if (
            self._state is BreakerState.OPEN
            and self._clock() - self._opened_at >= self.config.open_seconds
        ):
            self._move(BreakerState.HALF_OPEN)
        return self._state

    @property
    def epoch(self) -> int:
        """Changes whenever the state does; pass it back to ``on_*`` to drop stale outcomes."""
        _ = self.state
        return self._epoch

    def snapshot(self) -> BreakerSnapshot:
        state = self.state
        calls, failures = self._totals()
        retry_after = 0.0
        if state is BreakerState.OPEN:
            retry_after = max(0.0, self._opened_at + self.config.open_seconds - self._clock())
        return BreakerSnapshot(state, calls, failures, retry_after)

    # ---- calls
    def try_acquire(self) -> bool:
        """May a call go to the backend now? In half-open, a granted call is a trial."""
        state = self.state
        if state is BreakerState.CLOSED:
            return True
        if state is BreakerState.HALF_OPEN and self._trials < self.config.half_open_calls:
            self._trials += 1
            return True
        return False

    def on_success(self, epoch: int | None = None) -> None:
        if self._stale(epoch):
            return
        if self._state is BreakerState.HALF_OPEN:
            self._trials = max(0, self._trials - 1)
            self._trial_successes += 1
            if self._trial_successes >= self.config.half_open_calls:
                self._move(BreakerState.CLOSED)
        elif self._state is BreakerState.CLOSED:
            self._count(failed=False)

    def on_failure(self, epoch: int | None = None) -> None:
        if self._stale(epoch):
            return
        if self._state is BreakerState.HALF_OPEN:
            self._move(BreakerState.OPEN)
        elif self._state is BreakerState.CLOSED:
            self._count(failed=True)
            calls, failures = self._totals()
            if calls >= self.config.min_calls and failures >= self.config.failure_rate * calls:
                self._move(BreakerState.OPEN)

    def on_ignored(self, epoch: int | None = None) -> None:
        """The call ended without saying anything about the backend."""
        if not self._stale(epoch) and self._state is BreakerState.HALF_OPEN:
            self._trials = max(0, self._trials - 1)

    # ---- internals
    def _stale(self, epoch: int | None) -> bool:
        _ = self.state  # let an elapsed cool-down take effect first
        return epoch is not None and epoch != self._epoch

    def _move(self, to: BreakerState) -> None:
        before = self._state
        self._state = to
        self._epoch += 1
        self._trials = 0
        self._trial_successes = 0
        if to is BreakerState.OPEN:
            self._opened_at = self._clock()
        if to is BreakerState.CLOSED:
            self._counts.clear()  # a fresh start: old failures must not reopen it
        if self._on_change is not None and before is not to:
            self._on_change(before, to)

    def _count(self, *, failed: bool) -> None:
        index = int(self._clock() // self._slice)
        counts = self._counts.get(index)
        if counts is None:
            self._prune(index)
            counts = self._counts[index] = [0, 0]
        counts[0] += 1
        counts[1] += int(failed)

    def _prune(self, index: int) -> None:
        oldest = index - self.config.buckets + 1
        for stale in [i for i in self._counts if i < oldest]:
            del self._counts[stale]

    def _totals(self) -> tuple[int, int]:
        oldest = int(self._clock() // self._slice) - self.config.buckets + 1
        calls = failures = 0
        for index, (c, f) in self._counts.items():
            if index >= oldest:
                calls += c
                failures += f
        return calls, failures

"""The one clock of everything that waits on time, injectable so tests never sleep.

``Clock`` gives wall time (``now``: key expiry, rollback windows stored in the
database, metering's reservations, leases and ledger times), monotonic time
(``monotonic``: the TTL caches of keys, limits, budgets, prices, access facts and
resolutions, in-process rate limiters, canary steps, circuit breakers' windows and
cool-downs, the waits of the background loops), ``sleep`` (on an event loop) and
``wait`` (in a thread), and ``call_later`` (a timer on the running event loop).
``modelport.app.build_services`` builds one and hands it to every service; a test hands
it a ``ManualClock`` and ``advance``-s it to pass a TTL, re-close a breaker or drive a
whole staged rollout in milliseconds.

A call's deadline is an absolute ``monotonic()`` of this clock, set by the surface or
the read step and read by every layer it crosses (the serving dispatcher, the router's
fallback, shadow and streams, the backends, the batcher's queue and its expiry timer,
the generative engine): they all read the one clock, so a test moves a call past its
deadline with ``advance``, without a real wait.
"""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Timer(Protocol):
    """A pending ``call_later``: cancelled, it never runs."""

    def cancel(self) -> None: ...


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...

    def wait(self, event: threading.Event, seconds: float) -> bool:
        """Block the calling thread until ``event`` is set or ``seconds`` have passed on
        this clock; whether ``event`` was set. Pass an event of the waiter's own: a
        ``ManualClock`` wakes the waiter by setting it."""
        ...

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> Timer:
        """Run ``callback(*args)`` on the running event loop once ``delay`` seconds have passed
        on this clock (a deadline's expiry)."""
        ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))

    def wait(self, event: threading.Event, seconds: float) -> bool:
        return event.wait(max(0.0, seconds))

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> Timer:
        return asyncio.get_running_loop().call_later(max(0.0, delay), callback, *args)


class ManualClock:
    """A clock that moves only when ``advance`` is called (from any thread).

    Sleepers wake, on their own event loop, once the clock has moved past their
    wake-up time; threads in ``wait`` wake the same way. ``sleepers`` lets a test wait
    until the controller (or a background loop) is parked, ``waits`` tells how long each
    parked one still waits.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime.now(UTC)
        self._offset = 0.0
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []
        self._threads: list[_ThreadWaiter] = []
        self._timers: list[_ManualTimer] = []

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        return 1000.0 + self._offset

    @property
    def sleepers(self) -> int:
        with self._lock:
            asleep = sum(1 for _, _, f in self._waiters if not f.done())
            return asleep + sum(1 for w in self._threads if not w.event.is_set())

    @property
    def parked(self) -> int:
        """Sleepers waiting for a time still to come: unlike ``sleepers``, not one that
        ``advance`` made due and that has yet to wake."""
        return len(self.waits)

    @property
    def waits(self) -> list[float]:
        """How long each parked sleeper or waiting thread still waits, shortest first."""
        with self._lock:
            left = [w - self._offset for w, _, f in self._waiters if not f.done()]
            left += [w.wake - self._offset for w in self._threads if not w.event.is_set()]
        return sorted(x for x in left if x > 0)

    async def sleep(self, seconds: float) -> None:
        loop = asyncio.get_running_loop()
        future: asyncio.Future[None] = loop.create_future()
        with self._lock:
            wake = self._offset + max(0.0, seconds)
            if seconds <= 0:
                future.set_result(None)
            else:
                self._waiters.append((wake, loop, future))
        try:
            await future
        finally:
            with self._lock:
                self._waiters = [w for w in self._waiters if w[2] is not future]

    def wait(self, event: threading.Event, seconds: float) -> bool:
        waiter = _ThreadWaiter(event)
        with self._lock:
            waiter.wake = self._offset + max(0.0, seconds)
            if seconds <= 0:
                return event.is_set()
            self._threads.append(waiter)
        try:
            event.wait()
        finally:
            with self._lock:
                self._threads = [w for w in self._threads if w is not waiter]
        return not waiter.timed_out

    def call_later(self, delay: float, callback: Callable[..., object], *args: object) -> Timer:
        timer = _ManualTimer(asyncio.get_running_loop(), callback, args)
        with self._lock:
            timer.wake = self._offset + max(0.0, delay)
            self._timers.append(timer)
        if delay <= 0:
            self.advance(0.0)
        return timer

    @property
    def timers(self) -> int:
        """Timers set and not yet run or cancelled."""
        with self._lock:
            return sum(1 for t in self._timers if not t.cancelled)

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds
            due = [(loop, f) for wake, loop, f in self._waiters if wake <= self._offset]
            # Set under the lock: a waiter that has left (and whose event its owner may
            # have cleared for its next wait) is no longer listed, so it is never woken late.
            for waiter in self._threads:
                if waiter.wake <= self._offset and not waiter.event.is_set():
                    waiter.timed_out = True
                    waiter.event.set()
            fired = [t for t in self._timers if t.wake <= self._offset]
            self._timers = [t for t in self._timers if t.wake > self._offset and not t.cancelled]
        for loop, future in due:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)
        for timer in fired:
            if not timer.loop.is_closed():
                timer.loop.call_soon_threadsafe(timer.fire)


class _ThreadWaiter:
    """A thread blocked in ``ManualClock.wait``."""

    def __init__(self, event: threading.Event) -> None:
        self.event = event
        self.wake = 0.0
        self.timed_out = False


class _ManualTimer:
    """A ``ManualClock.call_later``: runs on its loop once the clock passed ``wake``."""

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        callback: Callable[..., object],
        args: tuple[object, ...],
    ) -> None:
        self.loop = loop
        self.callback = callback
        self.args = args
        self.wake = 0.0
        self.cancelled = False

    def cancel(self) -> None:
        self.cancelled = True

    def fire(self) -> None:
        if not self.cancelled:
            self.cancelled = True
            self.callback(*self.args)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

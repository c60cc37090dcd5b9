"""The one clock of everything that waits on time, injectable so tests never sleep.

``Clock`` gives wall time (``now``: key expiry, rollback windows stored in the
database), monotonic time (``monotonic``: the TTL caches of keys, limits, budgets,
prices, access facts and resolutions, in-process rate limiters, canary steps) and
``sleep``. ``modelport.app.build_services`` builds one and hands it to every service;
a test hands it a ``ManualClock`` and ``advance``-s it to pass a TTL or drive a whole
staged rollout in milliseconds. (Deadlines of calls in flight stay on
``time.monotonic``: they measure real work.)
"""

from __future__ import annotations

import asyncio
import threading
import time
from datetime import UTC, datetime, timedelta
from typing import Protocol


class Clock(Protocol):
    def now(self) -> datetime:
        """Wall time, timezone-aware UTC."""
        ...

    def monotonic(self) -> float: ...

    async def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real clock."""

    def now(self) -> datetime:
        return datetime.now(UTC)

    def monotonic(self) -> float:
        return time.monotonic()

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(max(0.0, seconds))


class ManualClock:
    """A clock that moves only when ``advance`` is called (from any thread).

    Sleepers wake, on their own event loop, once the clock has moved past their
    wake-up time. ``sleepers`` lets a test wait until the controller is parked.
    """

    def __init__(self, start: datetime | None = None) -> None:
        self._start = start or datetime.now(UTC)
        self._offset = 0.0
        self._lock = threading.Lock()
        self._waiters: list[tuple[float, asyncio.AbstractEventLoop, asyncio.Future[None]]] = []

    def now(self) -> datetime:
        return self._start + timedelta(seconds=self._offset)

    def monotonic(self) -> float:
        return 1000.0 + self._offset

    @property
    def sleepers(self) -> int:
        with self._lock:
            return sum(1 for _, _, f in self._waiters if not f.done())

    @property
    def parked(self) -> int:
        """Sleepers waiting for a time still to come: unlike ``sleepers``, not one that
        ``advance`` made due and that has yet to wake."""
        with self._lock:
            return sum(1 for wake, _, f in self._waiters if not f.done() and wake > self._offset)

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

    def advance(self, seconds: float) -> None:
        with self._lock:
            self._offset += seconds
            due = [(loop, f) for wake, loop, f in self._waiters if wake <= self._offset]
        for loop, future in due:
            if not loop.is_closed():
                loop.call_soon_threadsafe(_wake, future)


def _wake(future: asyncio.Future[None]) -> None:
    if not future.done():
        future.set_result(None)

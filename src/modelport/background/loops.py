"""The one periodic-task primitive: a step repeated until stopped, with backoff.

``BackgroundLoop`` runs a blocking step in a daemon thread (metering's outbox, usage
stream, reservation sweep and journal, webhook delivery, the limits refresh, the
concurrency lease keeper, the processing reaper); ``BackgroundTask`` runs an async step
as a task on the running event loop (the upload sweep, the idempotency-key purge, the
health prober). Both share ``Backoff`` and wait on the ``Clock`` they are given, so a
test drives them with a ``ManualClock`` and never sleeps.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import threading
from collections.abc import AsyncIterator, Awaitable, Callable

from modelport.clock import Clock, SystemClock

_log = logging.getLogger(__name__)


MIN_BACKOFF = 0.05
"""The first wait after a failed step."""
MAX_BACKOFF = 5.0
"""Longest wait after failed steps (a step that succeeds resets it)."""


class Backoff:
    """The wait before the next step: the interval after a success; after failures, a
    wait that doubles from ``first`` up to ``cap`` (or the interval if longer)."""

    def __init__(
        self, interval: float | None, cap: float = MAX_BACKOFF, first: float = MIN_BACKOFF
    ) -> None:
        self.interval = interval
        self.cap = cap
        self.first = first
        self.current = 0.0

    def succeeded(self) -> float | None:
        """The wait after a step that succeeded (None: until kicked)."""
        self.current = 0.0
        return self.interval

    def failed(self) -> float:
        """The wait after a step that raised."""
        # A step that fails again at once must not spin (a loop with no interval would
        # log thousands of times a second).
        self.current = min(self.cap, max(self.current * 2, self.first))
        return max(self.interval or 0.0, self.current)


class _Repeating:
    """What both forms share: a named step, its schedule and its backoff, on a clock."""

    def __init__(
        self,
        name: str,
        interval: float | None,
        *,
        clock: Clock | None,
        first_after: float,
        max_backoff: float,
        min_backoff: float,
        failure: str | None,
    ) -> None:
        self.name = name
        self._failure = failure or f"{name} failed"
        self._backoff = Backoff(interval, max_backoff, min_backoff)
        self._clock: Clock = clock if clock is not None else SystemClock()
        self._first_after = first_after


class BackgroundLoop(_Repeating):
    """Runs ``step`` every ``interval`` seconds (start to start) in a daemon thread until
    stopped; with ``interval`` None, only when kicked. A step that raises is logged and
    retried after ``Backoff``'s wait, from ``min_backoff`` to ``max_backoff`` (logged as
    ``failure``, by default "<name> failed").
    ``kick`` runs the next step at once; ``first_after`` delays the first step."""

    def __init__(
        self,
        name: str,
        step: Callable[[], object],
        interval: float | None,
        *,
        clock: Clock | None = None,
        first_after: float = 0.0,
        max_backoff: float = MAX_BACKOFF,
        min_backoff: float = MIN_BACKOFF,
        failure: str | None = None,
    ) -> None:
        super().__init__(
            name,
            interval,
            clock=clock,
            first_after=first_after,
            max_backoff=max_backoff,
            min_backoff=min_backoff,
            failure=failure,
        )
        self._step = step
        self._stop = threading.Event()
        self._wake = threading.Event()
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None

    @property
    def active(self) -> bool:
        return self._thread is not None

    def start(self) -> None:
        """Start the thread (nothing if it runs)."""
        with self._lock:
            if self._thread is not None:
                return
            self._stop.clear()
            self._thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            self._thread.start()

    def kick(self) -> None:
        """Run the next step now (after the one running, if any)."""
        self._wake.set()

    def stop(self, timeout: float = 10.0) -> None:
        """Stop and join the thread (a step running finishes first). Idempotent."""
        with self._lock:
            thread, self._thread = self._thread, None
            if thread is None:
                return
            self._stop.set()
            self._wake.set()
        if thread is not threading.current_thread():
            thread.join(timeout)

    def _run(self) -> None:
        if self._first_after > 0:
            self._wait(self._first_after)
        while not self._stop.is_set():
            started = self._clock.monotonic()
            try:
                self._step()
                wait = self._backoff.succeeded()
            except Exception:
                wait = self._backoff.failed()
                _log.exception("%s; retrying in %.2f s", self._failure, wait)
            if wait is None:
                self._wake.wait()
                self._wake.clear()
            else:
                self._wait(wait - (self._clock.monotonic() - started))

    def _wait(self, seconds: float) -> None:
        """Until ``seconds`` pass on the clock, a kick or ``stop``."""
        if seconds > 0 and not self._stop.is_set():
            self._clock.wait(self._wake, seconds)
        self._wake.clear()


class BackgroundTask(_Repeating):
    """``BackgroundLoop``'s async form: awaits ``step`` every ``interval`` seconds (start
    to start) in a task on the running event loop, between ``start`` and ``stop`` (or
    for the block of ``running``). The same backoff, ``failure``, ``kick`` and
    ``first_after``."""

    def __init__(
        self,
        name: str,
        step: Callable[[], Awaitable[object]],
        interval: float | None,
        *,
        clock: Clock | None = None,
        first_after: float = 0.0,
        max_backoff: float = MAX_BACKOFF,
        min_backoff: float = MIN_BACKOFF,
        failure: str | None = None,
    ) -> None:
        super().__init__(
            name,
            interval,
            clock=clock,
            first_after=first_after,
            max_backoff=max_backoff,
            min_backoff=min_backoff,
            failure=failure,
        )
        self._step = step
        self._task: asyncio.Task[None] | None = None
        self._wake: asyncio.Event | None = None
        self._kicked = False
        """A kick before ``start``: the first step then runs at once, as in a thread."""

    @property
    def active(self) -> bool:
        return self._task is not None

    def start(self) -> None:
        """Start the task on the running event loop (nothing if it runs)."""
        if self._task is not None:
            return
        self._wake = asyncio.Event()
        self._task = asyncio.get_running_loop().create_task(self._run(), name=self.name)
        if self._kicked:
            self._kicked = False
            self._wake.set()

    def kick(self) -> None:
        """Run the next step now (before ``start``: the first step, at once). Safe from
        any thread."""
        task, wake = self._task, self._wake
        if task is None or wake is None:
            self._kicked = True
            return
        if task.done():
            return
        loop = task.get_loop()
        try:
            on_loop = asyncio.get_running_loop() is loop
        except RuntimeError:
            on_loop = False
        if on_loop:
            wake.set()
        else:
            with contextlib.suppress(RuntimeError):  # its loop has closed
                loop.call_soon_threadsafe(wake.set)

    async def stop(self) -> None:
        """Cancel the task and await its end (a step running is cancelled). Idempotent."""
        task, self._task = self._task, None
        if task is None:
            return
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task

    @contextlib.asynccontextmanager
    async def running(self) -> AsyncIterator[BackgroundTask]:
        """Run for the duration of the block."""
        self.start()
        try:
            yield self
        finally:
            await self.stop()

    async def _run(self) -> None:
        if self._first_after > 0:
            await self._wait(self._first_after)
        while True:
            started = self._clock.monotonic()
            try:
                await self._step()
                wait = self._backoff.succeeded()
            except Exception:
                wait = self._backoff.failed()
                _log.exception("%s; retrying in %.2f s", self._failure, wait)
            if wait is None:
                assert self._wake is not None
                await self._wake.wait()
                self._wake.clear()
            else:
                await self._wait(wait - (self._clock.monotonic() - started))

    async def _wait(self, seconds: float) -> None:
        """Until ``seconds`` pass on the clock or a kick, whichever comes first."""
        assert self._wake is not None
        if seconds <= 0 or self._wake.is_set():
            self._wake.clear()
            return
        sleeping = asyncio.ensure_future(self._clock.sleep(seconds))
        kicked = asyncio.ensure_future(self._wake.wait())
        try:
            await asyncio.wait({sleeping, kicked}, return_when=asyncio.FIRST_COMPLETED)
        finally:
            for waiter in (sleeping, kicked):
                waiter.cancel()
            await asyncio.gather(sleeping, kicked, return_exceptions=True)
        self._wake.clear()

"""Group commit of settlements: one transaction for every call that settled meanwhile.

Settling a call (its reservation, its levels and its usage events in the outbox)
must be durable before the caller gets its answer. Doing that with a
transaction per call costs a thread hop and a commit per request. Instead, each
call queues its settlement and awaits its own future; one committer thread takes
everything queued, commits it with ``Reservations.settle_many`` and only then
resolves the futures (one wake-up per event loop per batch). While a commit is
in progress the next batch gathers, so under load a commit carries many calls,
and at concurrency 1 a call waits for nothing but its own commit.

If a batch fails, its calls are committed one by one, so one bad call fails
only its own request. The thread starts on the first settlement and stops after
``idle_seconds`` without work (and starts again when needed).

This is the ``database`` durability of metering (the default on PostgreSQL); with a
usage journal (``.journal``) the request path does not wait for a commit at all.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

from modelport.metering.reservations import Reservations
from modelport.metering.types import Reservation, UsageEvent


@dataclass
class _Job:
    reservation: Reservation | None
    events: Sequence[UsageEvent]
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[None]


class SettlementCommitter:
    """Queues settlements and commits them in batches (see the module docstring)."""

    def __init__(
        self, reservations: Reservations, *, max_batch: int = 512, idle_seconds: float = 5.0
    ) -> None:
        self._reservations = reservations
        self._max_batch = max_batch
        self._idle = idle_seconds
        self._queue: deque[_Job] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._running = False
        self.batches = 0
        """Transactions committed so far (tests and benchmarks read it)."""

    @property
    def pending(self) -> int:
        """Settlements queued and not yet taken by the committer."""
        return len(self._queue)

    def settle(
        self, reservation: Reservation | None, events: Sequence[UsageEvent]
    ) -> asyncio.Future[None]:
        """Queue a settlement; the future is done once it is committed (or failed).
        Call from the event loop. The commit happens whether or not anyone still
        awaits the future."""
        loop = asyncio.get_running_loop()
        job = _Job(reservation, events, loop, loop.create_future())
        with self._ready:
            self._queue.append(job)
            if self._running:
                self._ready.notify()
            else:
                self._running = True
                threading.Thread(target=self._run, name="settlement-commit", daemon=True).start()
        return job.future

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._queue:
                    self._ready.wait(self._idle)
                if not self._queue:
                    self._running = False
                    return
                count = min(len(self._queue), self._max_batch)
                jobs = [self._queue.popleft() for _ in range(count)]
            self._commit(jobs)

    def _commit(self, jobs: list[_Job]) -> None:
        try:
            self._reservations.settle_many([(j.reservation, j.events) for j in jobs])
            self.batches += 1
            outcomes: list[tuple[_Job, BaseException | None]] = [(j, None) for j in jobs]
        except Exception as exc:
            if len(jobs) == 1:
                outcomes = [(jobs[0], exc)]
            else:
                outcomes = [(job, self._commit_alone(job)) for job in jobs]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, BaseException | None]]] = {}
        for job, error in outcomes:
            by_loop.setdefault(job.loop, []).append((job, error))
        for loop, done in by_loop.items():
            with contextlib.suppress(RuntimeError):  # a closed loop: nobody left to answer
                loop.call_soon_threadsafe(_resolve, done)

    def _commit_alone(self, job: _Job) -> BaseException | None:
        try:
            self._reservations.settle_many([(job.reservation, job.events)])
        except Exception as exc:
            return exc
        self.batches += 1
        return None


def _resolve(done: list[tuple[_Job, BaseException | None]]) -> None:
    for job, error in done:
        if job.future.done():  # its awaiter was cancelled; the commit stands
            continue
        if error is None:
            job.future.set_result(None)
        else:
            job.future.set_exception(error)

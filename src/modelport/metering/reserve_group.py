"""Group reservation: one transaction for every priced call that asked meanwhile.

A priced call holds its upper-bound cost before it runs. Doing that with a thread
hop and a transaction per call costs more than the rest of the call. Instead, each
call queues its request and awaits its own future; one reserver thread takes
everything queued, holds it all with ``Reservations.reserve_many`` (one transaction,
each call held on all its levels or refused alone) and then resolves the futures
(one wake-up per event loop per batch). While a batch runs the next gathers, so
under load a transaction carries many calls, and at concurrency 1 a call waits for
nothing but its own.

If a batch's transaction fails (a database error, not a refusal), its calls are
reserved one by one, so one bad call fails only itself. A caller cancelled while it
waits leaves no hold behind: the reservation taken for it is released by the thread
(not left to the expiry sweep). The thread starts on the first request and stops
after ``idle_seconds`` without work (and starts again when needed).
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections import deque
from dataclasses import dataclass

from modelport.metering.reservations import HoldOutcome, HoldRequest, Reservations
from modelport.metering.types import Reservation

_log = logging.getLogger(__name__)

_Answer = HoldOutcome | BaseException


@dataclass(slots=True)
class _Job:
    request: HoldRequest
    loop: asyncio.AbstractEventLoop
    future: asyncio.Future[Reservation | None]


class GroupReserver:
    """Queues reservation requests and holds them in batches (see the module docstring)."""

    def __init__(
        self, reservations: Reservations, *, max_batch: int = 512, idle_seconds: float = 5.0
    ) -> None:
        self._reservations = reservations
        self._max_batch = max_batch
        self._idle = idle_seconds
        self._queue: deque[_Job] = deque()
        self._orphans: deque[Reservation] = deque()
        self._ready = threading.Condition(threading.Lock())
        self._running = False
        self.batches = 0
        """Transactions committed so far (tests and benchmarks read it)."""
        self.released = 0
        """Reservations given back because their caller went away."""

    @property
    def pending(self) -> int:
        """Requests queued and not yet taken by the reserver thread."""
        return len(self._queue)

    @property
    def running(self) -> bool:
        """Whether the reserver thread is alive (it stops when idle)."""
        return self._running

    async def reserve(
        self, tenant: str, key_id: str | None, amount: int, *, ttl_seconds: float
    ) -> Reservation | None:
        """``Reservations.reserve`` through the group: the reservation, None when there
        is nothing to hold, or ``PaymentRequired``. Cancelled while waiting, the hold
        taken for it (if any) is released."""
        if amount <= 0:
            return None  # free: no I/O
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reservation | None] = loop.create_future()
        self._put(_Job(HoldRequest(tenant, key_id, amount, ttl_seconds), loop, future))
        try:
            return await future
        except asyncio.CancelledError:
            # Answered, but cancelled before this task resumed: nobody will use the
            # hold. (Cancelled before the answer, ``_resolve`` finds the future done.)
            if future.done() and not future.cancelled() and future.exception() is None:
                reservation = future.result()
                if reservation is not None:
                    self.give_back(reservation)
            raise

    def give_back(self, reservation: Reservation) -> None:
        """Have the reserver thread release ``reservation`` (its caller went away).
        Does no I/O here: callable from the event loop."""
        with self._ready:
            self._orphans.append(reservation)
            self._wake()

    def _put(self, job: _Job) -> None:
        with self._ready:
            self._queue.append(job)
            self._wake()

    def _wake(self) -> None:
        # Under self._ready.
        if self._running:
            self._ready.notify()
        else:
            self._running = True
            threading.Thread(target=self._run, name="reservation-group", daemon=True).start()

    def _run(self) -> None:
        while True:
            with self._ready:
                if not self._queue and not self._orphans:
                    self._ready.wait(self._idle)
                if not self._queue and not self._orphans:
                    self._running = False
                    return
                count = min(len(self._queue), self._max_batch)
                jobs = [self._queue.popleft() for _ in range(count)]
                orphans = list(self._orphans)
                self._orphans.clear()
            for reservation in orphans:
                self._release(reservation)
            if jobs:
                self._hold(jobs)

    def _hold(self, jobs: list[_Job]) -> None:
        answers: list[_Answer]
        try:
            answers = list(self._reservations.reserve_many([job.request for job in jobs]))
            self.batches += 1
        except Exception as exc:
            # One by one, so one bad call fails only itself.
            answers = [exc] if len(jobs) == 1 else [self._hold_alone(job) for job in jobs]
        by_loop: dict[asyncio.AbstractEventLoop, list[tuple[_Job, _Answer]]] = {}
        for job, answer in zip(jobs, answers, strict=True):
            by_loop.setdefault(job.loop, []).append((job, answer))
        for loop, done in by_loop.items():
            try:
                loop.call_soon_threadsafe(_resolve, self, done)
            except RuntimeError:  # a closed loop: nobody left to answer or to hold for
                for _, answer in done:
                    if isinstance(answer, Reservation):
                        self._release(answer)

    def _hold_alone(self, job: _Job) -> _Answer:
        try:
            (answer,) = self._reservations.reserve_many([job.request])
        except Exception as exc:
            return exc
        self.batches += 1
        return answer

    def _release(self, reservation: Reservation) -> None:
        try:
            self._reservations.release(reservation)
        except Exception:
            # The expiry sweep gives it back later.
            _log.exception("releasing the reservation of a cancelled call failed")
            return
        self.released += 1


def _resolve(reserver: GroupReserver, done: list[tuple[_Job, _Answer]]) -> None:
    for job, answer in done:
        if job.future.done():  # its caller was cancelled: the hold must not stay
            if isinstance(answer, Reservation):
                reserver.give_back(answer)
            continue
        if isinstance(answer, BaseException):
            job.future.set_exception(answer)
        else:
            job.future.set_result(answer)

"""Group reservation: one transaction for every priced call that asked meanwhile.

A priced call holds its upper-bound cost before it runs. Doing that with a thread
hop and a transaction per call costs more than the rest of the call. Instead, each
call queues its request and awaits its own future; one reserver thread takes
everything queued, holds it all with ``Reservations.reserve_many`` (one transaction,
each call held on all its levels or refused alone, decided as one call after the
other would be) and then resolves the futures
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
from dataclasses import dataclass

from modelport.background.group_thread import GroupThread, answer_loops, await_answer
from modelport.metering.reservations import HoldOutcome, HoldRequest, Reservations
from modelport.metering.types import Reservation

_log = logging.getLogger(__name__)

_Answer = HoldOutcome | BaseException


@dataclass(slots=True)
class _Job:
    request: HoldRequest
    future: asyncio.Future[Reservation | None]


class GroupReserver(GroupThread[_Job | Reservation]):
    """Queues reservation requests and holds them in batches (see the module docstring).
    A queued ``Reservation`` is one to release: its caller went away."""

    def __init__(
        self, reservations: Reservations, *, max_batch: int = 512, idle_seconds: float = 5.0
    ) -> None:
        super().__init__("reservation-group", max_batch=max_batch, idle_seconds=idle_seconds)
        self._reservations = reservations
        self.batches = 0
        """Transactions committed so far (tests and benchmarks read it)."""
        self.released = 0
        """Reservations given back because their caller went away."""

    async def reserve(
        self,
        tenant: str,
        key_id: str | None,
        amount: int,
        *,
        ttl_seconds: float,
        model: str | None = None,
    ) -> Reservation | None:
        """``Reservations.reserve`` through the group: the reservation, None when there
        is nothing to hold, or ``PaymentRequired``. Cancelled while waiting, the hold
        taken for it (if any) is released."""
        if amount <= 0:
            return None  # free: no I/O
        loop = asyncio.get_running_loop()
        future: asyncio.Future[Reservation | None] = loop.create_future()
        self._put(_Job(HoldRequest(tenant, key_id, amount, ttl_seconds, model), future))
        return await await_answer(future, self._unclaimed)

    def give_back(self, reservation: Reservation) -> None:
        """Have the reserver thread release ``reservation`` (its caller went away).
        Does no I/O here: callable from the event loop."""
        self._put(reservation)

    def _process(self, batch: list[_Job | Reservation]) -> None:
        jobs = []
        for item in batch:
            if isinstance(item, Reservation):
                self._release(item)
            else:
                jobs.append(item)
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
        answer_loops(
            ((job.future, answer) for job, answer in zip(jobs, answers, strict=True)),
            self._unclaimed,
        )

    def _unclaimed(self, reservation: Reservation | None) -> None:
        """A hold whose caller went away (cancelled, or its loop closed): released."""
        if reservation is not None:
            self.give_back(reservation)

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

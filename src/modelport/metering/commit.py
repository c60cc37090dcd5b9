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
from collections.abc import Sequence
from dataclasses import dataclass

from modelport.background.group_thread import GroupThread, answer_loops
from modelport.metering.reservations import Reservations
from modelport.metering.types import Reservation, UsageEvent


@dataclass
class _Job:
    reservation: Reservation | None
    events: Sequence[UsageEvent]
    future: asyncio.Future[None]


class SettlementCommitter(GroupThread[_Job]):
    """Queues settlements and commits them in batches (see the module docstring)."""

    def __init__(
        self, reservations: Reservations, *, max_batch: int = 512, idle_seconds: float = 5.0
    ) -> None:
        super().__init__("settlement-commit", max_batch=max_batch, idle_seconds=idle_seconds)
        self._reservations = reservations
        self.batches = 0
        """Transactions committed so far (tests and benchmarks read it)."""

    def settle(
        self, reservation: Reservation | None, events: Sequence[UsageEvent]
    ) -> asyncio.Future[None]:
        """Queue a settlement; the future is done once it is committed (or failed).
        Call from the event loop. The commit happens whether or not anyone still
        awaits the future."""
        loop = asyncio.get_running_loop()
        job = _Job(reservation, events, loop.create_future())
        self._put(job)
        return job.future

    def _process(self, jobs: list[_Job]) -> None:
        try:
            self._reservations.settle_many([(j.reservation, j.events) for j in jobs])
            self.batches += 1
            outcomes: list[tuple[_Job, BaseException | None]] = [(j, None) for j in jobs]
        except Exception as exc:
            if len(jobs) == 1:
                outcomes = [(jobs[0], exc)]
            else:
                outcomes = [(job, self._commit_alone(job)) for job in jobs]
        # A caller cancelled meanwhile is not answered; its commit stands.
        answer_loops((job.future, error) for job, error in outcomes)

    def _commit_alone(self, job: _Job) -> BaseException | None:
        try:
            self._reservations.settle_many([(job.reservation, job.events)])
        except Exception as exc:
            return exc
        self.batches += 1
        return None

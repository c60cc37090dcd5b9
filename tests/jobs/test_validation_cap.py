"""One validation cap for the whole installation: runners of several processes (here two
runners, each on its own queue and clock, sharing the database) claim validations only
while fewer than the cap run on all of them together, counting live leases; a place
frees when a validation ends or when its lease expires (then the job itself is
claimable, and taken over first)."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable
from datetime import datetime
from typing import Any

from modelport.clock import ManualClock
from modelport.ids import unique_id
from modelport.jobs import repository as repo
from modelport.jobs.principals import principal_doc
from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobRunner
from modelport.jobs.stages import StageContext, StageRegistry, StageServices
from modelport.jobs.types import VALIDATE_VERSION, JobState, Lease, NewJob, StageSpec
from modelport.store.base import utcnow
from modelport.tenancy.types import Principal
from tests.jobs.conftest import Jobs

KIND = repo.VALIDATION
LEASE = 30.0


def _queue_validations(jobs: Jobs, count: int, at: datetime) -> list[str]:
    """``count`` validation jobs queued, oldest first (no version behind them: the
    stage that runs them here is a gate)."""
    spec = StageSpec(VALIDATE_VERSION, VALIDATE_VERSION, retries=0, timeout_seconds=600)
    principal = principal_doc(Principal("pub", frozenset({"owner"}), tenant="acme"))
    ids = []
    for n in range(count):
        job = NewJob(
            id=unique_id(),
            tenant="acme",
            principal=principal,
            target_kind=KIND,
            target=f"acme/adder:{n}",
            input_digest=jobs.services.blobs.put(b"{}", tenant="acme"),
            pipeline=(spec,),
            webhook=None,
            idempotency_key=None,
            fingerprint=unique_id(),
            created_at=at,
        )
        with jobs.services.database.transaction() as session:
            repo.add_job(session, job)
        ids.append(job.id)
    return ids


def _live(jobs: Jobs, now: datetime) -> int:
    with jobs.services.database.transaction() as session:
        return repo.live_count(session, (KIND,), now)


def test_concurrent_claimers_never_pass_the_installation_cap(jobs: Jobs) -> None:
    _queue_validations(jobs, 10, utcnow())
    now = utcnow()
    queues = [
        JobQueue(jobs.services.database, now=lambda: now, lease_seconds=LEASE) for _ in range(4)
    ]
    start = threading.Barrier(len(queues))
    won: list[str] = []

    def claim(queue: JobQueue, owner: str) -> None:
        start.wait()
        for _ in range(3):  # each runner has room for 3 of its own
            won.extend(
                lease.job_id for lease in queue.claim(owner, 1, kinds=(KIND,), running_cap=3)
            )

    threads = [
        threading.Thread(target=claim, args=(queue, f"runner-{i}"))
        for i, queue in enumerate(queues)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(won) == len(set(won)) == 3
    assert _live(jobs, now) == 3


class Gate:
    """The validation stage held until its job's gate opens; which attempts are inside
    (by job and runner), which jobs a runner ended and which leases it renewed, watched
    under one condition."""

    def __init__(self) -> None:
        self.inside: set[tuple[str, str]] = set()
        self.ended: set[str] = set()
        self.opened: set[str] = set()
        self.renewed: set[tuple[str, str, bool]] = set()
        self.changed = asyncio.Condition()
        self.loop = asyncio.get_running_loop()

    async def run(self, context: StageContext) -> bytes:
        assert context.lease is not None
        key = (context.job.id, context.lease.owner)
        async with self.changed:
            self.inside.add(key)
            self.changed.notify_all()
            try:
                await self.changed.wait_for(lambda: context.job.id in self.opened)
            finally:
                self.inside.discard(key)
                self.changed.notify_all()
        return b"{}"

    async def open(self, *job_ids: str) -> None:
        async with self.changed:
            self.opened.update(job_ids)
            self.changed.notify_all()

    def job_ended(self, job_id: str) -> None:
        self._note(self.ended, job_id)

    def lease_renewed(self, lease: Lease, held: bool) -> None:
        """From the renewing worker thread."""
        noted = (lease.job_id, lease.owner, held)
        self.loop.call_soon_threadsafe(self._note, self.renewed, noted)

    def _note(self, into: set[Any], item: Any) -> None:
        async def note() -> None:
            async with self.changed:
                into.add(item)
                self.changed.notify_all()

        self.loop.create_task(note())

    async def until(self, ready: Callable[[], bool]) -> None:
        async with self.changed:
            await asyncio.wait_for(self.changed.wait_for(ready), 30)


class WatchedQueue(JobQueue):
    """A queue that tells the gate of each renewal it made."""

    def __init__(self, gate: Gate, database: Any, now: Callable[[], datetime]) -> None:
        super().__init__(database, now=now, lease_seconds=LEASE)
        self.gate = gate

    def renew(self, lease: Lease) -> tuple[bool, bool]:
        held, cancelled = super().renew(lease)
        self.gate.lease_renewed(lease, held)
        return held, cancelled


def test_two_runners_share_one_cap_and_a_place_frees_at_an_end_or_an_expiry(
    jobs: Jobs,
) -> None:
    clock_a = ManualClock()
    clock_b = ManualClock(clock_a.now())
    first, second, third, fourth = _queue_validations(jobs, 4, clock_a.now())

    async def scenario() -> None:
        gate = Gate()

        def runner(clock: ManualClock, owner: str) -> JobRunner:
            made = JobRunner(
                WatchedQueue(gate, jobs.services.database, clock.now),
                StageRegistry({VALIDATE_VERSION: gate}),
                StageServices(blobs=jobs.services.blobs, inference=jobs.services.inference),
                concurrency=0,
                clock=clock,
                owner=owner,
                kind_concurrency={KIND: 3},  # room for 3 on each runner: the cap is 2
                installation_concurrency={KIND: 2},
            )
            made.ended.append(gate.job_ended)
            return made

        a, b = runner(clock_a, "a"), runner(clock_b, "b")
        assert await a.claim_once() == [first, second]
        assert await b.claim_once() == []
        await gate.until(lambda: gate.inside == {(first, "a"), (second, "a")})

        # A validation ends: its place is the other runner's to take.
        await gate.open(first)
        await gate.until(lambda: first in gate.ended)
        assert await b.claim_once() == [third]
        assert await a.claim_once() == []
        await gate.until(lambda: (third, "b") in gate.inside)

        # Runner a stalls past its lease (its clock stands still): for b, a's place is
        # free, and the oldest claimable job is the one a held. Taken over, it counts
        # again: the fourth waits.
        clock_b.advance(LEASE + 1)
        await gate.until(lambda: (third, "b", True) in gate.renewed)  # b's heartbeat
        assert _live(jobs, clock_b.now()) == 1
        assert await b.claim_once() == [second]
        assert await b.claim_once() == []
        assert await a.claim_once() == []
        assert _live(jobs, clock_b.now()) == 2
        # a's next heartbeat finds its lease taken: its attempt stops there.
        clock_a.advance(LEASE / 3)
        await gate.until(lambda: gate.inside == {(third, "b"), (second, "b")})

        await gate.open(second, third, fourth)
        await b.drain()
        await a.drain()

    asyncio.run(scenario())
    states = {job_id: jobs.services.jobs.get(None, job_id).state for job_id in (first, second)}
    assert states == {first: JobState.SUCCEEDED, second: JobState.SUCCEEDED}
    done = [jobs.services.jobs.get(None, job_id).state for job_id in (third, fourth)]
    assert done == [JobState.SUCCEEDED, JobState.SUCCEEDED]
    taken_over = jobs.services.jobs.get(None, second)
    assert (taken_over.lease_generation, taken_over.stages[0].attempts) == (2, 2)

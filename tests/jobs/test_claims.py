"""Claiming under leases: concurrent claimers never take the same job; a lease is the
claimer's until it expires, then anyone's; a lease taken over (its generation moved on)
writes nothing."""

from __future__ import annotations

import threading
from datetime import timedelta

import pytest

from modelport.jobs import shards
from modelport.jobs.queue import JobQueue
from modelport.jobs.types import JobState, Lease, LeaseLost, ShardCheckpoint, StageState
from modelport.store.base import utcnow
from tests.jobs.conftest import Jobs


def test_concurrent_claimers_share_the_jobs_out_without_overlap(jobs: Jobs) -> None:
    ids = {jobs.submit().json()["id"] for _ in range(12)}
    queue = JobQueue(jobs.services.database, now=utcnow, lease_seconds=30)
    won: dict[str, list[Lease]] = {}
    start = threading.Barrier(4)

    def claim(owner: str) -> None:
        start.wait()
        taken: list[Lease] = []
        while batch := queue.claim(owner, 2):
            taken += batch
        won[owner] = taken

    threads = [threading.Thread(target=claim, args=(f"runner-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    claimed = [lease.job_id for taken in won.values() for lease in taken]
    assert sorted(claimed) == sorted(ids)  # each once
    for owner, taken in won.items():
        for lease in taken:
            job = jobs.services.jobs.get(None, lease.job_id)
            assert job.lease_owner == owner and job.started_at is not None
            assert job.lease_generation == lease.generation == 1


def test_a_lease_is_the_claimers_until_it_expires(jobs: Jobs) -> None:
    job_id = jobs.submit().json()["id"]
    now = utcnow()

    def at(seconds: float) -> JobQueue:
        moment = now + timedelta(seconds=seconds)
        return JobQueue(jobs.services.database, now=lambda: moment, lease_seconds=10)

    [a] = at(0).claim("a", 5)
    assert (a.job_id, a.owner, a.generation) == (job_id, "a", 1)
    assert at(0).claim("b", 5) == []
    assert at(5).renew(Lease(job_id, "b", 1)) == (False, False)
    assert at(5).renew(a) == (True, False)  # now held until 15 s
    assert at(11).claim("b", 5) == []
    [b] = at(16).claim("b", 5)
    assert b.generation == 2
    assert at(16).stage_started(a, 0) is None  # "a" lost it: writes nothing
    assert at(16).stage_started(b, 0) == (1, 0)


def test_a_lease_taken_over_writes_nothing_even_under_the_same_owner(jobs: Jobs) -> None:
    """A runner that stalled past its lease and claimed the job again (the same owner id)
    holds a new generation: its old attempt's writes are refused, the new ones pass."""
    job_id = jobs.submit().json()["id"]
    now = utcnow()

    def at(seconds: float) -> JobQueue:
        moment = now + timedelta(seconds=seconds)
        return JobQueue(jobs.services.database, now=lambda: moment, lease_seconds=10)

    [stale] = at(0).claim("runner", 1)
    assert at(0).stage_started(stale, 0) == (1, 0)
    [current] = at(11).claim("runner", 1)  # expired, and claimed again by the same owner
    assert (current.owner, current.generation) == (stale.owner, stale.generation + 1)
    digest = jobs.services.blobs.put(b"{}", tenant="beta")
    checkpoint = ShardCheckpoint(0, 1, 0, digest, digest)

    assert at(12).renew(stale) == (False, False)
    assert at(12).stage_done(stale, 0, digest) is False
    assert at(12).stage_failed(stale, 0, "flaky", "not yet") is False
    assert at(12).finish(job_id, stale, JobState.SUCCEEDED, output_digest=digest) is None
    with pytest.raises(LeaseLost):
        shards.checkpoint(jobs.services.database, job_id, checkpoint, now, stale)
    at(12).release(stale)  # a no-op: the job stays the current lease's
    job = jobs.services.jobs.get(None, job_id)
    assert job.state is JobState.RUNNING and job.lease_generation == current.generation
    [stage, *_] = job.stages
    assert stage.state is StageState.RUNNING and stage.output_digest is None
    assert (stage.attempts, stage.error_code) == (1, None)
    with jobs.services.database.transaction() as session:
        assert shards.checkpoints(session, job_id) == []

    assert at(12).stage_started(current, 0) == (2, 0)
    assert shards.checkpoint(jobs.services.database, job_id, checkpoint, now, current)
    assert at(12).stage_done(current, 0, digest) is True
    ended = at(12).finish(job_id, current, JobState.SUCCEEDED, output_digest=digest)
    assert ended is not None and ended.state is JobState.SUCCEEDED

"""Claiming under leases: concurrent claimers never take the same job; a lease is the
claimer's until it expires, then anyone's."""

from __future__ import annotations

import threading
from datetime import timedelta

from modelport.jobs.queue import JobQueue
from modelport.store.base import utcnow
from tests.jobs.conftest import Jobs


def test_concurrent_claimers_share_the_jobs_out_without_overlap(jobs: Jobs) -> None:
    ids = {jobs.submit().json()["id"] for _ in range(12)}
    queue = JobQueue(jobs.services.database, now=utcnow, lease_seconds=30)
    won: dict[str, list[str]] = {}
    start = threading.Barrier(4)

    def claim(owner: str) -> None:
        start.wait()
        taken: list[str] = []
        while batch := queue.claim(owner, 2):
            taken += batch
        won[owner] = taken

    threads = [threading.Thread(target=claim, args=(f"runner-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    claimed = [job_id for taken in won.values() for job_id in taken]
    assert sorted(claimed) == sorted(ids)  # each once
    for owner, taken in won.items():
        for job_id in taken:
            job = jobs.services.jobs.get(None, job_id)
            assert job.lease_owner == owner and job.started_at is not None


def test_a_lease_is_the_claimers_until_it_expires(jobs: Jobs) -> None:
    job_id = jobs.submit().json()["id"]
    now = utcnow()

    def at(seconds: float) -> JobQueue:
        moment = now + timedelta(seconds=seconds)
        return JobQueue(jobs.services.database, now=lambda: moment, lease_seconds=10)

    assert at(0).claim("a", 5) == [job_id]
    assert at(0).claim("b", 5) == []
    assert at(5).renew(job_id, "b") == (False, False)
    assert at(5).renew(job_id, "a") == (True, False)  # now held until 15 s
    assert at(11).claim("b", 5) == []
    assert at(16).claim("b", 5) == [job_id]
    assert at(16).stage_started(job_id, 0, "a") is None  # "a" lost it: writes nothing
    assert at(16).stage_started(job_id, 0, "b") == (1, 0)

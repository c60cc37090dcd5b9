"""A suspended tenant's jobs: neither its queued jobs nor its orphaned running ones are
claimed, it cannot submit, and after reactivation they run to the end."""

from __future__ import annotations

from datetime import timedelta

from modelport.jobs.queue import JobQueue
from modelport.store.base import utcnow
from tests.jobs.conftest import AheadClock, Jobs


def test_a_suspended_tenants_jobs_wait_and_run_after_reactivation(jobs: Jobs) -> None:
    orphaned = jobs.submit().json()["id"]
    queued = jobs.submit().json()["id"]
    now = utcnow()
    queue = JobQueue(jobs.services.database, now=lambda: now, lease_seconds=10)
    [lease] = queue.claim("dead-runner", 1)  # a runner took it, then died
    assert lease.job_id == orphaned

    jobs.services.tenancy.suspend_tenant("beta", reason="unpaid")
    later = JobQueue(
        jobs.services.database, now=lambda: now + timedelta(seconds=60), lease_seconds=10
    )
    assert later.claim("runner", 5) == []  # neither the queued job nor the orphaned one
    refused = jobs.submit()
    assert (refused.status_code, refused.json()["code"]) == (403, "tenant_suspended")
    assert jobs.get(queued).status_code == 403

    jobs.services.tenancy.reactivate_tenant("beta")
    jobs.drain(jobs.runner(clock=AheadClock(60)))  # past the dead runner's lease
    for job_id in (orphaned, queued):
        assert jobs.get(job_id).json()["state"] == "succeeded"

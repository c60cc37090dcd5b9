"""A tenant's job limits on both databases: its quota (``jobs``) refuses a submission
over it, concurrent submissions included; its job concurrency leaves its queued jobs
queued at claim while other tenants' are claimed, concurrent claimers included."""

from __future__ import annotations

import threading
from datetime import timedelta
from typing import Any

import pytest

from modelport.errors import Overloaded
from modelport.jobs.principals import principal_of
from modelport.jobs.queue import JobQueue
from modelport.jobs.service import Submission
from modelport.jobs.types import JobState, Lease
from modelport.store.base import utcnow
from modelport.tenancy.types import Principal
from tests.jobs.conftest import INPUTS, Jobs

ACME = Principal(id="acme-app", roles=frozenset({"consumer"}), tenant="acme")
"""A principal of the other tenant (acme), for jobs only claimed here, never run."""


def _limit(world: Jobs, tenant: str, **fields: Any) -> None:
    response = world.platform.client.put(f"/api/limits/tenant/{tenant}", json=fields)
    assert response.status_code == 200, response.text


def _beta(jobs: Jobs) -> Principal:
    """beta's consumer, as a job it submitted stores it."""
    job_id = jobs.submit().json()["id"]
    return principal_of(jobs.services.jobs.get(None, job_id).principal)


def _submission(key: str | None = None) -> Submission:
    return Submission("model", "acme/adder", inputs=INPUTS, idempotency_key=key)


def test_a_submission_over_the_quota_is_refused_until_a_job_ends(jobs: Jobs) -> None:
    _limit(jobs, "beta", jobs=2)
    keyed = {"extra_headers": {"Idempotency-Key": "first"}}
    first = jobs.submit(**keyed).json()
    jobs.submit()
    refused = jobs.submit()
    assert refused.status_code == 429, refused.text
    assert refused.json()["code"] == "job_quota_exceeded"
    assert int(refused.headers["Retry-After"]) >= 1
    again = jobs.submit(**keyed)  # the same key: its job, not a refusal
    assert again.status_code == 202 and again.json()["id"] == first["id"]
    other = jobs.submit(target={"model": "acme/adder"}, extra_headers={"Idempotency-Key": "x"})
    assert other.status_code == 429  # a new key is a new job
    listed = jobs.platform.client.get("/api/jobs", headers=jobs.headers).json()["items"]
    assert len(listed) == 2  # nothing half-written
    cancelled = jobs.platform.client.post(f"/api/jobs/{first['id']}:cancel", headers=jobs.headers)
    assert cancelled.json()["state"] == "cancelled"
    assert jobs.submit().status_code == 202  # an ended job frees its place
    assert jobs.submit().status_code == 429
    jobs.drain()
    assert jobs.submit().status_code == 202
    _limit(jobs, "beta")  # lifted
    assert all(jobs.submit().status_code == 202 for _ in range(3))


def test_concurrent_submissions_never_pass_the_quota_together(jobs: Jobs) -> None:
    beta = _beta(jobs)
    _limit(jobs, "beta", jobs=4)  # one taken already
    start = threading.Barrier(8)
    outcomes: list[str] = []

    def submit() -> None:
        start.wait()
        try:
            jobs.services.jobs.submit(beta, _submission())
            outcomes.append("ok")
        except Overloaded as exc:
            outcomes.append(exc.code)

    threads = [threading.Thread(target=submit) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert sorted(outcomes) == ["job_quota_exceeded"] * 5 + ["ok"] * 3
    page = jobs.services.jobs.list("beta", limit=100)
    assert len(page.items) == 4


def test_a_tenant_at_its_running_cap_keeps_its_jobs_queued(jobs: Jobs) -> None:
    beta = _beta(jobs)
    first = jobs.services.jobs.list("beta").items[0].id
    second, _ = jobs.services.jobs.submit(beta, _submission())
    third, _ = jobs.services.jobs.submit(beta, _submission())
    theirs, _ = jobs.services.jobs.submit(ACME, _submission())
    _limit(jobs, "beta", job_concurrency=1)
    now = utcnow()
    queue = JobQueue(jobs.services.database, now=lambda: now, lease_seconds=30)
    leases = queue.claim("a", 10)
    assert [lease.job_id for lease in leases] == [first, theirs.id]  # beta's oldest, and acme's
    assert queue.claim("b", 10) == []
    assert jobs.services.jobs.get(None, second.id).state is JobState.QUEUED
    assert queue.finish(first, leases[0], JobState.SUCCEEDED)
    assert _ids(queue.claim("b", 10)) == [second.id]
    # A running job whose lease expired counts already: taken over at the cap.
    later = now + timedelta(seconds=31)
    late = JobQueue(jobs.services.database, now=lambda: later, lease_seconds=30)
    assert _ids(late.claim("c", 10)) == [second.id, theirs.id]
    assert jobs.services.jobs.get(None, third.id).state is JobState.QUEUED
    _limit(jobs, "beta", job_concurrency=2)
    assert _ids(late.claim("c", 10)) == [third.id]


def _ids(leases: list[Lease]) -> list[str]:
    return [lease.job_id for lease in leases]


@pytest.mark.parametrize("cap", [1, 2])
def test_concurrent_claimers_keep_the_running_cap(jobs: Jobs, cap: int) -> None:
    beta = _beta(jobs)
    for _ in range(7):
        jobs.services.jobs.submit(beta, _submission())
    theirs = {jobs.services.jobs.submit(ACME, _submission())[0].id for _ in range(3)}
    _limit(jobs, "beta", job_concurrency=cap)
    queue = JobQueue(jobs.services.database, now=utcnow, lease_seconds=30)
    start = threading.Barrier(4)
    won: list[str] = []

    def claim(owner: str) -> None:
        start.wait()
        for _ in range(5):
            won.extend(_ids(queue.claim(owner, 2)))

    threads = [threading.Thread(target=claim, args=(f"runner-{i}",)) for i in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    running = jobs.services.jobs.list("beta", state=JobState.RUNNING).items
    assert len(running) == cap
    assert len(won) == len(set(won)) == cap + len(theirs)
    assert theirs <= set(won)

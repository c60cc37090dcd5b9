"""An ended job is told to the SLO series (``modelport_job_duration_seconds``) with its
endpoint (empty for a job on a version), its end state and its time from submission to
end, as the runner's clock puts it."""

from __future__ import annotations

import asyncio
import time

from prometheus_client.parser import text_string_to_metric_families

from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobRunner
from modelport.jobs.stages import StageServices
from modelport.observability.metrics import render
from tests.jobs.conftest import AheadClock, Jobs

HOURS_2 = 7200.0


def buckets(jobs: Jobs) -> dict[tuple[str, str, str], float]:
    text = render(jobs.services.metrics.registry).decode()
    return {
        (s.labels["endpoint"], s.labels["state"], s.labels.get("le", s.name)): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name.startswith("modelport_job_duration_seconds")
    }


def test_ended_jobs_feed_the_completion_slo(jobs: Jobs) -> None:
    client, services = jobs.platform.client, jobs.services
    assert client.post("/api/endpoints", json={"name": "adds", "tenant": "beta"}).status_code == 201
    spec = {"versions": [{"model": "acme/adder", "version": "1", "weight": 100}]}
    made = client.post("/api/endpoints/adds/deployments", json=spec)
    assert made.status_code == 202, made.text
    path = f"/api/endpoints/adds/deployments/{made.json()['id']}"
    deadline = time.monotonic() + 60
    while client.get(path).json()["state"] == "pending":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    on_endpoint = jobs.submit(target={"endpoint": "adds"}).json()
    hidden = jobs.submit(target={"model": "acme/private-one"}).json()
    # The runner's clock is two hours ahead: each job ends two hours after submission.
    clock = AheadClock(HOURS_2)
    runner = JobRunner(
        JobQueue(services.database, now=clock.now, lease_seconds=600),
        services.jobs.stages,
        StageServices(blobs=services.blobs, inference=services.inference),
        poll_seconds=0.05,
        clock=clock,
        holds=services.job_runner.holds,
        observer=services.job_runner.observer,
    )
    asyncio.run(runner.drain())
    assert jobs.get(on_endpoint["id"]).json()["state"] == "succeeded"
    assert jobs.get(hidden["id"]).json()["state"] == "failed"
    seen = buckets(jobs)
    assert seen[("adds", "succeeded", "modelport_job_duration_seconds_count")] == 1
    assert seen[("adds", "succeeded", "3600.0")] == 0  # late for a one-hour objective
    assert seen[("adds", "succeeded", "21600.0")] == 1
    assert (
        HOURS_2 <= seen[("adds", "succeeded", "modelport_job_duration_seconds_sum")] < HOURS_2 + 60
    )
    assert seen[("", "failed", "modelport_job_duration_seconds_count")] == 1

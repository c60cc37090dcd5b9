"""A job's end posted to its webhook (signed, verified with the Standard Webhooks
reference library; recorded with the end in one transaction, so a crash right after it
still delivers it once, and an end whose notice cannot be recorded does not commit),
a webhook URL refused at submission, and a tenant's moderation policy
applied to its jobs (inputs before the model, outputs after; a blocked text fails the job
at once, costs nothing where the model did not run, and is audited with the job's id)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from sqlalchemy.orm import Session

from modelport.clock import Clock
from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobHolds, JobNotifier, JobRunner
from modelport.jobs.stages import StageServices
from modelport.jobs.types import Job
from modelport.moderation.types import DecisionQuery, Disposition, Stage
from tests.jobs.conftest import AheadClock
from tests.metering.conftest import make_platform
from tests.moderation.conftest import World, build
from tests.polling import eventually
from tests.webhooks.conftest import Receiver, verify


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    made = Receiver()
    yield made
    made.close()


@pytest.fixture
def world(tmp_path: Path, database_url: str, receiver: Receiver) -> Iterator[World]:
    """The moderation test platform, with no runner of its own and the receiver's host
    allowed for webhooks."""
    platform = make_platform(
        tmp_path / "home",
        database_url,
        job_runner_concurrency=0,
        webhook_allow_hosts=receiver.host,
    )
    yield build(platform)
    platform.close_client()
    platform.services.close()


def text_job(world: World, *texts: str, webhook: str | None = None) -> Any:
    inputs = [{"name": "text", "datatype": "BYTES", "shape": [len(texts)], "data": list(texts)}]
    body: dict[str, Any] = {"target": {"model": "acme/echo"}, "inputs": inputs}
    if webhook is not None:
        body["webhook"] = webhook
    headers = {"Authorization": f"Bearer {world.platform.key}"}
    return world.platform.client.post("/api/jobs", json=body, headers=headers)


def run_jobs(world: World) -> None:
    services = world.services
    queue = JobQueue(
        services.database,
        now=services.clock.now,
        lease_seconds=services.settings.jobs.lease_seconds,
    )
    runner = JobRunner(
        queue,
        services.jobs.stages,
        StageServices(blobs=services.blobs, inference=services.inference),
        concurrency=2,
        poll_seconds=0.05,
        notifier=services.jobs.notifier,
    )
    asyncio.run(runner.drain())


def job(world: World, job_id: str) -> dict[str, Any]:
    headers = {"Authorization": f"Bearer {world.platform.key}"}
    response = world.platform.client.get(f"/api/jobs/{job_id}", headers=headers)
    assert response.status_code == 200, response.text
    return dict(response.json())


def test_a_finished_job_is_posted_to_its_webhook_signed(world: World, receiver: Receiver) -> None:
    secret = world.services.webhooks.rotate_secret("beta").secret
    submitted = text_job(world, "hello", webhook=receiver.url)
    assert submitted.status_code == 202, submitted.text
    job_id = submitted.json()["id"]
    run_jobs(world)
    assert job(world, job_id)["state"] == "succeeded"
    world.services.webhooks.deliver_due()  # or the application's delivery loop did
    assert eventually(lambda: len(receiver.requests) == 1)
    [received] = receiver.requests
    event = verify(secret, received)  # the reference library checks the signature
    assert event["type"] == "job.succeeded"
    assert event["data"]["id"] == job_id and event["data"]["state"] == "succeeded"
    assert event["data"]["error"] is None and event["data"]["output_digest"]

    def delivered() -> bool:
        [delivery] = world.services.webhooks.deliveries("beta", subject=job_id).items
        return delivery.status.value == "delivered"

    assert eventually(delivered)


def test_a_webhook_url_that_may_not_be_called_is_refused_at_submission(world: World) -> None:
    for url, code in (
        ("http://example.com/hook", "webhook_url_not_https"),
        ("https://10.0.0.8/hook", "webhook_url_forbidden_address"),
        ("https://169.254.169.254/latest", "webhook_url_forbidden_address"),
    ):
        refused = text_job(world, "hello", webhook=url)
        assert refused.status_code == 400, refused.text
        assert refused.json()["code"] == code
    listed = world.platform.client.get(
        "/api/jobs", headers={"Authorization": f"Bearer {world.platform.key}"}
    )
    assert listed.json()["items"] == []


def test_a_tenant_with_a_policy_gets_its_jobs_moderated(world: World) -> None:
    world.price("acme/echo", 1_000)
    world.policy(sync=False)  # jobs are moderated whether or not sync calls are
    clean = text_job(world, "hello there").json()["id"]
    blocked = text_job(world, "hi", "the password = hunter2").json()["id"]
    run_jobs(world)
    done, refused = job(world, clean), job(world, blocked)
    assert [s["name"] for s in done["stages"]] == [
        "validate",
        "moderate_input",
        "infer",
        "moderate_output",
        "postprocess",
    ]
    assert done["state"] == "succeeded"
    assert refused["state"] == "failed" and refused["error"]["code"] == "content_blocked"
    states = {s["name"]: s["state"] for s in refused["stages"]}
    assert states["moderate_input"] == "failed" and states["infer"] == "pending"
    # Only the clean job's call was charged: the blocked one never reached the model.
    assert world.balance() == (10_000 - 1_000, 0)
    page = world.services.moderation.decisions(DecisionQuery(tenant="beta"))
    by_job = {(d.job_id, d.stage): d for d in page.items}
    assert by_job[(blocked, Stage.INPUT)].disposition is Disposition.BLOCKED
    assert by_job[(clean, Stage.INPUT)].disposition is Disposition.ALLOWED
    assert by_job[(clean, Stage.OUTPUT)].disposition is Disposition.ALLOWED
    assert (blocked, Stage.OUTPUT) not in by_job


def test_a_tenant_without_a_policy_keeps_the_plain_pipeline(world: World) -> None:
    headers = {"Authorization": f"Bearer {world.gamma_key}"}
    inputs = [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["password = x"]}]
    body = {"target": {"model": "acme/echo"}, "inputs": inputs}
    submitted = world.platform.client.post("/api/jobs", json=body, headers=headers)
    assert submitted.status_code == 202, submitted.text
    stages = [s["name"] for s in submitted.json()["stages"]]
    assert stages == ["validate", "infer", "postprocess"]


def test_a_blocked_output_fails_the_job_after_the_model_ran(world: World) -> None:
    world.price("acme/labeller", 1_000)
    world.policy(sync=False)
    inputs = [{"name": "id", "datatype": "INT64", "shape": [1], "data": [1]}]  # "forbidden fruit"
    body = {"target": {"model": "acme/labeller"}, "inputs": inputs}
    headers = {"Authorization": f"Bearer {world.platform.key}"}
    job_id = world.platform.client.post("/api/jobs", json=body, headers=headers).json()["id"]
    run_jobs(world)
    ended = job(world, job_id)
    assert ended["state"] == "failed" and ended["error"]["code"] == "content_blocked"
    states = {s["name"]: s["state"] for s in ended["stages"]}
    assert states["infer"] == "done" and states["moderate_output"] == "failed"
    assert "forbidden" not in str(ended)  # the blocked answer is not shown
    # The model ran: its call is charged, as for a synchronous call withheld on output.
    assert world.balance() == (10_000 - 1_000, 0)
    page = world.services.moderation.decisions(DecisionQuery(tenant="beta"))
    [blocked] = [d for d in page.items if d.job_id == job_id and d.stage is Stage.OUTPUT]
    assert blocked.disposition is Disposition.BLOCKED


class Crash(BaseException):
    """The process dying: no handler of the runner's catches it."""


class CrashAfterCommit:
    """``JobHolds`` whose ``close`` (the first thing a runner does once a job's end has
    committed, where the end's webhook used to be queued after) crashes."""

    async def open(self, job: object, principal: object) -> None:
        return None

    async def close(self, job_id: str) -> None:
        raise Crash


def runner_of(
    world: World,
    *,
    clock: Clock | None = None,
    notifier: JobNotifier | None = None,
    holds: JobHolds | None = None,
) -> JobRunner:
    """A runner of the world's jobs, its queue on ``clock``, telling ``notifier`` (by
    default the application's: the webhook's outbox row)."""
    services = world.services
    clock = clock or services.clock
    queue = JobQueue(
        services.database, now=clock.now, lease_seconds=services.settings.jobs.lease_seconds
    )
    return JobRunner(
        queue,
        services.jobs.stages,
        StageServices(blobs=services.blobs, inference=services.inference),
        concurrency=2,
        poll_seconds=0.05,
        clock=clock,
        notifier=notifier or services.jobs.notifier,
        holds=holds,
    )


def test_a_crash_right_after_the_end_commits_still_delivers_its_webhook_once(
    world: World, receiver: Receiver
) -> None:
    secret = world.services.webhooks.rotate_secret("beta").secret
    job_id = text_job(world, "hello", webhook=receiver.url).json()["id"]
    crashing = runner_of(world, holds=CrashAfterCommit())
    asyncio.run(crashing.drain())
    assert job(world, job_id)["state"] == "succeeded"  # committed before the crash
    [delivery] = world.services.webhooks.deliveries("beta", subject=job_id).items
    assert delivery.event_type == "job.succeeded"  # committed with it
    world.services.webhooks.drain()  # or the application's delivery loop did
    assert eventually(lambda: len(receiver.requests) == 1)
    assert verify(secret, receiver.requests[0])["data"]["id"] == job_id
    world.services.webhooks.drain()
    assert len(receiver.requests) == 1
    assert len(world.services.webhooks.deliveries("beta", subject=job_id).items) == 1


class FailingNotice:
    """A ``JobNotifier`` that cannot record the notice (the database refused it)."""

    def check_webhook(self, url: str) -> None:
        return None

    def job_finished(self, session: Session, job: Job) -> None:
        raise RuntimeError("the notice could not be recorded")

    def wake(self) -> None:
        return None


def test_a_job_whose_notice_cannot_be_recorded_does_not_end_without_it(
    world: World, receiver: Receiver
) -> None:
    job_id = text_job(world, "hello", webhook=receiver.url).json()["id"]
    asyncio.run(runner_of(world, notifier=FailingNotice()).drain())
    stuck = job(world, job_id)
    assert stuck["state"] == "running"  # the end rolled back with its notice
    assert world.services.webhooks.deliveries("beta", subject=job_id).items == ()
    # Once its lease expires, a runner that can record the notice ends the job with it,
    # without running a finished stage again.
    lease = world.services.settings.jobs.lease_seconds
    asyncio.run(runner_of(world, clock=AheadClock(lease + 1)).drain())
    ended = job(world, job_id)
    assert ended["state"] == "succeeded"
    assert [s["attempts"] for s in ended["stages"]] == [s["attempts"] for s in stuck["stages"]]
    [delivery] = world.services.webhooks.deliveries("beta", subject=job_id).items
    assert delivery.event_type == "job.succeeded"

"""Validations as jobs: capped (one process here; several runners under one cap in
``tests/jobs/test_validation_cap.py``), queued within a bound, visible through the jobs
API, answered in the request or at once with ``Prefer: respond-async``, and taken over
by another runner when the one running them dies."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import psutil
import pytest

from modelport.clock import ManualClock
from modelport.config import Settings
from modelport.jobs.queue import JobQueue
from modelport.jobs.runner import JobRunner
from modelport.jobs.stages import StageServices
from modelport.manifest import Manifest
from modelport.registry.validation import Validator
from modelport.sandbox.cancel import Cancellation
from tests.jobs.conftest import AheadClock
from tests.polling import eventually
from tests.registry.helpers import Registry, add_one_example, manifest_for

REF = "acme/adder"
ASYNC = {"Prefer": "respond-async"}


class GatedValidator:
    """The real validator behind a gate: each validation waits for a permit before it
    runs, and the most running at once is counted."""

    def __init__(self, inner: Validator) -> None:
        self.inner = inner
        self.permits = threading.Semaphore(0)
        self.lock = threading.Lock()
        self.entered = 0
        self.active = 0
        self.most = 0

    def validate(self, manifest: Manifest, *, cancel: Cancellation | None = None) -> dict[str, Any]:
        with self.lock:
            self.entered += 1
            self.active += 1
            self.most = max(self.most, self.active)
        try:
            assert self.permits.acquire(timeout=60), "the test never let this validation run"
            return self.inner.validate(manifest, cancel=cancel)
        finally:
            with self.lock:
                self.active -= 1


@pytest.fixture
def settings(settings: Settings) -> Settings:
    return settings.model_copy(
        update={
            "validation_concurrency": 1,
            "validation_queue_size": 1,
            "job_poll_seconds": 0.05,
        }
    )


@pytest.fixture
def model(registry: Registry) -> Registry:
    registry.create_model(REF)
    return registry


@pytest.fixture
def gate(model: Registry) -> GatedValidator:
    registry = model.services.registry
    gated = GatedValidator(registry.validator)
    registry.validator = gated
    return gated


def no_validations_here(runner: JobRunner, monkeypatch: pytest.MonkeyPatch) -> None:
    """This process's runner claims no validation from now on: its cap is 0, and one
    whole claim made after that has ended (a claim under way when the cap changed had
    counted its room already, and could take a job submitted meanwhile)."""
    runner.kind_concurrency["validation"] = 0
    settled = threading.Event()
    claim_once = runner.claim_once

    async def counted() -> list[str]:
        claimed = await claim_once()
        settled.set()
        return claimed

    monkeypatch.setattr(runner, "claim_once", counted)
    runner.kick()
    assert settled.wait(30), "the job runner did not claim again"


def _validate(model: Registry, version: str, headers: dict[str, str] | None = None) -> Any:
    return model.client.post(
        f"/api/models/{REF}/versions/{version}/transitions",
        json={"to": "validated", "reason": "ci"},
        headers=headers or {},
    )


def _job(model: Registry, job_id: str) -> dict[str, Any]:
    response = model.client.get(f"/api/jobs/{job_id}")
    assert response.status_code == 200, response.text
    return response.json()


def _state(model: Registry, version: str) -> str:
    return str(model.client.get(f"/api/models/{REF}/versions/{version}").json()["state"])


def _ended(model: Registry, job_id: str) -> bool:
    return _job(model, job_id)["state"] in ("succeeded", "failed", "cancelled")


def test_validations_beyond_the_cap_wait_queued_and_run_one_at_a_time(
    model: Registry, gate: GatedValidator
) -> None:
    for version in ("1", "2"):
        model.publish(REF, version)
    ids = []
    for version in ("1", "2"):
        response = _validate(model, version, ASYNC)
        assert response.status_code == 202, response.text
        assert response.headers["Location"] == f"/api/jobs/{response.json()['id']}"
        ids.append(response.json()["id"])
        # The first one runs (held at the gate) before the second is asked for.
        assert eventually(lambda: gate.entered == 1)
    listed = model.client.get("/api/jobs", params={"state": "queued"}).json()["items"]
    assert [job["id"] for job in listed] == ids[1:]
    running = model.client.get("/api/jobs", params={"state": "running"}).json()["items"]
    assert [job["id"] for job in running] == ids[:1]
    assert running[0]["kind"] == "validation"
    assert running[0]["tenant"] == "acme"
    assert running[0]["target"] == {"version": f"{REF}:1"}

    gate.permits.release(2)
    assert eventually(lambda: all(_ended(model, job_id) for job_id in ids))
    assert gate.entered == 2
    assert gate.most == 1  # never two sandboxed validations at once
    assert [_job(model, job_id)["state"] for job_id in ids] == ["succeeded"] * 2
    assert [_state(model, version) for version in ("1", "2")] == ["validated"] * 2


def test_the_job_ends_as_the_report_says_and_links_to_it(model: Registry) -> None:
    model.publish(REF, "1")
    wrong = add_one_example(expected=[[9.0, 9.0, 9.0, 9.0]])
    model.publish(REF, "2", manifest_for(model.data, examples=[wrong]))

    passed = _validate(model, "1")  # waits for the job, as before jobs
    assert passed.status_code == 201, passed.text
    body = passed.json()
    assert body["state"] == "validated"
    assert body["event"]["to"] == "validated" and body["event"]["reason"] == "ci"
    job = _job(model, body["job"]["id"])
    assert job["state"] == "succeeded" and job["kind"] == "validation"
    assert job["links"]["validation"] == f"/api/models/{REF}/versions/1/validation"
    report = model.client.get(job["links"]["validation"]).json()
    assert report["passed"] is True

    failed = _validate(model, "2")
    assert failed.status_code == 422, failed.text
    problem = failed.json()
    assert problem["code"] == "validation_failed"
    assert problem["report"]["cause"] == "examples_failed"
    job = _job(model, problem["job"])
    assert job["state"] == "failed"
    assert job["error"]["code"] == "validation_failed"
    assert job["stages"][0]["state"] == "failed"
    stored = model.client.get(job["links"]["validation"]).json()
    assert stored["passed"] is False and stored["report"] == problem["report"]
    assert _state(model, "2") == "candidate"

    listed = model.client.get("/api/jobs", params={"target": f"{REF}:2"}).json()["items"]
    assert [item["id"] for item in listed] == [job["id"]]
    # An illegal transition is refused at once, with no job.
    again = _validate(model, "1")
    assert again.status_code == 409 and again.json()["code"] == "illegal_transition"
    listed = model.client.get("/api/jobs", params={"target": f"{REF}:1"}).json()["items"]
    assert [item["id"] for item in listed] == [body["job"]["id"]]


def test_respond_async_answers_202_and_the_version_is_validated_when_the_job_ends(
    model: Registry, gate: GatedValidator
) -> None:
    model.publish(REF, "1")
    response = _validate(model, "1", {"Prefer": "respond-async, wait=5"})
    assert response.status_code == 202, response.text
    job = response.json()
    assert job["state"] in ("queued", "running")
    assert job["links"]["job"] == f"/api/jobs/{job['id']}"
    assert response.headers["Preference-Applied"] == "respond-async"
    assert _state(model, "1") == "candidate"  # nothing moved before the validation ran

    gate.permits.release(1)
    assert eventually(lambda: _state(model, "1") == "validated")
    assert eventually(lambda: _job(model, job["id"])["state"] == "succeeded")
    events = model.client.get(f"/api/models/{REF}/versions/1/events").json()["items"]
    assert [event["to"] for event in events] == ["candidate", "validated"]


def test_a_held_validation_request_lets_go_once_its_wait_has_passed_on_the_clock(
    model: Registry, gate: GatedValidator
) -> None:
    """How long a validation request waits for its job is counted on the services'
    clock: however long the job runs, the wait ends when that clock has passed it, with
    the job as it is then."""
    clock = ManualClock()
    validations = model.services.validations
    validations.now = clock.now  # the composition root hands it ``clock.now``
    model.publish(REF, "1")
    job_id = _validate(model, "1", ASYNC).json()["id"]
    assert eventually(lambda: gate.entered == 1)

    async def held() -> Any:
        waiting = asyncio.create_task(validations.wait(job_id, 150))
        await asyncio.sleep(0)  # the wait has taken its deadline
        clock.advance(150)
        return await waiting

    job = asyncio.run(held())
    assert job.state.value == "running" and not job.finished
    gate.permits.release(1)
    assert eventually(lambda: _job(model, job_id)["state"] == "succeeded")


def test_a_full_queue_is_refused_and_a_version_queued_twice_is_one_job(
    model: Registry, gate: GatedValidator
) -> None:
    for version in ("1", "2", "3"):
        model.publish(REF, version)
    first = _validate(model, "1", ASYNC).json()["id"]
    assert eventually(lambda: gate.entered == 1)  # running: the queue is empty again
    queued = _validate(model, "2", ASYNC)
    assert queued.status_code == 202

    refused = _validate(model, "3", ASYNC)
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "validation_queue_full"
    assert int(refused.headers["Retry-After"]) > 0
    assert model.client.get("/api/jobs", params={"target": f"{REF}:3"}).json()["items"] == []
    # The same version again joins its job (no second validation of it, not refused).
    twice = _validate(model, "2", ASYNC)
    assert twice.status_code == 202 and twice.json()["id"] == queued.json()["id"]

    gate.permits.release(2)
    ids = [first, queued.json()["id"]]
    assert eventually(lambda: all(_ended(model, job_id) for job_id in ids))
    assert gate.entered == 2
    assert _state(model, "3") == "candidate"


def test_the_cap_is_the_installations_and_a_process_takes_its_share(
    model: Registry, settings: Settings
) -> None:
    from modelport.app import build_validations

    runner = model.services.job_runner
    # VALIDATION_CONCURRENCY 1 (the fixture), no process share of its own: up to it.
    assert runner.installation_concurrency == {"validation": 1}
    assert runner.kind_concurrency["validation"] == 1

    services = model.services
    for share, expected in ((None, 3), (2, 2), (5, 3), (0, 0)):
        other = JobRunner(
            services.jobs.queue,
            services.jobs.stages,
            StageServices(blobs=services.blobs, inference=services.inference),
        )
        build_validations(
            settings.model_copy(
                update={"validation_concurrency": 3, "validation_process_concurrency": share}
            ),
            services.database,
            services.blobs,
            services.registry,
            services.jobs,
            other,
            services.clock,
        )
        assert other.installation_concurrency == {"validation": 3}
        assert other.kind_concurrency == {"validation": expected}


def test_a_validation_whose_runner_died_is_taken_over(
    model: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    services = model.services
    model.publish(REF, "1")
    lease_seconds = 5.0
    dead = JobQueue(services.database, now=services.clock.now, lease_seconds=lease_seconds)
    # No runner of this process runs it: the validation's slots are taken by a runner
    # that died holding it (it claimed the job and started its stage, then nothing).
    no_validations_here(services.job_runner, monkeypatch)
    response = _validate(model, "1", ASYNC)
    assert response.status_code == 202
    job_id = response.json()["id"]
    (lease,) = dead.claim("dead-runner", 1, kinds=("validation",))
    assert lease.job_id == job_id
    assert dead.stage_started(lease, 0) == (1, 0)

    clock = AheadClock(lease_seconds + 1)
    other = JobRunner(
        JobQueue(services.database, now=clock.now, lease_seconds=lease_seconds),
        services.jobs.stages,
        StageServices(blobs=services.blobs, inference=services.inference),
        concurrency=0,
        kind_concurrency={"validation": 1},
        clock=clock,
    )
    asyncio.run(other.drain())
    job = _job(model, job_id)
    assert job["state"] == "succeeded"
    assert job["stages"][0]["attempts"] == 2
    assert _state(model, "1") == "validated"


def test_a_publisher_follows_its_validations_and_no_pipeline_may_run_one(
    model: Registry,
) -> None:
    tenancy = model.services.tenancy
    tenancy.add_member("acme", "pub", roles=["publisher"], actor="admin")
    tenancy.add_member("acme", "app", roles=["consumer"], actor="admin")
    publisher = {
        "Authorization": f"Bearer {tenancy.create_key('acme', 'pub', name='ci', actor='admin').secret}"
    }
    consumer = {
        "Authorization": f"Bearer {tenancy.create_key('acme', 'app', name='app', actor='admin').secret}"
    }
    model.publish(REF, "1")
    response = _validate(model, "1", publisher | ASYNC)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    inference = model.client.post(
        "/api/jobs",
        json={"target": {"model": f"{REF}:1"}, "inputs": []},
        headers=consumer,
    )
    assert inference.status_code == 202, inference.text
    other = inference.json()["id"]

    def job_state() -> str:
        return str(model.client.get(f"/api/jobs/{job_id}", headers=publisher).json()["state"])

    assert eventually(lambda: job_state() == "succeeded")
    # A publisher (no model.call) sees its tenant's validations, no other job.
    listed = model.client.get("/api/jobs", headers=publisher).json()["items"]
    assert [job["id"] for job in listed] == [job_id]
    hidden = model.client.get(f"/api/jobs/{other}", headers=publisher)
    assert hidden.status_code == 404 and hidden.json()["code"] == "job_not_found"
    listed = model.client.get("/api/jobs", headers=consumer).json()["items"]
    assert [job["id"] for job in listed] == [other, job_id]

    # A submitted pipeline cannot name the validation's stage (it checks no access).
    refused = model.client.post(
        "/api/jobs",
        json={
            "target": {"model": f"{REF}:1"},
            "inputs": [],
            "pipeline": [{"name": "v", "implementation": "validate_version"}],
        },
        headers=consumer,
    )
    assert refused.status_code == 400, refused.text
    assert refused.json()["code"] == "unknown_stage"


@pytest.mark.slow  # the validation runs in a sandboxed process
def test_cancelling_a_running_validation_kills_its_child_and_records_nothing(
    model: Registry, monkeypatch: pytest.MonkeyPatch
) -> None:
    from tests.registry.test_processing import sentiment_manifest

    # No renewal of the job's lease comes while the test runs: the cancel has to reach
    # the running stage at once, not at the runner's next look at the job.
    monkeypatch.setattr(model.services.jobs.queue, "lease_seconds", 3600.0)

    blocking = {
        "inputs": [{"name": "text", "datatype": "BYTES", "shape": [1], "data": ["wait here"]}],
        "outputs": [{"name": "label", "datatype": "BYTES", "shape": [1], "data": ["neutral"]}],
    }
    model.publish(REF, "1", sentiment_manifest(model, examples=[blocking]))
    before = _state(model, "1")
    response = _validate(model, "1", ASYNC)
    assert response.status_code == 202, response.text
    job_id = response.json()["id"]
    # The gate: the publisher's code, in the sandboxed child, says it is blocked.
    work_dir = model.services.registry.validator.work_dir  # type: ignore[attr-defined]
    assert eventually(lambda: any(work_dir.glob("validate-*/scratch/waiting")))
    children = [
        p
        for p in psutil.Process().children(recursive=True)
        if any("validation_worker" in part for part in _cmdline(p))
    ]
    assert children, "the sandboxed validation child is not a descendant of the server"

    cancelled = model.client.post(f"/api/jobs/{job_id}:cancel")
    assert cancelled.status_code == 202, cancelled.text
    assert eventually(lambda: _ended(model, job_id))
    job = _job(model, job_id)
    assert job["state"] == "cancelled"
    assert all(_gone(p) for p in children)  # the whole tree, killed
    assert not any(work_dir.glob("validate-*"))  # its folder removed
    # Unvalidated: neither passed nor failed, no report, the version as it was.
    assert _state(model, "1") == before
    missing = model.client.get(f"/api/models/{REF}/versions/1/validation")
    assert missing.status_code == 404, missing.text
    assert missing.json()["code"] == "validation_not_found"


def _cmdline(process: psutil.Process) -> list[str]:
    try:
        return process.cmdline()
    except psutil.Error:
        return []


def _gone(process: psutil.Process) -> bool:
    try:
        return process.status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True

"""Jobs end to end on a real ONNX model (acme/adder: y = x + 1): every stage, retries
that reuse finished stages, fail-fast, cancel, idempotency, tenant isolation, listing,
and a runner that dies resumed by another at the stage it was in."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import anyio.to_thread
import pytest

from modelport.clock import ManualClock
from modelport.jobs.stages import InferStage, StageContext, ValidateStage
from modelport.jobs.types import JobState
from modelport.metering.types import BalanceScope
from tests.jobs.conftest import AheadClock, Counting, Jobs
from tests.metering.conftest import redis_url
from tests.polling import eventually

__all__ = ["redis_url"]  # the fixture

ADDED = [2.0, 3.0, 4.0, 5.0]


def _wait(condition: threading.Event) -> None:
    assert condition.wait(30), "the stage never started"


def test_a_job_runs_through_every_stage(jobs: Jobs) -> None:
    submitted = jobs.submit(select=["y"], rename={"y": "plus_one"})
    assert submitted.status_code == 202, submitted.text
    job = submitted.json()
    assert submitted.headers["Location"] == f"/api/jobs/{job['id']}"
    assert job["state"] == "queued"
    assert [s["name"] for s in job["stages"]] == ["validate", "infer", "postprocess"]
    jobs.drain()
    done = jobs.get(job["id"]).json()
    assert done["state"] == "succeeded", done
    assert [(s["state"], s["attempts"]) for s in done["stages"]] == [("done", 1)] * 3
    assert all(s["output_digest"].startswith("sha256:") for s in done["stages"])
    assert done["output_digest"] == done["stages"][-1]["output_digest"]
    [output] = done["outputs"]
    assert output["name"] == "plus_one" and output["data"] == ADDED
    assert done["model"] == "acme/adder" and done["version"] == "1"
    # Billed once, as the submitting key, the job id on its usage event.
    [entry] = jobs.platform.entries()
    event = entry.event
    assert event.tenant == "beta" and event.request_id == job["id"]
    assert event.prediction_id == f"job:{job['id']}:infer"


def test_a_job_calls_its_model_at_offline_priority(jobs: Jobs) -> None:
    submitted = jobs.submit()
    assert submitted.status_code == 202, submitted.text
    jobs.drain()
    assert jobs.get(submitted.json()["id"]).json()["state"] == "succeeded"
    registry = jobs.services.metrics.registry
    labels = {"model": "acme/adder", "version": "1"}
    name = "modelport_inference_queued_requests_total"
    assert registry.get_sample_value(name, {**labels, "priority": "offline"}) == 1
    assert registry.get_sample_value(name, {**labels, "priority": "interactive"}) == 0


def test_a_failed_stage_is_retried_without_repeating_finished_stages(jobs: Jobs) -> None:
    validate = Counting(ValidateStage())
    infer = Counting(InferStage())
    flaky = Counting(fail=2)
    jobs.register("counted-validate", validate)
    jobs.register("counted-infer", infer)
    jobs.register("flaky", flaky)
    pipeline = [
        {"name": "validate", "implementation": "counted-validate", "retryable": False},
        {"name": "infer", "implementation": "counted-infer"},
        {"name": "flaky", "implementation": "flaky", "retries": 2, "backoff_seconds": 0.01},
        {"name": "postprocess", "implementation": "postprocess"},
    ]
    job = jobs.submit(pipeline=pipeline).json()
    jobs.drain()
    done = jobs.get(job["id"]).json()
    assert done["state"] == "succeeded", done
    assert (validate.runs, infer.runs, flaky.runs) == (1, 1, 3)
    assert [s["attempts"] for s in done["stages"]] == [1, 1, 3, 1]
    assert done["outputs"][0]["data"] == ADDED
    assert len(jobs.platform.entries()) == 1


def test_a_stage_out_of_retries_fails_the_job_and_a_non_retryable_one_at_once(
    jobs: Jobs,
) -> None:
    flaky, strict = Counting(fail=5), Counting(fail=1)
    jobs.register("flaky", flaky)
    jobs.register("strict", strict)
    limited = [{"name": "f", "implementation": "flaky", "retries": 1, "backoff_seconds": 0}]
    once = [{"name": "s", "implementation": "strict", "retryable": False}]
    first = jobs.submit(pipeline=limited).json()
    second = jobs.submit(pipeline=once).json()
    jobs.drain()
    failed = jobs.get(first["id"]).json()
    assert failed["state"] == "failed" and failed["error"]["code"] == "flaky"
    assert failed["stages"][0]["state"] == "failed" and failed["stages"][0]["attempts"] == 2
    assert flaky.runs == 2
    fast = jobs.get(second["id"]).json()
    assert fast["state"] == "failed" and fast["stages"][0]["attempts"] == 1
    assert strict.runs == 1


def test_an_invalid_input_fails_validation_and_costs_nothing(jobs: Jobs) -> None:
    bad = [{"name": "x", "datatype": "FP32", "shape": [1, 3], "data": [1, 2, 3]}]
    job = jobs.submit(inputs=bad).json()
    jobs.drain()
    failed = jobs.get(job["id"]).json()
    assert failed["state"] == "failed"
    assert failed["error"]["code"] == "invalid_input"
    assert [s["state"] for s in failed["stages"]] == ["failed", "pending", "pending"]
    assert jobs.platform.entries() == []


def test_cancel_a_queued_job_then_a_finished_one(jobs: Jobs) -> None:
    job = jobs.submit().json()
    cancelled = jobs.platform.client.post(f"/api/jobs/{job['id']}:cancel", headers=jobs.headers)
    assert cancelled.status_code == 202, cancelled.text
    assert cancelled.json()["state"] == "cancelled"
    again = jobs.platform.client.post(f"/api/jobs/{job['id']}:cancel", headers=jobs.headers)
    assert again.status_code == 409 and again.json()["code"] == "job_finished"
    jobs.drain()  # nothing to run
    assert jobs.get(job["id"]).json()["state"] == "cancelled"
    assert jobs.platform.entries() == []


def test_cancel_stops_a_running_job_at_the_next_stage_boundary(jobs: Jobs) -> None:
    gate = threading.Event()
    held = Counting(gate=gate)
    after = Counting()
    jobs.register("held", held)
    jobs.register("after", after)
    pipeline = [
        {"name": "held", "implementation": "held"},
        {"name": "after", "implementation": "after"},
    ]
    job = jobs.submit(pipeline=pipeline).json()
    runner = jobs.runner()
    runner.start()
    try:
        _wait(held.entered)
        cancel = jobs.platform.client.post(f"/api/jobs/{job['id']}:cancel", headers=jobs.headers)
        assert cancel.status_code == 202 and cancel.json()["cancel_requested"] is True
        assert cancel.json()["state"] == "running"
        gate.set()
        assert eventually(lambda: jobs.get(job["id"]).json()["state"] != "running")
    finally:
        runner.stop()
    ended = jobs.get(job["id"]).json()
    assert ended["state"] == "cancelled"
    assert [s["state"] for s in ended["stages"]] == ["done", "pending"]
    assert after.runs == 0


class Watching:
    """A stage that runs until its job is cancelled, then stops as a stage that can stop
    early does: ``Cancelled``, nothing recorded."""

    def __init__(self) -> None:
        self.entered = threading.Event()

    async def run(self, context: StageContext) -> bytes:
        stopped = threading.Event()

        def wait() -> None:
            with context.cancel.hooked(stopped.set):
                self.entered.set()
                assert stopped.wait(60), "the job's cancel never reached the stage"
            context.cancel.check()

        await anyio.to_thread.run_sync(wait)
        return b"{}"


@pytest.mark.parametrize("here", [True, False], ids=["this-process", "another-process"])
def test_cancel_stops_a_stage_that_watches_for_it_at_once(jobs: Jobs, here: bool) -> None:
    watching = Watching()
    jobs.register("watching", watching)
    after = Counting()
    jobs.register("after", after)
    pipeline = [
        {"name": "w", "implementation": "watching"},
        {"name": "after", "implementation": "after"},
    ]
    job = jobs.submit(pipeline=pipeline).json()
    # The lease is renewed only when the test moves the clock: this process's runner is
    # told of the cancel by the cancel itself, with no renewal; a runner of another
    # process learns of it at its next renewal.
    clock = ManualClock()
    runner = jobs.runner(clock=clock, lease=30.0)
    if here:
        jobs.services.jobs.cancelled = runner.cancel_requested
    runner.start()
    try:
        _wait(watching.entered)
        cancel = jobs.platform.client.post(f"/api/jobs/{job['id']}:cancel", headers=jobs.headers)
        assert cancel.status_code == 202, cancel.text
        if not here:
            assert eventually(lambda: clock.parked == 1)  # the heartbeat, waiting
            clock.advance(10.0)
        assert eventually(lambda: jobs.get(job["id"]).json()["state"] != "running")
    finally:
        runner.stop()
    ended = jobs.get(job["id"]).json()
    assert ended["state"] == "cancelled"
    assert [s["state"] for s in ended["stages"]] == ["failed", "pending"]
    assert ended["stages"][0]["error"]["code"] == "cancelled"
    assert after.runs == 0


def test_the_same_idempotency_key_answers_the_same_job(jobs: Jobs) -> None:
    key = {"extra_headers": {"Idempotency-Key": "k-1"}}
    first = jobs.submit(**key)
    second = jobs.submit(**key)
    assert first.status_code == second.status_code == 202
    assert first.json()["id"] == second.json()["id"]
    other = jobs.submit(inputs=[{**jobs_input(), "data": [9, 9, 9, 9]}], **key)
    assert other.status_code == 409 and other.json()["code"] == "idempotency_key_reused"
    listed = jobs.platform.client.get("/api/jobs", headers=jobs.headers).json()
    assert len(listed["items"]) == 1


def jobs_input() -> dict[str, object]:
    return {"name": "x", "datatype": "FP32", "shape": [1, 4]}


def test_another_tenant_sees_no_job(jobs: Jobs) -> None:
    services = jobs.services
    services.tenancy.add_member("acme", "acme-app", roles=["consumer"], actor="admin")
    secret = services.tenancy.create_key("acme", "acme-app", name="k", actor="admin").secret
    other = {"Authorization": f"Bearer {secret}"}
    job = jobs.submit().json()
    missing = jobs.get("f" * 32, headers=other)
    hidden = jobs.get(job["id"], headers=other)
    assert hidden.status_code == missing.status_code == 404
    assert hidden.json()["code"] == missing.json()["code"] == "job_not_found"
    cancel = jobs.platform.client.post(f"/api/jobs/{job['id']}:cancel", headers=other)
    assert cancel.status_code == 404
    assert jobs.platform.client.get("/api/jobs", headers=other).json()["items"] == []
    # The operator sees it.
    assert jobs.platform.client.get(f"/api/jobs/{job['id']}").status_code == 200


def test_inputs_by_digest_must_be_a_blob_the_tenant_holds(jobs: Jobs) -> None:
    from modelport.jobs import tensors

    services = jobs.services
    doc = tensors.dumps({"inputs": jobs_submit_inputs()})
    mine = services.blobs.put(doc, tenant="beta")
    theirs = services.blobs.put(doc + b" ", tenant="acme")
    accepted = jobs.submit(input_digest=mine)
    assert accepted.status_code == 202, accepted.text
    refused = jobs.submit(input_digest=theirs)
    assert refused.status_code == 404 and refused.json()["code"] == "blob_not_found"
    jobs.drain()
    assert jobs.get(accepted.json()["id"]).json()["outputs"][0]["data"] == ADDED


def jobs_submit_inputs() -> list[dict[str, object]]:
    return [{**jobs_input(), "data": [1, 2, 3, 4]}]


def test_listing_pages_and_filters(jobs: Jobs) -> None:
    ids = [jobs.submit().json()["id"] for _ in range(3)]
    client = jobs.platform.client
    first = client.get("/api/jobs", params={"limit": 2}, headers=jobs.headers).json()
    assert [j["id"] for j in first["items"]] == ids[::-1][:2]
    second = client.get(
        "/api/jobs", params={"limit": 2, "cursor": first["next_cursor"]}, headers=jobs.headers
    ).json()
    assert [j["id"] for j in second["items"]] == [ids[0]] and second["next_cursor"] is None
    client.post(f"/api/jobs/{ids[1]}:cancel", headers=jobs.headers)
    cancelled = client.get("/api/jobs", params={"state": "cancelled"}, headers=jobs.headers)
    assert [j["id"] for j in cancelled.json()["items"]] == [ids[1]]
    by_target = client.get("/api/jobs", params={"target": "acme/other"}, headers=jobs.headers)
    assert by_target.json()["items"] == []
    bad = client.get("/api/jobs", params={"cursor": "x"}, headers=jobs.headers)
    assert bad.status_code == 400 and bad.json()["code"] == "invalid_cursor"


def test_submissions_that_cannot_run_are_refused(jobs: Jobs) -> None:
    unknown = jobs.submit(pipeline=[{"name": "a", "implementation": "nope"}])
    assert unknown.status_code == 400 and unknown.json()["code"] == "unknown_stage"
    both = jobs.submit(target={"model": "acme/adder", "endpoint": "e"})
    assert both.status_code == 400 and both.json()["code"] == "invalid_target"
    admin = jobs.platform.client.post(
        "/api/jobs", json={"target": {"model": "acme/adder"}, "inputs": jobs_submit_inputs()}
    )
    assert admin.status_code == 400 and admin.json()["code"] == "tenant_required"


def test_a_runner_that_dies_loses_its_lease_and_another_resumes_at_its_stage(
    jobs: Jobs,
) -> None:
    validate, infer, post = Counting(ValidateStage()), Counting(InferStage()), Counting()
    gate = threading.Event()
    held = Counting(gate=gate)
    for name, stage in (("v", validate), ("i", infer), ("held", held), ("p", post)):
        jobs.register(name, stage)
    pipeline = [
        {"name": "validate", "implementation": "v"},
        {"name": "infer", "implementation": "i"},
        {"name": "held", "implementation": "held"},
        {"name": "post", "implementation": "p"},
    ]
    job = jobs.submit(pipeline=pipeline).json()
    first = jobs.runner()
    first.start()
    _wait(held.entered)
    first.stop(release=False)  # dies: its lease stays until it expires
    stalled = jobs.get(job["id"]).json()
    assert stalled["state"] == "running"
    assert [s["state"] for s in stalled["stages"]] == ["done", "done", "running", "pending"]
    jobs.drain(jobs.runner())  # the lease has not expired: nothing to claim
    assert jobs.get(job["id"]).json()["stages"][2]["attempts"] == 1
    gate.set()
    lease = jobs.services.settings.jobs.lease_seconds
    jobs.drain(jobs.runner(clock=AheadClock(lease + 1)))
    done = jobs.get(job["id"]).json()
    assert done["state"] == "succeeded", done
    assert (validate.runs, infer.runs, held.runs, post.runs) == (1, 1, 2, 1)
    assert [s["attempts"] for s in done["stages"]] == [1, 1, 2, 1]
    assert len(jobs.platform.entries()) == 1


def test_running_the_infer_stage_twice_charges_once(jobs: Jobs) -> None:
    """A runner that died after the infer stage's call settled, before it was recorded
    done, runs it again: the ledger and the balance see one call."""
    metering = jobs.services.metering
    metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
    jobs.platform.price(2_500)
    crashing = Counting(InferStage(), gate=threading.Event())  # never answers on its own
    jobs.register("crashing-infer", crashing)
    job = jobs.submit(pipeline=[{"name": "infer", "implementation": "crashing-infer"}]).json()
    first = jobs.runner()
    first.start()
    _wait(crashing.entered)
    first.stop(release=False)
    # What the dead runner's attempt did: the metered call, run to its end.
    import asyncio

    from modelport.jobs.principals import principal_of
    from modelport.jobs.stages import StageContext, StageServices

    stored = jobs.services.jobs.get("beta", job["id"])
    services = jobs.services
    context = StageContext(
        job=stored,
        spec=stored.pipeline[0],
        position=0,
        attempt=1,
        closed_attempts=0,
        principal=principal_of(stored.principal),
        input_digest=stored.input_digest,
        outputs={},
        services=StageServices(blobs=services.blobs, inference=services.inference),
    )
    asyncio.run(InferStage().run(context))
    crashing.gate = None
    jobs.drain(jobs.runner(clock=AheadClock(services.settings.jobs.lease_seconds + 1)))
    assert jobs.get(job["id"]).json()["state"] == "succeeded"
    if metering.journal is not None:
        assert metering.journal.flush()
    [entry] = jobs.platform.entries()
    assert entry.event.amount_micros == 2_500
    balance = metering.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 7_500 and balance.reserved_micros == 0
    assert jobs.services.jobs.get(None, job["id"]).state is JobState.SUCCEEDED


class Slow:
    """A stage that outlives any short timeout, and notes whether it was cancelled."""

    def __init__(self) -> None:
        self.cancelled = threading.Event()
        self.entered = threading.Event()

    async def run(self, context: object) -> bytes:
        import asyncio

        self.entered.set()
        try:
            await asyncio.sleep(3600)
        except asyncio.CancelledError:
            self.cancelled.set()
            raise
        return b"{}"


def test_a_stage_past_its_timeout_fails(jobs: Jobs) -> None:
    slow = Slow()
    jobs.register("slow", slow)
    stage = {"name": "s", "implementation": "slow", "timeout_seconds": 0.05, "retries": 0}
    job = jobs.submit(pipeline=[stage]).json()
    jobs.drain()
    failed = jobs.get(job["id"]).json()
    assert failed["state"] == "failed" and failed["error"]["code"] == "stage_timeout"
    assert slow.cancelled.is_set()


def test_a_runner_that_lost_its_lease_records_nothing(jobs: Jobs) -> None:
    from sqlalchemy import update

    from modelport.store.tables import JobRow

    gate = threading.Event()
    held = Counting(gate=gate)
    jobs.register("held", held)
    job = jobs.submit(pipeline=[{"name": "s", "implementation": "held"}]).json()
    runner = jobs.runner(lease=0.3)  # renewed every 0.1 s
    runner.start()
    try:
        _wait(held.entered)
        with jobs.services.database.transaction() as session:  # another runner took it
            session.execute(
                update(JobRow).where(JobRow.id == job["id"]).values(lease_owner="another")
            )
        # Its next heartbeat is refused: the attempt is cancelled, its gate never opened.
        deadline = time.monotonic() + 30
        while runner.busy():
            assert time.monotonic() < deadline
            time.sleep(0.02)
    finally:
        runner.stop()
    after = jobs.services.jobs.get(None, job["id"])
    assert after.state is JobState.RUNNING and after.lease_owner == "another"
    assert after.stages[0].attempts == 1 and after.stages[0].output_digest is None
    assert held.runs == 1


def test_an_attempt_interrupted_by_a_clean_stop_gives_the_next_a_new_call_id(
    jobs: Jobs,
) -> None:
    gate = threading.Event()
    infer = Counting(InferStage(), gate=gate)
    jobs.register("gated-infer", infer)
    job = jobs.submit(pipeline=[{"name": "infer", "implementation": "gated-infer"}]).json()
    runner = jobs.runner()
    runner.start()
    _wait(infer.entered)
    runner.stop()  # cleanly: the attempt is closed, the job queued again
    stopped = jobs.services.jobs.get(None, job["id"])
    assert stopped.state is JobState.QUEUED and stopped.lease_owner is None
    run = stopped.stages[0]
    assert (run.attempts, run.closed_attempts, run.error_code) == (1, 1, "interrupted")
    gate.set()
    jobs.drain()
    assert jobs.get(job["id"]).json()["state"] == "succeeded"
    [entry] = jobs.platform.entries()
    assert entry.event.prediction_id == f"job:{job['id']}:infer:1"


def test_a_job_in_the_distributed_shape_is_charged_once(
    tmp_path: Path, database_url: str, redis_url: str
) -> None:
    """With Redis (limits, and on PostgreSQL the usage stream), the infer stage run twice
    is still one event and one charge."""
    from tests.jobs.conftest import Jobs as World
    from tests.metering.conftest import make_platform

    platform = make_platform(
        tmp_path / "home", database_url, job_runner_concurrency=0, redis_url=redis_url
    )
    try:
        jobs = World(platform)
        metering = platform.services.metering
        metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
        platform.price(2_500)
        job = jobs.submit().json()
        jobs.drain()
        stored = platform.services.jobs.get(None, job["id"])
        assert stored.state is JobState.SUCCEEDED
        _run_infer_again(platform.services, stored)
        if metering.journal is not None:
            assert metering.journal.flush()
        deadline = time.monotonic() + 30
        while not (entries := platform.entries()):
            assert time.monotonic() < deadline
            time.sleep(0.05)
        assert [e.event.prediction_id for e in entries] == [f"job:{job['id']}:infer"]
        balance = metering.balances.get(BalanceScope.TENANT, "beta")
        assert balance.balance_micros == 7_500 and balance.reserved_micros == 0
    finally:
        platform.close_client()
        platform.services.close()


def _run_infer_again(services: Any, stored: Any) -> None:
    import asyncio

    from modelport.jobs.principals import principal_of
    from modelport.jobs.stages import StageContext, StageServices

    infer = stored.pipeline[1]
    context = StageContext(
        job=stored,
        spec=infer,
        position=1,
        attempt=2,
        closed_attempts=0,
        principal=principal_of(stored.principal),
        input_digest=stored.stages[0].output_digest,
        outputs={},
        services=StageServices(blobs=services.blobs, inference=services.inference),
    )
    asyncio.run(InferStage().run(context))


def test_a_job_on_an_endpoint_and_one_on_a_model_it_may_not_see(jobs: Jobs) -> None:
    client, services = jobs.platform.client, jobs.services
    services.tenancy.add_member("beta", "ops", roles=["deployer"], actor="admin")
    deployer = services.tenancy.create_key("beta", "ops", name="d", actor="admin").secret
    headers = {"Authorization": f"Bearer {deployer}"}
    assert client.post("/api/endpoints", json={"name": "adds"}, headers=headers).status_code == 201
    spec = {"versions": [{"model": "acme/adder", "version": "1", "weight": 100}]}
    made = client.post("/api/endpoints/adds/deployments", json=spec, headers=headers)
    assert made.status_code == 202, made.text
    path = f"/api/endpoints/adds/deployments/{made.json()['id']}"
    deadline = time.monotonic() + 60
    while client.get(path, headers=headers).json()["state"] == "pending":
        assert time.monotonic() < deadline
        time.sleep(0.05)
    on_endpoint = jobs.submit(target={"endpoint": "adds"}).json()
    hidden = jobs.submit(target={"model": "acme/private-one"}).json()
    jobs.drain()
    done = jobs.get(on_endpoint["id"]).json()
    assert done["state"] == "succeeded", done
    assert done["outputs"][0]["data"] == ADDED and done["model"] == "adds"
    failed = jobs.get(hidden["id"]).json()
    assert failed["state"] == "failed" and failed["error"]["code"] == "model_not_found"
    assert failed["stages"][0]["attempts"] == 1

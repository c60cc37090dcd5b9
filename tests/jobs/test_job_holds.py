"""A job's upfront hold on both databases: its upper bound held once when it starts
running, its infer call's reservation drawn from it, what is left given back when it
ends however it ends; a tenant that cannot cover it has the job fail with nothing
charged; a resumed job does not hold twice. The balance always equals what was
credited less what the ledger charged."""

from __future__ import annotations

import asyncio
import threading
import time
from typing import Any

from sqlalchemy import select

from modelport.jobs.principals import principal_of
from modelport.jobs.stages import InferStage, StageContext, StageServices, ValidateStage, hold_id
from modelport.metering.meter import repeatable_id
from modelport.metering.types import BalanceScope, ReservationState
from modelport.store.tables import ReservationRow
from tests.jobs.conftest import AheadClock, Counting, Jobs
from tests.polling import eventually

CREDIT = 10_000
PRICE = 1_000


def _priced(jobs: Jobs, credit: int = CREDIT) -> Any:
    metering = jobs.services.metering
    metering.balances.credit(BalanceScope.TENANT, "beta", credit, tenant="beta")
    jobs.platform.price(PRICE)
    return metering


def _pipeline(jobs: Jobs, gate: threading.Event) -> tuple[list[dict[str, Any]], Counting]:
    """validate → infer (built-in, 2 retries: 3 attempts bounded) → a gated stage → a
    pass-through."""
    held = Counting(gate=gate)
    jobs.register("held", held)
    jobs.register("v", Counting(ValidateStage()))
    jobs.register("after", Counting())  # a stage boundary after the gated one
    pipeline = [
        {"name": "validate", "implementation": "v"},
        {"name": "infer", "implementation": "infer", "retries": 2},
        {"name": "held", "implementation": "held"},
        {"name": "after", "implementation": "after"},
    ]
    return pipeline, held


def _rows(jobs: Jobs) -> dict[str, tuple[int, str]]:
    """beta's reservations: id → (amount, state)."""
    with jobs.services.database.transaction() as session:
        rows = session.scalars(select(ReservationRow).where(ReservationRow.tenant == "beta"))
        return {row.id: (row.amount_micros, row.state) for row in rows}


def _balance(jobs: Jobs) -> tuple[int, int]:
    jobs.services.metering.deliver()
    balance = jobs.services.metering.balances.get(BalanceScope.TENANT, "beta")
    return balance.balance_micros, balance.reserved_micros


def _charged(jobs: Jobs) -> int:
    return sum(entry.event.amount_micros for entry in jobs.platform.entries())


def _wait(event: threading.Event) -> None:
    assert event.wait(30), "the stage never started"


def _ended(jobs: Jobs, job_id: str) -> dict[str, Any]:
    deadline = time.monotonic() + 30
    while (job := jobs.get(job_id).json())["state"] in ("queued", "running"):
        assert time.monotonic() < deadline, job
        time.sleep(0.02)
    return job


def test_the_bound_is_held_once_drawn_by_the_infer_call_and_released_at_the_end(
    jobs: Jobs,
) -> None:
    _priced(jobs)
    gate = threading.Event()
    pipeline, held = _pipeline(jobs, gate)
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    runner = jobs.runner()
    runner.start()
    try:
        _wait(held.entered)
        hold, call = hold_id(job_id), repeatable_id(f"job:{job_id}:infer")
        assert _balance(jobs) == (CREDIT - PRICE, 2 * PRICE)
        # Three attempts bounded, one drawn into the call's reservation and settled.
        assert _rows(jobs) == {hold: (2 * PRICE, "held"), call: (PRICE, "settled")}
        gate.set()
        assert _ended(jobs, job_id)["state"] == "succeeded"
    finally:
        runner.stop()
    assert _rows(jobs)[hold] == (2 * PRICE, ReservationState.RELEASED.value)
    assert _balance(jobs) == (CREDIT - PRICE, 0)
    [entry] = jobs.platform.entries()
    event = entry.event
    assert (event.request_id, event.prediction_id) == (job_id, f"job:{job_id}:infer")
    assert event.reservation_id == call and _charged(jobs) == PRICE


def test_a_short_balance_fails_the_job_before_any_stage_and_charges_nothing(
    jobs: Jobs,
) -> None:
    _priced(jobs, credit=3 * PRICE - 1)  # one call fits, the bound (3 attempts) does not
    job_id = jobs.submit().json()["id"]
    jobs.drain()
    job = jobs.get(job_id).json()
    assert (job["state"], job["error"]["code"]) == ("failed", "budget_exceeded"), job
    assert [stage["attempts"] for stage in job["stages"]] == [0, 0, 0]
    assert _rows(jobs) == {}
    assert _balance(jobs) == (3 * PRICE - 1, 0)
    assert jobs.platform.entries() == []


def test_a_cancelled_job_gives_its_hold_back(jobs: Jobs) -> None:
    _priced(jobs)
    gate = threading.Event()
    pipeline, held = _pipeline(jobs, gate)
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    runner = jobs.runner()
    runner.start()
    try:
        _wait(held.entered)
        cancel = jobs.platform.client.post(f"/api/jobs/{job_id}:cancel", headers=jobs.headers)
        assert cancel.status_code == 202
        gate.set()
        assert _ended(jobs, job_id)["state"] == "cancelled"
        # The end is visible before the runner gives the hold back: a stop now would
        # cancel that (the hold would then only expire).
        assert eventually(lambda: not runner.busy())
    finally:
        runner.stop()
    assert _rows(jobs)[hold_id(job_id)][1] == ReservationState.RELEASED.value
    assert _balance(jobs) == (CREDIT - PRICE, 0) and _charged(jobs) == PRICE


def test_a_job_given_back_and_cancelled_while_queued_gives_its_hold_back(jobs: Jobs) -> None:
    _priced(jobs)
    gate = threading.Event()
    pipeline, held = _pipeline(jobs, gate)
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    runner = jobs.runner()
    runner.start()
    _wait(held.entered)
    runner.stop()  # a clean stop: the job is queued again, its hold still taken
    assert jobs.get(job_id).json()["state"] == "queued"
    assert _rows(jobs)[hold_id(job_id)] == (2 * PRICE, "held")
    cancel = jobs.platform.client.post(f"/api/jobs/{job_id}:cancel", headers=jobs.headers)
    assert cancel.json()["state"] == "cancelled"
    assert _rows(jobs)[hold_id(job_id)] == (2 * PRICE, ReservationState.RELEASED.value)
    assert _balance(jobs) == (CREDIT - PRICE, 0) and _charged(jobs) == PRICE


def test_a_job_with_no_priced_call_holds_nothing(jobs: Jobs) -> None:
    jobs.services.metering.balances.credit(BalanceScope.TENANT, "beta", CREDIT, tenant="beta")
    job_id = jobs.submit().json()["id"]  # acme/adder has no price
    jobs.drain()
    assert jobs.get(job_id).json()["state"] == "succeeded"
    assert _rows(jobs) == {}
    assert _balance(jobs) == (CREDIT, 0)


def test_a_resumed_job_does_not_hold_twice(jobs: Jobs) -> None:
    _priced(jobs)
    gate = threading.Event()
    pipeline, held = _pipeline(jobs, gate)
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    first = jobs.runner()
    first.start()
    _wait(held.entered)
    first.stop(release=False)  # dies: the hold stays, as its lease does
    before = _rows(jobs)
    gate.set()
    lease = jobs.services.settings.jobs.lease_seconds
    jobs.drain(jobs.runner(clock=AheadClock(lease + 1)))
    assert jobs.get(job_id).json()["state"] == "succeeded"
    after = _rows(jobs)
    assert after.keys() == before.keys() and len(after) == 2  # the hold and the one call
    assert after[hold_id(job_id)] == (2 * PRICE, ReservationState.RELEASED.value)
    assert _balance(jobs) == (CREDIT - PRICE, 0) and _charged(jobs) == PRICE


def test_the_infer_call_run_again_draws_once(jobs: Jobs) -> None:
    """The infer call run again under the same call id (its runner died before recording
    the stage done) finds the reservation it drew: the hold is drawn once, the call
    charged once."""
    _priced(jobs)
    gate = threading.Event()
    pipeline, held = _pipeline(jobs, gate)
    job_id = jobs.submit(pipeline=pipeline).json()["id"]
    runner = jobs.runner()
    runner.start()
    try:
        _wait(held.entered)
        stored = jobs.services.jobs.get(None, job_id)
        services = jobs.services
        context = StageContext(
            job=stored,
            spec=stored.pipeline[1],
            position=1,
            attempt=2,
            closed_attempts=0,
            principal=principal_of(stored.principal),
            input_digest=stored.stages[0].output_digest or "",
            outputs={},
            services=StageServices(blobs=services.blobs, inference=services.inference),
        )
        asyncio.run(InferStage().run(context))
        assert _rows(jobs)[hold_id(job_id)] == (2 * PRICE, "held")
        assert _balance(jobs) == (CREDIT - PRICE, 2 * PRICE)
        gate.set()
        assert _ended(jobs, job_id)["state"] == "succeeded"
    finally:
        runner.stop()
    assert _balance(jobs) == (CREDIT - PRICE, 0) and _charged(jobs) == PRICE


def test_a_job_on_an_endpoint_holds_its_dearest_version(jobs: Jobs) -> None:
    _priced(jobs)
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
    job_id = jobs.submit(target={"endpoint": "adds"}).json()["id"]
    jobs.drain()
    assert jobs.get(job_id).json()["state"] == "succeeded"
    # The default infer stage: 3 attempts of acme/adder:1 held, one drawn and charged.
    assert _rows(jobs)[hold_id(job_id)] == (2 * PRICE, ReservationState.RELEASED.value)
    assert _balance(jobs) == (CREDIT - PRICE, 0) and _charged(jobs) == PRICE

"""The inference hook: how a call ends decides its status and charge; the price is the
one effective when the call started, of the version that actually ran."""

from __future__ import annotations

import asyncio
import dataclasses
import time
from datetime import timedelta

import pytest

from modelport.errors import DeadlineExceeded, Internal, Overloaded, PaymentRequired, Unavailable
from modelport.metering.meter import MeteredCall, stream_call
from modelport.metering.types import (
    BalanceScope,
    CallInfo,
    FailureRule,
    LedgerEntry,
    NewPriceRule,
    ReservationState,
    Unit,
    Usage,
    UsageStatus,
)
from tests.metering.conftest import DIGEST, T0, Metering

CALL = CallInfo(
    tenant="beta",
    key_id="k1",
    model="acme/adder",
    version="1",
    manifest_digest=DIGEST,
    request_id="req-1",
    timeout_seconds=2.0,
)


def price(metering: Metering, micros: int, *, unit: Unit = Unit.PREDICTION, **extra) -> int:
    added = metering.prices.add(
        NewPriceRule(model="acme/adder", unit=unit, unit_price_micros=micros, **extra), actor="t"
    )
    return added.id


def delivered(metering: Metering) -> list[LedgerEntry]:
    metering.outbox.drain(metering.sink)
    return metering.ledger.entries()


async def run(metering: Metering, outcome: BaseException | None, call: CallInfo = CALL):
    async with metering.meter.metered(call) as metered:
        metered.record(compute_seconds=0.0123)
        if outcome is not None:
            raise outcome
    return metered


@pytest.fixture
def funded(metering: Metering) -> Metering:
    metering.balances.credit(BalanceScope.TENANT, "beta", 100_000, tenant="beta")
    return metering


def test_a_successful_call_is_charged_and_snapshots_its_price(funded: Metering) -> None:
    rule_id = price(funded, 2_000, revenue_share_bps=6000)
    metered = asyncio.run(run(funded, None))
    assert funded.balances.get(BalanceScope.TENANT, "beta").balance_micros == 98_000
    [entry] = delivered(funded)
    event = entry.event
    assert event.event_id == f"{metered.prediction_id}:prediction"
    assert (event.status, event.unit, event.quantity) == (UsageStatus.SUCCEEDED, Unit.PREDICTION, 1)
    assert (event.price.rule_id, event.price.unit_price_micros) == (rule_id, 2_000)
    assert (event.amount_micros, event.publisher_micros) == (2_000, 1_200)
    assert (event.manifest_digest, event.request_id, event.key_id) == (DIGEST, "req-1", "k1")
    assert event.compute_ms == pytest.approx(12.3)
    assert event.reservation_id == metered.reservation.id  # type: ignore[union-attr]
    assert funded.reservations.get(event.reservation_id).state is ReservationState.SETTLED  # type: ignore[arg-type, union-attr]


@pytest.mark.parametrize(
    ("failure", "outcome", "status", "charged"),
    [
        ({"failure_rule": FailureRule.NONE}, Internal("boom"), UsageStatus.FAILED, 0),
        ({"failure_rule": FailureRule.FULL}, Internal("boom"), UsageStatus.FAILED, 2_000),
        (
            {"failure_rule": FailureRule.FRACTION, "failure_bps": 2500},
            DeadlineExceeded("late"),
            UsageStatus.TIMEOUT,
            500,
        ),
        ({"failure_rule": FailureRule.NONE}, DeadlineExceeded("late"), UsageStatus.TIMEOUT, 0),
        ({"failure_rule": FailureRule.FULL}, ValueError("bug"), UsageStatus.FAILED, 2_000),
    ],
)
def test_failure_billing_rules(
    funded: Metering, failure: dict, outcome: Exception, status: UsageStatus, charged: int
) -> None:
    rule_id = price(funded, 2_000, **failure)
    with pytest.raises(type(outcome)):
        asyncio.run(run(funded, outcome))
    [entry] = delivered(funded)
    assert (entry.event.status, entry.event.amount_micros) == (status, charged)
    assert entry.event.price.rule_id == rule_id
    assert entry.event.price.failure_rule is failure["failure_rule"]
    after = funded.balances.get(BalanceScope.TENANT, "beta")
    assert after.balance_micros == 100_000 - charged and after.reserved_micros == 0


@pytest.mark.parametrize("refusal", [Overloaded("queue full"), Unavailable("not loaded")])
def test_work_refused_before_running_releases_the_hold_and_meters_nothing(
    funded: Metering, refusal: Exception
) -> None:
    price(funded, 2_000, failure_rule=FailureRule.FULL)
    with pytest.raises(type(refusal)):
        asyncio.run(run(funded, refusal))
    assert delivered(funded) == []
    after = funded.balances.get(BalanceScope.TENANT, "beta")
    assert after.balance_micros == 100_000 and after.reserved_micros == 0


def test_a_cancelled_call_is_metered_for_what_was_done(funded: Metering) -> None:
    price(funded, 2_000, failure_rule=FailureRule.FULL)
    price(funded, 10, unit=Unit.COMPUTE_MS)

    async def cancelled() -> None:
        task = asyncio.create_task(run(funded, None, CALL))
        await asyncio.sleep(0)

        inside = asyncio.Event()

        async def hang() -> None:
            async with funded.meter.metered(CALL) as metered:
                metered.record(compute_seconds=0.004)
                inside.set()
                await asyncio.sleep(3600)

        hanging = asyncio.create_task(hang())
        # Cancelled once it recorded its work, however long a loaded machine took to
        # reserve for it.
        await asyncio.wait_for(inside.wait(), 60)
        hanging.cancel()
        with pytest.raises(asyncio.CancelledError):
            await hanging
        await task

    asyncio.run(cancelled())
    # let the settlement that runs on its own after the cancellation finish (generous: a
    # loaded CI machine can take seconds to schedule the committer thread)
    deadline = time.monotonic() + 60
    while len(delivered(funded)) < 4 and time.monotonic() < deadline:
        time.sleep(0.02)
    by_status = {}
    for entry in funded.ledger.entries():
        by_status.setdefault(entry.event.status, {})[entry.event.unit] = entry.event
    done = by_status[UsageStatus.CANCELLED]
    assert done[Unit.PREDICTION].quantity == 0  # no answer was produced
    assert done[Unit.COMPUTE_MS].quantity == 4 and done[Unit.COMPUTE_MS].amount_micros == 40
    assert by_status[UsageStatus.SUCCEEDED][Unit.PREDICTION].amount_micros == 2_000
    after = funded.balances.get(BalanceScope.TENANT, "beta")
    assert after.reserved_micros == 0
    assert after.balance_micros == 100_000 - 2_000 - 130 - 40  # 13 ms of compute, then 4


def test_402_before_any_work_when_the_upper_bound_does_not_fit(metering: Metering) -> None:
    metering.balances.credit(BalanceScope.TENANT, "beta", 1_999, tenant="beta")
    price(metering, 2_000)
    ran = False

    async def call() -> None:
        nonlocal ran
        async with metering.meter.metered(CALL):
            ran = True

    with pytest.raises(PaymentRequired) as refused:
        asyncio.run(call())
    assert refused.value.code == "budget_exceeded" and not ran
    assert delivered(metering) == []


def test_time_priced_units_are_reserved_up_to_the_deadline_and_capped_there(
    funded: Metering,
) -> None:
    price(funded, 1, unit=Unit.COMPUTE_MS)
    seen = {}

    async def call() -> None:
        async with funded.meter.metered(CALL) as metered:
            seen["held"] = funded.reservations.get(metered.reservation.id).amount_micros  # type: ignore[union-attr]
            metered.record(compute_seconds=5.0)  # more than the 2 s deadline allowed

    asyncio.run(call())
    [entry] = delivered(funded)
    assert seen["held"] == 2_000
    assert entry.event.quantity == 2_000 and entry.event.compute_ms == pytest.approx(5_000)


def test_price_changes_mid_period_bill_each_call_at_the_price_of_its_start(
    funded: Metering,
) -> None:
    first = price(funded, 1_000)
    change = T0 + timedelta(days=3)
    second = price(funded, 1_500, effective_from=change)
    asyncio.run(run(funded, None))
    funded.clock.advance(days=3)
    asyncio.run(run(funded, None))
    funded.clock.advance(days=1)
    asyncio.run(run(funded, None))
    events = sorted((e.event for e in delivered(funded)), key=lambda e: e.started_at)
    assert [(e.price.rule_id, e.amount_micros) for e in events] == [
        (first, 1_000),
        (second, 1_500),
        (second, 1_500),
    ]
    # Adding a rule later changes nothing that was charged.
    funded.clock.advance(days=1)
    price(funded, 9_999)
    again = {e.event.event_id: e.event.amount_micros for e in delivered(funded)}
    assert sorted(again.values()) == [1_000, 1_500, 1_500]


def test_the_version_that_ran_is_billed_at_its_own_price(funded: Metering) -> None:
    price(funded, 1_000, version="1")
    fallback = price(funded, 4_000, version="2")

    async def call() -> None:
        async with funded.meter.metered(CALL) as metered:
            metered.ran_version("acme/adder", "2", "sha256:" + "cd" * 32)

    asyncio.run(call())
    [entry] = delivered(funded)
    assert (entry.event.version, entry.event.price.rule_id) == ("2", fallback)
    assert entry.event.manifest_digest == "sha256:" + "cd" * 32
    assert funded.balances.get(BalanceScope.TENANT, "beta").balance_micros == 96_000


def test_a_free_version_still_yields_one_usage_event(funded: Metering) -> None:
    metered = asyncio.run(run(funded, None))
    assert metered.reservation is None
    [entry] = delivered(funded)
    assert (entry.event.unit, entry.event.amount_micros, entry.event.price.rule_id) == (
        Unit.PREDICTION,
        0,
        None,
    )


def test_a_stream_is_bounded_by_its_prompt_bytes_and_max_tokens() -> None:
    call = stream_call(CALL, prompt_bytes=len("héllo wörld".encode()), max_tokens=5)
    assert call.quantities == {Unit.INPUT_TOKEN: 13, Unit.OUTPUT_TOKEN: 5}
    assert CALL.quantities == {}  # the call it was made from is untouched
    metered = MeteredCall(call, {}, None, T0, 0.0)
    metered.deliver(input_tokens=2)
    for _ in range(7):  # a backend that streams more than it was asked for
        metered.deliver(output_tokens=1)
    # what is billed never passes what was held
    assert metered.quantities == {Unit.INPUT_TOKEN: 2, Unit.OUTPUT_TOKEN: 5}


ROWS = dataclasses.replace(CALL, rows=5)
"""A call of 5 rows."""


def test_rows_are_held_for_every_row_asked_and_charged_for_the_rows_answered(
    funded: Metering,
) -> None:
    price(funded, 100, unit=Unit.ROW)
    held = {}

    async def call() -> None:
        async with funded.meter.metered(ROWS) as metered:
            held["amount"] = funded.reservations.get(metered.reservation.id).amount_micros  # type: ignore[union-attr]
            metered.record_usage(Usage(rows=3))  # the backend answered 3 of the 5 rows

    asyncio.run(call())
    assert held["amount"] == 500
    [entry] = delivered(funded)
    assert (entry.event.unit, entry.event.quantity, entry.event.amount_micros) == (Unit.ROW, 3, 300)
    after = funded.balances.get(BalanceScope.TENANT, "beta")
    assert after.balance_micros == 100_000 - 300 and after.reserved_micros == 0


@pytest.mark.parametrize(
    ("failure", "outcome", "status", "charged"),
    [
        ({"failure_rule": FailureRule.NONE}, Internal("boom"), UsageStatus.FAILED, 0),
        (
            {"failure_rule": FailureRule.FRACTION, "failure_bps": 2500},
            Internal("boom"),
            UsageStatus.FAILED,
            125,  # a quarter of the 5 rows asked
        ),
        ({"failure_rule": FailureRule.FULL}, DeadlineExceeded("late"), UsageStatus.TIMEOUT, 500),
    ],
)
def test_a_failed_call_is_charged_its_rows_by_the_failure_rule(
    funded: Metering, failure: dict, outcome: Exception, status: UsageStatus, charged: int
) -> None:
    price(funded, 100, unit=Unit.ROW, **failure)
    with pytest.raises(type(outcome)):
        asyncio.run(run(funded, outcome, ROWS))
    [entry] = delivered(funded)
    event = entry.event
    assert (event.unit, event.quantity, event.status) == (Unit.ROW, 5, status)
    assert event.amount_micros == charged
    after = funded.balances.get(BalanceScope.TENANT, "beta")
    assert after.balance_micros == 100_000 - charged and after.reserved_micros == 0


def test_a_call_cancelled_before_its_answer_is_charged_no_rows() -> None:
    metered = MeteredCall(ROWS, {}, None, T0, 0.0)
    assert metered.quantity(Unit.ROW, UsageStatus.CANCELLED, 10.0) == 0
    assert metered.quantity(Unit.ROW, UsageStatus.SUCCEEDED, 10.0) == 5  # none counted: all
    metered.record_usage(Usage(rows=9))  # a backend answering more than asked
    assert metered.quantity(Unit.ROW, UsageStatus.CANCELLED, 10.0) == 5  # never above the hold


def test_402_before_any_work_when_the_rows_do_not_fit(metering: Metering) -> None:
    metering.balances.credit(BalanceScope.TENANT, "beta", 499, tenant="beta")
    price(metering, 100, unit=Unit.ROW)
    ran = False

    async def call() -> None:
        nonlocal ran
        async with metering.meter.metered(ROWS):
            ran = True

    with pytest.raises(PaymentRequired) as refused:
        asyncio.run(call())
    assert refused.value.code == "budget_exceeded" and not ran
    assert delivered(metering) == []
    assert metering.balances.get(BalanceScope.TENANT, "beta").reserved_micros == 0

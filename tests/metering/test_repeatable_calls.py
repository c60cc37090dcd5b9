"""A repeatable call (``CallInfo.call_id``: a job's stage, run again after its runner
died) is charged once however often it runs: its hold is taken under an id derived
from the call id and reused by every later run, and its usage events keep their ids."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest

from modelport.metering.meter import repeatable_id
from modelport.metering.types import BalanceScope, NewPriceRule, ReservationState, Unit
from tests.metering.conftest import Metering
from tests.metering.test_meter import CALL, delivered

REPEATABLE = dataclasses.replace(CALL, call_id="job:abc:infer")


@pytest.fixture
def priced(metering: Metering) -> Metering:
    metering.prices.add(
        NewPriceRule(model="acme/adder", unit=Unit.PREDICTION, unit_price_micros=1_000),
        actor="t",
    )
    metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
    return metering


async def _settled(metering: Metering) -> str:
    async with metering.meter.metered(REPEATABLE) as call:
        pass
    return call.prediction_id


def test_a_call_run_twice_is_charged_once(priced: Metering) -> None:
    assert asyncio.run(_settled(priced)) == "job:abc:infer"
    asyncio.run(_settled(priced))
    [entry] = delivered(priced)
    assert entry.event.event_id == "job:abc:infer:prediction"
    assert entry.event.reservation_id == repeatable_id("job:abc:infer")
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 9_000 and balance.reserved_micros == 0


def test_a_run_after_one_that_died_holding_settles_its_hold_once(priced: Metering) -> None:
    async def died() -> None:
        await priced.meter.open(REPEATABLE)  # held, never settled: its process died

    asyncio.run(died())
    held = priced.reservations.get(repeatable_id("job:abc:infer"))
    assert held is not None and held.state is ReservationState.HELD
    asyncio.run(_settled(priced))
    assert len(delivered(priced)) == 1
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 9_000 and balance.reserved_micros == 0


def test_a_hold_that_expired_is_charged_once_by_the_next_run(priced: Metering) -> None:
    async def died() -> None:
        await priced.meter.open(REPEATABLE)

    asyncio.run(died())
    priced.clock.advance(seconds=REPEATABLE.timeout_seconds + 120)
    assert priced.reservations.sweep() == 1
    assert priced.balances.get(BalanceScope.TENANT, "beta").reserved_micros == 0
    asyncio.run(_settled(priced))
    asyncio.run(_settled(priced))
    assert len(delivered(priced)) == 1
    balance = priced.balances.get(BalanceScope.TENANT, "beta")
    assert balance.balance_micros == 9_000 and balance.reserved_micros == 0


def test_calls_without_an_id_are_each_their_own(priced: Metering) -> None:
    async def plain() -> None:
        async with priced.meter.metered(CALL):
            pass

    asyncio.run(plain())
    asyncio.run(plain())
    assert len(delivered(priced)) == 2
    assert priced.balances.get(BalanceScope.TENANT, "beta").balance_micros == 8_000

"""Holds for work of many calls (a job's): ``draw`` moves part of a hold into one call's
reservation without holding the money twice; what is left is released or swept; a
repeatable call draws once and holds anew only when the hold does not cover it."""

from __future__ import annotations

import asyncio
import dataclasses

from modelport.metering.meter import repeatable_id
from modelport.metering.types import BalanceScope, PriceSnapshot, ReservationState, UsageStatus
from tests.metering.conftest import PRICE, Metering, call_info, price_predictions, usage_event

TENANT = BalanceScope.TENANT


def _levels(metering: Metering) -> tuple[int, int]:
    found = metering.balances.get(TENANT, "beta")
    return found.balance_micros, found.reserved_micros


def test_draws_move_money_from_the_hold_and_the_rest_is_released(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta")
    hold = metering.reservations.reserve(
        "beta", None, 3 * PRICE, ttl_seconds=60, reservation_id="h" * 32
    )
    assert hold is not None
    first = metering.reservations.draw(
        hold.id, "beta", PRICE, reservation_id="a" * 32, ttl_seconds=30
    )
    assert first is not None and first.levels == hold.levels
    assert _levels(metering) == (10 * PRICE, 3 * PRICE)  # held once, not twice
    event = usage_event("first", price=PriceSnapshot(1, PRICE), reservation_id=first.id)
    metering.reservations.settle(first, [event])
    assert _levels(metering) == (9 * PRICE, 2 * PRICE)
    second = metering.reservations.draw(
        hold.id, "beta", PRICE, reservation_id="b" * 32, ttl_seconds=30
    )
    assert second is not None
    # More than is left, or another tenant's: nothing drawn, nothing written.
    assert (
        metering.reservations.draw(
            hold.id, "beta", 2 * PRICE, reservation_id="c" * 32, ttl_seconds=30
        )
        is None
    )
    assert (
        metering.reservations.draw(hold.id, "acme", 1, reservation_id="d" * 32, ttl_seconds=30)
        is None
    )
    assert (
        metering.reservations.get("c" * 32) is None and metering.reservations.get("d" * 32) is None
    )
    assert metering.reservations.release(hold)  # gives back what it has left
    assert _levels(metering) == (9 * PRICE, PRICE)
    left = metering.reservations.get(hold.id)
    assert left is not None and (left.amount_micros, left.state) == (
        PRICE,
        ReservationState.RELEASED,
    )
    assert (
        metering.reservations.draw(hold.id, "beta", 1, reservation_id="e" * 32, ttl_seconds=30)
        is None
    )
    failed = usage_event(
        "second", price=PriceSnapshot(1, PRICE), status=UsageStatus.FAILED, reservation_id=second.id
    )
    metering.reservations.settle(second, [failed])
    balance, reserved = _levels(metering)
    assert reserved == 0 and balance == 9 * PRICE - failed.amount_micros


def test_an_expired_hold_gives_back_what_it_has_left_and_draws_no_more(
    metering: Metering,
) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta")
    hold = metering.reservations.reserve("beta", None, 3 * PRICE, ttl_seconds=60)
    assert hold is not None
    drawn = metering.reservations.draw(
        hold.id, "beta", PRICE, reservation_id="a" * 32, ttl_seconds=300
    )
    assert drawn is not None
    metering.clock.advance(seconds=61)
    assert metering.reservations.sweep() == 1  # the hold; the call's lives on
    assert _levels(metering) == (10 * PRICE, PRICE)
    assert (
        metering.reservations.draw(hold.id, "beta", 1, reservation_id="b" * 32, ttl_seconds=1)
        is None
    )
    metering.reservations.settle(drawn, [usage_event("x", price=PriceSnapshot(1, PRICE))])
    assert _levels(metering) == (9 * PRICE, 0)


def test_a_repeatable_call_draws_once_and_holds_anew_when_the_hold_falls_short(
    metering: Metering,
) -> None:
    price_predictions(metering, 10 * PRICE)
    metering.reservations.reserve("beta", "k1", PRICE, ttl_seconds=60, reservation_id="h" * 32)
    call = dataclasses.replace(call_info(), call_id="job:j:infer", hold_id="h" * 32)
    opened = asyncio.run(metering.meter.open(call))
    assert opened.reservation is not None
    assert opened.reservation.id == repeatable_id("job:j:infer")
    assert metering.reservations.get("h" * 32).amount_micros == 0  # type: ignore[union-attr]
    again = asyncio.run(metering.meter.open(call))  # the same call run again: no new draw
    assert again.reservation is not None and again.reservation.id == opened.reservation.id
    assert _levels(metering) == (10 * PRICE, PRICE)
    retry = dataclasses.replace(call, call_id="job:j:infer:1")  # the hold is spent
    anew = asyncio.run(metering.meter.open(retry))
    assert anew.reservation is not None and anew.reservation.amount_micros == PRICE
    assert _levels(metering) == (10 * PRICE, 2 * PRICE)

"""Settling is idempotent: a settlement applied again (the usage journal replays what a
crash left unconfirmed) charges nothing more, and its events, written to the outbox
again, are recorded once by the ledger."""

from __future__ import annotations

from sqlalchemy import delete, update

from modelport.metering.types import BalanceScope, PriceSnapshot, ReservationState
from modelport.store.tables import BalanceRow, ReservationRow
from tests.metering.conftest import Metering, usage_event

PRICE = 1_000
TENANT = BalanceScope.TENANT


def funded(metering: Metering, micros: int = 10 * PRICE) -> None:
    metering.balances.credit(TENANT, "beta", micros, tenant="beta")


def state(metering: Metering) -> tuple[int, int, list[tuple[str, int]]]:
    """The balance, what it holds, and the ledger (each event id with its amount)."""
    metering.outbox.drain(metering.sink)
    balance = metering.balances.get(TENANT, "beta")
    ledger = [(e.event.event_id, e.event.amount_micros) for e in metering.ledger.entries()]
    return balance.balance_micros, balance.reserved_micros, ledger


def test_a_settled_call_applied_again_is_charged_once(metering: Metering) -> None:
    funded(metering)
    held = metering.reservations.reserve("beta", "k1", 3 * PRICE, ttl_seconds=30)
    assert held is not None
    events = [
        usage_event("call:prediction", price=PriceSnapshot(1, PRICE), reservation_id=held.id),
        usage_event("call:second", price=PriceSnapshot(2, 2 * PRICE), reservation_id=held.id),
    ]
    metering.reservations.settle_many([(held, events)])
    once = state(metering)
    assert once == (7 * PRICE, 0, [("call:prediction", PRICE), ("call:second", 2 * PRICE)])
    metering.reservations.settle_many([(held, events)])  # the replay
    assert metering.outbox.pending() == 2  # written again: the ledger sorts it out
    assert state(metering) == once
    reservation = metering.reservations.get(held.id)
    assert reservation is not None and reservation.state is ReservationState.SETTLED
    assert reservation.settled_micros == 3 * PRICE


def test_a_replay_in_the_same_batch_is_charged_once(metering: Metering) -> None:
    funded(metering)
    held = metering.reservations.reserve("beta", None, 2 * PRICE, ttl_seconds=30)
    event = usage_event("call:prediction", price=PriceSnapshot(1, PRICE), reservation_id=held.id)  # type: ignore[union-attr]
    metering.reservations.settle_many([(held, [event]), (held, [event])])
    assert state(metering) == (9 * PRICE, 0, [("call:prediction", PRICE)])


def test_an_expired_reservation_settled_twice_is_charged_once(metering: Metering) -> None:
    funded(metering)
    held = metering.reservations.reserve("beta", None, 3 * PRICE, ttl_seconds=1)
    assert held is not None
    metering.clock.advance(seconds=2)
    assert metering.reservations.sweep() == 1  # the hold is back
    event = usage_event("late:prediction", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
    metering.reservations.settle(held, [event])
    once = state(metering)
    assert once == (9 * PRICE, 0, [("late:prediction", PRICE)])
    metering.reservations.settle(held, [event])
    assert state(metering) == once
    reservation = metering.reservations.get(held.id)
    assert reservation is not None and reservation.state is ReservationState.EXPIRED
    assert reservation.settled_micros == PRICE


def test_a_released_reservation_is_not_charged_by_a_stray_settlement(
    metering: Metering,
) -> None:
    funded(metering)
    held = metering.reservations.reserve("beta", None, 3 * PRICE, ttl_seconds=30)
    assert held is not None
    assert metering.reservations.release(held)
    event = usage_event("never:prediction", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
    metering.reservations.settle(held, [event])
    balance, reserved, _ = state(metering)
    assert (balance, reserved) == (10 * PRICE, 0)


def test_a_lost_hold_is_charged_once(metering: Metering) -> None:
    """A hold taken without waiting for the disk may be lost in a database crash: its
    settlement charges the work, and so does its replay, only once."""
    funded(metering)
    held = metering.reservations.reserve("beta", None, 3 * PRICE, ttl_seconds=30)
    assert held is not None
    with metering.database.transaction() as session:  # as if the hold had never been
        session.execute(delete(ReservationRow).where(ReservationRow.id == held.id))
        session.execute(
            update(BalanceRow)
            .where(BalanceRow.scope_id == "beta")
            .values(reserved_micros=BalanceRow.reserved_micros - held.amount_micros)
        )
    event = usage_event("lost:prediction", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
    metering.reservations.settle(held, [event])
    once = state(metering)
    assert once == (9 * PRICE, 0, [("lost:prediction", PRICE)])
    metering.reservations.settle(held, [event])
    assert state(metering) == once
    reservation = metering.reservations.get(held.id)
    assert reservation is not None and reservation.state is ReservationState.SETTLED
    assert reservation.settled_micros == PRICE


def test_events_without_a_reservation_delivered_twice_are_charged_once(
    metering: Metering,
) -> None:
    """Events no reservation settled are charged by the ledger when it records them:
    only the first copy is recorded, so only it is charged."""
    funded(metering)
    event = usage_event("free:prediction", price=PriceSnapshot(1, PRICE))
    assert event.reservation_id is None and event.amount_micros == PRICE
    metering.reservations.settle_many([(None, [event])])
    metering.reservations.settle_many([(None, [event])])
    assert metering.outbox.pending() == 2
    assert state(metering) == (9 * PRICE, 0, [("free:prediction", PRICE)])

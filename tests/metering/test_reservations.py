"""Reserve, then settle: holds never overspend a level, even under 200 concurrent
callers; every level of a call is held atomically; a reservation never settled is
recovered by the sweeper."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from modelport.clock import ManualClock
from modelport.errors import PaymentRequired
from modelport.metering.reservations import Reservations
from modelport.metering.types import BalanceScope, PriceSnapshot, ReservationState
from modelport.store.tables import BudgetRow
from modelport.tenancy.limits import BudgetRepository
from tests.metering.conftest import Metering, budget_reserved, make_platform, usage_event

PRICE = 1_000
TENANT, KEY = BalanceScope.TENANT, BalanceScope.KEY


def balance(metering: Metering, scope: BalanceScope = TENANT, scope_id: str = "beta"):
    return metering.balances.get(scope, scope_id)


def reserve_many(metering: Metering, callers: int, *, key_id: str | None = None):
    """``callers`` threads reserve (and settle) one call each at the same instant."""
    barrier = threading.Barrier(callers)

    def call(i: int) -> bool:
        barrier.wait()
        try:
            held = metering.reservations.reserve("beta", key_id, PRICE, ttl_seconds=30)
        except PaymentRequired as exc:
            assert exc.code == "budget_exceeded"
            return False
        event = usage_event(f"call{i}", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
        metering.reservations.settle(held, [event])
        return True

    with ThreadPoolExecutor(callers) as pool:
        return list(pool.map(call, range(callers)))


def test_200_concurrent_calls_against_a_balance_for_50(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 50 * PRICE, tenant="beta")
    results = reserve_many(metering, 200)
    assert sum(results) == 50
    after = balance(metering)
    assert after.balance_micros == 0 and after.reserved_micros == 0
    assert metering.outbox.pending() == 50


def test_the_balance_goes_no_lower_than_its_overdraft(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta", overdraft_micros=5 * PRICE)
    assert sum(reserve_many(metering, 40)) == 15
    assert balance(metering).balance_micros == -5 * PRICE


def test_a_postpaid_budget_cap_holds_exactly(metering: Metering) -> None:
    BudgetRepository(metering.database, now=metering.clock).put(
        "beta", hard_cap_micros=20 * PRICE, soft_cap_micros=None
    )
    assert sum(reserve_many(metering, 60)) == 20
    budget = BudgetRepository(metering.database, now=metering.clock).get("beta")
    assert budget is not None
    assert budget.spent_micros == 20 * PRICE and budget.period == "2026-12"


def test_every_level_is_held_or_none(metering: Metering) -> None:
    metering.balances.credit(KEY, "k1", 100 * PRICE, tenant="beta")  # the key could pay
    metering.balances.credit(TENANT, "beta", PRICE // 2, tenant="beta")  # the tenant cannot
    with pytest.raises(PaymentRequired) as refused:
        metering.reservations.reserve("beta", "k1", PRICE, ttl_seconds=30)
    assert refused.value.extra["level"] == "balance:tenant:beta"
    # The key's hold taken before the refusal was rolled back with it.
    assert balance(metering, KEY, "k1").reserved_micros == 0
    assert metering.reservations.held("beta") == []


def test_a_key_allowance_narrows_the_tenant_balance(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 100 * PRICE, tenant="beta")
    metering.balances.credit(KEY, "k1", 3 * PRICE, tenant="beta")
    assert sum(reserve_many(metering, 10, key_id="k1")) == 3
    assert balance(metering).balance_micros == 97 * PRICE
    assert balance(metering, KEY, "k1").balance_micros == 0


def test_a_call_without_balance_or_budget_holds_nothing(metering: Metering) -> None:
    assert metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30) is None
    metering.balances.credit(TENANT, "beta", 0, tenant="beta")
    assert metering.reservations.reserve("beta", None, 0, ttl_seconds=30) is None


def test_settle_charges_the_actual_amount_and_gives_back_the_rest(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta")
    held = metering.reservations.reserve("beta", None, 4 * PRICE, ttl_seconds=30)
    assert held is not None
    assert balance(metering).reserved_micros == 4 * PRICE
    assert balance(metering).available_micros == 6 * PRICE
    event = usage_event("e", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
    metering.reservations.settle(held, [event])
    after = balance(metering)
    assert after.balance_micros == 9 * PRICE and after.reserved_micros == 0
    stored = metering.reservations.get(held.id)
    assert stored is not None
    assert stored.state is ReservationState.SETTLED and stored.settled_micros == PRICE


def test_release_gives_the_hold_back_whole_once(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta")
    held = metering.reservations.reserve("beta", None, 4 * PRICE, ttl_seconds=30)
    assert metering.reservations.release(held) is True
    assert metering.reservations.release(held) is False
    assert balance(metering).reserved_micros == 0
    assert balance(metering).balance_micros == 10 * PRICE


def test_a_crash_between_reserve_and_settle_is_recovered_by_the_sweeper(
    metering: Metering,
) -> None:
    metering.balances.credit(TENANT, "beta", 2 * PRICE, tenant="beta")
    # The process that took these holds dies: nobody settles them.
    for _ in range(2):
        metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30)
    with pytest.raises(PaymentRequired):
        metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30)
    assert metering.reservations.sweep() == 0  # not expired yet
    metering.clock.advance(seconds=31)
    assert metering.reservations.sweep() == 2
    assert balance(metering).reserved_micros == 0
    assert balance(metering).balance_micros == 2 * PRICE  # nothing was charged
    assert metering.reservations.held("beta") == []
    assert metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30) is not None


def test_settling_after_expiry_charges_the_work_once_and_gives_back_nothing_twice(
    metering: Metering,
) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta")
    held = metering.reservations.reserve("beta", None, 3 * PRICE, ttl_seconds=1)
    assert held is not None
    metering.clock.advance(seconds=2)
    assert metering.reservations.sweep() == 1
    event = usage_event("late", price=PriceSnapshot(1, PRICE), reservation_id=held.id)
    metering.reservations.settle(held, [event])
    after = balance(metering)
    assert after.reserved_micros == 0 and after.balance_micros == 9 * PRICE
    assert metering.reservations.get(held.id).state is ReservationState.EXPIRED  # type: ignore[union-attr]


def test_the_budget_rolls_into_a_new_month_on_settlement(metering: Metering) -> None:
    budgets = BudgetRepository(metering.database, now=metering.clock)
    budgets.put("beta", hard_cap_micros=2 * PRICE, soft_cap_micros=None)
    with metering.database.transaction() as session:
        session.execute(
            update(BudgetRow)
            .where(BudgetRow.tenant == "beta")
            .values(spent_micros=2 * PRICE, period="2026-11")
        )
    # Last month's spending does not count against this month's cap.
    held = metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30)
    event = usage_event("e", price=PriceSnapshot(1, PRICE), reservation_id=held.id)  # type: ignore[union-attr]
    metering.reservations.settle(held, [event])
    budget = budgets.get("beta")
    assert budget is not None and (budget.period, budget.spent_micros) == ("2026-12", PRICE)


def test_a_settlement_of_the_month_before_never_takes_the_period_back(
    metering: Metering,
) -> None:
    # Two processes: one read the time just before midnight and commits after the
    # other's settlement in the new month; then the new month goes on.
    budgets = BudgetRepository(metering.database, now=metering.clock)
    budgets.put("beta", hard_cap_micros=100 * PRICE, soft_cap_micros=None)
    late = datetime(2026, 11, 30, 23, 59, 59, 990000, tzinfo=UTC)
    outbox = metering.outbox
    november = Reservations(metering.database, outbox, now=lambda: late)
    december = Reservations(
        metering.database, outbox, now=lambda: late + timedelta(milliseconds=30)
    )
    old = november.reserve("beta", None, PRICE, ttl_seconds=60)
    new = december.reserve("beta", None, 3 * PRICE, ttl_seconds=60)
    december.settle(new, [usage_event("dec", price=PriceSnapshot(1, 3 * PRICE))])
    november.settle(old, [usage_event("nov", price=PriceSnapshot(1, PRICE))])
    again = december.reserve("beta", None, 2 * PRICE, ttl_seconds=60)
    december.settle(again, [usage_event("dec2", price=PriceSnapshot(1, 2 * PRICE))])
    budget = budgets.get("beta")
    assert budget is not None
    assert (budget.period, budget.spent_micros) == ("2026-12", 5 * PRICE)  # 3 + 2
    assert budget_reserved(metering, "beta") == 0  # every hold given back


def test_the_services_hold_and_expire_reservations_on_their_clock(
    tmp_path: Path, database_url: str
) -> None:
    """The composed metering stamps and expires holds by the clock the services were
    built with: a hold outlives any real time until that clock passes its expiry."""
    start = datetime(2031, 1, 1, tzinfo=UTC)
    clock = ManualClock(start)
    platform = make_platform(tmp_path / "home", database_url, clock=clock)
    try:
        metering = platform.services.metering
        metering.balances.credit(TENANT, "beta", PRICE, tenant="beta")
        held = metering.reservations.reserve("beta", None, PRICE, ttl_seconds=30)
        assert held is not None
        assert held.created_at == start and held.expires_at == start + timedelta(seconds=30)
        clock.advance(29)
        assert metering.reservations.sweep() == 0
        clock.advance(2)
        assert metering.reservations.sweep() == 1
        assert metering.balances.get(TENANT, "beta").reserved_micros == 0
    finally:
        platform.close_client()
        platform.services.close()

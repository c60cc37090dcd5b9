"""Group reservation: concurrent priced calls share one transaction; each call is held on
all its levels or refused alone; nothing overspends; holds take their locks in the one
global order; a failed batch is retried call by call; a caller that goes away leaves no
hold behind."""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from typing import Any

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st
from sqlalchemy import event, func, select
from sqlalchemy.exc import OperationalError

from modelport.errors import PaymentRequired
from modelport.metering.balances import lock_order
from modelport.metering.meter import InferenceMeter
from modelport.metering.prices import PriceBook
from modelport.metering.reservations import HoldOutcome, HoldRequest, Reservations
from modelport.metering.reserve_group import GroupReserver
from modelport.metering.types import (
    BalanceScope,
    Reservation,
    ReservationState,
)
from modelport.store.tables import ReservationRow
from modelport.tenancy.limits import BudgetRepository
from tests.metering.conftest import (
    PRICE,
    Metering,
    bound_rows,
    budget_reserved,
    call_info,
    price_predictions,
    recording_levels,
)

TENANT, KEY = BalanceScope.TENANT, BalanceScope.KEY
Result = Reservation | None | BaseException


class Gated(Reservations):
    """Real reservations whose first batch waits for ``gate`` (setting ``entered``), so
    the requests made meanwhile queue into the next one; records every batch's size."""

    def __init__(self, inner: Reservations) -> None:
        self.__dict__.update(inner.__dict__)
        self.gate = threading.Event()
        self.entered = threading.Event()
        self.sizes: list[int] = []

    def reserve_many(self, requests: Sequence[HoldRequest]) -> list[HoldOutcome]:
        self.sizes.append(len(requests))
        if len(self.sizes) == 1:
            self.entered.set()
            self.gate.wait(30)
        return super().reserve_many(requests)


async def until(condition: Callable[[], bool], timeout: float = 30) -> None:
    stop = time.monotonic() + timeout
    while not condition():
        assert time.monotonic() < stop, "timed out"
        await asyncio.sleep(0.005)


async def in_one_batch(
    reserver: GroupReserver, gated: Gated, requests: Sequence[HoldRequest]
) -> list[Result]:
    """Reserve ``requests`` through ``reserver``, all queued while a first request (of a
    tenant without levels) waits at the gate: they form the next batch."""
    first = asyncio.create_task(reserver.reserve("nobody", None, PRICE, ttl_seconds=30))
    await until(gated.entered.is_set)
    tasks = [
        asyncio.create_task(reserver.reserve(r.tenant, r.key_id, r.amount, ttl_seconds=30))
        for r in requests
    ]
    await until(lambda: reserver.pending == len(requests))
    gated.gate.set()
    results = await asyncio.gather(first, *tasks, return_exceptions=True)
    assert results[0] is None
    return results[1:]


def gated(metering: Metering) -> tuple[GroupReserver, Gated]:
    inner = Gated(metering.reservations)
    return GroupReserver(inner), inner


def reserved(metering: Metering, scope: BalanceScope, scope_id: str) -> int:
    return metering.balances.get(scope, scope_id).reserved_micros


def rows(metering: Metering, tenant: str | None = None) -> int:
    query = select(func.count()).select_from(ReservationRow)
    if tenant is not None:
        query = query.where(ReservationRow.tenant == tenant)
    with metering.database.transaction() as session:
        return session.scalar(query)


@pytest.fixture
def priced(metering: Metering) -> Metering:
    return price_predictions(metering, 1_000 * PRICE)


def test_concurrent_calls_share_transactions(priced: Metering) -> None:
    # Prices cached, as in a serving process: open goes straight to the reserver.
    prices = PriceBook(priced.database, default_revenue_share_bps=7000, now=priced.clock)
    meter = InferenceMeter(prices, priced.reservations, now=priced.clock)

    async def main() -> list[Any]:
        await meter.open(call_info())  # caches the prices
        return await asyncio.gather(*(meter.open(call_info(n)) for n in range(120)))

    opened = asyncio.run(main())
    assert 1 <= meter.reserver.batches < 121  # grouped: fewer transactions than calls
    assert all(m.reservation is not None for m in opened)
    assert reserved(priced, TENANT, "beta") == 121 * PRICE
    assert len(priced.reservations.held("beta")) == 121


def test_queued_calls_are_held_in_one_transaction(priced: Metering) -> None:
    gate = Gated(priced.reservations)
    meter = InferenceMeter(
        priced.prices, gate, now=priced.clock, reserver=GroupReserver(gate, max_batch=50)
    )

    async def main() -> list[Any]:
        first = asyncio.create_task(meter.open(call_info(999)))
        await until(gate.entered.is_set)
        tasks = [asyncio.create_task(meter.open(call_info(n))) for n in range(120)]
        await until(lambda: meter.reserver.pending == 120)
        gate.gate.set()
        return await asyncio.gather(first, *tasks)

    opened = asyncio.run(main())
    assert gate.sizes == [1, 50, 50, 20]  # up to max_batch per transaction
    assert meter.reserver.batches == 4
    assert reserved(priced, TENANT, "beta") == 121 * PRICE
    held = {r.id for r in priced.reservations.held("beta")}
    assert held == {m.reservation.id for m in opened}


def test_one_refusal_refuses_only_its_own_call(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 100 * PRICE, tenant="beta")
    metering.balances.credit(KEY, "k1", PRICE // 2, tenant="beta")  # cannot pay a call
    reserver, gate = gated(metering)
    requests = [HoldRequest("beta", "k1" if i == 3 else "k2", PRICE, 30) for i in range(7)]
    results = asyncio.run(in_one_batch(reserver, gate, requests))
    assert gate.sizes == [1, 7]
    refused = results.pop(3)
    assert isinstance(refused, PaymentRequired)
    assert all(isinstance(r, Reservation) for r in results)
    # Exactly the refusal ``reserve`` gives alone.
    with pytest.raises(PaymentRequired) as alone:
        metering.reservations.reserve("beta", "k1", PRICE, ttl_seconds=30)
    assert str(refused) == str(alone.value)
    assert refused.code == alone.value.code == "budget_exceeded"
    assert (
        refused.extra
        == alone.value.extra
        == {
            "level": "balance:key:k1",
            "required_micros": PRICE,
        }
    )
    assert reserved(metering, TENANT, "beta") == 6 * PRICE
    assert reserved(metering, KEY, "k1") == 0
    assert rows(metering, "beta") == 6


def test_a_call_refused_on_its_last_level_holds_none_of_the_others(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 100 * PRICE, tenant="beta")
    # gamma's key and balance could pay; its budget cannot.
    metering.balances.credit(KEY, "g1", 100 * PRICE, tenant="gamma")
    metering.balances.credit(TENANT, "gamma", 100 * PRICE, tenant="gamma")
    BudgetRepository(metering.database, now=metering.clock).put(
        "gamma", hard_cap_micros=PRICE // 2, soft_cap_micros=None
    )
    reserver, gate = gated(metering)
    requests = [
        HoldRequest("beta", None, PRICE, 30),
        HoldRequest("gamma", "g1", PRICE, 30),
        HoldRequest("beta", None, PRICE, 30),
        HoldRequest("gamma", "g1", 2 * PRICE, 30),
    ]
    results = asyncio.run(in_one_batch(reserver, gate, requests))
    assert gate.sizes == [1, 4]
    for refused in (results[1], results[3]):
        assert isinstance(refused, PaymentRequired)
        assert refused.extra["level"] == "budget:gamma"
    assert results[3].extra["required_micros"] == 2 * PRICE  # type: ignore[union-attr]
    assert reserved(metering, KEY, "g1") == 0
    assert reserved(metering, TENANT, "gamma") == 0
    assert budget_reserved(metering, "gamma") == 0
    assert rows(metering, "gamma") == 0
    assert reserved(metering, TENANT, "beta") == 2 * PRICE
    beta = results[0]
    assert isinstance(beta, Reservation) and beta.levels == ("balance:tenant:beta",)


def test_every_level_of_a_call_is_held_by_its_amount(metering: Metering) -> None:
    metering.balances.credit(KEY, "k1", 100 * PRICE, tenant="beta")
    metering.balances.credit(TENANT, "beta", 100 * PRICE, tenant="beta")
    BudgetRepository(metering.database, now=metering.clock).put(
        "beta", hard_cap_micros=100 * PRICE, soft_cap_micros=None
    )
    reserver, gate = gated(metering)
    requests = [HoldRequest("beta", "k1" if i % 2 else None, (i + 1) * PRICE, 30) for i in range(6)]
    results = asyncio.run(in_one_batch(reserver, gate, requests))
    assert all(isinstance(r, Reservation) for r in results)
    assert results[1].levels == ("balance:key:k1", "balance:tenant:beta", "budget:beta")  # type: ignore[union-attr]
    assert results[0].levels == ("balance:tenant:beta", "budget:beta")  # type: ignore[union-attr]
    assert reserved(metering, KEY, "k1") == (2 + 4 + 6) * PRICE
    assert reserved(metering, TENANT, "beta") == 21 * PRICE
    assert budget_reserved(metering, "beta") == 21 * PRICE
    held = {r.id: r.amount_micros for r in metering.reservations.held("beta")}
    assert held == {r.id: r.amount_micros for r in results}  # type: ignore[union-attr]


def test_many_concurrent_calls_never_overspend(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 10 * PRICE, tenant="beta", overdraft_micros=5 * PRICE)
    reserver = GroupReserver(metering.reservations)
    outcomes: list[Result] = []

    def loop_of_callers() -> None:  # several event loops share the reserver
        async def main() -> list[Result]:
            return await asyncio.gather(
                *(reserver.reserve("beta", None, PRICE, ttl_seconds=30) for _ in range(50)),
                return_exceptions=True,
            )

        outcomes.extend(asyncio.run(main()))

    threads = [threading.Thread(target=loop_of_callers) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(outcomes) == 200
    assert sum(isinstance(o, Reservation) for o in outcomes) == 15
    assert sum(isinstance(o, PaymentRequired) for o in outcomes) == 185
    after = metering.balances.get(TENANT, "beta")
    assert after.reserved_micros == 15 * PRICE
    assert after.balance_micros - after.reserved_micros == -after.overdraft_micros


PROPERTY = settings(
    max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)


@PROPERTY
@given(
    amounts=st.lists(st.integers(1, 20), min_size=1, max_size=30),
    balance=st.integers(0, 100),
    overdraft=st.integers(0, 20),
)
def test_one_level_holds_what_one_call_after_the_other_would(
    metering: Metering, amounts: list[int], balance: int, overdraft: int
) -> None:
    tenant = f"t{uuid.uuid4().hex[:12]}"
    metering.balances.credit(TENANT, tenant, balance, tenant=tenant, overdraft_micros=overdraft)
    outcomes = metering.reservations.reserve_many(
        [HoldRequest(tenant, None, a, 30) for a in amounts]
    )
    room, expected = balance + overdraft, []
    for amount in amounts:  # one call after the other
        expected.append(amount <= room)
        room -= amount if amount <= room else 0
    assert [isinstance(o, Reservation) for o in outcomes] == expected
    assert all(isinstance(o, Reservation | PaymentRequired) for o in outcomes)
    taken = sum(a for a, ok in zip(amounts, expected, strict=True) if ok)
    assert reserved(metering, TENANT, tenant) == taken


LEVEL_CHOICES = st.fixed_dictionaries(
    {
        "key": st.none() | st.integers(0, 60),
        "tenant": st.none() | st.integers(0, 60),
        "overdraft": st.integers(0, 10),
        "cap": st.none() | st.integers(0, 60),
    }
)


TENANTS = st.lists(LEVEL_CHOICES, min_size=1, max_size=3)
CALLS = st.lists(st.tuples(st.integers(0, 2), st.booleans(), st.integers(1, 15)), max_size=40)
"""(tenant number, keyed, amount) per call."""


def _levels(metering: Metering, name: str, spec: dict[str, Any]) -> dict[str, int]:
    """Create the levels ``spec`` gives tenant ``name``; each level's limit."""
    limits = {}
    if spec["key"] is not None:
        metering.balances.credit(KEY, f"{name}-k", spec["key"], tenant=name)
        limits[f"balance:key:{name}-k"] = spec["key"]
    if spec["tenant"] is not None:
        metering.balances.credit(
            TENANT, name, spec["tenant"], tenant=name, overdraft_micros=spec["overdraft"]
        )
        limits[f"balance:tenant:{name}"] = spec["tenant"] + spec["overdraft"]
    if spec["cap"] is not None:
        BudgetRepository(metering.database, now=metering.clock).put(
            name, hard_cap_micros=spec["cap"], soft_cap_micros=None
        )
        limits[f"budget:{name}"] = spec["cap"]
    return limits


@PROPERTY
@given(tenants=TENANTS, calls=CALLS)
def test_holds_never_pass_any_level_and_each_call_is_all_or_nothing(
    metering: Metering, tenants: list[dict[str, Any]], calls: list[tuple[int, bool, int]]
) -> None:
    run = uuid.uuid4().hex[:8]
    names = [f"t{i}-{run}" for i in range(len(tenants))]
    limits: dict[str, int] = {}
    for name, spec in zip(names, tenants, strict=True):
        limits.update(_levels(metering, name, spec))
    requests = [
        HoldRequest(names[t % len(names)], f"{names[t % len(names)]}-k" if keyed else None, a, 30)
        for t, keyed, a in calls
    ]
    outcomes = metering.reservations.reserve_many(requests)
    expected_held = dict.fromkeys(limits, 0)
    for request, outcome in zip(requests, outcomes, strict=True):
        mine = [
            level
            for level in limits
            if level in (f"balance:tenant:{request.tenant}", f"budget:{request.tenant}")
            or level == f"balance:key:{request.key_id}"
        ]
        if not mine:
            assert outcome is None
        elif isinstance(outcome, PaymentRequired):
            assert outcome.extra["level"] in mine
        else:
            assert isinstance(outcome, Reservation)
            assert sorted(outcome.levels) == sorted(mine)
            for level in mine:
                expected_held[level] += request.amount
    for level, limit in limits.items():
        kind, _, rest = level.partition(":")
        if kind == "budget":
            held = budget_reserved(metering, rest)
        else:
            scope, _, scope_id = rest.partition(":")
            held = reserved(metering, BalanceScope(scope), scope_id)
        assert held == expected_held[level]  # exactly the held calls' amounts
        assert held <= limit  # never over the level's limit
    assert sum(rows(metering, name) for name in names) == sum(
        isinstance(o, Reservation) for o in outcomes
    )


def test_a_hold_given_back_later_in_the_batch_is_there_for_the_next_call(
    metering: Metering,
) -> None:
    # The tenant balance has room for one of the two calls; the budget refuses the
    # first (8 > 7) after its balance hold. One call after the other, the second
    # (5) then fits both: the batch must hold it too.
    metering.balances.credit(TENANT, "beta", 10, tenant="beta")
    BudgetRepository(metering.database, now=metering.clock).put(
        "beta", hard_cap_micros=7, soft_cap_micros=None
    )
    first, second = metering.reservations.reserve_many(
        [HoldRequest("beta", None, 8, 30), HoldRequest("beta", None, 5, 30)]
    )
    assert isinstance(first, PaymentRequired)
    assert first.extra == {"level": "budget:beta", "required_micros": 8}
    assert isinstance(second, Reservation)
    assert second.levels == ("balance:tenant:beta", "budget:beta")
    assert reserved(metering, TENANT, "beta") == 5
    assert budget_reserved(metering, "beta") == 5
    assert rows(metering, "beta") == 1


def _held(metering: Metering, name: str) -> tuple[int, int, int | None]:
    def balance(scope: BalanceScope, scope_id: str) -> int:
        try:
            return reserved(metering, scope, scope_id)
        except Exception:
            return -1  # no such balance

    return balance(KEY, f"{name}-k"), balance(TENANT, name), budget_reserved(metering, name)


@PROPERTY
@example(  # a hold given back late in the batch (found by this property at 400 examples)
    tenants=[{"key": None, "tenant": 10, "overdraft": 0, "cap": 7}],
    calls=[(0, False, 8), (0, False, 5)],
)
@given(tenants=TENANTS, calls=CALLS)
def test_a_batch_decides_as_one_call_after_the_other_would(
    metering: Metering, tenants: list[dict[str, Any]], calls: list[tuple[int, bool, int]]
) -> None:
    # Two copies of the same levels: one reserved in one batch, one call by call.
    run = uuid.uuid4().hex[:8]
    copies = {side: [f"{side}{i}-{run}" for i in range(len(tenants))] for side in "ab"}
    for names in copies.values():
        for name, spec in zip(names, tenants, strict=True):
            _levels(metering, name, spec)

    def requests(names: list[str]) -> list[HoldRequest]:
        return [
            HoldRequest(names[t % len(names)], f"{names[t % len(names)]}-k" if k else None, a, 30)
            for t, k, a in calls
        ]

    batch = metering.reservations.reserve_many(requests(copies["a"]))
    alone: list[HoldOutcome] = []
    for request in requests(copies["b"]):
        try:
            alone.append(metering.reservations.reserve(*request[:3], ttl_seconds=30))
        except PaymentRequired as refusal:
            alone.append(refusal)

    def shape(outcome: HoldOutcome, names: list[str]) -> Any:
        if isinstance(outcome, PaymentRequired):
            level = outcome.extra["level"]
            for i, name in enumerate(names):  # the copy's names, as tenant numbers
                level = level.replace(name, f"t{i}")
            return ("refused", level, outcome.extra["required_micros"])
        if isinstance(outcome, Reservation):
            return ("held", outcome.amount_micros, len(outcome.levels))
        return outcome

    assert [shape(o, copies["a"]) for o in batch] == [shape(o, copies["b"]) for o in alone]
    for a, b in zip(copies["a"], copies["b"], strict=True):
        assert _held(metering, a) == _held(metering, b)


def test_a_refusing_batch_still_takes_its_locks_in_the_one_global_order(
    metering: Metering,
) -> None:
    tenant_of = {}
    for tenant in ("zeta", "alpha", "mid"):
        metering.balances.credit(KEY, f"{tenant}-k1", 100 * PRICE, tenant=tenant)
        tenant_of[f"balance:key:{tenant}-k1"] = tenant
        metering.balances.credit(TENANT, tenant, 3 * PRICE, tenant=tenant)  # room for 3
        tenant_of[f"balance:tenant:{tenant}"] = tenant
        BudgetRepository(metering.database, now=metering.clock).put(
            tenant,
            hard_cap_micros=2 * PRICE,
            soft_cap_micros=None,  # and for 2 here
        )
        tenant_of[f"budget:{tenant}"] = tenant
    requests = [
        HoldRequest(tenant, key, PRICE, 30)
        for key in ("mid-k1", None, None, None)
        for tenant in ("zeta", "mid", "alpha")
    ]
    requests = [r._replace(key_id=f"{r.tenant}-k1") if r.key_id else r for r in requests]
    outcomes, touched = recording_levels(
        metering, lambda: metering.reservations.reserve_many(requests)
    )
    first_touch = list(dict.fromkeys(touched))
    order = [lock_order(tenant_of[level], level) for level in first_touch]
    assert order == sorted(order)
    assert set(first_touch) == set(tenant_of)
    # Each tenant: four calls, its budget holds two of them (the first two).
    held = [isinstance(o, Reservation) for o in outcomes]
    assert held == [True] * 6 + [False] * 6
    for tenant in ("zeta", "mid", "alpha"):
        assert budget_reserved(metering, tenant) == 2 * PRICE
        assert reserved(metering, TENANT, tenant) == 2 * PRICE


def test_concurrent_refusing_batches_neither_deadlock_nor_overspend(metering: Metering) -> None:
    import random

    tenants = ("zeta", "alpha", "mid")
    for tenant in tenants:
        for key in ("k1", "k2"):
            metering.balances.credit(KEY, f"{tenant}-{key}", 60 * PRICE, tenant=tenant)
        metering.balances.credit(TENANT, tenant, 40 * PRICE, tenant=tenant)
        BudgetRepository(metering.database, now=metering.clock).put(
            tenant, hard_cap_micros=50 * PRICE, soft_cap_micros=None
        )
    outcomes: list[tuple[HoldRequest, HoldOutcome]] = []
    errors: list[BaseException] = []

    def batches(seed: int) -> None:
        rng = random.Random(seed)
        try:
            for _ in range(15):
                requests = [
                    HoldRequest(t, rng.choice((f"{t}-k1", f"{t}-k2", None)), amount, 30)
                    for t, amount in (
                        (rng.choice(tenants), rng.randint(1, 6) * PRICE) for _ in range(8)
                    )
                ]
                outcomes.extend(
                    zip(requests, metering.reservations.reserve_many(requests), strict=True)
                )
        except BaseException as exc:  # a deadlock would surface here
            errors.append(exc)

    threads = [threading.Thread(target=batches, args=(seed,)) for seed in range(6)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)
    assert not errors
    assert len(outcomes) == 6 * 15 * 8
    assert any(isinstance(o, PaymentRequired) for _, o in outcomes)  # refusals did happen
    held: dict[tuple[BalanceScope | str, str], int] = {}
    for request, outcome in outcomes:
        if isinstance(outcome, Reservation):
            for level in [(TENANT, request.tenant), ("budget", request.tenant)] + (
                [(KEY, request.key_id)] if request.key_id else []
            ):
                held[level] = held.get(level, 0) + request.amount
    for tenant in tenants:
        assert reserved(metering, TENANT, tenant) == held.get((TENANT, tenant), 0) <= 40 * PRICE
        assert budget_reserved(metering, tenant) == held.get(("budget", tenant), 0) <= 50 * PRICE
        for key in ("k1", "k2"):
            key_id = f"{tenant}-{key}"
            assert reserved(metering, KEY, key_id) == held.get((KEY, key_id), 0) <= 60 * PRICE


def test_holds_take_their_locks_in_the_one_global_order(metering: Metering) -> None:
    tenant_of = {}
    for tenant in ("zeta", "alpha", "mid"):
        for key in ("k2", "k1"):
            metering.balances.credit(KEY, f"{tenant}-{key}", 100 * PRICE, tenant=tenant)
            tenant_of[f"balance:key:{tenant}-{key}"] = tenant
        metering.balances.credit(TENANT, tenant, 100 * PRICE, tenant=tenant)
        tenant_of[f"balance:tenant:{tenant}"] = tenant
        BudgetRepository(metering.database, now=metering.clock).put(
            tenant, hard_cap_micros=100 * PRICE, soft_cap_micros=None
        )
        tenant_of[f"budget:{tenant}"] = tenant
    requests = [
        HoldRequest(tenant, f"{tenant}-{key}" if key else None, PRICE, 30)
        for key in ("k2", None, "k1")
        for tenant in ("zeta", "mid", "alpha")
    ]
    outcomes, seen = recording_levels(
        metering, lambda: metering.reservations.reserve_many(requests)
    )
    assert all(isinstance(o, Reservation) for o in outcomes)
    order = [lock_order(tenant_of[level], level) for level in seen]
    assert order == sorted(order)
    assert len(set(seen)) == len(tenant_of)  # every level of the batch, each taken once
    assert len(seen) == len(tenant_of)  # each level's calls fit: one UPDATE for their sum


def test_a_failed_batch_is_retried_call_by_call(metering: Metering) -> None:
    for tenant in ("beta", "bad"):
        metering.balances.credit(TENANT, tenant, 100 * PRICE, tenant=tenant)
    reserver, gate = gated(metering)

    def failing(
        conn: Any, clauseelement: Any, multiparams: Any, params: Any, execution_options: Any
    ) -> None:
        # The database fails the insert of any batch holding for "bad", after its holds.
        if str(clauseelement).startswith("INSERT INTO reservations") and any(
            row["tenant"] == "bad" for row in bound_rows(multiparams, params)
        ):
            raise OperationalError("INSERT INTO reservations", {}, Exception("disk I/O error"))

    requests = [HoldRequest("bad" if i == 5 else "beta", None, PRICE, 30) for i in range(8)]
    engine = metering.database.engine
    event.listen(engine, "before_execute", failing)
    try:
        results = asyncio.run(in_one_batch(reserver, gate, requests))
    finally:
        event.remove(engine, "before_execute", failing)
    assert gate.sizes == [1, 8, *[1] * 8]  # the batch failed, then each call alone
    failed = results.pop(5)
    assert isinstance(failed, OperationalError)
    assert all(isinstance(r, Reservation) for r in results)
    assert reserved(metering, TENANT, "beta") == 7 * PRICE
    assert reserved(metering, TENANT, "bad") == 0  # its transactions rolled back
    assert rows(metering, "beta") == 7 and rows(metering, "bad") == 0
    assert reserver.batches == 1 + 7  # the first (alone) and the seven that went through


def test_callers_without_a_level_get_none_and_no_row(metering: Metering) -> None:
    metering.balances.credit(TENANT, "beta", 100 * PRICE, tenant="beta")
    reserver, gate = gated(metering)
    requests = [HoldRequest("nobody" if i % 2 else "beta", None, PRICE, 30) for i in range(6)]
    results = asyncio.run(in_one_batch(reserver, gate, requests))
    assert results[1::2] == [None, None, None]
    assert all(isinstance(r, Reservation) for r in results[::2])
    assert rows(metering, "nobody") == 0
    assert rows(metering) == 3
    # A batch with no level at all holds nothing and inserts nothing.
    outcomes = metering.reservations.reserve_many([HoldRequest("nobody", "k", PRICE, 30)] * 3)
    assert outcomes == [None, None, None] and rows(metering) == 3
    # Free calls do not reach the database.
    assert asyncio.run(reserver.reserve("beta", None, 0, ttl_seconds=30)) is None


def test_a_caller_cancelled_while_waiting_leaves_no_hold(priced: Metering) -> None:
    gate = Gated(priced.reservations)
    meter = InferenceMeter(
        priced.prices, gate, now=priced.clock, reserver=GroupReserver(gate, max_batch=50)
    )

    async def main() -> None:
        task = asyncio.create_task(meter.open(call_info()))
        await until(gate.entered.is_set)  # its hold is being taken
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        gate.gate.set()
        await until(lambda: meter.reserver.released == 1)

    asyncio.run(main())
    assert reserved(priced, TENANT, "beta") == 0
    assert priced.reservations.held("beta") == []
    with priced.database.transaction() as session:
        states = list(session.scalars(select(ReservationRow.state)))
    assert states == [ReservationState.RELEASED.value]


class Handing(GroupReserver):
    """Sets ``handed`` once a batch's answers are handed to their event loops."""

    def __init__(self, reservations: Reservations) -> None:
        super().__init__(reservations)
        self.handed = threading.Event()

    def _hold(self, jobs: list[Any]) -> None:
        super()._hold(jobs)
        self.handed.set()


def test_a_caller_cancelled_after_its_answer_leaves_no_hold(priced: Metering) -> None:
    gate = Gated(priced.reservations)
    reserver = Handing(gate)

    async def main() -> None:
        task = asyncio.create_task(reserver.reserve("beta", None, PRICE, ttl_seconds=30))
        await until(gate.entered.is_set)
        gate.gate.set()
        # Keep this loop busy until the answer is queued to it: the answer then resolves
        # the future, and the task is cancelled before it resumes.
        assert reserver.handed.wait(30)
        await asyncio.sleep(0)  # runs the answer, then this task again
        assert not task.done()
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        await until(lambda: reserver.released == 1)

    asyncio.run(main())
    assert reserved(priced, TENANT, "beta") == 0
    assert priced.reservations.held("beta") == []


def test_the_thread_stops_when_idle_and_starts_again(priced: Metering) -> None:
    reserver = GroupReserver(priced.reservations, idle_seconds=0.05)

    async def main() -> None:
        assert not reserver.running
        assert await reserver.reserve("beta", None, PRICE, ttl_seconds=30) is not None
        await until(lambda: not reserver.running)
        assert await reserver.reserve("beta", None, PRICE, ttl_seconds=30) is not None

    asyncio.run(main())
    assert reserver.batches == 2
    assert reserved(priced, TENANT, "beta") == 2 * PRICE


def test_begin_still_reserves_synchronously(priced: Metering) -> None:
    metered = priced.meter.begin(call_info(key_id=None))
    assert metered.reservation is not None
    assert metered.reservation.levels == ("balance:tenant:beta",)
    assert priced.meter.reserver.batches == 0  # not through the group
    assert reserved(priced, TENANT, "beta") == PRICE


def test_a_free_call_with_its_prices_cached_does_no_io(metering: Metering) -> None:
    prices = PriceBook(metering.database, default_revenue_share_bps=7000, now=metering.clock)
    meter = InferenceMeter(prices, metering.reservations, now=metering.clock)
    statements: list[str] = []

    def count(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        statements.append(statement)

    async def main() -> None:
        await meter.open(call_info())  # reads (and caches) the version's rules: none
        event.listen(metering.database.engine, "before_cursor_execute", count)
        try:
            opened = await meter.open(call_info(1))
        finally:
            event.remove(metering.database.engine, "before_cursor_execute", count)
        assert opened.reservation is None

    asyncio.run(main())
    assert statements == []
    assert meter.reserver.batches == 0 and not meter.reserver.running

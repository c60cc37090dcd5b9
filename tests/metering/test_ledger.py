"""The ledger keeps one event per ``event_id`` whatever the delivery order or count, and
charges reported usage once."""

from __future__ import annotations

import random
import threading
from datetime import datetime, timedelta, timezone
from typing import Any

import pytest
from sqlalchemy import event, text

from modelport.metering.balances import lock_order
from modelport.metering.events import event_to_doc
from modelport.metering.outbox import EncodedEvent
from modelport.metering.types import (
    BalanceScope,
    FailureRule,
    PriceSnapshot,
    Unit,
    UsageEvent,
    UsageStatus,
)
from modelport.tenancy.limits import BudgetRepository
from tests.metering.conftest import Metering, recording_levels, usage_event
from tests.polling import eventually

PRICE = PriceSnapshot(rule_id=None, unit_price_micros=1_000, revenue_share_bps=7000)


def test_duplicate_and_reordered_delivery_records_each_event_once(metering: Metering) -> None:
    events = [usage_event(f"e{i}", quantity=i) for i in range(20)]
    first = metering.ledger.record(events[:12])
    assert first.inserted == tuple(f"e{i}" for i in range(12)) and first.duplicates == ()
    replay = events[5:]
    random.Random(7).shuffle(replay)
    second = metering.ledger.record(replay)
    assert sorted(second.inserted) == sorted(f"e{i}" for i in range(12, 20))
    assert sorted(second.duplicates) == sorted(f"e{i}" for i in range(5, 12))
    assert metering.ledger.count() == 20
    stored = {e.event.event_id: e.event for e in metering.ledger.entries()}
    assert stored == {e.event_id: e for e in events}  # every field round-trips


def test_a_copy_within_one_batch_is_a_duplicate(metering: Metering) -> None:
    event = usage_event("same")
    result = metering.ledger.record([event, event, usage_event("other")])
    assert result.inserted == ("same", "other")
    assert result.duplicates == ("same",)
    assert metering.ledger.count() == 2


def test_entries_after_a_watermark_in_arrival_order(metering: Metering) -> None:
    metering.ledger.record([usage_event("b"), usage_event("a")])
    metering.ledger.record([usage_event("c", tenant="other")])
    entries = metering.ledger.entries()
    assert [e.event.event_id for e in entries] == ["a", "b", "c"]  # sorted within a batch
    watermark = entries[0].seq
    assert [e.event.event_id for e in metering.ledger.entries(after_seq=watermark)] == ["b", "c"]
    assert [e.event.event_id for e in metering.ledger.entries(tenant="other")] == ["c"]
    assert metering.ledger.get("missing") is None
    assert metering.ledger.get("c").event.tenant == "other"  # type: ignore[union-attr]


def test_reported_usage_is_charged_once_however_often_it_is_delivered(
    metering: Metering,
) -> None:
    metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
    events = [usage_event(f"r{i}", price=PRICE, quantity=2) for i in range(3)]
    for _ in range(3):
        metering.ledger.record(events)
    assert metering.balances.get(BalanceScope.TENANT, "beta").balance_micros == 10_000 - 6_000
    stored = metering.ledger.get("r0")
    assert stored is not None
    assert stored.event.amount_micros == 2_000 and stored.event.publisher_micros == 1_400


def test_reported_usage_of_many_callers_in_one_batch_charges_each_its_own_levels(
    metering: Metering,
) -> None:
    credit = metering.balances.credit
    credit(BalanceScope.TENANT, "beta", 100_000, tenant="beta")
    credit(BalanceScope.KEY, "k1", 50_000, tenant="beta")
    credit(BalanceScope.TENANT, "gamma", 100_000, tenant="gamma")
    callers = [("beta", "k1"), ("beta", None), ("gamma", "k9"), ("beta", "k1"), ("gamma", None)]
    events = [
        usage_event(f"m{i}", tenant=tenant, key_id=key, price=PRICE, quantity=i + 1)
        for i, (tenant, key) in enumerate(callers)
    ]
    metering.ledger.record(events)
    balance = metering.balances.get
    # k1's calls (1 and 4 units) are charged to its key and to its tenant; beta's
    # key-less call (2) to the tenant only; gamma's (3 and 5) to gamma, which has no
    # balance for k9.
    assert balance(BalanceScope.KEY, "k1").balance_micros == 50_000 - 5_000
    assert balance(BalanceScope.TENANT, "beta").balance_micros == 100_000 - 7_000
    assert balance(BalanceScope.TENANT, "gamma").balance_micros == 100_000 - 8_000


def test_charges_take_their_locks_in_the_one_global_order(metering: Metering) -> None:
    # Holds and settlements lock levels tenant by tenant; a charge taking them in
    # another order (every key balance first, say) deadlocks against them.
    tenant_of = {}
    for tenant in ("zeta", "alpha"):
        metering.balances.credit(BalanceScope.KEY, f"{tenant}-k", 100_000, tenant=tenant)
        tenant_of[f"balance:key:{tenant}-k"] = tenant
        metering.balances.credit(BalanceScope.TENANT, tenant, 100_000, tenant=tenant)
        tenant_of[f"balance:tenant:{tenant}"] = tenant
        BudgetRepository(metering.database, now=metering.clock).put(
            tenant, hard_cap_micros=None, soft_cap_micros=None
        )
        tenant_of[f"budget:{tenant}"] = tenant
    events = [
        usage_event(f"o{i}", tenant=tenant, key_id=key, price=PRICE)
        for i, (tenant, key) in enumerate(
            [("zeta", "zeta-k"), ("alpha", None), ("alpha", "alpha-k"), ("zeta", None)]
        )
    ]
    _, seen = recording_levels(metering, lambda: metering.ledger.record(events))
    assert sorted(seen) == sorted(tenant_of)  # each level charged once
    order = [lock_order(tenant_of[level], level) for level in seen]
    assert order == sorted(order)


def test_settled_events_are_not_charged_again_by_the_ledger(metering: Metering) -> None:
    metering.balances.credit(BalanceScope.TENANT, "beta", 10_000, tenant="beta")
    event = usage_event("settled", price=PRICE, reservation_id="r" * 32)
    metering.ledger.record([event])
    assert metering.balances.get(BalanceScope.TENANT, "beta").balance_micros == 10_000


def test_concurrent_overlapping_batches_record_each_event_once(metering: Metering) -> None:
    events = [usage_event(f"c{i:03d}", price=PRICE) for i in range(200)]
    metering.balances.credit(BalanceScope.TENANT, "beta", 1_000_000, tenant="beta")
    errors: list[BaseException] = []

    def deliver(seed: int) -> None:
        batch = list(events)
        random.Random(seed).shuffle(batch)
        try:
            for start in range(0, 200, 50):
                metering.ledger.record(batch[start : start + 50])
        except BaseException as exc:  # surfaced below
            errors.append(exc)

    threads = [threading.Thread(target=deliver, args=(seed,)) for seed in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert metering.ledger.count() == 200
    assert metering.balances.get(BalanceScope.TENANT, "beta").balance_micros == 1_000_000 - 200_000


def test_a_large_batch_of_mostly_known_events_is_deduplicated_whole(metering: Metering) -> None:
    """1,200 of 1,500 ids known, in reverse order: only the other 300 are new."""
    events = [usage_event(f"big{i:05d}") for i in range(1_500)]
    assert len(metering.ledger.record(events[:1_200]).inserted) == 1_200
    again = metering.ledger.record(list(reversed(events)))
    assert sorted(again.inserted) == [f"big{i:05d}" for i in range(1_200, 1_500)]
    assert len(again.duplicates) == 1_200
    assert metering.ledger.count() == 1_500


def test_new_events_among_known_ones_are_told_apart_and_charged_once(
    metering: Metering,
) -> None:
    """New ids sorting before, between and after known ones, in one batch: the ledger
    reports and charges exactly the new ones, and stores them in id order."""
    metering.balances.credit(BalanceScope.TENANT, "beta", 100_000, tenant="beta")
    events = {name: usage_event(name, price=PRICE) for name in "abcdefg"}
    assert metering.ledger.record([events[n] for n in "fdb"]).inserted == ("f", "d", "b")
    batch = [events[n] for n in "gfedcba"]
    result = metering.ledger.record(batch)
    assert result.inserted == ("g", "e", "c", "a")
    assert result.duplicates == ("f", "d", "b")
    assert [e.event.event_id for e in metering.ledger.entries()] == list("bdfaceg")
    assert metering.balances.get(BalanceScope.TENANT, "beta").balance_micros == 100_000 - 7_000


def test_a_batch_of_known_events_only_inserts_and_charges_nothing(metering: Metering) -> None:
    metering.balances.credit(BalanceScope.TENANT, "beta", 100_000, tenant="beta")
    events = [usage_event(f"k{i}", price=PRICE) for i in range(5)]
    metering.ledger.record(events)
    again = metering.ledger.record([*events, events[0]])
    assert again.inserted == ()
    assert again.duplicates == (*(e.event_id for e in events), "k0")
    assert metering.ledger.count() == 5
    assert metering.balances.get(BalanceScope.TENANT, "beta").balance_micros == 100_000 - 5_000


def _varied_events() -> list[UsageEvent]:
    fraction = PriceSnapshot(
        rule_id=7,
        unit_price_micros=1_500,
        per_units=1_000,
        failure_rule=FailureRule.FRACTION,
        failure_bps=2_500,
        revenue_share_bps=8_000,
    )
    later = datetime(2026, 11, 30, 23, 59, 59, 999_999, tzinfo=timezone(timedelta(hours=-5)))
    return [
        usage_event("free"),
        usage_event("priced", price=PRICE, quantity=3, key_id="k1", endpoint="fraud"),
        usage_event(
            "failed",
            price=fraction,
            quantity=1_234,
            status=UsageStatus.FAILED,
            unit=Unit.INPUT_TOKEN,
            at=later,
            reservation_id="res-1",
            task="chat",
            compute_ms=1.25,
            wall_ms=3.5,
            request_id="req",
            prediction_id="pred",
        ),
    ]


def test_a_malformed_document_is_refused_and_nothing_of_its_batch_is_stored(
    metering: Metering,
) -> None:
    good, bad = usage_event("good"), usage_event("bad")
    docs = [
        EncodedEvent(good.event_id, good.amount_micros, event_to_doc(good)),
        EncodedEvent(bad.event_id, bad.amount_micros, {**event_to_doc(bad), "unit": "parsec"}),
    ]
    with pytest.raises((KeyError, ValueError)):
        metering.ledger.record(docs)
    assert metering.ledger.count() == 0


def test_documents_and_events_are_recorded_alike_and_deduplicated_together(
    metering: Metering,
) -> None:
    events = _varied_events()
    docs = [EncodedEvent(e.event_id, e.amount_micros, event_to_doc(e)) for e in events]
    first = metering.ledger.record(docs[:2])
    assert first.inserted == ("free", "priced")
    second = metering.ledger.record([events[0], docs[2]])
    assert second.inserted == ("failed",) and second.duplicates == ("free",)
    stored = {e.event.event_id: e.event for e in metering.ledger.entries()}
    assert stored == {e.event_id: e for e in events}  # every field round-trips


def test_on_postgresql_seq_rises_in_commit_order(metering: Metering) -> None:
    """A reader paging by ``seq`` must never see a row while a lower one is still to
    commit (it would page past it for good): writers take turns."""
    if metering.database.dialect != "postgresql":
        pytest.skip("SQLite writers take turns already (BEGIN IMMEDIATE)")
    inserted, resume = threading.Event(), threading.Event()
    first_writer: list[int] = []

    def pause(
        conn: Any, clause: Any, multiparams: Any, params: Any, options: Any, result: Any
    ) -> None:
        if threading.get_ident() in first_writer and str(clause).startswith("INSERT INTO usage"):
            inserted.set()
            resume.wait(60)

    def write(event_id: str, first: bool) -> None:
        if first:
            first_writer.append(threading.get_ident())
        metering.ledger.record([usage_event(event_id)])

    engine = metering.database.engine
    event.listen(engine, "after_execute", pause)
    try:
        slow = threading.Thread(target=write, args=("first", True))
        slow.start()
        assert inserted.wait(10)  # its seq taken, not committed
        fast = threading.Thread(target=write, args=("second", False))
        fast.start()
        assert eventually(lambda: advisory_waiters(metering) == 1)  # waits for its turn
        assert fast.is_alive()
        assert metering.ledger.entries() == []  # nothing a reader could page past
        resume.set()
        slow.join(10)
        fast.join(10)
    finally:
        resume.set()
        event.remove(engine, "after_execute", pause)
    assert [e.event.event_id for e in metering.ledger.entries()] == ["first", "second"]


def advisory_waiters(metering: Metering) -> int:
    """Sessions waiting for an advisory lock now (PostgreSQL)."""
    with metering.database.transaction() as session:
        waiting = session.execute(
            text("SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND NOT granted")
        )
        return int(waiting.scalar_one())

"""Recompute: every stored invoice and statement equals its rebuild from the raw usage
events to the micro-unit, and any tampering shows up as a difference."""

from __future__ import annotations

import random
from itertools import count

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sqlalchemy import text

from modelport.metering.billing.periods import Period
from modelport.metering.billing.service import BillingService
from modelport.metering.billing.types import DifferenceKind
from modelport.metering.ledger import Ledger
from modelport.metering.types import BPS, FailureRule, Unit, UsageStatus
from modelport.store import Database
from tests.metering.billing.conftest import Clock
from tests.metering.billing.factories import DECEMBER, event, price


def seed(ledger: Ledger) -> None:
    ledger.record(
        [
            event("globex", "acme/a", "1"),
            event("globex", "acme/a", "2", snapshot=price(2_500, rule_id=2, share_bps=6_000)),
            event("initech", "acme/a", "1", quantity=3),
            event(
                "acme",
                "globex/b",
                "1",
                unit=Unit.INPUT_TOKEN,
                quantity=4_321,
                snapshot=price(7, rule_id=3, per_units=1_000),
            ),
        ]
    )


def test_stored_documents_equal_their_rebuild(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed(ledger)
    generated = billing.generate("2026-11")
    clock.at = DECEMBER
    billing.finalize_invoice(generated.invoices[0].id, actor="admin")
    report = billing.recompute("2026-11")
    assert report.clean, report.differences
    assert (report.invoices, report.statements, report.events) == (3, 2, 4)


def test_a_tampered_line_or_total_is_reported(
    billing: BillingService, ledger: Ledger, database: Database
) -> None:
    seed(ledger)
    invoices = {i.tenant: i for i in billing.generate("2026-11").invoices}
    globex = invoices["globex"].id
    with database.transaction() as session:
        session.execute(
            text(
                "UPDATE invoice_lines SET amount_micros = amount_micros - 1 "
                f"WHERE invoice_id = {globex} AND line_no = 2"
            )
        )
        session.execute(
            text(f"UPDATE invoices SET total_micros = 1 WHERE id = {invoices['initech'].id}")
        )
        session.execute(text("UPDATE statements SET platform_take_micros = 0"))
    report = billing.recompute("2026-11")
    found = {(d.kind, d.document, d.item) for d in report.differences}
    assert (
        DifferenceKind.CHANGED,
        "invoice:globex",
        "acme/a:2 prediction rule 2 2500/1 at 10000bps",
    ) in found
    changed = next(d for d in report.differences if d.document == "invoice:globex")
    assert changed.stored == "events=1 quantity=1 amount=2499"
    assert changed.recomputed == "events=1 quantity=1 amount=2500"
    assert (DifferenceKind.CHANGED, "invoice:initech", "total") in found
    assert (DifferenceKind.CHANGED, "statement:acme", "platform_take") in found
    assert not report.clean


def test_a_finalised_invoice_altered_behind_the_database_s_back_is_reported(
    billing: BillingService, ledger: Ledger, clock: Clock, database: Database
) -> None:
    seed(ledger)
    invoice = {i.tenant: i for i in billing.generate("2026-11").invoices}["initech"]
    clock.at = DECEMBER
    billing.finalize_invoice(invoice.id, actor="admin")
    with database.transaction() as session:  # someone with DDL rights removes the guard
        if database.dialect == "postgresql":
            session.execute(text("ALTER TABLE invoice_lines DISABLE TRIGGER USER"))
        else:
            session.execute(text("DROP TRIGGER invoice_lines_finalized_no_delete"))
        session.execute(text(f"DELETE FROM invoice_lines WHERE invoice_id = {invoice.id}"))
        if database.dialect == "postgresql":
            session.execute(text("ALTER TABLE invoice_lines ENABLE TRIGGER USER"))
    [difference] = [d for d in billing.recompute("2026-11").differences]
    assert difference.kind is DifferenceKind.MISSING and difference.status == "finalized"
    assert difference.document == "invoice:initech" and difference.stored == ""


def test_documents_never_generated_and_mischarged_events_are_reported(
    billing: BillingService, ledger: Ledger, database: Database
) -> None:
    seed(ledger)
    report = billing.recompute("2026-11")
    kinds = {(d.kind, d.document) for d in report.differences}
    assert (DifferenceKind.MISSING, "invoice:globex") in kinds
    assert (DifferenceKind.MISSING, "statement:acme") in kinds
    billing.generate("2026-11")
    assert billing.recompute("2026-11").clean
    with database.transaction() as session:
        session.execute(text("UPDATE usage_events SET amount_micros = 1 WHERE quantity = 3"))
    [difference] = billing.recompute("2026-11").differences
    assert difference.kind is DifferenceKind.EVENT_CHARGE and difference.item == "amount_micros"
    assert (difference.stored, difference.recomputed) == ("1", "3000")


def test_a_stale_draft_is_a_difference_until_it_is_regenerated(
    billing: BillingService, ledger: Ledger
) -> None:
    seed(ledger)
    billing.generate("2026-11")
    ledger.record([event("globex", "acme/a", "1")])
    report = billing.recompute("2026-11")
    assert {d.status for d in report.differences} == {"draft"}
    billing.generate("2026-11")
    assert billing.recompute("2026-11").clean


_months = count()

prices = st.builds(
    price,
    st.integers(0, 10**7),
    rule_id=st.integers(1, 3),
    per_units=st.sampled_from([1, 1_000]),
    share_bps=st.integers(0, BPS),
    failure_rule=st.sampled_from(list(FailureRule)),
    failure_bps=st.integers(0, BPS),
)
calls = st.lists(
    st.tuples(
        st.sampled_from(["acme", "globex", "initech"]),
        st.sampled_from(["acme/a", "globex/b"]),
        st.sampled_from(["1", "2"]),
        st.integers(0, 10**5),
        st.sampled_from(list(UsageStatus)),
        prices,
    ),
    min_size=1,
    max_size=25,
)


@settings(
    max_examples=15,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(calls=calls, redeliveries=st.lists(st.integers(0, 24), max_size=20), seed=st.integers())
def test_invoices_equal_the_sum_over_unique_events_whatever_the_deliveries(
    billing: BillingService,
    ledger: Ledger,
    clock: Clock,
    calls: list,
    redeliveries: list[int],
    seed: int,
) -> None:
    # Each example bills a month of its own (years ahead), so examples never mix.
    month = next(_months)
    period = Period(2100 + month // 12, month % 12 + 1)
    clock.at = period.start.replace(day=15)
    events = [
        event(tenant, model, version, quantity=q, status=s, snapshot=p, at=clock.at)
        for tenant, model, version, q, s, p in calls
    ]
    deliveries = events + [events[i % len(events)] for i in redeliveries]
    rnd = random.Random(seed)
    rnd.shuffle(deliveries)
    while deliveries:  # batches of random sizes, duplicates within and across them
        size = rnd.randint(1, 5)
        ledger.record(deliveries[:size])
        deliveries = deliveries[size:]

    result = billing.generate(str(period))
    expected: dict[str, int] = {}
    per_line: dict[tuple[str, str, str], tuple[int, int]] = {}
    for e in events:
        amount = e.price.amount(e.quantity, e.status)
        expected[e.tenant] = expected.get(e.tenant, 0) + amount
        quantity, total = per_line.get((e.tenant, e.model, e.version), (0, 0))
        per_line[e.tenant, e.model, e.version] = (quantity + e.quantity, total + amount)
    assert {i.tenant: i.total_micros for i in result.invoices} == expected
    got: dict[tuple[str, str, str], tuple[int, int]] = {}
    for invoice in result.invoices:
        for line in invoice.content.lines:
            quantity, total = got.get((invoice.tenant, line.model, line.version), (0, 0))
            got[invoice.tenant, line.model, line.version] = (
                quantity + line.quantity,
                total + line.amount_micros,
            )
    assert got == per_line
    revenue = sum(s.revenue_micros for s in result.statements)
    assert revenue == sum(expected.values())
    for statement in result.statements:
        assert (
            statement.publisher_share_micros + statement.platform_take_micros
            == statement.revenue_micros
        )
    assert billing.recompute(str(period)).clean

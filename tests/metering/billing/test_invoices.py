"""Invoices: drafts from the ledger, regenerated until finalised; a finalised invoice
never changes (in the service and in the database); corrections are credit notes."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import text
from sqlalchemy.exc import DBAPIError

from modelport.errors import Conflict, InvalidInput, NotFound
from modelport.metering.billing.service import BillingService
from modelport.metering.billing.types import CreditNoteLine, DocumentStatus
from modelport.metering.ledger import Ledger
from modelport.metering.types import BPS, FREE, Unit
from modelport.store import Database
from tests.metering.billing.conftest import Clock
from tests.metering.billing.factories import DECEMBER, NOVEMBER, event, price


def seed_november(ledger: Ledger) -> None:
    ledger.record(
        [
            event("globex", "acme/sentiment", "1", quantity=1),
            event("globex", "acme/sentiment", "1", quantity=1),
            event("globex", "acme/sentiment", "2", snapshot=price(2_500, rule_id=2)),
            event("initech", "acme/sentiment", "1"),
            event(
                "acme",
                "globex/tokens",
                "1",
                unit=Unit.INPUT_TOKEN,
                quantity=5_000,
                snapshot=price(3, rule_id=7, per_units=1_000, share_bps=8_000),
            ),
        ]
    )


def test_generate_builds_an_invoice_per_caller_with_lines_per_version(
    billing: BillingService, ledger: Ledger
) -> None:
    seed_november(ledger)
    result = billing.generate("2026-11")
    invoices = {i.tenant: i for i in result.invoices}
    assert sorted(invoices) == ["acme", "globex", "initech"]
    globex = invoices["globex"]
    assert globex.status is DocumentStatus.DRAFT and globex.period == "2026-11"
    assert [
        (x.version, x.events, x.quantity, x.unit_price_micros, x.amount_micros)
        for x in globex.content.lines
    ] == [("1", 2, 2, 1_000, 2_000), ("2", 1, 1, 2_500, 2_500)]
    assert globex.total_micros == 4_500 and globex.due_micros == 4_500
    assert invoices["acme"].total_micros == 15  # 5,000 tokens at 3 micros per 1,000
    assert billing.get_invoice(globex.id) == globex
    assert billing.list_invoices(tenant="globex") == [globex]
    assert billing.list_invoices(period="2026-10") == []


def test_usage_belongs_to_the_period_the_ledger_recorded_it_in(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed_november(ledger)
    clock.at = DECEMBER
    # Ran on 30 November, delivered on 2 December: December's usage.
    ledger.record([event("globex", at=NOVEMBER + timedelta(days=20), quantity=1)])
    november = {i.tenant: i.total_micros for i in billing.generate("2026-11").invoices}
    december = {i.tenant: i.total_micros for i in billing.generate("2026-12").invoices}
    assert november["globex"] == 4_500 and december == {"globex": 1_000}


def test_drafts_are_regenerated_and_finalised_invoices_are_kept(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed_november(ledger)
    draft = {i.tenant: i for i in billing.generate("2026-11").invoices}["globex"]
    ledger.record([event("globex", "acme/sentiment", "1")])
    again = {i.tenant: i for i in billing.generate("2026-11").invoices}["globex"]
    assert again.id == draft.id and again.total_micros == draft.total_micros + 1_000

    clock.at = DECEMBER
    final = billing.finalize_invoice(draft.id, actor="admin")
    assert final.status is DocumentStatus.FINALIZED and final.finalized_by == "admin"
    assert final.finalized_at == DECEMBER and final.total_micros == 5_500
    result = billing.generate("2026-11")
    assert "invoice:globex" in result.kept
    assert "globex" not in {i.tenant for i in result.invoices}
    assert billing.get_invoice(draft.id) == final


def test_finalising_refreshes_the_draft_from_the_ledger_first(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed_november(ledger)
    draft = {i.tenant: i for i in billing.generate("2026-11").invoices}["initech"]
    ledger.record([event("initech", "acme/sentiment", "1")])  # after the draft was built
    clock.at = DECEMBER
    assert billing.finalize_invoice(draft.id, actor="admin").total_micros == 2_000


def test_an_open_period_cannot_be_finalised(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed_november(ledger)
    invoice = billing.generate("2026-11").invoices[0]
    clock.at = NOVEMBER.replace(day=30, hour=23, minute=59)
    with pytest.raises(Conflict) as caught:
        billing.finalize_invoice(invoice.id, actor="admin")
    assert caught.value.code == "period_open"
    clock.at = NOVEMBER.replace(month=12, day=1, hour=0, minute=30)  # within the grace hour
    with pytest.raises(Conflict):
        billing.finalize_invoice(invoice.id, actor="admin")
    clock.at = NOVEMBER.replace(month=12, day=1, hour=1)
    assert billing.finalize_invoice(invoice.id, actor="admin").status is DocumentStatus.FINALIZED


def test_a_finalised_invoice_cannot_be_finalised_again(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    seed_november(ledger)
    invoice = billing.generate("2026-11").invoices[0]
    clock.at = DECEMBER
    final = billing.finalize_invoice(invoice.id, actor="admin")
    clock.advance(timedelta(days=1))
    with pytest.raises(Conflict) as caught:
        billing.finalize_invoice(invoice.id, actor="someone-else")
    assert caught.value.code == "invoice_finalized"
    assert billing.get_invoice(invoice.id) == final


def test_the_database_refuses_to_change_a_finalised_invoice(
    billing: BillingService, ledger: Ledger, clock: Clock, database: Database
) -> None:
    seed_november(ledger)
    invoices = {i.tenant: i for i in billing.generate("2026-11").invoices}
    clock.at = DECEMBER
    final = billing.finalize_invoice(invoices["globex"].id, actor="admin")
    draft = invoices["initech"]
    for statement in (
        f"UPDATE invoices SET total_micros = 1 WHERE id = {final.id}",
        f"UPDATE invoices SET status = 'draft' WHERE id = {final.id}",
        f"DELETE FROM invoices WHERE id = {final.id}",
        f"UPDATE invoice_lines SET amount_micros = 1 WHERE invoice_id = {final.id}",
        f"DELETE FROM invoice_lines WHERE invoice_id = {final.id}",
        f"INSERT INTO invoice_lines (invoice_id, line_no, model, version, unit, "
        f"unit_price_micros, per_units, charge_bps, events, quantity, amount_micros) "
        f"VALUES ({final.id}, 99, 'acme/x', '1', 'prediction', 1, 1, 10000, 1, 1, 1)",
    ):
        with pytest.raises(DBAPIError, match="immutable"), database.transaction() as session:
            session.execute(text(statement))
    assert billing.get_invoice(final.id) == final
    # A draft's rows are the service's to rebuild.
    with database.transaction() as session:
        session.execute(text(f"UPDATE invoice_lines SET events = 9 WHERE invoice_id = {draft.id}"))


def test_unknown_invoices_are_not_found(billing: BillingService) -> None:
    with pytest.raises(NotFound) as caught:
        billing.get_invoice(12345)
    assert caught.value.code == "invoice_not_found"
    with pytest.raises(NotFound):
        billing.finalize_invoice(12345, actor="admin")
    with pytest.raises(InvalidInput):
        billing.generate("november")


def finalised(billing: BillingService, ledger: Ledger, clock: Clock, tenant: str = "globex"):
    seed_november(ledger)
    invoice = {i.tenant: i for i in billing.generate("2026-11").invoices}[tenant]
    clock.at = DECEMBER
    return billing.finalize_invoice(invoice.id, actor="admin")


def test_credit_notes_correct_a_finalised_invoice(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    invoice = finalised(billing, ledger, clock)  # lines: 2,000 and 2,500
    note = billing.add_credit_note(
        invoice.id,
        reason="version 2 returned errors for an hour",
        lines=[CreditNoteLine("refund of version 2 calls", 2_500, invoice_line=2)],
        actor="admin",
    )
    assert note.invoice_id == invoice.id and note.tenant == "globex" and note.period == "2026-11"
    assert note.total_micros == 2_500 and note.created_by == "admin"
    goodwill = billing.add_credit_note(
        invoice.id, reason="goodwill", lines=[CreditNoteLine("goodwill", 500)], actor="admin"
    )
    assert billing.credit_notes(invoice.id) == [note, goodwill]
    after = billing.get_invoice(invoice.id)
    assert after.credited_micros == 3_000 and after.due_micros == 1_500
    # The invoice itself is unchanged: same lines, same total.
    assert after.content == invoice.content and after.total_micros == invoice.total_micros


def test_credits_never_exceed_the_invoice_or_the_line(
    billing: BillingService, ledger: Ledger, clock: Clock
) -> None:
    invoice = finalised(billing, ledger, clock)
    billing.add_credit_note(
        invoice.id, reason="r", lines=[CreditNoteLine("part", 2_000, 2)], actor="admin"
    )
    with pytest.raises(Conflict) as caught:
        billing.add_credit_note(
            invoice.id, reason="r", lines=[CreditNoteLine("more", 501, 2)], actor="admin"
        )
    assert caught.value.code == "credit_exceeds_invoice"
    assert caught.value.extra == {"available_micros": 500, "line": 2}
    with pytest.raises(Conflict) as caught:
        billing.add_credit_note(
            invoice.id, reason="r", lines=[CreditNoteLine("all", 2_501)], actor="admin"
        )
    assert caught.value.extra == {"available_micros": 2_500}
    with pytest.raises(InvalidInput) as invalid:
        billing.add_credit_note(
            invoice.id, reason="r", lines=[CreditNoteLine("x", 1, 3)], actor="admin"
        )
    assert invalid.value.code == "invalid_credit_line"
    for bad in (
        {"reason": " ", "lines": [CreditNoteLine("x", 1)]},
        {"reason": "r", "lines": []},
        {"reason": "r", "lines": [CreditNoteLine("x", 0)]},
        {"reason": "r", "lines": [CreditNoteLine("", 1)]},
        {"reason": "r", "lines": [CreditNoteLine("x", 1, 0)]},
    ):
        with pytest.raises(InvalidInput):
            billing.add_credit_note(invoice.id, actor="admin", **bad)
    assert billing.get_invoice(invoice.id).credited_micros == 2_000


def test_a_draft_is_regenerated_not_credited(billing: BillingService, ledger: Ledger) -> None:
    seed_november(ledger)
    draft = billing.generate("2026-11").invoices[0]
    with pytest.raises(Conflict) as caught:
        billing.add_credit_note(draft.id, reason="r", lines=[CreditNoteLine("x", 1)], actor="admin")
    assert caught.value.code == "invoice_not_finalized"


def test_credit_notes_are_append_only_in_the_database(
    billing: BillingService, ledger: Ledger, clock: Clock, database: Database
) -> None:
    invoice = finalised(billing, ledger, clock)
    note = billing.add_credit_note(
        invoice.id, reason="r", lines=[CreditNoteLine("x", 10)], actor="admin"
    )
    for statement in (
        f"UPDATE credit_notes SET total_micros = 1 WHERE id = {note.id}",
        f"DELETE FROM credit_note_lines WHERE credit_note_id = {note.id}",
    ):
        with pytest.raises(DBAPIError), database.transaction() as session:
            session.execute(text(statement))
    assert billing.credit_notes(invoice.id) == [note]


def test_failed_calls_bill_by_their_failure_rule(billing: BillingService, ledger: Ledger) -> None:
    from modelport.metering.types import FailureRule, UsageStatus

    snapshot = price(1_000, failure_rule=FailureRule.FRACTION, failure_bps=2_000)
    ledger.record(
        [
            event("globex", snapshot=snapshot),
            event("globex", snapshot=snapshot, status=UsageStatus.FAILED),
        ]
    )
    [invoice] = billing.generate("2026-11").invoices
    assert {(x.charge_bps, x.amount_micros) for x in invoice.content.lines} == {
        (BPS, 1_000),
        (2_000, 200),
    }


def test_a_version_used_free_then_priced_in_one_period_is_invoiced(
    billing: BillingService, ledger: Ledger
) -> None:
    # Free until the publisher set a price mid-month: one line with no price rule and one
    # with; both tenants' invoices are made (before, sorting the lines failed for all).
    ledger.record(
        [
            event("globex", snapshot=FREE),
            event("globex", snapshot=price(1_000, rule_id=3)),
            event("globex", snapshot=FREE),
            event("initech", snapshot=price(1_000, rule_id=3)),
        ]
    )
    invoices = {i.tenant: i for i in billing.generate("2026-11").invoices}
    assert sorted(invoices) == ["globex", "initech"]
    lines = invoices["globex"].content.lines
    assert [(x.price_rule_id, x.events, x.amount_micros) for x in lines] == [
        (None, 2, 0),
        (3, 1, 1_000),
    ]
    assert invoices["globex"].total_micros == 1_000
    assert billing.get_invoice(invoices["globex"].id).content.lines == lines

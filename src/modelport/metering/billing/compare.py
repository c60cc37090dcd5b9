"""Stored invoices and statements against the ones rebuilt from the ledger: every
difference, line by line and total by total (pure)."""

from __future__ import annotations

from collections.abc import Mapping

from modelport.metering.billing.aggregate import charge_of, share_of
from modelport.metering.billing.types import (
    Difference,
    DifferenceKind,
    Invoice,
    InvoiceContent,
    InvoiceLine,
    Statement,
    StatementContent,
    StatementLine,
)
from modelport.metering.types import UsageEvent


def invoice_line_key(line: InvoiceLine) -> str:
    rule = "free" if line.price_rule_id is None else f"rule {line.price_rule_id}"
    return (
        f"{line.model}:{line.version} {line.unit} {rule} "
        f"{line.unit_price_micros}/{line.per_units} at {line.charge_bps}bps"
    )


def statement_line_key(line: StatementLine) -> str:
    return f"{line.model}:{line.version} {line.unit} share {line.revenue_share_bps}bps"


def _invoice_figures(line: InvoiceLine) -> str:
    return f"events={line.events} quantity={line.quantity} amount={line.amount_micros}"


def _statement_figures(line: StatementLine) -> str:
    return (
        f"events={line.events} quantity={line.quantity} revenue={line.revenue_micros} "
        f"share={line.publisher_share_micros}"
    )


def _lines(
    document: str,
    status: str,
    stored: Mapping[str, str],
    rebuilt: Mapping[str, str],
) -> list[Difference]:
    found = []
    for key in sorted(stored.keys() | rebuilt.keys()):
        before, after = stored.get(key), rebuilt.get(key)
        if before == after:
            continue
        kind = (
            DifferenceKind.MISSING
            if before is None
            else DifferenceKind.UNEXPECTED
            if after is None
            else DifferenceKind.CHANGED
        )
        found.append(Difference(kind, document, status, key, before or "", after or ""))
    return found


def _totals(
    document: str, status: str, totals: tuple[tuple[str, int, int], ...]
) -> list[Difference]:
    return [
        Difference(DifferenceKind.CHANGED, document, status, item, str(was), str(now))
        for item, was, now in totals
        if was != now
    ]


def compare_invoices(
    stored: Mapping[str, Invoice], rebuilt: Mapping[str, InvoiceContent]
) -> list[Difference]:
    """Differences between the stored invoices and those rebuilt, both keyed by tenant."""
    found: list[Difference] = []
    for tenant in sorted(stored.keys() | rebuilt.keys()):
        document = f"invoice:{tenant}"
        invoice, content = stored.get(tenant), rebuilt.get(tenant)
        if invoice is None:
            assert content is not None
            summary = f"total={content.total_micros} lines={len(content.lines)}"
            found.append(Difference(DifferenceKind.MISSING, document, "", "invoice", "", summary))
            continue
        status = invoice.status.value
        lines = content.lines if content is not None else ()
        found += _lines(
            document,
            status,
            {invoice_line_key(x): _invoice_figures(x) for x in invoice.content.lines},
            {invoice_line_key(x): _invoice_figures(x) for x in lines},
        )
        expected = sum(line.amount_micros for line in lines)
        found += _totals(document, status, (("total", invoice.total_micros, expected),))
    return found


def compare_statements(
    stored: Mapping[str, Statement], rebuilt: Mapping[str, StatementContent]
) -> list[Difference]:
    """Differences between the stored statements and those rebuilt, keyed by publisher."""
    found: list[Difference] = []
    for publisher in sorted(stored.keys() | rebuilt.keys()):
        document = f"statement:{publisher}"
        statement, content = stored.get(publisher), rebuilt.get(publisher)
        if statement is None:
            assert content is not None
            summary = f"revenue={content.revenue_micros} lines={len(content.lines)}"
            found.append(Difference(DifferenceKind.MISSING, document, "", "statement", "", summary))
            continue
        status = statement.status.value
        lines = content.lines if content is not None else ()
        found += _lines(
            document,
            status,
            {statement_line_key(x): _statement_figures(x) for x in statement.content.lines},
            {statement_line_key(x): _statement_figures(x) for x in lines},
        )
        revenue = sum(line.revenue_micros for line in lines)
        share = sum(line.publisher_share_micros for line in lines)
        found += _totals(
            document,
            status,
            (
                ("revenue", statement.revenue_micros, revenue),
                ("publisher_share", statement.publisher_share_micros, share),
                ("platform_take", statement.platform_take_micros, revenue - share),
            ),
        )
    return found


def check_events(events: list[UsageEvent]) -> list[Difference]:
    """Events whose recorded charge or share is not what their price snapshot gives."""
    found = []
    for event in events:
        document = f"event:{event.event_id}"
        amount, share = charge_of(event), share_of(event)
        if event.amount_micros != amount:
            found.append(
                Difference(
                    DifferenceKind.EVENT_CHARGE,
                    document,
                    "",
                    "amount_micros",
                    str(event.amount_micros),
                    str(amount),
                )
            )
        if event.publisher_micros != share:
            found.append(
                Difference(
                    DifferenceKind.EVENT_CHARGE,
                    document,
                    "",
                    "publisher_micros",
                    str(event.publisher_micros),
                    str(share),
                )
            )
    return found

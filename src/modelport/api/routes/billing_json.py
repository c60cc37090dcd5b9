"""How billing records look on the wire (every amount an integer of micro-units)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from modelport.metering.billing.types import (
    CreditNote,
    Difference,
    GenerateResult,
    Invoice,
    RecomputeReport,
    ReconciliationReport,
    Statement,
)
from modelport.metering.types import Balance, LedgerEntry


def _time(value: datetime | None) -> str | None:
    return value.isoformat() if value is not None else None


def invoice_json(invoice: Invoice, *, lines: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": invoice.id,
        "tenant": invoice.tenant,
        "period": invoice.period,
        "status": invoice.status.value,
        "events": invoice.content.events,
        "total_micros": invoice.total_micros,
        "credited_micros": invoice.credited_micros,
        "due_micros": invoice.due_micros,
        "generated_at": _time(invoice.generated_at),
        "finalized_at": _time(invoice.finalized_at),
        "finalized_by": invoice.finalized_by,
    }
    if lines:
        body["lines"] = [
            {
                "line": number,
                "model": line.model,
                "version": line.version,
                "unit": line.unit,
                "price_rule_id": line.price_rule_id,
                "unit_price_micros": line.unit_price_micros,
                "per_units": line.per_units,
                "charge_bps": line.charge_bps,
                "events": line.events,
                "quantity": line.quantity,
                "amount_micros": line.amount_micros,
            }
            for number, line in enumerate(invoice.content.lines, start=1)
        ]
    return body


def credit_note_json(note: CreditNote) -> dict[str, Any]:
    return {
        "id": note.id,
        "invoice_id": note.invoice_id,
        "tenant": note.tenant,
        "period": note.period,
        "reason": note.reason,
        "total_micros": note.total_micros,
        "created_at": _time(note.created_at),
        "created_by": note.created_by,
        "lines": [
            {
                "line": number,
                "description": line.description,
                "amount_micros": line.amount_micros,
                "invoice_line": line.invoice_line,
            }
            for number, line in enumerate(note.lines, start=1)
        ],
    }


def statement_json(statement: Statement, *, lines: bool = True) -> dict[str, Any]:
    body: dict[str, Any] = {
        "id": statement.id,
        "publisher": statement.publisher,
        "period": statement.period,
        "status": statement.status.value,
        "events": statement.content.events,
        "revenue_micros": statement.revenue_micros,
        "publisher_share_micros": statement.publisher_share_micros,
        "platform_take_micros": statement.platform_take_micros,
        "generated_at": _time(statement.generated_at),
        "finalized_at": _time(statement.finalized_at),
        "finalized_by": statement.finalized_by,
    }
    if lines:
        body["lines"] = [
            {
                "line": number,
                "model": line.model,
                "version": line.version,
                "unit": line.unit,
                "revenue_share_bps": line.revenue_share_bps,
                "events": line.events,
                "quantity": line.quantity,
                "revenue_micros": line.revenue_micros,
                "publisher_share_micros": line.publisher_share_micros,
                "platform_take_micros": line.platform_take_micros,
            }
            for number, line in enumerate(statement.content.lines, start=1)
        ]
    return body


def generate_json(result: GenerateResult) -> dict[str, Any]:
    return {
        "period": result.period,
        "invoices": [invoice_json(i, lines=False) for i in result.invoices],
        "statements": [statement_json(s, lines=False) for s in result.statements],
        "kept": list(result.kept),
    }


def difference_json(difference: Difference) -> dict[str, Any]:
    return {
        "kind": difference.kind.value,
        "document": difference.document,
        "status": difference.status,
        "item": difference.item,
        "stored": difference.stored,
        "recomputed": difference.recomputed,
    }


def recompute_json(report: RecomputeReport) -> dict[str, Any]:
    return {
        "period": report.period,
        "clean": report.clean,
        "invoices": report.invoices,
        "statements": report.statements,
        "events": report.events,
        "differences": [difference_json(d) for d in report.differences],
    }


def reconciliation_json(report: ReconciliationReport) -> dict[str, Any]:
    return {
        "period": report.period,
        "threshold_bps": report.threshold_bps,
        "flagged": report.flagged,
        "tenants": [
            {
                "tenant": row.tenant,
                "reservations": row.reservations,
                "settled": row.settled,
                "released": row.released,
                "expired": row.expired,
                "held": row.held,
                "reserved_micros": row.reserved_micros,
                "settled_micros": row.settled_micros,
                "ledger_micros": row.ledger_micros,
                "variance_micros": row.variance_micros,
                "variance_bps": row.variance_bps,
                "flagged": row.flagged,
            }
            for row in report.rows
        ],
        "findings": [
            {
                "anomaly": f.anomaly.value,
                "reservation_id": f.reservation_id,
                "tenant": f.tenant,
                "reserved_micros": f.reserved_micros,
                "settled_micros": f.settled_micros,
                "ledger_micros": f.ledger_micros,
            }
            for f in report.findings
        ],
    }


def balance_json(balance: Balance) -> dict[str, Any]:
    return {
        "scope": balance.scope.value,
        "scope_id": balance.scope_id,
        "tenant": balance.tenant,
        "balance_micros": balance.balance_micros,
        "reserved_micros": balance.reserved_micros,
        "overdraft_micros": balance.overdraft_micros,
        "available_micros": balance.available_micros,
        "updated_at": _time(balance.updated_at),
    }


USAGE_COLUMNS = (
    "seq",
    "event_id",
    "recorded_at",
    "tenant",
    "key_id",
    "model",
    "version",
    "manifest_digest",
    "endpoint",
    "task",
    "unit",
    "quantity",
    "status",
    "started_at",
    "finished_at",
    "compute_ms",
    "wall_ms",
    "price_rule_id",
    "unit_price_micros",
    "per_units",
    "failure_rule",
    "failure_bps",
    "revenue_share_bps",
    "amount_micros",
    "publisher",
    "publisher_micros",
    "request_id",
    "prediction_id",
    "source",
    "reservation_id",
)
"""The fields of a usage record, in the order of the CSV export's columns."""


def usage_json(entry: LedgerEntry) -> dict[str, Any]:
    event, price = entry.event, entry.event.price
    return {
        "seq": entry.seq,
        "event_id": event.event_id,
        "recorded_at": _time(entry.recorded_at),
        "tenant": event.tenant,
        "key_id": event.key_id,
        "model": event.model,
        "version": event.version,
        "manifest_digest": event.manifest_digest,
        "endpoint": event.endpoint,
        "task": event.task,
        "unit": event.unit.value,
        "quantity": event.quantity,
        "status": event.status.value,
        "started_at": _time(event.started_at),
        "finished_at": _time(event.finished_at),
        "compute_ms": event.compute_ms,
        "wall_ms": event.wall_ms,
        "price_rule_id": price.rule_id,
        "unit_price_micros": price.unit_price_micros,
        "per_units": price.per_units,
        "failure_rule": price.failure_rule.value,
        "failure_bps": price.failure_bps,
        "revenue_share_bps": price.revenue_share_bps,
        "amount_micros": event.amount_micros,
        "publisher": event.publisher,
        "publisher_micros": event.publisher_micros,
        "request_id": event.request_id,
        "prediction_id": event.prediction_id,
        "source": event.source,
        "reservation_id": event.reservation_id,
    }

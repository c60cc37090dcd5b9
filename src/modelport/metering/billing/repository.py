"""Billing's queries: the ledger read by period, invoices, credit notes and statements.

Functions take the caller's session (the service owns the transaction) and return
frozen records; rows never leave this module.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime

from sqlalchemy import Select, delete, func, select
from sqlalchemy.orm import Session

from modelport.errors import NotFound
from modelport.metering.billing.periods import Period
from modelport.metering.billing.types import (
    CreditNote,
    CreditNoteLine,
    DocumentStatus,
    Invoice,
    InvoiceContent,
    InvoiceLine,
    Statement,
    StatementContent,
    StatementLine,
    UsageQuery,
)
from modelport.metering.ledger import entry_of
from modelport.metering.reservations import reservation_of
from modelport.metering.types import LedgerEntry, Reservation, UsageEvent
from modelport.store.base import is_row_id
from modelport.store.tables import (
    CreditNoteLineRow,
    CreditNoteRow,
    InvoiceLineRow,
    InvoiceRow,
    ReservationRow,
    StatementLineRow,
    StatementRow,
    UsageEventRow,
)

STREAM_BATCH = 1000
"""Ledger rows fetched at a time while a period is read."""


def invoice_not_found(invoice_id: int | str) -> NotFound:
    return NotFound(f"invoice {invoice_id} not found", code="invoice_not_found")


def statement_not_found(statement_id: int | str) -> NotFound:
    return NotFound(f"statement {statement_id} not found", code="statement_not_found")


# ---- the ledger, by period -------------------------------------------------------


def usage_query(
    *,
    period: Period | None = None,
    tenant: str | None = None,
    publisher: str | None = None,
    model: str | None = None,
    version: str | None = None,
    after_seq: int = 0,
) -> Select[UsageEventRow]:
    """Ledger rows in arrival order. A period holds the usage the ledger *recorded* in it."""
    query = select(UsageEventRow).where(UsageEventRow.seq > after_seq)
    if period is not None:
        query = query.where(
            UsageEventRow.recorded_at >= period.start, UsageEventRow.recorded_at < period.end
        )
    if tenant is not None:
        query = query.where(UsageEventRow.tenant == tenant)
    if publisher is not None:
        query = query.where(UsageEventRow.publisher == publisher)
    if model is not None:
        query = query.where(UsageEventRow.model == model)
    if version is not None:
        query = query.where(UsageEventRow.version == version)
    return query.order_by(UsageEventRow.seq)


def usage_select(query: UsageQuery) -> Select[UsageEventRow]:
    return usage_query(
        period=Period.parse(query.period) if query.period else None,
        tenant=query.tenant,
        model=query.model,
        version=query.version,
        after_seq=query.after_seq,
    )


def stream_events(session: Session, query: Select[UsageEventRow]) -> Iterator[UsageEvent]:
    """The events of ``query``, fetched in batches (server-side on PostgreSQL)."""
    rows = session.scalars(query.execution_options(yield_per=STREAM_BATCH))
    for row in rows:
        yield entry_of(row).event


def stream_entries(session: Session, query: Select[UsageEventRow]) -> Iterator[LedgerEntry]:
    """The ledger entries of ``query`` (events with when they were recorded), in batches."""
    rows = session.scalars(query.execution_options(yield_per=STREAM_BATCH))
    for row in rows:
        yield entry_of(row)


def usage_page(session: Session, query: Select[UsageEventRow], limit: int) -> list[LedgerEntry]:
    return [entry_of(row) for row in session.scalars(query.limit(limit))]


# ---- invoices --------------------------------------------------------------------


def _invoice_line(row: InvoiceLineRow) -> InvoiceLine:
    return InvoiceLine(
        model=row.model,
        version=row.version,
        unit=row.unit,
        price_rule_id=row.price_rule_id,
        unit_price_micros=row.unit_price_micros,
        per_units=row.per_units,
        charge_bps=row.charge_bps,
        events=row.events,
        quantity=row.quantity,
        amount_micros=row.amount_micros,
    )


def _invoice(session: Session, row: InvoiceRow) -> Invoice:
    lines = session.scalars(
        select(InvoiceLineRow)
        .where(InvoiceLineRow.invoice_id == row.id)
        .order_by(InvoiceLineRow.line_no)
    )
    credited = session.scalar(
        select(func.coalesce(func.sum(CreditNoteRow.total_micros), 0)).where(
            CreditNoteRow.invoice_id == row.id
        )
    )
    return Invoice(
        id=row.id,
        status=DocumentStatus(row.status),
        content=InvoiceContent(row.tenant, row.period, tuple(_invoice_line(x) for x in lines)),
        total_micros=row.total_micros,
        generated_at=row.generated_at,
        finalized_at=row.finalized_at,
        finalized_by=row.finalized_by,
        credited_micros=int(credited or 0),
    )


def invoice_row(session: Session, invoice_id: int, *, lock: bool = False) -> InvoiceRow:
    row = (
        session.get(InvoiceRow, invoice_id, with_for_update=lock) if is_row_id(invoice_id) else None
    )
    if row is None:
        raise invoice_not_found(invoice_id)
    return row


def find_invoice_row(
    session: Session, tenant: str, period: str, *, lock: bool = False
) -> InvoiceRow | None:
    query = select(InvoiceRow).where(InvoiceRow.tenant == tenant, InvoiceRow.period == period)
    return session.scalar(query.with_for_update() if lock else query)


def list_invoices(
    session: Session,
    *,
    tenant: str | None = None,
    period: str | None = None,
    status: DocumentStatus | None = None,
) -> list[Invoice]:
    query = select(InvoiceRow).order_by(InvoiceRow.period.desc(), InvoiceRow.tenant)
    if tenant is not None:
        query = query.where(InvoiceRow.tenant == tenant)
    if period is not None:
        query = query.where(InvoiceRow.period == period)
    if status is not None:
        query = query.where(InvoiceRow.status == status.value)
    return [_invoice(session, row) for row in session.scalars(query)]


def write_invoice(
    session: Session, row: InvoiceRow | None, content: InvoiceContent, now: datetime
) -> InvoiceRow:
    """Store ``content`` as a draft, replacing the draft ``row`` (None: a new invoice)."""
    if row is None:
        row = InvoiceRow(tenant=content.tenant, period=content.period)
        session.add(row)
    else:
        session.execute(delete(InvoiceLineRow).where(InvoiceLineRow.invoice_id == row.id))
    row.status = DocumentStatus.DRAFT.value
    row.total_micros = content.total_micros
    row.events = content.events
    row.generated_at = now
    session.flush()
    session.add_all(
        InvoiceLineRow(
            invoice_id=row.id,
            line_no=number,
            model=line.model,
            version=line.version,
            unit=line.unit,
            price_rule_id=line.price_rule_id,
            unit_price_micros=line.unit_price_micros,
            per_units=line.per_units,
            charge_bps=line.charge_bps,
            events=line.events,
            quantity=line.quantity,
            amount_micros=line.amount_micros,
        )
        for number, line in enumerate(content.lines, start=1)
    )
    session.flush()
    return row


def finalize(session: Session, row: InvoiceRow | StatementRow, actor: str, now: datetime) -> None:
    row.status = DocumentStatus.FINALIZED.value
    row.finalized_at = now
    row.finalized_by = actor
    session.flush()


def invoice_view(session: Session, row: InvoiceRow) -> Invoice:
    return _invoice(session, row)


# ---- credit notes ----------------------------------------------------------------


def _credit_note(session: Session, row: CreditNoteRow, invoice: InvoiceRow) -> CreditNote:
    lines = session.scalars(
        select(CreditNoteLineRow)
        .where(CreditNoteLineRow.credit_note_id == row.id)
        .order_by(CreditNoteLineRow.line_no)
    )
    return CreditNote(
        id=row.id,
        invoice_id=row.invoice_id,
        tenant=invoice.tenant,
        period=invoice.period,
        reason=row.reason,
        lines=tuple(
            CreditNoteLine(
                description=x.description,
                amount_micros=x.amount_micros,
                invoice_line=x.invoice_line,
            )
            for x in lines
        ),
        created_at=row.created_at,
        created_by=row.created_by,
    )


def credit_notes(session: Session, invoice: InvoiceRow) -> list[CreditNote]:
    rows = session.scalars(
        select(CreditNoteRow)
        .where(CreditNoteRow.invoice_id == invoice.id)
        .order_by(CreditNoteRow.id)
    )
    return [_credit_note(session, row, invoice) for row in rows]


def credited_per_line(session: Session, invoice_id: int) -> dict[int | None, int]:
    """What the invoice's credit notes gave back so far, per invoice line (None: none)."""
    rows = session.execute(
        select(CreditNoteLineRow.invoice_line, func.sum(CreditNoteLineRow.amount_micros))
        .join(CreditNoteRow, CreditNoteRow.id == CreditNoteLineRow.credit_note_id)
        .where(CreditNoteRow.invoice_id == invoice_id)
        .group_by(CreditNoteLineRow.invoice_line)
    )
    return {line: int(total) for line, total in rows}


def add_credit_note(
    session: Session,
    invoice: InvoiceRow,
    reason: str,
    lines: tuple[CreditNoteLine, ...],
    actor: str,
    now: datetime,
) -> CreditNote:
    row = CreditNoteRow(
        invoice_id=invoice.id,
        reason=reason,
        total_micros=sum(line.amount_micros for line in lines),
        created_at=now,
        created_by=actor,
    )
    session.add(row)
    session.flush()
    session.add_all(
        CreditNoteLineRow(
            credit_note_id=row.id,
            line_no=number,
            invoice_line=line.invoice_line,
            description=line.description,
            amount_micros=line.amount_micros,
        )
        for number, line in enumerate(lines, start=1)
    )
    session.flush()
    return _credit_note(session, row, invoice)


# ---- statements ------------------------------------------------------------------


def _statement(session: Session, row: StatementRow) -> Statement:
    lines = session.scalars(
        select(StatementLineRow)
        .where(StatementLineRow.statement_id == row.id)
        .order_by(StatementLineRow.line_no)
    )
    return Statement(
        id=row.id,
        status=DocumentStatus(row.status),
        content=StatementContent(
            row.publisher,
            row.period,
            tuple(
                StatementLine(
                    model=x.model,
                    version=x.version,
                    unit=x.unit,
                    revenue_share_bps=x.revenue_share_bps,
                    events=x.events,
                    quantity=x.quantity,
                    revenue_micros=x.revenue_micros,
                    publisher_share_micros=x.publisher_share_micros,
                )
                for x in lines
            ),
        ),
        revenue_micros=row.revenue_micros,
        publisher_share_micros=row.publisher_share_micros,
        platform_take_micros=row.platform_take_micros,
        generated_at=row.generated_at,
        finalized_at=row.finalized_at,
        finalized_by=row.finalized_by,
    )


def statement_row(session: Session, statement_id: int, *, lock: bool = False) -> StatementRow:
    row = (
        session.get(StatementRow, statement_id, with_for_update=lock)
        if is_row_id(statement_id)
        else None
    )
    if row is None:
        raise statement_not_found(statement_id)
    return row


def statement_view(session: Session, row: StatementRow) -> Statement:
    return _statement(session, row)


def find_statement_row(
    session: Session, publisher: str, period: str, *, lock: bool = False
) -> StatementRow | None:
    query = select(StatementRow).where(
        StatementRow.publisher == publisher, StatementRow.period == period
    )
    return session.scalar(query.with_for_update() if lock else query)


def list_statements(
    session: Session, *, publisher: str | None = None, period: str | None = None
) -> list[Statement]:
    query = select(StatementRow).order_by(StatementRow.period.desc(), StatementRow.publisher)
    if publisher is not None:
        query = query.where(StatementRow.publisher == publisher)
    if period is not None:
        query = query.where(StatementRow.period == period)
    return [_statement(session, row) for row in session.scalars(query)]


def write_statement(
    session: Session, row: StatementRow | None, content: StatementContent, now: datetime
) -> StatementRow:
    """Store ``content`` as a draft, replacing the draft ``row`` (None: a new statement)."""
    if row is None:
        row = StatementRow(publisher=content.publisher, period=content.period)
        session.add(row)
    else:
        session.execute(delete(StatementLineRow).where(StatementLineRow.statement_id == row.id))
    row.status = DocumentStatus.DRAFT.value
    row.events = content.events
    row.revenue_micros = content.revenue_micros
    row.publisher_share_micros = content.publisher_share_micros
    row.platform_take_micros = content.platform_take_micros
    row.generated_at = now
    session.flush()
    session.add_all(
        StatementLineRow(
            statement_id=row.id,
            line_no=number,
            model=line.model,
            version=line.version,
            unit=line.unit,
            revenue_share_bps=line.revenue_share_bps,
            events=line.events,
            quantity=line.quantity,
            revenue_micros=line.revenue_micros,
            publisher_share_micros=line.publisher_share_micros,
        )
        for number, line in enumerate(content.lines, start=1)
    )
    session.flush()
    return row


# ---- reservations ----------------------------------------------------------------


def reservations_with_charges(
    session: Session, period: Period
) -> Iterator[tuple[Reservation, int]]:
    """Reservations taken in ``period``, each with the ledger's charges against it."""
    charged = (
        select(
            UsageEventRow.reservation_id.label("reservation_id"),
            func.sum(UsageEventRow.amount_micros).label("micros"),
        )
        .where(
            UsageEventRow.reservation_id.is_not(None),
            # settled after it was taken: nothing before the period can be its charge
            UsageEventRow.recorded_at >= period.start,
        )
        .group_by(UsageEventRow.reservation_id)
        .subquery()
    )
    query = (
        select(ReservationRow, func.coalesce(charged.c.micros, 0))
        .outerjoin(charged, charged.c.reservation_id == ReservationRow.id)
        .where(ReservationRow.created_at >= period.start, ReservationRow.created_at < period.end)
        .order_by(ReservationRow.tenant, ReservationRow.id)
        .execution_options(yield_per=STREAM_BATCH)
    )
    for row, micros in session.execute(query):
        yield reservation_of(row), int(micros)

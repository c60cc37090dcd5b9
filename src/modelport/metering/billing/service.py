"""The billing service: invoices, credit notes, publisher statements, recompute,
reconciliation, usage reads and prepaid balance credits.

Periods are calendar months in UTC, and usage belongs to the period in which the
ledger *recorded* it (``recorded_at``), not the one in which the call ran: once a
period is over, nothing can join it, so a finalised invoice stays equal to its
rebuild from the ledger. Usage delivered late (an outbox drained after a crash)
is billed in the period it arrives in.

Documents are built by ``aggregate.PeriodBook`` and nothing else, so generating,
finalising and recomputing agree by construction; recompute compares what is
stored with a fresh build and reports every difference.

Drafts are rebuilt on demand until finalised. A finalised invoice or statement is
immutable: this service has no path that changes one (finalising a finalised one,
regenerating it or re-finalising it is refused or skipped), and the database
refuses updates and deletes of finalised rows too. Corrections are credit notes.

Authorization is the caller's (``modelport.tenancy.policy``); every method opens
its own transaction.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator, Sequence
from datetime import datetime, timedelta

from sqlalchemy.exc import IntegrityError

from modelport.errors import Conflict, InvalidInput
from modelport.logs import log_event
from modelport.metering.balances import BalanceRepository
from modelport.metering.billing import repository as repo
from modelport.metering.billing.aggregate import PeriodBook
from modelport.metering.billing.compare import (
    check_events,
    compare_invoices,
    compare_statements,
)
from modelport.metering.billing.periods import Period
from modelport.metering.billing.reconcile import reconcile
from modelport.metering.billing.revenue import revenue_by_day
from modelport.metering.billing.types import (
    CreditNote,
    CreditNoteLine,
    Difference,
    DocumentStatus,
    GenerateResult,
    Invoice,
    RecomputeReport,
    ReconciliationReport,
    RevenueDay,
    Statement,
    UsageQuery,
)
from modelport.metering.types import BPS, Balance, BalanceScope, LedgerEntry
from modelport.store import Database
from modelport.store.base import utcnow

log = logging.getLogger(__name__)

FINALIZE_AFTER = timedelta(hours=1)
"""How long after a period ends its documents may be finalised: usage recorded just
before the end may still be committing, and gateways' clocks differ a little."""
MAX_CREDIT_LINES = 100
MAX_REASON = 2000
MAX_DESCRIPTION = 512
MAX_CREDIT_MICROS = 10**15
"""A billion currency units: a bound on one balance credit, far from 64-bit overflow."""


class BillingService:
    def __init__(
        self,
        database: Database,
        balances: BalanceRepository,
        *,
        now: Callable[[], datetime] = utcnow,
        finalize_after: timedelta = FINALIZE_AFTER,
    ) -> None:
        self.database = database
        self.balances = balances
        self._now = now
        self._finalize_after = finalize_after

    # ---- generating and finalising

    def generate(self, period: str) -> GenerateResult:
        """Build every invoice and statement of ``period`` from the ledger and store them
        as drafts; finalised ones are left as they are."""
        parsed = Period.parse(period)
        for attempt in range(2):
            try:
                return self._generate(parsed)
            except IntegrityError:
                if attempt:  # a concurrent generate created the same drafts first
                    raise
        raise AssertionError("unreachable")

    def _generate(self, period: Period) -> GenerateResult:
        now = self._now()
        with self.database.transaction() as session:
            book = PeriodBook(str(period))
            for event in repo.stream_events(session, repo.usage_query(period=period)):
                book.add(event)
            invoices, statements, kept = [], [], []
            for tenant, content in book.invoices().items():
                row = repo.find_invoice_row(session, tenant, str(period), lock=True)
                if row is not None and row.status == DocumentStatus.FINALIZED.value:
                    kept.append(f"invoice:{tenant}")
                    continue
                row = repo.write_invoice(session, row, content, now)
                invoices.append(repo.invoice_view(session, row))
            for publisher, statement in book.statements().items():
                srow = repo.find_statement_row(session, publisher, str(period), lock=True)
                if srow is not None and srow.status == DocumentStatus.FINALIZED.value:
                    kept.append(f"statement:{publisher}")
                    continue
                srow = repo.write_statement(session, srow, statement, now)
                statements.append(repo.statement_view(session, srow))
            return GenerateResult(str(period), tuple(invoices), tuple(statements), tuple(kept))

    def finalize_invoice(self, invoice_id: int, *, actor: str) -> Invoice:
        """Rebuild the draft from the ledger one last time and make it final (409
        ``invoice_finalized`` if it is; 409 ``period_open`` before the period may close)."""
        now = self._now()
        with self.database.transaction() as session:
            row = repo.invoice_row(session, invoice_id, lock=True)
            if row.status == DocumentStatus.FINALIZED.value:
                raise Conflict(
                    f"invoice {invoice_id} is finalized; correct it with a credit note",
                    code="invoice_finalized",
                )
            period = Period.parse(row.period)
            self._require_closed(period, now)
            book = PeriodBook(row.period)
            query = repo.usage_query(period=period, tenant=row.tenant)
            for event in repo.stream_events(session, query):
                book.add(event)
            content = book.invoices().get(row.tenant)
            if content is not None:
                repo.write_invoice(session, row, content, now)
            repo.finalize(session, row, actor, now)
            return repo.invoice_view(session, row)

    def finalize_statement(self, statement_id: int, *, actor: str) -> Statement:
        """The same for a publisher statement (409 ``statement_finalized``, ``period_open``)."""
        now = self._now()
        with self.database.transaction() as session:
            row = repo.statement_row(session, statement_id, lock=True)
            if row.status == DocumentStatus.FINALIZED.value:
                raise Conflict(f"statement {statement_id} is finalized", code="statement_finalized")
            period = Period.parse(row.period)
            self._require_closed(period, now)
            book = PeriodBook(row.period)
            query = repo.usage_query(period=period, publisher=row.publisher)
            for event in repo.stream_events(session, query):
                book.add(event)
            content = book.statements().get(row.publisher)
            if content is not None:
                repo.write_statement(session, row, content, now)
            repo.finalize(session, row, actor, now)
            return repo.statement_view(session, row)

    def _require_closed(self, period: Period, now: datetime) -> None:
        closes = period.end + self._finalize_after
        if now < closes:
            raise Conflict(
                f"period {period} is still open: its documents may be finalized from "
                f"{closes.isoformat()}",
                code="period_open",
                closes_at=closes.isoformat(),
            )

    # ---- reading

    def get_invoice(self, invoice_id: int) -> Invoice:
        with self.database.transaction() as session:
            return repo.invoice_view(session, repo.invoice_row(session, invoice_id))

    def list_invoices(
        self,
        *,
        tenant: str | None = None,
        period: str | None = None,
        status: DocumentStatus | None = None,
    ) -> list[Invoice]:
        if period is not None:
            period = str(Period.parse(period))
        with self.database.transaction() as session:
            return repo.list_invoices(session, tenant=tenant, period=period, status=status)

    def get_statement(self, statement_id: int) -> Statement:
        with self.database.transaction() as session:
            return repo.statement_view(session, repo.statement_row(session, statement_id))

    def list_statements(
        self, *, publisher: str | None = None, period: str | None = None
    ) -> list[Statement]:
        if period is not None:
            period = str(Period.parse(period))
        with self.database.transaction() as session:
            return repo.list_statements(session, publisher=publisher, period=period)

    def revenue(
        self,
        publisher: str | None,
        period: str,
        *,
        model: str | None = None,
        version: str | None = None,
    ) -> list[RevenueDay]:
        """Calls and revenue of ``publisher``'s models (None: every publisher's) in
        ``period``, by day, model and version: what the period's statement will say, as
        the ledger holds it now."""
        parsed = Period.parse(period)
        query = repo.usage_query(period=parsed, publisher=publisher, model=model, version=version)
        with self.database.transaction() as session:
            return revenue_by_day(repo.stream_entries(session, query))

    # ---- credit notes

    def credit_notes(self, invoice_id: int) -> list[CreditNote]:
        with self.database.transaction() as session:
            return repo.credit_notes(session, repo.invoice_row(session, invoice_id))

    def add_credit_note(
        self,
        invoice_id: int,
        *,
        reason: str,
        lines: Sequence[CreditNoteLine],
        actor: str,
    ) -> CreditNote:
        """Give money back on a finalised invoice (409 ``invoice_not_finalized`` on a
        draft: regenerate it instead). Credits never exceed the invoice's total, nor a
        line's amount for lines that name one (409 ``credit_exceeds_invoice``)."""
        checked = _check_credit(reason, lines)
        now = self._now()
        with self.database.transaction() as session:
            row = repo.invoice_row(session, invoice_id, lock=True)
            if row.status != DocumentStatus.FINALIZED.value:
                raise Conflict(
                    f"invoice {invoice_id} is a draft: regenerate it instead of crediting it",
                    code="invoice_not_finalized",
                )
            invoice = repo.invoice_view(session, row)
            credited = repo.credited_per_line(session, invoice_id)
            total = sum(line.amount_micros for line in checked)
            available = invoice.total_micros - sum(credited.values())
            if total > available:
                raise Conflict(
                    f"credit of {total} micro-units exceeds the {available} left on "
                    f"invoice {invoice_id}",
                    code="credit_exceeds_invoice",
                    available_micros=available,
                )
            for number in {x.invoice_line for x in checked if x.invoice_line is not None}:
                if number > len(invoice.content.lines):
                    raise InvalidInput(
                        f"invoice {invoice_id} has no line {number}",
                        code="invalid_credit_line",
                    )
                line_total = sum(x.amount_micros for x in checked if x.invoice_line == number)
                left = invoice.content.lines[number - 1].amount_micros - credited.get(number, 0)
                if line_total > left:
                    raise Conflict(
                        f"credit of {line_total} micro-units exceeds the {left} left on "
                        f"line {number} of invoice {invoice_id}",
                        code="credit_exceeds_invoice",
                        available_micros=left,
                        line=number,
                    )
            return repo.add_credit_note(session, row, reason.strip(), tuple(checked), actor, now)

    # ---- recompute and reconciliation

    def recompute(self, period: str) -> RecomputeReport:
        """Rebuild every invoice and statement of ``period`` from the raw ledger (each
        charge from its event's price snapshot) and list every difference from what is
        stored, including ledger events whose recorded charge disagrees with their
        snapshot. Reads only."""
        parsed = Period.parse(period)
        with self.database.transaction() as session:
            book = PeriodBook(str(parsed))
            differences: list[Difference] = []
            for event in repo.stream_events(session, repo.usage_query(period=parsed)):
                book.add(event)
                differences += check_events([event])
            stored_invoices = {i.tenant: i for i in repo.list_invoices(session, period=str(parsed))}
            stored_statements = {
                s.publisher: s for s in repo.list_statements(session, period=str(parsed))
            }
        differences += compare_invoices(stored_invoices, book.invoices())
        differences += compare_statements(stored_statements, book.statements())
        return RecomputeReport(
            period=str(parsed),
            invoices=len(stored_invoices),
            statements=len(stored_statements),
            events=book.events,
            differences=tuple(differences),
        )

    def reconcile(self, period: str, *, threshold_bps: int = 1_000) -> ReconciliationReport:
        """Reservations taken in ``period`` against what they settled and what the ledger
        charged (see ``.reconcile``)."""
        if not 0 <= threshold_bps <= 100 * BPS:
            raise InvalidInput(
                "the threshold is between 0 and 1,000,000 basis points",
                code="invalid_threshold",
                field="threshold_bps",
            )
        parsed = Period.parse(period)
        now = self._now()
        with self.database.transaction() as session:
            report = reconcile(
                str(parsed),
                repo.reservations_with_charges(session, parsed),
                threshold_bps=threshold_bps,
                now=now,
            )
        log_event(
            log,
            "billing.reconciled",
            level=logging.WARNING if report.flagged else logging.INFO,
            period=report.period,
            rows=len(report.rows),
            findings=len(report.findings),
            flagged=report.flagged,
        )
        return report

    # ---- usage

    def usage(self, query: UsageQuery, *, limit: int) -> list[LedgerEntry]:
        """One page of the ledger in arrival order."""
        with self.database.transaction() as session:
            return repo.usage_page(session, repo.usage_select(query), limit)

    def iter_usage(self, query: UsageQuery, *, batch: int = 1000) -> Iterator[LedgerEntry]:
        """Every matching event, a short transaction per ``batch`` (for streaming out)."""
        after = query.after_seq
        while True:
            page = self.usage(
                UsageQuery(query.tenant, query.model, query.version, query.period, after),
                limit=batch,
            )
            yield from page
            if len(page) < batch:
                return
            after = page[-1].seq

    # ---- prepaid balances

    def balances_of(self, tenant: str) -> list[Balance]:
        """The tenant's prepaid balance and its keys' allowances (empty: none opened)."""
        return self.balances.list(tenant)

    def credit_balance(self, tenant: str, micros: int) -> Balance:
        """Add ``micros`` (positive) to the tenant's prepaid balance, opening it at 0."""
        if not 0 < micros <= MAX_CREDIT_MICROS:
            raise InvalidInput(
                f"a credit is between 1 and {MAX_CREDIT_MICROS} micro-units",
                code="invalid_amount",
                field="amount_micros",
            )
        return self.balances.credit(BalanceScope.TENANT, tenant, micros, tenant=tenant)


def _check_credit(reason: str, lines: Sequence[CreditNoteLine]) -> list[CreditNoteLine]:
    if not reason.strip() or len(reason) > MAX_REASON:
        raise InvalidInput(
            f"a credit note needs a reason (at most {MAX_REASON} characters)",
            code="invalid_credit_note",
            field="reason",
        )
    if not 1 <= len(lines) <= MAX_CREDIT_LINES:
        raise InvalidInput(
            f"a credit note has 1 to {MAX_CREDIT_LINES} lines",
            code="invalid_credit_note",
            field="lines",
        )
    checked = []
    for line in lines:
        if line.amount_micros <= 0:
            raise InvalidInput(
                "every credit line gives back a positive amount",
                code="invalid_credit_note",
                field="amount_micros",
            )
        if not line.description.strip() or len(line.description) > MAX_DESCRIPTION:
            raise InvalidInput(
                f"every credit line has a description (at most {MAX_DESCRIPTION} characters)",
                code="invalid_credit_note",
                field="description",
            )
        if line.invoice_line is not None and line.invoice_line < 1:
            raise InvalidInput(
                "invoice lines are numbered from 1",
                code="invalid_credit_line",
                field="invoice_line",
            )
        checked.append(
            CreditNoteLine(line.description.strip(), line.amount_micros, line.invoice_line)
        )
    return checked

"""Plain billing records (frozen, no I/O): invoices and their lines, credit notes,
publisher statements, recompute differences and the reconciliation report.

Every amount is an integer in micro-units of the currency; nothing here is a float.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from functools import total_ordering


class DocumentStatus(StrEnum):
    """A draft is rebuilt from the ledger on demand; a finalised document never changes."""

    DRAFT = "draft"
    FINALIZED = "finalized"


@total_ordering
@dataclass(frozen=True)
class InvoiceLine:
    """Usage of one model version and unit at one price and charge rate.

    ``amount_micros`` is the sum of the events' own charges, each rounded down to the
    micro-unit on its own, so it may be less than ``quantity * unit price`` by less
    than one micro-unit per event.
    """

    model: str
    """``owner/name``"""
    version: str
    unit: str
    price_rule_id: int | None
    """None: the version had no price for the unit (free)."""
    unit_price_micros: int
    per_units: int
    """``unit_price_micros`` is the price of this many units."""
    charge_bps: int
    """Basis points of the full price charged: 10,000, or a failure rule's fraction."""
    events: int
    quantity: int
    amount_micros: int

    def sort_key(self) -> tuple[str, str, str, bool, int, int, int, int, int, int, int]:
        """The fields in order, a free line (no price rule) before the priced ones: a
        version used free and then priced in one period has both, and ``None`` does not
        compare with an integer."""
        rule = self.price_rule_id
        return (
            self.model,
            self.version,
            self.unit,
            rule is not None,
            rule or 0,
            self.unit_price_micros,
            self.per_units,
            self.charge_bps,
            self.events,
            self.quantity,
            self.amount_micros,
        )

    def __lt__(self, other: object) -> bool:
        if not isinstance(other, InvoiceLine):
            return NotImplemented
        return self.sort_key() < other.sort_key()


@dataclass(frozen=True)
class InvoiceContent:
    """What an invoice says, as built from the ledger (or read back from the store)."""

    tenant: str
    period: str
    lines: tuple[InvoiceLine, ...]

    @property
    def total_micros(self) -> int:
        return sum(line.amount_micros for line in self.lines)

    @property
    def events(self) -> int:
        return sum(line.events for line in self.lines)


@dataclass(frozen=True)
class CreditNoteLine:
    description: str
    amount_micros: int
    invoice_line: int | None = None
    """The 1-based number of the invoice line this corrects, if one."""


@dataclass(frozen=True)
class CreditNote:
    """A correction of a finalised invoice: money given back, with its own lines."""

    id: int
    invoice_id: int
    tenant: str
    period: str
    reason: str
    lines: tuple[CreditNoteLine, ...]
    created_at: datetime
    created_by: str

    @property
    def total_micros(self) -> int:
        return sum(line.amount_micros for line in self.lines)


@dataclass(frozen=True)
class Invoice:
    """A tenant's charges for one period. Its lines are numbered from 1 in order."""

    id: int
    status: DocumentStatus
    content: InvoiceContent
    total_micros: int
    """The total as stored (recompute checks it against the lines and the ledger)."""
    generated_at: datetime
    finalized_at: datetime | None
    finalized_by: str | None
    credited_micros: int
    """The total of the invoice's credit notes."""

    @property
    def tenant(self) -> str:
        return self.content.tenant

    @property
    def period(self) -> str:
        return self.content.period

    @property
    def due_micros(self) -> int:
        return self.total_micros - self.credited_micros


@dataclass(frozen=True, order=True)
class StatementLine:
    """Revenue of one model version and unit at one revenue share.

    ``publisher_share_micros`` is the sum of the events' shares, each rounded down on
    its own; ``platform_take_micros`` is the rest, so the two always add up to
    ``revenue_micros`` exactly.
    """

    model: str
    version: str
    unit: str
    revenue_share_bps: int
    events: int
    quantity: int
    revenue_micros: int
    publisher_share_micros: int

    @property
    def platform_take_micros(self) -> int:
        return self.revenue_micros - self.publisher_share_micros


@dataclass(frozen=True)
class StatementContent:
    publisher: str
    """The tenant owning the models' namespace."""
    period: str
    lines: tuple[StatementLine, ...]

    @property
    def events(self) -> int:
        return sum(line.events for line in self.lines)

    @property
    def revenue_micros(self) -> int:
        return sum(line.revenue_micros for line in self.lines)

    @property
    def publisher_share_micros(self) -> int:
        return sum(line.publisher_share_micros for line in self.lines)

    @property
    def platform_take_micros(self) -> int:
        return sum(line.platform_take_micros for line in self.lines)


@dataclass(frozen=True)
class Statement:
    id: int
    status: DocumentStatus
    content: StatementContent
    revenue_micros: int
    publisher_share_micros: int
    platform_take_micros: int
    """The totals as stored (recompute checks them against the lines and the ledger)."""
    generated_at: datetime
    finalized_at: datetime | None
    finalized_by: str | None

    @property
    def publisher(self) -> str:
        return self.content.publisher

    @property
    def period(self) -> str:
        return self.content.period


@dataclass(frozen=True)
class GenerateResult:
    """What generating a period did: drafts written, finalised documents left alone."""

    period: str
    invoices: tuple[Invoice, ...]
    statements: tuple[Statement, ...]
    kept: tuple[str, ...]
    """Finalised documents not rebuilt (``invoice:<tenant>``, ``statement:<publisher>``)."""


class DifferenceKind(StrEnum):
    MISSING = "missing"
    """The ledger has usage the store holds no document for."""
    UNEXPECTED = "unexpected"
    """A stored document (or line) the ledger does not support."""
    CHANGED = "changed"
    """A stored line or total differs from the rebuilt one."""
    EVENT_CHARGE = "event_charge"
    """A ledger event's recorded charge differs from its price snapshot's arithmetic."""


@dataclass(frozen=True)
class Difference:
    kind: DifferenceKind
    document: str
    """``invoice:<tenant>``, ``statement:<publisher>`` or ``event:<event_id>``."""
    status: str
    """The stored document's status ('' when there is none)."""
    item: str
    """What differs: a line's key, ``total``, or the field of an event."""
    stored: str
    recomputed: str


@dataclass(frozen=True)
class RecomputeReport:
    period: str
    invoices: int
    statements: int
    events: int
    differences: tuple[Difference, ...]

    @property
    def clean(self) -> bool:
        return not self.differences


class Anomaly(StrEnum):
    """Something wrong with one reservation (holding more than was used is not: the
    per-tenant variance against the threshold tells how much more)."""

    UNDER_RESERVED = "under_reserved"
    """Settled more than was reserved: the hold was not an upper bound."""
    LEDGER_MISMATCH = "ledger_mismatch"
    """The settled amount differs from the ledger's charges for the reservation."""
    STUCK = "stuck"
    """Still held after it expired: the sweeper has not given it back."""


@dataclass(frozen=True)
class ReconciliationRow:
    """Reservations one tenant took in the period against what they settled."""

    tenant: str
    reservations: int
    settled: int
    """Reservations with a settled amount (settled, or settled after they expired)."""
    released: int
    expired: int
    """Expired and never settled: the call's process died before it could settle."""
    held: int
    reserved_micros: int
    """What the settled reservations held."""
    settled_micros: int
    """What they charged on settlement."""
    ledger_micros: int
    """The ledger's charges for them (short while settled usage awaits delivery)."""
    variance_micros: int
    """``reserved_micros - settled_micros``: held beyond what the calls cost."""
    variance_bps: int
    """The variance in basis points of ``reserved_micros`` (rounded toward zero)."""
    flagged: bool
    """``|variance_bps|`` is over the report's threshold."""


@dataclass(frozen=True)
class ReservationFinding:
    anomaly: Anomaly
    reservation_id: str
    tenant: str
    reserved_micros: int
    settled_micros: int | None
    ledger_micros: int


@dataclass(frozen=True)
class ReconciliationReport:
    period: str
    threshold_bps: int
    rows: tuple[ReconciliationRow, ...]
    findings: tuple[ReservationFinding, ...]

    @property
    def flagged(self) -> bool:
        return any(row.flagged for row in self.rows) or bool(self.findings)


@dataclass(frozen=True)
class UsageQuery:
    """Filters of the usage ledger; every given one must match."""

    tenant: str | None = None
    """The calling tenant."""
    model: str | None = None
    """``owner/name``"""
    version: str | None = None
    period: str | None = None
    """Usage the ledger recorded in this period (``YYYY-MM``)."""
    after_seq: int = 0
    """Only events that arrived after this ledger position (a page's cursor)."""


@dataclass(frozen=True, order=True)
class RevenueDay:
    """A publisher's calls to one model version on one UTC day (by when the ledger
    recorded them, as periods are): the revenue and the publisher's share, each event's
    figures from its price snapshot as its statement line computes them."""

    day: str
    """``YYYY-MM-DD``"""
    model: str
    version: str
    events: int
    """Usage lines (one per priced unit of a call)."""
    revenue_micros: int
    publisher_share_micros: int
    calls: int = 0
    """Calls: lines that share a ``prediction_id`` count once."""

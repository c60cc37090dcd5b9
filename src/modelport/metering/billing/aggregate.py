"""Ledger events to invoice and statement lines: pure, exact, order-independent.

Each event's charge is computed again from its price snapshot
(``PriceSnapshot.amount``: rounded down to the micro-unit, per event) and the
publisher's share from that charge (``PriceSnapshot.publisher_share``: rounded down,
per event); the platform's take is the rest. Lines add the events' own figures, so
a line's share plus take equals its revenue to the micro-unit, and the same events
in any order, delivered any number of times, give the same lines.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from modelport.metering.billing.types import (
    InvoiceContent,
    InvoiceLine,
    StatementContent,
    StatementLine,
)
from modelport.metering.types import UsageEvent


@dataclass
class _Sum:
    events: int = 0
    quantity: int = 0
    amount: int = 0
    share: int = 0

    def add(self, quantity: int, amount: int, share: int = 0) -> None:
        self.events += 1
        self.quantity += quantity
        self.amount += amount
        self.share += share


def charge_of(event: UsageEvent) -> int:
    """What the event costs, from its price snapshot (not from its recorded amount)."""
    return event.price.amount(event.quantity, event.status)


def share_of(event: UsageEvent) -> int:
    """The publisher's part of the event's charge."""
    return event.price.publisher_share(charge_of(event))


def unique(events: Iterable[UsageEvent]) -> list[UsageEvent]:
    """One event per ``event_id`` (the first seen), as the ledger keeps them."""
    seen: dict[str, UsageEvent] = {}
    for event in events:
        seen.setdefault(event.event_id, event)
    return list(seen.values())


_InvoiceKey = tuple[str, str, str, int | None, int, int, int]
_StatementKey = tuple[str, str, str, int]


class PeriodBook:
    """Invoices and statements of one period, built in one pass over its events.

    ``add`` takes each event as the ledger holds it, once (the ledger's unique
    ``event_id``); memory grows with the number of lines, not of events.
    """

    def __init__(self, period: str) -> None:
        self.period = period
        self.events = 0
        self._invoices: dict[str, dict[_InvoiceKey, _Sum]] = {}
        self._statements: dict[str, dict[_StatementKey, _Sum]] = {}

    def add(self, event: UsageEvent) -> None:
        price = event.price
        amount = charge_of(event)
        unit = event.unit.value
        self.events += 1
        invoice_key = (
            event.model,
            event.version,
            unit,
            price.rule_id,
            price.unit_price_micros,
            price.per_units,
            price.factor_bps(event.status),
        )
        lines = self._invoices.setdefault(event.tenant, {})
        lines.setdefault(invoice_key, _Sum()).add(event.quantity, amount)
        statement_key = (event.model, event.version, unit, price.revenue_share_bps)
        revenue = self._statements.setdefault(event.publisher, {})
        revenue.setdefault(statement_key, _Sum()).add(
            event.quantity, amount, price.publisher_share(amount)
        )

    def invoices(self) -> dict[str, InvoiceContent]:
        """An invoice per calling tenant, its lines sorted."""
        return {
            tenant: InvoiceContent(tenant, self.period, _invoice_lines(sums))
            for tenant, sums in sorted(self._invoices.items())
        }

    def statements(self) -> dict[str, StatementContent]:
        """A statement per publisher (the tenant owning the model), its lines sorted."""
        return {
            publisher: StatementContent(publisher, self.period, _statement_lines(sums))
            for publisher, sums in sorted(self._statements.items())
        }


def _invoice_lines(sums: dict[_InvoiceKey, _Sum]) -> tuple[InvoiceLine, ...]:
    return tuple(
        sorted(
            InvoiceLine(
                model=model,
                version=version,
                unit=unit,
                price_rule_id=rule_id,
                unit_price_micros=unit_price,
                per_units=per_units,
                charge_bps=charge_bps,
                events=s.events,
                quantity=s.quantity,
                amount_micros=s.amount,
            )
            for (
                model,
                version,
                unit,
                rule_id,
                unit_price,
                per_units,
                charge_bps,
            ), s in sums.items()
        )
    )


def _statement_lines(sums: dict[_StatementKey, _Sum]) -> tuple[StatementLine, ...]:
    return tuple(
        sorted(
            StatementLine(
                model=model,
                version=version,
                unit=unit,
                revenue_share_bps=bps,
                events=s.events,
                quantity=s.quantity,
                revenue_micros=s.amount,
                publisher_share_micros=s.share,
            )
            for (model, version, unit, bps), s in sums.items()
        )
    )


def book(events: Iterable[UsageEvent], period: str) -> PeriodBook:
    """A period's book of ``events``, each counted once whatever its deliveries."""
    built = PeriodBook(period)
    for event in unique(events):
        built.add(event)
    return built


def invoices(events: Iterable[UsageEvent], period: str) -> dict[str, InvoiceContent]:
    """An invoice per calling tenant of ``events`` (all taken to be of ``period``)."""
    return book(events, period).invoices()


def statements(events: Iterable[UsageEvent], period: str) -> dict[str, StatementContent]:
    """A statement per publisher of ``events`` (all taken to be of ``period``)."""
    return book(events, period).statements()


def invoice_lines(events: Iterable[UsageEvent]) -> tuple[InvoiceLine, ...]:
    """The lines of one tenant's ``events``."""
    return tuple(sorted(x for c in invoices(events, "").values() for x in c.lines))


def statement_lines(events: Iterable[UsageEvent]) -> tuple[StatementLine, ...]:
    """The lines of one publisher's ``events``."""
    return tuple(sorted(x for c in statements(events, "").values() for x in c.lines))

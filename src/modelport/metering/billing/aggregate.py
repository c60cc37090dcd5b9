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


def invoice_lines(events: Iterable[UsageEvent]) -> tuple[InvoiceLine, ...]:
    """Lines per model version, unit, price rule and charge rate, sorted."""
    sums: dict[tuple[str, str, str, int | None, int, int, int], _Sum] = {}
    for event in unique(events):
        price = event.price
        key = (
            event.model,
            event.version,
            event.unit.value,
            price.rule_id,
            price.unit_price_micros,
            price.per_units,
            price.factor_bps(event.status),
        )
        sums.setdefault(key, _Sum()).add(event.quantity, charge_of(event))
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


def invoices(events: Iterable[UsageEvent], period: str) -> dict[str, InvoiceContent]:
    """An invoice per calling tenant of ``events`` (all taken to be of ``period``)."""
    by_tenant: dict[str, list[UsageEvent]] = {}
    for event in unique(events):
        by_tenant.setdefault(event.tenant, []).append(event)
    return {
        tenant: InvoiceContent(tenant=tenant, period=period, lines=invoice_lines(group))
        for tenant, group in sorted(by_tenant.items())
    }


def statement_lines(events: Iterable[UsageEvent]) -> tuple[StatementLine, ...]:
    """Lines per model version, unit and revenue share, sorted."""
    sums: dict[tuple[str, str, str, int], _Sum] = {}
    for event in unique(events):
        key = (event.model, event.version, event.unit.value, event.price.revenue_share_bps)
        amount = charge_of(event)
        sums.setdefault(key, _Sum()).add(
            event.quantity, amount, event.price.publisher_share(amount)
        )
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


def statements(events: Iterable[UsageEvent], period: str) -> dict[str, StatementContent]:
    """A statement per publisher (the tenant owning the model) of ``events``."""
    by_publisher: dict[str, list[UsageEvent]] = {}
    for event in unique(events):
        by_publisher.setdefault(event.publisher, []).append(event)
    return {
        publisher: StatementContent(
            publisher=publisher, period=period, lines=statement_lines(group)
        )
        for publisher, group in sorted(by_publisher.items())
    }

"""A publisher's revenue by day, model and version: the same per-event arithmetic as
its statement lines (``aggregate.charge_of``, ``aggregate.share_of``), summed by the
UTC day the ledger recorded each event, so a period's days add up to its statement."""

from __future__ import annotations

from collections.abc import Iterable

from modelport.metering.billing.aggregate import charge_of, share_of
from modelport.metering.billing.types import RevenueDay
from modelport.metering.types import LedgerEntry


def revenue_by_day(entries: Iterable[LedgerEntry]) -> list[RevenueDay]:
    """``entries`` (one publisher's, each once) summed by day, model and version, oldest
    day first. A call is counted once however many units priced it (its lines share
    its ``prediction_id``)."""
    sums: dict[tuple[str, str, str], list[int]] = {}
    calls: dict[tuple[str, str, str], set[str]] = {}
    for entry in entries:
        event = entry.event
        key = (entry.recorded_at.date().isoformat(), event.model, event.version)
        amount = charge_of(event)
        bucket = sums.setdefault(key, [0, 0, 0])
        bucket[0] += 1
        bucket[1] += amount
        bucket[2] += share_of(event)
        calls.setdefault(key, set()).add(event.prediction_id or event.event_id)
    return sorted(
        RevenueDay(day, model, version, events, revenue, share, len(calls[day, model, version]))
        for (day, model, version), (events, revenue, share) in sums.items()
    )

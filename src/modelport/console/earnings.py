"""A publisher's revenue (``GET /api/revenue`` items: day, model, version, calls,
revenue, share) summed for the workbench's tables and bar charts."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import date, timedelta
from typing import Any

from modelport.console.charts import BarChart, bar_chart


@dataclass(frozen=True)
class Earned:
    """Calls and money summed under one label (a day, a model or a version)."""

    label: str
    calls: int
    revenue_micros: int
    share_micros: int
    """The publisher's part of the revenue."""


def earned_by(
    items: Iterable[dict[str, Any]], label: Callable[[dict[str, Any]], str]
) -> list[Earned]:
    """``items`` summed by ``label(item)``, in label order."""
    sums: dict[str, list[int]] = {}
    for item in items:
        bucket = sums.setdefault(label(item), [0, 0, 0])
        bucket[0] += int(item.get("calls") or 0)
        bucket[1] += int(item.get("revenue_micros") or 0)
        bucket[2] += int(item.get("publisher_share_micros") or 0)
    return [Earned(key, c, r, s) for key, (c, r, s) in sorted(sums.items())]


def by_day(items: Iterable[dict[str, Any]]) -> list[Earned]:
    """Sums by day, with the days between the first and the last that had no calls as
    zeros, so the chart's bars are evenly spaced days."""
    found = {e.label: e for e in earned_by(items, lambda i: str(i["day"]))}
    if not found:
        return []
    first, last = date.fromisoformat(min(found)), date.fromisoformat(max(found))
    days = (first + timedelta(days=n) for n in range((last - first).days + 1))
    return [found.get(d.isoformat()) or Earned(d.isoformat(), 0, 0, 0) for d in days]


def by_model(items: Iterable[dict[str, Any]]) -> list[Earned]:
    return earned_by(items, lambda i: str(i["model"]))


def by_version(items: Iterable[dict[str, Any]]) -> dict[str, list[Earned]]:
    """Each version's sums by day."""
    versions: dict[str, list[dict[str, Any]]] = {}
    for item in items:
        versions.setdefault(str(item["version"]), []).append(item)
    return {version: by_day(rows) for version, rows in versions.items()}


def total(rows: Iterable[Earned], label: str = "total") -> Earned:
    kept = list(rows)
    return Earned(
        label,
        sum(r.calls for r in kept),
        sum(r.revenue_micros for r in kept),
        sum(r.share_micros for r in kept),
    )


def revenue_chart(rows: list[Earned]) -> BarChart:
    """Bars of each row's revenue."""
    return bar_chart([(r.label, r.calls, r.revenue_micros) for r in rows])

"""Plots drawn on the server as SVG (spend bars, traffic splits): no script, no
charting library to ship, readable by a screen reader (each bar has a title, and the
page shows the same numbers in a table)."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

from modelport.console.usage import call_id

WIDTH = 640
HEIGHT = 220
MARGIN_LEFT = 84
MARGIN_BOTTOM = 40
MARGIN_TOP = 12


@dataclass(frozen=True)
class Bar:
    label: str
    value_micros: int
    x: float
    y: float
    width: float
    height: float


@dataclass(frozen=True)
class BarChart:
    bars: list[Bar]
    max_micros: int
    width: int = WIDTH
    height: int = HEIGHT
    left: int = MARGIN_LEFT
    bottom: int = HEIGHT - MARGIN_BOTTOM
    top: int = MARGIN_TOP


@dataclass
class Bucket:
    """Calls (their ids) and money summed under one label."""

    calls: set[str] = field(default_factory=set)
    micros: int = 0


@dataclass(frozen=True)
class Spend:
    """A tenant's usage summed by model and by day (micros), and the call counts."""

    by_model: list[tuple[str, int, int]]
    """(model, calls, micros), most spent first."""
    by_day: list[tuple[str, int, int]]
    """(YYYY-MM-DD, calls, micros), oldest first."""
    by_key: list[tuple[str, int, int]]
    """(key id, calls, micros), most spent first ("—": calls without a key)."""
    total_micros: int


def spend(events: list[dict[str, Any]]) -> Spend:
    """Sum usage events (``GET /api/usage`` items) by model, by day and by key: money by
    line, calls by call id (a chat's token lines are one call, ``console.usage``)."""
    models: dict[str, Bucket] = defaultdict(Bucket)
    keys: dict[str, Bucket] = defaultdict(Bucket)
    days: dict[str, Bucket] = defaultdict(Bucket)
    total = 0
    for event in events:
        amount = int(event.get("amount_micros") or 0)
        day = str(event.get("finished_at") or event.get("recorded_at") or "")[:10]
        key = str(event.get("key_id") or "—")
        call = call_id(event)
        for bucket in (models[str(event.get("model"))], days[day], keys[key]):
            bucket.calls.add(call)
            bucket.micros += amount
        total += amount
    by_model = sorted(
        ((m, len(b.calls), b.micros) for m, b in models.items()), key=lambda r: (-r[2], r[0])
    )
    by_day = sorted((d, len(b.calls), b.micros) for d, b in days.items())
    by_key = sorted(
        ((k, len(b.calls), b.micros) for k, b in keys.items()), key=lambda r: (-r[2], r[0])
    )
    return Spend(by_model=by_model, by_day=by_day, by_key=by_key, total_micros=total)


def bar_chart(rows: list[tuple[str, int, int]]) -> BarChart:
    """Bars of ``rows`` (label, calls, micros) by micros, scaled to the plot's height."""
    plot_width = WIDTH - MARGIN_LEFT - 8
    plot_height = HEIGHT - MARGIN_BOTTOM - MARGIN_TOP
    top = max((micros for _, _, micros in rows), default=0)
    slot = plot_width / max(len(rows), 1)
    bars = []
    for index, (label, _, micros) in enumerate(rows):
        height = plot_height * micros / top if top else 0.0
        bars.append(
            Bar(
                label=label,
                value_micros=micros,
                x=round(MARGIN_LEFT + index * slot + slot * 0.15, 1),
                y=round(HEIGHT - MARGIN_BOTTOM - height, 1),
                width=round(slot * 0.7, 1),
                height=round(height, 1),
            )
        )
    return BarChart(bars=bars, max_micros=top)


def dollars(micros: int | None) -> str:
    """Micro-dollars as dollars, to the micro."""
    if micros is None:
        return "—"
    sign = "-" if micros < 0 else ""
    whole, rest = divmod(abs(micros), 1_000_000)
    return f"{sign}${whole:,}.{rest:06d}"


@dataclass(frozen=True)
class Segment:
    label: str
    share: int
    """Percent of the whole (0-100)."""
    x: float
    width: float
    shade: str


@dataclass(frozen=True)
class SplitBar:
    """One horizontal bar split into shares (an endpoint's traffic by version)."""

    segments: list[Segment]
    width: int = WIDTH
    height: int = 36


SHADES = ("#1f5fa8", "#b35900", "#19652d", "#6a3d9a", "#a11d1d", "#4a4a4a")
"""Segment colours, dark enough for white labels (WCAG AA)."""


def split_bar(parts: list[tuple[str, int]]) -> SplitBar:
    """A bar of ``parts`` (label, percent); parts at 0 % are listed but take no width."""
    segments = []
    x = 0.0
    for index, (label, share) in enumerate(parts):
        width = round(WIDTH * max(share, 0) / 100, 1)
        segments.append(Segment(label, share, round(x, 1), width, SHADES[index % len(SHADES)]))
        x += width
    return SplitBar(segments=segments)

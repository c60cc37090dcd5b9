"""Error rate and latency per version of an endpoint, over the prediction log.

What an endpoint's owner watches across processes and restarts (the canary's windows
are this process's memory, reset at every step): predictions, errors (any status but
``ok``: the error code the caller got), answers from a fallback, and latency
percentiles of the answered ones, per model, version and shadow flag, over a time
window. The newest ``MAX_ROWS`` predictions of the window are read at most; the
report says when it stopped there.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import datetime

import numpy as np
from sqlalchemy import select

from modelport.store import Database
from modelport.store.tables import PredictionRow

MAX_ROWS = 50_000
"""Predictions one report reads at most (the newest of its window)."""


@dataclass(frozen=True)
class VersionTraffic:
    """One version's predictions in the window (a shadow's copies apart)."""

    model: str | None
    """None: answers no version gave (a static fallback, or nothing answered)."""
    version: str | None
    shadow: bool
    predictions: int
    errors: int
    fallbacks: int
    """Answered by a fallback (a version, the cache or a static answer)."""
    p50_ms: float | None
    p95_ms: float | None
    p99_ms: float | None
    """Latency of the answered predictions; None when none was answered."""
    error_codes: dict[str, int] = field(default_factory=dict)

    @property
    def error_rate(self) -> float:
        return self.errors / self.predictions if self.predictions else 0.0


@dataclass(frozen=True)
class TrafficReport:
    versions: list[VersionTraffic]
    truncated: bool
    """The window held more than ``MAX_ROWS`` predictions: the report covers the newest."""


@dataclass
class _Tally:
    predictions: int = 0
    fallbacks: int = 0
    latencies: list[float] = field(default_factory=list)
    codes: Counter[str] = field(default_factory=Counter)


class VersionTrafficService:
    """Reads the ``predictions`` table; writes nothing."""

    def __init__(self, database: Database, *, max_rows: int = MAX_ROWS) -> None:
        self._db = database
        self.max_rows = max_rows

    def report(
        self, endpoint: str, *, owner: str, since: datetime, until: datetime
    ) -> TrafficReport:
        """``endpoint``'s predictions received in [since, until), of its ``owner``."""
        p = PredictionRow
        query = (
            select(p.model, p.version, p.shadow_of, p.status, p.fallback, p.latency_seconds)
            .where(
                p.endpoint == endpoint,
                p.owner == owner,
                p.received_at >= since,
                p.received_at < until,
            )
            .order_by(p.received_at.desc())
            .limit(self.max_rows + 1)
        )
        with self._db.transaction() as session:
            rows = session.execute(query).all()
        truncated = len(rows) > self.max_rows
        tallies: dict[tuple[str | None, str | None, bool], _Tally] = defaultdict(_Tally)
        for model, version, shadow_of, status, fallback, latency in rows[: self.max_rows]:
            tally = tallies[model, version, shadow_of is not None]
            tally.predictions += 1
            tally.fallbacks += 1 if fallback else 0
            if status == "ok":
                tally.latencies.append(float(latency))
            else:
                tally.codes[str(status)] += 1
        versions = [
            _version(model, version, shadow, tally)
            for (model, version, shadow), tally in sorted(
                tallies.items(), key=lambda item: (item[0][2], item[0][0] or "", item[0][1] or "")
            )
        ]
        return TrafficReport(versions=versions, truncated=truncated)


def _version(model: str | None, version: str | None, shadow: bool, tally: _Tally) -> VersionTraffic:
    p50 = p95 = p99 = None
    if tally.latencies:
        found = np.percentile(np.asarray(tally.latencies, dtype=np.float64) * 1000, [50, 95, 99])
        p50, p95, p99 = (round(float(x), 3) for x in found)
    return VersionTraffic(
        model=model,
        version=version,
        shadow=shadow,
        predictions=tally.predictions,
        errors=sum(tally.codes.values()),
        fallbacks=tally.fallbacks,
        p50_ms=p50,
        p95_ms=p95,
        p99_ms=p99,
        error_codes=dict(tally.codes.most_common()),
    )

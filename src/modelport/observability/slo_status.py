"""Where an endpoint's SLOs stand now, read from the prediction log: over each SLO's
window the share of its error budget left, and the burn rate over the alert windows.

The same arithmetic as the Prometheus rules (``slo_rules``), over the log's records of
the endpoint's calls (a shadow's copies apart) instead of one process's counters, so it
holds across processes and restarts:

- ``availability``: a record whose status is an error code is a bad event, but for the
  codes that are the caller's doing (``slo_metrics``), which count neither way;
- ``latency``: among answered records, one slower than ``threshold_ms`` is bad.

The burn rate over a window is its error ratio over the budget (``1 - objective``); the
budget left is ``1 -`` the SLO window's burn rate. A window with no event burns nothing.
Records older than the tenant's retention are gone, so a window longer than it reads
only what is kept. ``completion`` SLOs are read from jobs, which the log does not hold:
they are reported with no figures (``measured`` false).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, and_, case, func, not_, select
from sqlalchemy.orm import Session

from modelport.observability.slo import SLO, SLOKind
from modelport.observability.slo_metrics import CALLER_CODES
from modelport.store import Database
from modelport.store.tables import PredictionRow

BURN_WINDOWS: tuple[tuple[str, timedelta], ...] = (
    ("5m", timedelta(minutes=5)),
    ("1h", timedelta(hours=1)),
    ("6h", timedelta(hours=6)),
    ("1d", timedelta(days=1)),
    ("3d", timedelta(days=3)),
)
"""The windows of ``slo_rules.BURN_ALERTS`` a console reader compares (short to long)."""
CALLER_STATUSES = (*sorted(CALLER_CODES), "cancelled")
"""Logged statuses that are the caller's doing: no event for availability."""


@dataclass(frozen=True)
class WindowBurn:
    window: str
    events: int
    bad: int
    burn_rate: float


@dataclass(frozen=True)
class SLOStatus:
    """One SLO now: its window's events and budget left, and its burn rates."""

    slo: SLO
    measured: bool
    """False: the prediction log does not hold this SLO's events (``completion``)."""
    events: int = 0
    bad: int = 0
    budget_remaining: float | None = None
    """Share of the error budget left over the SLO's window (negative: overspent)."""
    burn: tuple[WindowBurn, ...] = ()


class SLOStatusService:
    """Reads the ``predictions`` table; writes nothing."""

    def __init__(self, database: Database) -> None:
        self._db = database

    def status(
        self, endpoint: str, *, owner: str, slos: tuple[SLO, ...], now: datetime
    ) -> list[SLOStatus]:
        """Each of ``slos`` of ``endpoint`` (of ``owner``) at ``now``."""
        found = []
        with self._db.transaction() as session:
            for slo in slos:
                if slo.kind is SLOKind.COMPLETION:
                    found.append(SLOStatus(slo=slo, measured=False))
                    continue
                counted = self._counter(endpoint, owner, slo)
                events, bad = counted(session, now - timedelta(days=slo.window_days), now)
                burn = []
                for name, span in BURN_WINDOWS:
                    n, b = counted(session, now - span, now)
                    burn.append(WindowBurn(name, n, b, _burn(slo, n, b)))
                found.append(
                    SLOStatus(
                        slo=slo,
                        measured=True,
                        events=events,
                        bad=bad,
                        budget_remaining=1.0 - _burn(slo, events, bad),
                        burn=tuple(burn),
                    )
                )
        return found

    @staticmethod
    def _counter(
        endpoint: str, owner: str, slo: SLO
    ) -> Callable[[Session, datetime, datetime], tuple[int, int]]:
        p = PredictionRow
        counted: ColumnElement[bool]
        bad: ColumnElement[bool]
        if slo.kind is SLOKind.AVAILABILITY:
            counted = not_(p.status.in_(CALLER_STATUSES))
            bad = p.status != "ok"
        else:
            assert slo.threshold_ms is not None  # a checked latency SLO has one
            counted = p.status == "ok"
            bad = p.latency_seconds > slo.threshold_ms / 1000

        def count(session: Session, since: datetime, until: datetime) -> tuple[int, int]:
            query = select(func.count(), func.coalesce(func.sum(case((bad, 1), else_=0)), 0)).where(
                and_(
                    p.endpoint == endpoint,
                    p.owner == owner,
                    p.shadow_of.is_(None),
                    p.received_at >= since,
                    p.received_at < until,
                    counted,
                )
            )
            events, bad_events = session.execute(query).one()
            return int(events), int(bad_events)

        return count


def _burn(slo: SLO, events: int, bad: int) -> float:
    return (bad / events) / (1.0 - slo.objective) if events else 0.0

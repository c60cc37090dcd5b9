"""Spending caps, checked on the request path before any work is done.

A tenant's budget has a hard cap (calls are refused with 402
``budget_exceeded``) and a soft cap (an alert is recorded once per period).
Amounts are integers in micro-units; ``spent_micros`` is what the tenant spent
in the current calendar month (UTC), kept by metering (``add_spent``). The
guard reads budgets through a short TTL cache: a cap reached mid-period is
enforced within ``ttl_seconds`` on every gateway (metering's reservations
make the exact cut).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from datetime import datetime
from typing import Protocol

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError

from modelport.errors import PaymentRequired
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import BudgetAlertRow, BudgetRow
from modelport.tenancy.limits.types import Budget, BudgetAlert

SOFT_CAP = "soft_cap"


def period_of(at: datetime) -> str:
    """The budget period (calendar month, UTC) ``at`` falls in: ``YYYY-MM``."""
    return f"{at.year:04d}-{at.month:02d}"


class BudgetGuard(Protocol):
    """Called once per call, after the rate and concurrency limits, before any work."""

    def check(self, tenant: str) -> None:
        """Raise ``PaymentRequired`` (code ``budget_exceeded``) when the tenant's hard
        cap is reached; record a soft-cap alert (once per period) when its soft cap is."""
        ...


class NoBudgets:
    """A guard that lets every call through (no budgets configured)."""

    def check(self, tenant: str) -> None:
        return None


def _budget(row: BudgetRow) -> Budget:
    return Budget(
        tenant=row.tenant,
        hard_cap_micros=row.hard_cap_micros,
        soft_cap_micros=row.soft_cap_micros,
        spent_micros=row.spent_micros,
        period=row.period,
        updated_at=row.updated_at,
    )


def _alert(row: BudgetAlertRow) -> BudgetAlert:
    return BudgetAlert(
        id=row.id,
        tenant=row.tenant,
        period=row.period,
        kind=row.kind,
        spent_micros=row.spent_micros,
        cap_micros=row.cap_micros,
        created_at=row.created_at,
    )


class BudgetRepository:
    """The ``budgets`` and ``budget_alerts`` tables."""

    def __init__(self, database: Database, *, now: Callable[[], datetime] = utcnow) -> None:
        self._db = database
        self._now = now

    def get(self, tenant: str) -> Budget | None:
        with self._db.transaction() as session:
            row = session.get(BudgetRow, tenant)
            return _budget(row) if row else None

    def put(
        self, tenant: str, *, hard_cap_micros: int | None, soft_cap_micros: int | None
    ) -> Budget:
        """Set a tenant's caps (keeping what it spent)."""
        for attempt in range(2):
            try:
                with self._db.transaction() as session:
                    row = session.get(BudgetRow, tenant)
                    if row is None:
                        row = BudgetRow(
                            tenant=tenant, spent_micros=0, period=period_of(self._now())
                        )
                        session.add(row)
                    row.hard_cap_micros, row.soft_cap_micros = hard_cap_micros, soft_cap_micros
                    row.updated_at = self._now()
                    session.flush()
                    return _budget(row)
            except IntegrityError:
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def delete(self, tenant: str) -> bool:
        with self._db.transaction() as session:
            row = session.get(BudgetRow, tenant)
            if row is None:
                return False
            session.delete(row)
            return True

    def add_spent(self, tenant: str, micros: int) -> Budget:
        """Add to what the tenant spent this period, atomically (starts a new period's
        total when the stored one is older; leaves a newer one as it is). For
        metering."""
        now = self._now()
        period = period_of(now)
        for attempt in range(2):
            try:
                with self._db.transaction() as session:
                    # FOR UPDATE on PostgreSQL; SQLite transactions already write-lock.
                    row = session.get(BudgetRow, tenant, with_for_update=True)
                    if row is None:
                        row = BudgetRow(tenant=tenant, spent_micros=0, period=period)
                        session.add(row)
                    if row.period > period:
                        # Read the time in the month before, committed after a charge of
                        # the new one: the new month's spending is not this charge's.
                        return _budget(row)
                    if row.period != period:
                        row.spent_micros, row.period = 0, period
                    row.spent_micros += micros
                    row.updated_at = now
                    session.flush()
                    return _budget(row)
            except IntegrityError:
                # A concurrent first spend created the row: add to it.
                if attempt:
                    raise
        raise AssertionError("unreachable")

    def record_alert(self, tenant: str, period: str, kind: str, *, spent: int, cap: int) -> bool:
        """Record an alert unless this tenant already has one of ``kind`` in ``period``;
        True when this call recorded it (the unique constraint settles races)."""
        try:
            with self._db.transaction() as session:
                session.add(
                    BudgetAlertRow(
                        tenant=tenant,
                        period=period,
                        kind=kind,
                        spent_micros=spent,
                        cap_micros=cap,
                        created_at=self._now(),
                    )
                )
        except IntegrityError:
            return False
        return True

    def alerts(self, tenant: str) -> list[BudgetAlert]:
        query = (
            select(BudgetAlertRow)
            .where(BudgetAlertRow.tenant == tenant)
            .order_by(BudgetAlertRow.id)
        )
        with self._db.transaction() as session:
            return [_alert(r) for r in session.scalars(query)]


class DatabaseBudgetGuard:
    """:class:`BudgetGuard` over the ``budgets`` table, through a TTL cache."""

    def __init__(
        self,
        repository: BudgetRepository,
        *,
        ttl_seconds: float,
        clock: Callable[[], float] = time.monotonic,
        now: Callable[[], datetime] = utcnow,
    ) -> None:
        self._repository = repository
        self._ttl = ttl_seconds
        self._clock = clock
        self._now = now
        self._cache: dict[str, tuple[float, Budget | None]] = {}
        self._alerted: set[tuple[str, str]] = set()
        self._lock = threading.Lock()

    def check(self, tenant: str, *, stale_ok: bool = False) -> None:
        budget = self._budget(tenant, stale_ok=stale_ok)
        if budget is None:
            return
        period = period_of(self._now())
        spent = budget.spent_micros if budget.period == period else 0
        # The soft cap first: a burst that crossed both caps between two reads of the
        # budget is refused at the hard cap, and its soft-cap alert is still due.
        soft = budget.soft_cap_micros
        if soft is not None and spent >= soft and (tenant, period) not in self._alerted:
            self._repository.record_alert(tenant, period, SOFT_CAP, spent=spent, cap=soft)
            with self._lock:
                self._alerted.add((tenant, period))
        hard = budget.hard_cap_micros
        if hard is not None and spent >= hard:
            raise PaymentRequired(
                f"tenant {tenant!r} has reached its spending cap for {period}",
                code="budget_exceeded",
                spent_micros=spent,
                cap_micros=hard,
            )

    def staleness(self, tenant: str) -> float | None:
        """Seconds since the cached budget of ``tenant`` went stale (negative while fresh),
        or None when none is cached."""
        cached = self._cache.get(tenant)
        return None if cached is None else self._clock() - cached[0]

    def refresh(self, tenant: str) -> None:
        """Read the tenant's budget again. Blocking."""
        budget = self._repository.get(tenant)
        with self._lock:
            self._cache[tenant] = (self._clock() + self._ttl, budget)

    def is_warm(self, tenant: str, *, stale_ok: bool = False) -> bool:
        """True when ``check(tenant)`` needs no database access (cached, no alert due)."""
        with self._lock:
            cached = self._cache.get(tenant)
        if cached is None or (not stale_ok and cached[0] <= self._clock()):
            return False
        budget = cached[1]
        if budget is None or budget.soft_cap_micros is None:
            return True
        period = period_of(self._now())
        return budget.spent_micros < budget.soft_cap_micros or (tenant, period) in self._alerted

    def _budget(self, tenant: str, *, stale_ok: bool = False) -> Budget | None:
        now = self._clock()
        with self._lock:
            cached = self._cache.get(tenant)
        if cached is not None and (stale_ok or cached[0] > now):
            return cached[1]
        self.refresh(tenant)
        return self._cache[tenant][1]

    def invalidate(self, tenant: str | None = None) -> None:
        with self._lock:
            if tenant is None:
                self._cache.clear()
            else:
                self._cache.pop(tenant, None)

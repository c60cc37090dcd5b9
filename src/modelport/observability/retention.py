"""How long a tenant's data is kept (its prediction log, its jobs' inputs and outputs),
and deleting it.

A record is kept ``days`` after it was received, by the retention of the tenant that
owns its endpoint (``PredictionRecord.owner``: whose log it is), or the installation's
default (``prediction_retention_days``, 90) for a tenant that set none. ``sweep`` deletes
what is past it, the outcomes recorded against those predictions with them; a serving
process runs it every ``prediction_retention_interval_seconds``. ``forget`` is the right
to deletion: every record of a tenant's calls (``PredictionRecord.tenant``, whichever
endpoint logged them), their inputs and outputs with them, at once.

The same retention covers other data a tenant's calls left (``Retained``: the inputs and
outputs of its finished jobs and batches, ``jobs.erasure``), kept ``days`` after the job
finished; the sweep and ``forget`` erase those too. Each sweep that erased something
writes one audit event per tenant (``audit``), naming what went; ``forget`` is audited
by its route.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from datetime import datetime, timedelta
from typing import Protocol

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import PredictionOutcomeRow, PredictionRetentionRow, PredictionRow
from modelport.tenancy import audit as audit_log

SWEEP_ACTION = "retention.sweep"
SWEEP_ACTOR = "system:retention"

MAX_DAYS = 3650
_log = logging.getLogger("modelport.observability.retention")


class Retained(Protocol):
    """Other data a tenant's retention covers (a job's inputs and outputs)."""

    @property
    def kind(self) -> str:
        """What it is, as counts and audit reasons name it (``jobs``)."""
        ...

    def sweep(self, days: Mapping[str, int], default_days: int) -> Mapping[str, int]:
        """Erase what is past its tenant's ``days`` (``default_days`` for the others);
        how many went, by tenant."""
        ...

    def forget(self, tenant: str) -> Mapping[str, int]:
        """Erase all of ``tenant``'s now; counts by name (``jobs``: erased, and what else
        it reports, such as ``jobs_unfinished``)."""
        ...


Audit = Callable[[str, str], None]
"""Records that the sweep erased something of a tenant: ``(tenant, reason)``."""


def audit_sweeps(database: Database) -> Audit:
    """The audit log's record of a sweep: ``retention.sweep`` by ``system:retention``
    on the tenant, the counts as its reason."""

    def record(tenant: str, reason: str) -> None:
        with database.transaction() as session:
            audit_log.append(
                session,
                audit_log.NewAuditEvent(
                    actor=SWEEP_ACTOR,
                    actor_tenant=None,
                    key_id=None,
                    action=SWEEP_ACTION,
                    method="DELETE",
                    target=f"/api/tenants/{tenant}/retention",
                    tenant=tenant,
                    status=200,
                    reason=reason,
                ),
            )

    return record


class PredictionRetention:
    def __init__(
        self,
        database: Database,
        *,
        default_days: int,
        now: Callable[[], datetime] = utcnow,
        also: Sequence[Retained] = (),
        audit: Audit | None = None,
    ) -> None:
        self.database = database
        self.default_days = default_days
        self._now = now
        self.also = tuple(also)
        self._audit = audit

    def days_of(self, tenant: str) -> tuple[int, bool]:
        """The tenant's retention in days, and whether it set it (False: the default)."""
        with self.database.transaction() as session:
            row = session.get(PredictionRetentionRow, tenant)
        return (row.days, True) if row is not None else (self.default_days, False)

    def set_days(self, tenant: str, days: int | None, *, actor: str) -> None:
        """Keep ``tenant``'s records ``days`` days (None: the default again)."""
        if days is not None and not (isinstance(days, int) and 1 <= days <= MAX_DAYS):
            raise InvalidInput(
                f"days is a whole number of days from 1 to {MAX_DAYS}",
                code="invalid_retention",
                field="days",
            )
        with self.database.transaction() as session:
            row = session.get(PredictionRetentionRow, tenant)
            if days is None:
                if row is not None:
                    session.delete(row)
                return
            if row is None:
                session.add(PredictionRetentionRow(tenant=tenant, days=days, updated_by=actor))
            else:
                row.days, row.updated_by, row.updated_at = days, actor, self._now()

    def sweep(self) -> int:
        """Delete every record past its owner's retention, and erase the other data
        (``also``) past it; how many records went."""
        now = self._now()
        by_tenant: dict[str, dict[str, int]] = {}
        deleted = 0
        policies = self.policies()
        with self.database.transaction() as session:
            for tenant, days in policies.items():
                old = (PredictionRow.owner == tenant) & (
                    PredictionRow.received_at < now - timedelta(days=days)
                )
                _count(by_tenant, "predictions", _owners(session, old))
                deleted += _delete(session, old)
            others = PredictionRow.received_at < now - timedelta(days=self.default_days)
            if policies:
                others = others & (
                    PredictionRow.owner.is_(None) | PredictionRow.owner.not_in(list(policies))
                )
            _count(by_tenant, "predictions", _owners(session, others))
            deleted += _delete(session, others)
        if deleted:
            _log.info("prediction retention deleted=%d", deleted)
        for data in self.also:
            try:
                _count(by_tenant, data.kind, data.sweep(policies, self.default_days))
            except Exception:  # the next sweep finishes it; the log's records went
                _log.exception("retention sweep of %s failed", data.kind)
        if self._audit is not None:
            for tenant, counts in sorted(by_tenant.items()):
                self._audit(tenant, _reason(counts, policies.get(tenant, self.default_days)))
        return deleted

    def policies(self) -> dict[str, int]:
        """The tenants that set a retention of their own, and their days."""
        with self.database.transaction() as session:
            rows = session.execute(
                select(PredictionRetentionRow.tenant, PredictionRetentionRow.days)
            ).all()
        return {tenant: days for tenant, days in rows}

    def forget(self, tenant: str) -> int:
        """Delete every record of ``tenant``'s calls now; how many went."""
        with self.database.transaction() as session:
            deleted = _delete(session, PredictionRow.tenant == tenant)
        _log.info("prediction records forgotten tenant=%s deleted=%d", tenant, deleted)
        return deleted

    def forget_all(self, tenant: str) -> dict[str, int]:
        """The right to deletion over everything: ``tenant``'s prediction-log records
        (``forget``) and its other data (``also``: its finished jobs' inputs and
        outputs). Counts by name (``predictions``, ``jobs``, ...)."""
        counts = {"predictions": self.forget(tenant)}
        for data in self.also:
            counts.update(data.forget(tenant))
        return counts


def _owners(session: Session, where: ColumnElement[bool]) -> dict[str, int]:
    """How many records ``where`` selects, by owner (records of no owner under "")."""
    rows = session.execute(
        select(PredictionRow.owner, func.count()).where(where).group_by(PredictionRow.owner)
    ).all()
    return {owner or "": int(n) for owner, n in rows}


def _count(by_tenant: dict[str, dict[str, int]], kind: str, counts: Mapping[str, int]) -> None:
    for tenant, n in counts.items():
        if n and tenant:
            tally = by_tenant.setdefault(tenant, {})
            tally[kind] = tally.get(kind, 0) + n


def _reason(counts: Mapping[str, int], days: int) -> str:
    parts = ", ".join(f"{n} {kind}" for kind, n in sorted(counts.items()))
    return f"retention of {days} days erased {parts}"


def _delete(session: Session, where: ColumnElement[bool]) -> int:
    """Delete the predictions ``where`` selects and the outcomes recorded against them."""
    chosen = select(PredictionRow.id).where(where)
    session.execute(
        delete(PredictionOutcomeRow).where(PredictionOutcomeRow.prediction_id.in_(chosen))
    )
    result = session.execute(delete(PredictionRow).where(where))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]

"""How long the prediction log keeps records, per tenant, and deleting them.

A record is kept ``days`` after it was received, by the retention of the tenant that
owns its endpoint (``PredictionRecord.owner``: whose log it is), or the installation's
default (``prediction_retention_days``, 90) for a tenant that set none. ``sweep`` deletes
what is past it, the outcomes recorded against those predictions with them, and audits
what it deleted per owner (``retention.sweep``); a serving process runs it every
``prediction_retention_interval_seconds``. ``forget`` is the right
to deletion: every record of a tenant's calls (``PredictionRecord.tenant``, whichever
endpoint logged them), their inputs and outputs with them, at once.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime, timedelta

from sqlalchemy import ColumnElement, delete, func, select
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput
from modelport.store import Database
from modelport.store.base import utcnow
from modelport.store.tables import PredictionOutcomeRow, PredictionRetentionRow, PredictionRow
from modelport.tenancy import audit

SWEEP_ACTION = "retention.sweep"
SWEEP_ACTOR = "system:retention"

MAX_DAYS = 3650
_log = logging.getLogger("modelport.observability.retention")


class PredictionRetention:
    def __init__(
        self, database: Database, *, default_days: int, now: Callable[[], datetime] = utcnow
    ) -> None:
        self.database = database
        self.default_days = default_days
        self._now = now

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
        """Delete every record past its owner's retention; how many went. Each owner
        whose records went gets an audit event (``retention.sweep``) in the same
        transaction, saying how many and after how many days."""
        now = self._now()
        with self.database.transaction() as session:
            rows = session.execute(
                select(PredictionRetentionRow.tenant, PredictionRetentionRow.days)
            ).all()
            policies = {tenant: days for tenant, days in rows}
            swept: list[tuple[str | None, int, int]] = []  # (owner, days, deleted)
            for tenant, days in policies.items():
                where = (PredictionRow.owner == tenant) & (
                    PredictionRow.received_at < now - timedelta(days=days)
                )
                swept.append((tenant, days, _delete(session, where)))
            others = PredictionRow.received_at < now - timedelta(days=self.default_days)
            if policies:
                others = others & (
                    PredictionRow.owner.is_(None) | PredictionRow.owner.not_in(list(policies))
                )
            counts = session.execute(
                select(PredictionRow.owner, func.count())
                .where(others)
                .group_by(PredictionRow.owner)
            ).all()
            _delete(session, others)
            swept += [(owner, self.default_days, int(n)) for owner, n in counts]
            for owner, days, n in swept:
                if n:
                    audit.append(session, _swept_event(owner, days, n))
        deleted = sum(n for _, _, n in swept)
        if deleted:
            _log.info("prediction retention deleted=%d", deleted)
        return deleted

    def forget(self, tenant: str) -> int:
        """Delete every record of ``tenant``'s calls now; how many went."""
        with self.database.transaction() as session:
            deleted = _delete(session, PredictionRow.tenant == tenant)
        _log.info("prediction records forgotten tenant=%s deleted=%d", tenant, deleted)
        return deleted


def _swept_event(owner: str | None, days: int, deleted: int) -> audit.NewAuditEvent:
    return audit.NewAuditEvent(
        actor=SWEEP_ACTOR,
        actor_tenant=None,
        key_id=None,
        action=SWEEP_ACTION,
        method="DELETE",
        target=f"/api/tenants/{owner}/predictions" if owner else "/api/predictions",
        tenant=owner or None,
        status=200,
        reason=f"deleted {deleted} prediction records older than {days} days",
    )


def _delete(session: Session, where: ColumnElement[bool]) -> int:
    """Delete the predictions ``where`` selects and the outcomes recorded against them."""
    chosen = select(PredictionRow.id).where(where)
    session.execute(
        delete(PredictionOutcomeRow).where(PredictionOutcomeRow.prediction_id.in_(chosen))
    )
    result = session.execute(delete(PredictionRow).where(where))
    return int(result.rowcount or 0)  # type: ignore[attr-defined]

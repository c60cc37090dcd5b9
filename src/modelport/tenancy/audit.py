"""The audit log: append one event per audited action; query with filters and a cursor.

Pages go newest first, keyed by the event id, so a page costs one index range
scan however deep it is and events appended meanwhile never shift later pages.
"""

from __future__ import annotations

from dataclasses import dataclass

from sqlalchemy import or_, select
from sqlalchemy.orm import Session

from modelport.errors import InvalidInput
from modelport.store.cursors import INT64_MAX, IdCursor
from modelport.store.tables import AuditEventRow
from modelport.tenancy.types import AuditEvent, AuditPage, AuditQuery

MAX_LIMIT = 500
OUTCOMES = ("success", "denied", "failed", "error")
_CURSOR = IdCursor(b"a1:", maximum=INT64_MAX)
_TARGET_MAX = 1024
_REQUEST_ID_MAX = 128
_REASON_MAX = 2000


@dataclass(frozen=True)
class NewAuditEvent:
    actor: str
    actor_tenant: str | None
    key_id: str | None
    action: str
    method: str
    target: str
    tenant: str | None
    status: int
    reason: str = ""
    request_id: str = ""

    @property
    def outcome(self) -> str:
        if self.status < 400:
            return "success"
        if self.status in (401, 403):
            return "denied"
        return "error" if self.status >= 500 else "failed"


def append(session: Session, event: NewAuditEvent) -> None:
    session.add(
        AuditEventRow(
            actor=event.actor[:128],
            actor_tenant=event.actor_tenant,
            key_id=event.key_id,
            action=event.action[:128],
            method=event.method[:8],
            target=event.target[:_TARGET_MAX],
            tenant=event.tenant[:64] if event.tenant else None,
            outcome=event.outcome,
            status=event.status,
            reason=event.reason[:_REASON_MAX],
            request_id=event.request_id[:_REQUEST_ID_MAX],
        )
    )


def _event(row: AuditEventRow) -> AuditEvent:
    return AuditEvent(
        id=row.id,
        at=row.at,
        actor=row.actor,
        actor_tenant=row.actor_tenant,
        key_id=row.key_id,
        action=row.action,
        method=row.method,
        target=row.target,
        tenant=row.tenant,
        outcome=row.outcome,
        status=row.status,
        reason=row.reason,
        request_id=row.request_id,
    )


def search(session: Session, query: AuditQuery) -> AuditPage:
    """One page of events, newest first. ``query.tenant`` matches events about the tenant
    (its resources) or by it (its principals)."""
    if not 1 <= query.limit <= MAX_LIMIT:
        raise InvalidInput(
            f"limit must be between 1 and {MAX_LIMIT}", code="invalid_limit", field="limit"
        )
    if query.outcome is not None and query.outcome not in OUTCOMES:
        raise InvalidInput(
            f"outcome must be one of {', '.join(OUTCOMES)}", code="invalid_outcome", field="outcome"
        )
    stmt = select(AuditEventRow).order_by(AuditEventRow.id.desc()).limit(query.limit + 1)
    if query.cursor:
        stmt = stmt.where(AuditEventRow.id < _CURSOR.decode(query.cursor))
    if query.tenant is not None:
        stmt = stmt.where(
            or_(AuditEventRow.tenant == query.tenant, AuditEventRow.actor_tenant == query.tenant)
        )
    if query.actor is not None:
        stmt = stmt.where(AuditEventRow.actor == query.actor)
    if query.action is not None:
        stmt = stmt.where(AuditEventRow.action == query.action)
    if query.outcome is not None:
        stmt = stmt.where(AuditEventRow.outcome == query.outcome)
    if query.since is not None:
        stmt = stmt.where(AuditEventRow.at >= query.since)
    if query.until is not None:
        stmt = stmt.where(AuditEventRow.at < query.until)
    rows = list(session.scalars(stmt))
    more = len(rows) > query.limit
    rows = rows[: query.limit]
    return AuditPage(
        items=tuple(_event(r) for r in rows),
        next_cursor=_CURSOR.encode(rows[-1].id) if more else None,
    )

"""/api/audit: the append-only audit log, for the platform admin and tenants' owners."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime
from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from modelport.api import deps
from modelport.api.access import require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.tenancy_json import audit_event_json
from modelport.tenancy.audit import MAX_LIMIT
from modelport.tenancy.policy import Permission, permissions_of
from modelport.tenancy.repository import tenant_not_found
from modelport.tenancy.types import AuditEvent, AuditQuery

router = APIRouter(tags=["audit"])


@router.get("/audit")
def audit_log(
    tenancy: deps.Tenancy,
    request: Request,
    principal: CurrentPrincipal,
    tenant: Annotated[
        str | None, Query(description="Events about or by this tenant; owners: their own")
    ] = None,
    actor: str | None = None,
    action: str | None = None,
    outcome: Annotated[str | None, Query(description="success, denied, failed or error")] = None,
    since: datetime | None = None,
    until: datetime | None = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIMIT)] = 50,
    cursor: str | None = None,
) -> dict[str, Any]:
    """Events newest first; pass ``next_cursor`` back as ``cursor`` for the next page."""
    viewer = None
    if Permission.PLATFORM_MANAGE not in permissions_of(principal):
        viewer = principal.tenant
        if principal.tenant is None or tenant not in (None, principal.tenant):
            raise tenant_not_found(tenant or "")
        require_tenant(request, principal, principal.tenant, Permission.AUDIT_READ)
        tenant = principal.tenant
    since, until = _utc(since), _utc(until)
    page = tenancy.audit_log(
        AuditQuery(
            tenant=tenant,
            actor=actor,
            action=action,
            outcome=outcome,
            since=since,
            until=until,
            limit=limit,
            cursor=cursor,
        )
    )
    items = [audit_event_json(_as_seen_by(e, viewer)) for e in page.items]
    return {"items": items, "next_cursor": page.next_cursor}


def _as_seen_by(event: AuditEvent, viewer: str | None) -> AuditEvent:
    """The event as ``viewer``'s owners may see it (None: the platform admin sees all).

    A refused attempt on another tenant's resource names that tenant in the log, for its
    owners; shown to the attempting tenant, it would tell a hidden resource from one
    that does not exist (which names no tenant). So there it names none."""
    if viewer is None or event.tenant in (None, viewer) or event.status < 400:
        return event
    return replace(event, tenant=None)


def _utc(value: datetime | None) -> datetime | None:
    """Times without a zone are taken as UTC."""
    if value is None or value.tzinfo is not None:
        return value
    return value.replace(tzinfo=UTC)

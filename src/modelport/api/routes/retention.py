"""/api/tenants/{tenant}/retention and /api/tenants/{tenant}/predictions: how long the
prediction log keeps a tenant's records, and deleting a tenant's records now (the right
to deletion). Reading needs ``tenant.read``, changing and deleting ``tenant.manage``, in
that tenant (the platform admin: any)."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.observability.retention import MAX_DAYS, PredictionRetention
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["tenants"])
PATH = "/tenants/{tenant}"
FORGET_ACTION = "retention.forget"


class SetRetention(BaseModel):
    model_config = ConfigDict(extra="forbid")

    days: int | None = Field(
        description=f"Days a record is kept, 1 to {MAX_DAYS}; null: the installation's default"
    )


async def _retention(retention: PredictionRetention, tenant: str) -> dict[str, Any]:
    days, own = await anyio.to_thread.run_sync(retention.days_of, tenant)
    return {"tenant": tenant, "days": days, "default": not own}


async def _tenant(request: Request, principal: Any, tenant: str, permission: Permission) -> None:
    require_tenant(request, principal, tenant, permission)
    await anyio.to_thread.run_sync(deps.tenancy_service(request).get_tenant, tenant)


@router.get(PATH + "/retention")
async def get_retention(
    retention: deps.Retention, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """How many days the prediction log keeps the records of the tenant's endpoints."""
    await _tenant(request, principal, tenant, Permission.TENANT_READ)
    return await _retention(retention, tenant)


@router.put(PATH + "/retention")
async def set_retention(
    retention: deps.Retention,
    tenant: str,
    body: SetRetention,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Keep the records of the tenant's endpoints ``days`` days (400 ``invalid_retention``
    out of range); the next sweep deletes what is older."""
    await _tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    await anyio.to_thread.run_sync(
        lambda: retention.set_days(tenant, body.days, actor=principal.id)
    )
    return await _retention(retention, tenant)


@router.delete(PATH + "/predictions")
async def forget_predictions(
    retention: deps.Retention, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Delete now every prediction-log record of the tenant's calls, their inputs,
    outputs and outcomes, whichever endpoint logged them (audited as
    ``retention.forget`` with the count)."""
    await _tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    deleted = await anyio.to_thread.run_sync(retention.forget, tenant)
    request.state.audit_action = FORGET_ACTION
    request.state.audit_reason = f"deleted {deleted} prediction records"
    return {"tenant": tenant, "deleted": deleted}

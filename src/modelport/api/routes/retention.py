"""/api/retention (every tenant's, for the platform admin), /api/tenants/{tenant}/retention,
/predictions and /data: how long a tenant's data is
kept (its prediction log's records; its finished jobs' and batches' inputs and outputs),
and erasing it now (the right to deletion): ``/predictions`` the prediction log only,
``/data`` everything. Reading needs ``tenant.read``, changing and deleting
``tenant.manage``, in that tenant (the platform admin: any). Every change and deletion
is audited (``api.context``), a deletion with what it erased as the reason."""

from __future__ import annotations

from typing import Any

import anyio.to_thread
from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_platform, require_tenant
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


@router.get("/retention")
async def list_retention(
    retention: deps.Retention, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """The installation's default and every tenant that set its own, in one answer
    (the platform admin only)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    policies = await anyio.to_thread.run_sync(retention.policies)
    return {
        "default_days": retention.default_days,
        "tenants": [{"tenant": t, "days": d} for t, d in sorted(policies.items())],
    }


@router.get(PATH + "/retention")
async def get_retention(
    retention: deps.Retention, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """How many days the prediction log keeps the records of the tenant's endpoints, and
    the tenant's finished jobs keep their inputs and outputs."""
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
    """Keep the records of the tenant's endpoints, and its jobs' inputs and outputs,
    ``days`` days (400 ``invalid_retention`` out of range); the next sweep erases what
    is older."""
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
    request.state.audit_reason = f"erased {deleted} predictions"
    return {"tenant": tenant, "deleted": deleted}


@router.delete(PATH + "/data")
async def forget_data(
    retention: deps.Retention, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """The right to deletion: erase now every prediction-log record of the tenant's
    calls and the inputs and outputs of its finished jobs and batches (their records
    stay, with what billing needs: ids, quantities, times; their outputs answer 410
    ``erased``). Jobs still queued or running are left and counted in
    ``jobs_unfinished``: cancel them and call again."""
    await _tenant(request, principal, tenant, Permission.TENANT_MANAGE)
    erased = await anyio.to_thread.run_sync(retention.forget_all, tenant)
    request.state.audit_action = FORGET_ACTION
    request.state.audit_reason = "erased " + ", ".join(
        f"{n} {kind}" for kind, n in sorted(erased.items())
    )
    return {"tenant": tenant, **erased}

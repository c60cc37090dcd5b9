"""/api/limits and /api/budgets: rate and concurrency limits, spending caps.

Who may change what:

- a tenant's limits and budget: its owners (and the platform admin);
- an API key's limits: whoever manages the key (its holder, the tenant's
  owners); a key's limits only narrow its tenant's, never widen them;
- a model's limits (``scope_id`` ``owner/name``, counted per calling tenant):
  its publishers. Anyone who can see the model can read them.

A change is enforced at once by the process that made it and by every other
gateway within ``limits_cache_ttl_seconds``.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import enforce, model_resource, note_tenant
from modelport.api.auth import CurrentPrincipal
from modelport.errors import Forbidden, NotFound
from modelport.registry.errors import model_not_found
from modelport.store.base import utcnow
from modelport.tenancy.limits import Budget, BudgetAlert, Limits, ScopeType, period_of
from modelport.tenancy.limits.service import MAX_CAP_MICROS
from modelport.tenancy.policy import (
    Permission,
    Resource,
    TenantScoped,
)
from modelport.tenancy.repository import key_not_found, tenant_not_found
from modelport.tenancy.types import Principal

router = APIRouter(tags=["limits"])

MAX_RATE = 60_000_000
"""One unit per microsecond: the finest rate the limiters count."""


class PutLimits(BaseModel):
    model_config = ConfigDict(extra="forbid")

    rpm: int | None = Field(default=None, ge=1, le=MAX_RATE, description="requests per minute")
    concurrency: int | None = Field(
        default=None, ge=1, le=1_000_000, description="requests in flight at once"
    )
    tpm: int | None = Field(default=None, ge=1, le=MAX_RATE, description="tokens per minute")
    jobs: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="a tenant's jobs queued and running at once (tenant scope only)",
    )
    job_concurrency: int | None = Field(
        default=None,
        ge=1,
        le=1_000_000,
        description="a tenant's jobs running at once (tenant scope only)",
    )


class PutBudget(BaseModel):
    model_config = ConfigDict(extra="forbid")

    hard_cap_micros: int | None = Field(
        default=None,
        ge=0,
        le=MAX_CAP_MICROS,
        description="refuse calls (402) once spending this period reaches it",
    )
    soft_cap_micros: int | None = Field(
        default=None,
        ge=0,
        le=MAX_CAP_MICROS,
        description="record an alert once per period when spending reaches it",
    )


def limits_json(limits: Limits) -> dict[str, Any]:
    return {
        "scope_type": limits.scope_type.value,
        "scope_id": limits.scope_id,
        "tenant": limits.tenant,
        "rpm": limits.rpm,
        "concurrency": limits.concurrency,
        "tpm": limits.tpm,
        "jobs": limits.jobs,
        "job_concurrency": limits.job_concurrency,
        "updated_at": limits.updated_at.isoformat(),
        "updated_by": limits.updated_by,
    }


def budget_json(budget: Budget, period: str) -> dict[str, Any]:
    return {
        "tenant": budget.tenant,
        "hard_cap_micros": budget.hard_cap_micros,
        "soft_cap_micros": budget.soft_cap_micros,
        "period": period,
        "spent_micros": budget.spent_micros if budget.period == period else 0,
        "updated_at": budget.updated_at.isoformat(),
    }


def alert_json(alert: BudgetAlert) -> dict[str, Any]:
    return {
        "id": alert.id,
        "tenant": alert.tenant,
        "period": alert.period,
        "kind": alert.kind,
        "spent_micros": alert.spent_micros,
        "cap_micros": alert.cap_micros,
        "created_at": alert.created_at.isoformat(),
    }


def _enforce(
    request: Request,
    principal: Principal,
    permission: Permission,
    resource: Resource,
    tenant: str,
    hidden: Callable[[], NotFound],
) -> None:
    note_tenant(request, tenant)
    enforce(principal, permission, resource, hidden=hidden)


def _scope_tenant(
    request: Request, principal: Principal, scope_type: ScopeType, scope_id: str, write: bool
) -> str:
    """The tenant a scope belongs to, once the caller may read (or change) its limits."""
    if scope_type is ScopeType.TENANT:
        tenant = deps.tenancy_service(request).get_tenant(scope_id).slug
        permission = Permission.TENANT_MANAGE if write else Permission.TENANT_READ
        resource: Resource = TenantScoped(tenant)
        hidden: Callable[[], NotFound] = partial(tenant_not_found, tenant)
    elif scope_type is ScopeType.KEY:
        key = deps.tenancy_service(request).get_key(scope_id)
        tenant = key.tenant
        permission = Permission.KEYS_MANAGE
        resource = TenantScoped(tenant, key.principal_id)
        hidden = partial(key_not_found, scope_id)
    else:
        owner, _, name = scope_id.partition("/")
        model = deps.registry_service(request).get_model(owner, name)
        tenant = model.owner
        permission = Permission.MODEL_REGISTER if write else Permission.MODEL_READ
        resource = model_resource(request, principal, owner, name, model.visibility.value)
        hidden = partial(model_not_found, owner, name)
    _enforce(request, principal, permission, resource, tenant, hidden)
    return tenant


@router.get("/limits")
def list_limits(
    limits: deps.Limits,
    request: Request,
    principal: CurrentPrincipal,
    tenant: str | None = None,
    scope_type: ScopeType | None = None,
) -> dict[str, Any]:
    """Limits rows: the admin sees every tenant's (or ``tenant``'s); others their own
    tenant's (its own, its keys', its models')."""
    if not principal.is_admin:
        tenant = tenant or principal.tenant
        if tenant is None:
            raise Forbidden("a tenant is needed", code="forbidden")
        _scope_tenant(request, principal, ScopeType.TENANT, tenant, write=False)
    items = limits.list_limits(tenant=tenant, scope_type=scope_type)
    return {"items": [limits_json(item) for item in items]}


@router.get("/limits/{scope_type}/{scope_id:path}")
def get_limits(
    limits: deps.Limits,
    scope_type: ScopeType,
    scope_id: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    _scope_tenant(request, principal, scope_type, scope_id, write=False)
    return limits_json(limits.get_limits(scope_type, scope_id))


@router.put("/limits/{scope_type}/{scope_id:path}")
def put_limits(
    limits: deps.Limits,
    scope_type: ScopeType,
    scope_id: str,
    body: PutLimits,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Set (replace) a scope's limits; a field left out or null is not limited."""
    tenant = _scope_tenant(request, principal, scope_type, scope_id, write=True)
    stored = limits.set_limits(
        scope_type,
        scope_id,
        tenant=tenant,
        rpm=body.rpm,
        concurrency=body.concurrency,
        tpm=body.tpm,
        jobs=body.jobs,
        job_concurrency=body.job_concurrency,
        actor=principal.id,
    )
    return limits_json(stored)


@router.delete("/limits/{scope_type}/{scope_id:path}", status_code=204)
def delete_limits(
    limits: deps.Limits,
    scope_type: ScopeType,
    scope_id: str,
    request: Request,
    principal: CurrentPrincipal,
) -> None:
    _scope_tenant(request, principal, scope_type, scope_id, write=True)
    limits.delete_limits(scope_type, scope_id)


def _budget_access(request: Request, principal: Principal, tenant: str, write: bool) -> str:
    slug = deps.tenancy_service(request).get_tenant(tenant).slug
    permission = Permission.TENANT_MANAGE if write else Permission.USAGE_READ
    _enforce(
        request,
        principal,
        permission,
        TenantScoped(slug),
        slug,
        partial(tenant_not_found, slug),
    )
    return slug


@router.get("/budgets/{tenant}")
def get_budget(
    limits: deps.Limits, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    slug = _budget_access(request, principal, tenant, write=False)
    budget = limits.get_budget(slug)
    return budget_json(budget, period_of(utcnow()))


@router.put("/budgets/{tenant}")
def put_budget(
    limits: deps.Limits, tenant: str, body: PutBudget, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Set a tenant's spending caps (micro-units; null: no cap). Spending is kept."""
    slug = _budget_access(request, principal, tenant, write=True)
    budget = limits.set_budget(
        slug, hard_cap_micros=body.hard_cap_micros, soft_cap_micros=body.soft_cap_micros
    )
    return budget_json(budget, period_of(utcnow()))


@router.delete("/budgets/{tenant}", status_code=204)
def delete_budget(
    limits: deps.Limits, tenant: str, request: Request, principal: CurrentPrincipal
) -> None:
    slug = _budget_access(request, principal, tenant, write=True)
    limits.delete_budget(slug)


@router.get("/budgets/{tenant}/alerts")
def budget_alerts(
    limits: deps.Limits, tenant: str, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    slug = _budget_access(request, principal, tenant, write=False)
    return {"items": [alert_json(a) for a in limits.budget_alerts(slug)]}

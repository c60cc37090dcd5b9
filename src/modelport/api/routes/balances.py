"""/api/balances: tenants' prepaid balances (and their keys' spending allowances).

A tenant's owners and ``billing`` members read its balance; only the platform admin
credits one. Every credit is recorded in the audit log (action ``balances.credit``,
its amount and reason in the event's reason).
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_access import require_document
from modelport.api.routes.billing_json import balance_json
from modelport.metering.billing.service import MAX_CREDIT_MICROS
from modelport.tenancy.policy import Permission
from modelport.tenancy.repository import tenant_not_found

router = APIRouter(tags=["billing"])


class CreditBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    amount_micros: int = Field(gt=0, le=MAX_CREDIT_MICROS, description="Added, in micro-units")
    reason: str = Field(default="", max_length=1000, description="Recorded in the audit log")


@router.get("/balances/{tenant}")
def get_balances(
    billing: deps.Billing,
    tenancy: deps.Tenancy,
    tenant: str,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """The tenant's prepaid balance and its keys' allowances (none until credited)."""
    require_document(
        request, principal, tenant, Permission.USAGE_READ, lambda: tenant_not_found(tenant)
    )
    slug = tenancy.get_tenant(tenant).slug
    return {"tenant": slug, "items": [balance_json(b) for b in billing.balances_of(slug)]}


@router.post("/balances/{tenant}/credits", status_code=201)
def credit_balance(
    billing: deps.Billing,
    tenancy: deps.Tenancy,
    tenant: str,
    body: CreditBody,
    request: Request,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Add money to the tenant's prepaid balance (opened at 0 by the first credit)."""
    request.state.audit_action = "balances.credit"
    request.state.audit_reason = f"credit of {body.amount_micros} micro-units" + (
        f": {body.reason}" if body.reason else ""
    )
    require_document(
        request, principal, tenant, Permission.PLATFORM_MANAGE, lambda: tenant_not_found(tenant)
    )
    slug = tenancy.get_tenant(tenant).slug
    return balance_json(billing.credit_balance(slug, body.amount_micros))

"""/api/billing: the platform admin's billing operations on a period: generate the
draft invoices and statements, recompute them from the raw ledger, and reconcile
reservations with what they settled."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.access import require_platform
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_json import generate_json, recompute_json, reconciliation_json
from modelport.tenancy.policy import Permission

router = APIRouter(tags=["billing"])


class GenerateBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    period: str = Field(description="YYYY-MM")


@router.post("/billing/generate")
def generate(
    billing: deps.Billing, body: GenerateBody, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Rebuild every draft invoice and statement of the period from the ledger
    (finalised ones are kept as they are and listed under ``kept``)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    return generate_json(billing.generate(body.period))


@router.get("/billing/recompute")
def recompute(
    billing: deps.Billing,
    request: Request,
    principal: CurrentPrincipal,
    period: Annotated[str, Query(description="YYYY-MM")],
) -> dict[str, Any]:
    """Every difference between the stored invoices and statements and their rebuild
    from the raw usage events (``clean``: none)."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    return recompute_json(billing.recompute(period))


@router.get("/billing/reconciliation")
def reconciliation(
    billing: deps.Billing,
    request: Request,
    principal: CurrentPrincipal,
    period: Annotated[str, Query(description="YYYY-MM")],
    threshold_bps: Annotated[
        int, Query(ge=0, le=1_000_000, description="Flag a variance over this (basis points)")
    ] = 1_000,
) -> dict[str, Any]:
    """Reservations taken in the period against what they settled and what the ledger
    charged, per tenant, with the reservations that need attention."""
    require_platform(request, principal, Permission.PLATFORM_MANAGE)
    report = billing.reconcile(period, threshold_bps=threshold_bps)
    return reconciliation_json(report)

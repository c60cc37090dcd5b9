"""/api/statements: a publisher's revenue per period, model version and unit, with the
publisher's share and the platform's take (which add up to the revenue exactly).

The publishing tenant's owners and ``billing`` members read its statements; the
platform admin reads every one and finalises them.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_access import readable_tenant, require_document
from modelport.api.routes.billing_json import statement_json
from modelport.metering.billing.repository import statement_not_found
from modelport.metering.billing.types import Statement
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

router = APIRouter(tags=["billing"])


def _statement(
    request: Request, principal: Principal, statement_id: int, permission: Permission
) -> Statement:
    statement = deps.billing_service(request).get_statement(statement_id)
    require_document(
        request,
        principal,
        statement.publisher,
        permission,
        lambda: statement_not_found(statement_id),
    )
    return statement


@router.get("/statements")
def list_statements(
    billing: deps.Billing,
    request: Request,
    principal: CurrentPrincipal,
    publisher: Annotated[str | None, Query(description="Default: one's own tenant")] = None,
    period: Annotated[str | None, Query(description="YYYY-MM")] = None,
) -> dict[str, Any]:
    """Statements newest period first (without their lines)."""
    publisher = readable_tenant(request, principal, publisher)
    statements = billing.list_statements(publisher=publisher, period=period)
    return {"items": [statement_json(s, lines=False) for s in statements]}


@router.get("/statements/{statement_id}")
def get_statement(
    statement_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    return statement_json(_statement(request, principal, statement_id, Permission.USAGE_READ))


@router.post("/statements/{statement_id}/finalize")
def finalize_statement(
    billing: deps.Billing, statement_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Rebuild the draft one last time and make it final (409 ``statement_finalized``,
    ``period_open``)."""
    _statement(request, principal, statement_id, Permission.PLATFORM_MANAGE)
    statement = billing.finalize_statement(statement_id, actor=principal.id)
    return statement_json(statement)

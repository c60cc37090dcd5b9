"""/api/invoices: a tenant's charges per period, and their credit notes.

Tenants' owners and ``billing`` members read their own tenant's invoices; the
platform admin reads every one, finalises them and adds credit notes. A draft is
rebuilt from the ledger by ``POST /api/billing/generate``; a finalised invoice
never changes, and is corrected by credit notes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Request, Response
from pydantic import BaseModel, ConfigDict, Field

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.api.routes.billing_access import readable_tenant, require_document
from modelport.api.routes.billing_json import credit_note_json, invoice_json
from modelport.metering.billing.repository import invoice_not_found
from modelport.metering.billing.types import CreditNoteLine, DocumentStatus, Invoice
from modelport.tenancy.policy import Permission
from modelport.tenancy.types import Principal

router = APIRouter(tags=["billing"])


class CreditLineBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    description: str = Field(max_length=512)
    amount_micros: int = Field(gt=0, description="Given back, in micro-units")
    invoice_line: int | None = Field(
        default=None, ge=1, description="The invoice line this corrects (numbered from 1)"
    )


class CreditNoteBody(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(min_length=1, max_length=2000)
    lines: list[CreditLineBody] = Field(min_length=1, max_length=100)


def _invoice(
    request: Request, principal: Principal, invoice_id: int, permission: Permission
) -> Invoice:
    invoice = deps.billing_service(request).get_invoice(invoice_id)
    require_document(
        request, principal, invoice.tenant, permission, lambda: invoice_not_found(invoice_id)
    )
    return invoice


@router.get("/invoices")
def list_invoices(
    billing: deps.Billing,
    request: Request,
    principal: CurrentPrincipal,
    tenant: Annotated[str | None, Query(description="Default: one's own tenant")] = None,
    period: Annotated[str | None, Query(description="YYYY-MM")] = None,
    status: DocumentStatus | None = None,
) -> dict[str, Any]:
    """Invoices newest period first (without their lines)."""
    tenant = readable_tenant(request, principal, tenant)
    invoices = billing.list_invoices(tenant=tenant, period=period, status=status)
    return {"items": [invoice_json(i, lines=False) for i in invoices]}


@router.get("/invoices/{invoice_id}")
def get_invoice(
    billing: deps.Billing, invoice_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """An invoice with its lines and its credit notes."""
    invoice = _invoice(request, principal, invoice_id, Permission.USAGE_READ)
    body = invoice_json(invoice)
    notes = billing.credit_notes(invoice_id)
    body["credit_notes"] = [credit_note_json(n) for n in notes]
    return body


@router.post("/invoices/{invoice_id}/finalize")
def finalize_invoice(
    billing: deps.Billing, invoice_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    """Rebuild the draft from the ledger one last time and make it final (409
    ``invoice_finalized`` if it is, ``period_open`` before the period has closed)."""
    _invoice(request, principal, invoice_id, Permission.PLATFORM_MANAGE)
    invoice = billing.finalize_invoice(invoice_id, actor=principal.id)
    return invoice_json(invoice)


@router.get("/invoices/{invoice_id}/credit-notes")
def list_credit_notes(
    billing: deps.Billing, invoice_id: int, request: Request, principal: CurrentPrincipal
) -> dict[str, Any]:
    _invoice(request, principal, invoice_id, Permission.USAGE_READ)
    notes = billing.credit_notes(invoice_id)
    return {"items": [credit_note_json(n) for n in notes]}


@router.post("/invoices/{invoice_id}/credit-notes", status_code=201)
def add_credit_note(
    billing: deps.Billing,
    invoice_id: int,
    body: CreditNoteBody,
    request: Request,
    response: Response,
    principal: CurrentPrincipal,
) -> dict[str, Any]:
    """Give money back on a finalised invoice; never more than it (or a line) charged."""
    _invoice(request, principal, invoice_id, Permission.PLATFORM_MANAGE)
    request.state.audit_reason = body.reason
    note = billing.add_credit_note(
        invoice_id,
        reason=body.reason,
        lines=[CreditNoteLine(x.description, x.amount_micros, x.invoice_line) for x in body.lines],
        actor=principal.id,
    )
    response.headers["Location"] = f"/api/invoices/{invoice_id}/credit-notes"
    return credit_note_json(note)

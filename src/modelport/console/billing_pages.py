"""A tenant's invoices: the list by period, and one invoice with its lines and credit
notes."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.charts import dollars
from modelport.console.web import current_session, platform, refusal, render

router = APIRouter()


@router.get("/invoices")
async def invoices(request: Request) -> Response:
    """The signed-in tenant's invoices, newest period first."""
    session = await current_session(request)
    answer = await platform(request, session).get("/api/invoices")
    return render(
        request,
        "invoices.html",
        status_code=answer.status if not answer.ok else 200,
        session=session,
        invoices=answer.body.get("items", []) if answer.ok else [],
        error=None if answer.ok else answer.error,
        dollars=dollars,
    )


@router.get("/invoices/{invoice_id}")
async def invoice(invoice_id: str, request: Request) -> Response:
    """One invoice: its lines, its credit notes and its totals (the API's 404 for one of
    another tenant)."""
    session = await current_session(request)
    answer = await platform(request, session).get(f"/api/invoices/{quote(invoice_id, safe='')}")
    if not answer.ok:
        return refusal(request, session, answer)
    return render(request, "invoice.html", session=session, invoice=answer.body, dollars=dollars)

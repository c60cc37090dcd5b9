"""Operations pages: what serving cost, earned and left as margin per tenant and model
over a month (``GET /api/costs``, the operator's), each tenant's prediction-log
retention with the latest sweeps and deletions from the audit log (the operator's),
and a tenant's own retention with the form that deletes its logged predictions now
(its right to deletion, ``DELETE /api/tenants/{tenant}/data``). The API
decides who may see and do what; its refusal is shown with its code."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.calls import PlatformAPI
from modelport.console.charts import dollars
from modelport.console.sessions import ConsoleSession
from modelport.console.web import checked_form, current_session, platform, refusal, render

router = APIRouter()

SWEEP_ACTION = "retention.sweep"
FORGET_ACTION = "retention.forget"
"""The audit actions of the retention sweep and of a deletion (``api/routes/retention``)."""
RECENT_EVENTS = "20"
"""Audit events of each kind the retention pages show."""


def _q(segment: str) -> str:
    return quote(segment, safe="")


def micros(value: float | int | None) -> str:
    """A micro-unit figure (costs are fractional) as dollars, to the micro."""
    return dollars(None if value is None else round(value))


@router.get("/operator/costs")
async def costs(request: Request) -> Response:
    """Cost, revenue and margin per tenant and model over a month (``period``)."""
    session = await current_session(request)
    period = request.query_params.get("period", "").strip()
    answer = await platform(request, session).get("/api/costs", period=period or None)
    if answer.status in (401, 403, 404):
        return refusal(request, session, answer)
    body: dict[str, Any] = answer.body if answer.ok else {}
    models = body.get("models", [])
    return render(
        request,
        "operator_costs.html",
        status_code=answer.status,
        session=session,
        period=body.get("period") or period,
        prices=body.get("prices") or {},
        tenants=body.get("tenants", []),
        models=models,
        items=body.get("items", []),
        totals={
            key: sum(m.get(key, 0) for m in models)
            for key in ("calls", "compute_ms", "cost_micros", "revenue_micros", "margin_micros")
        },
        error=None if answer.ok else answer.error,
        micros=micros,
    )


@router.get("/operator/retention")
async def retention(request: Request) -> Response:
    """Every tenant's retention, and the latest sweeps and deletions the audit log
    holds."""
    session = await current_session(request)
    api = platform(request, session)
    listed = await api.get("/api/tenants")
    if not listed.ok:
        return refusal(request, session, listed)
    slugs = [str(t["slug"]) for t in listed.body.get("items", [])]
    every = await api.get("/api/retention")  # the platform admin's: one answer for all
    if every.ok:
        own = {p["tenant"]: p["days"] for p in every.body["tenants"]}
        default = int(every.body["default_days"])
        rows = [{"tenant": s, "days": own.get(s, default), "default": s not in own} for s in slugs]
    else:  # anyone else is listed its own tenant only: ask for each (one)
        answers = await asyncio.gather(*(api.get(f"/api/tenants/{_q(s)}/retention") for s in slugs))
        rows = [
            {"tenant": slug, **(a.body if a.ok else {"error": a.error})}
            for slug, a in zip(slugs, answers, strict=True)
        ]
    sweeps, deletions = await _recent(api)
    return render(
        request,
        "operator_retention.html",
        session=session,
        rows=rows,
        sweeps=sweeps,
        deletions=deletions,
    )


async def _recent(api: PlatformAPI) -> tuple[dict[str, Any], dict[str, Any]]:
    """The latest sweep and deletion events the session may read, or their error."""
    found = await asyncio.gather(
        *(
            api.get("/api/audit", action=a, limit=RECENT_EVENTS)
            for a in (SWEEP_ACTION, FORGET_ACTION)
        )
    )
    sweeps, deletions = (
        {"items": a.body.get("items", [])} if a.ok else {"items": [], "error": a.error}
        for a in found
    )
    return sweeps, deletions


@router.get("/data")
async def data(request: Request) -> Response:
    session = await current_session(request)
    return await _data_page(request, session)


async def _data_page(
    request: Request,
    session: ConsoleSession,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    """The signed-in tenant's retention, its latest deletions, and the deletion form."""
    if not session.tenant:  # the platform admin: every tenant's is on the operator's page
        return RedirectResponse("/console/operator/retention", status_code=303)
    api = platform(request, session)
    found = await api.get(f"/api/tenants/{_q(session.tenant)}/retention")
    if not found.ok:
        return refusal(request, session, found)
    sweeps, deletions = await _recent(api)
    return render(
        request,
        "data.html",
        status_code=status_code,
        session=session,
        retention=found.body,
        sweeps=sweeps,
        deletions=deletions,
        deleted=request.query_params.get("deleted"),
        jobs=request.query_params.get("jobs"),
        error=error,
    )


@router.post("/data/forget")
async def forget(request: Request) -> Response:
    """Erase every logged prediction of the signed-in tenant's calls and its finished
    jobs' inputs and outputs (``DELETE /api/tenants/{tenant}/data``), once the form names
    the tenant (the confirmation); the API decides who may, and audits it."""
    session = await current_session(request)
    form = await checked_form(request, session)
    tenant = session.tenant
    if not tenant:
        return RedirectResponse("/console/operator/retention", status_code=303)
    if form.get("confirm", "").strip() != tenant:
        return await _data_page(
            request,
            session,
            error=f"Type the tenant's name, {tenant}, to confirm the deletion "
            "(deletion_not_confirmed)",
            status_code=400,
        )
    answer = await platform(request, session).call("DELETE", f"/api/tenants/{_q(tenant)}/data")
    if not answer.ok:
        return await _data_page(request, session, error=answer.error, status_code=answer.status)
    erased = answer.body
    return RedirectResponse(
        f"/console/data?deleted={int(erased['predictions'])}&jobs={int(erased.get('jobs', 0))}",
        status_code=303,
    )

"""A tenant's budget (spending caps, this month's spend, its alerts) and its rate,
concurrency and job limits; owners set the budget here (the API decides who may)."""

from __future__ import annotations

import re
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.charts import dollars
from modelport.console.sessions import ConsoleSession
from modelport.console.web import checked_form, current_session, platform, render

router = APIRouter()

AMOUNT = re.compile(r"\$?\s*(\d{1,12})(?:\.(\d{1,6}))?")
"""Dollars to the micro-dollar, as a person types them: ``12``, ``12.5``, ``$0.000250``."""
BAD_AMOUNT = "invalid_amount"


class BadAmount(ValueError):
    """A cap that is not an amount of dollars."""


def micros_of(text: str) -> int | None:
    """Typed dollars as micro-dollars, exactly (no float); blank: no cap."""
    cleaned = text.strip().replace(",", "")
    if not cleaned:
        return None
    found = AMOUNT.fullmatch(cleaned)
    if found is None:
        raise BadAmount(text)
    whole, fraction = found[1], found[2] or ""
    return int(whole) * 1_000_000 + int(fraction.ljust(6, "0"))


def _tenant_of(request: Request, session: ConsoleSession) -> str | None:
    """The tenant shown: the session's, or (a platform session) the one asked for."""
    return session.tenant or (request.query_params.get("tenant") or "").strip() or None


@router.get("/limits")
async def limits(request: Request) -> Response:
    session = await current_session(request)
    return await _limits_page(request, session, _tenant_of(request, session))


async def _limits_page(
    request: Request,
    session: ConsoleSession,
    tenant: str | None,
    *,
    form: dict[str, str] | None = None,
    form_error: str | None = None,
    status_code: int = 200,
) -> Response:
    api = platform(request, session)
    budget: dict[str, Any] | None = None
    alerts: list[dict[str, Any]] = []
    budget_error = limits_error = None
    rows: list[dict[str, Any]] = []
    if tenant:
        slug = quote(tenant, safe="")
        found = await api.get(f"/api/budgets/{slug}")
        if found.ok or _code(found.body) == "budget_not_found":
            # No budget yet is no error: spending is not capped.
            budget = found.body if found.ok else None
            listed = await api.get(f"/api/budgets/{slug}/alerts")
            alerts = listed.body.get("items", []) if listed.ok else []
        else:
            budget_error = found.error
        answer = await api.get("/api/limits", tenant=tenant)
        if answer.ok:
            rows = answer.body.get("items", [])
        else:
            limits_error = answer.error
    if form is None and budget is not None:
        form = {name: _typed(budget.get(name)) for name in ("hard_cap_micros", "soft_cap_micros")}
    return render(
        request,
        "limits.html",
        status_code=status_code,
        session=session,
        tenant=tenant,
        budget=budget,
        readable=budget_error is None,
        alerts=alerts,
        limits=rows,
        budget_error=budget_error,
        limits_error=limits_error,
        form=form or {},
        form_error=form_error,
        dollars=dollars,
    )


def _code(body: Any) -> str | None:
    return body.get("code") if isinstance(body, dict) else None


def _typed(micros: int | None) -> str:
    """A cap as the form shows it: plain dollars, no sign or separators."""
    if micros is None:
        return ""
    whole, rest = divmod(micros, 1_000_000)
    return f"{whole}.{rest:06d}"


@router.post("/limits/budget")
async def set_budget(request: Request) -> Response:
    """Set the tenant's spending caps (blank: no cap) through ``PUT /api/budgets/{tenant}``;
    the API's refusal (a member without ``tenant.manage``) is shown with its code."""
    session = await current_session(request)
    fields = await checked_form(request, session)
    tenant = session.tenant or fields.get("tenant", "").strip() or None
    if tenant is None:
        return await _limits_page(
            request,
            session,
            None,
            form_error="Choose a tenant first (invalid_request)",
            status_code=400,
        )
    caps: dict[str, int | None] = {}
    for name, label in (("hard_cap_micros", "Hard cap"), ("soft_cap_micros", "Soft cap")):
        try:
            caps[name] = micros_of(fields.get(name, ""))
        except BadAmount:
            return await _limits_page(
                request,
                session,
                tenant,
                form=fields,
                form_error=f"{label}: give dollars such as 25 or 12.50, at most 6 decimals "
                f"({BAD_AMOUNT})",
                status_code=400,
            )
    answer = await platform(request, session).call(
        "PUT", f"/api/budgets/{quote(tenant, safe='')}", json=caps
    )
    if not answer.ok:
        return await _limits_page(
            request,
            session,
            tenant,
            form=fields,
            form_error=answer.error,
            status_code=answer.status,
        )
    query = "" if session.tenant else "?" + urlencode({"tenant": tenant})
    return RedirectResponse(f"/console/limits{query}", status_code=303)

"""A consumer's own pages: API keys (create, shown once; revoke) with the tenant's tier,
usage and spend by model and by day, the tenant's share of the month's compute, and the prepaid balance."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.charts import bar_chart, dollars, spend
from modelport.console.sessions import ConsoleSession
from modelport.console.usage import calls
from modelport.console.web import checked_form, current_session, platform, render

router = APIRouter()

USAGE_PAGES = 20
"""Pages of usage (500 events each) a usage page sums at most: the month's events."""
RECENT_CALLS = 20


@router.get("/keys")
async def keys(request: Request) -> Response:
    session = await current_session(request)
    return await _keys_page(request, session)


async def _keys_page(
    request: Request,
    session: ConsoleSession,
    *,
    created: dict[str, Any] | None = None,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    api = platform(request, session)
    if session.tenant:  # the member's tenant, for its tier (every member may read it)
        answer, found = await asyncio.gather(
            api.get("/api/keys"), api.get(f"/api/tenants/{quote(session.tenant, safe='')}")
        )
        tenant = found.body if found.ok else None
    else:
        answer, tenant = await api.get("/api/keys"), None
    items = answer.body.get("items", []) if answer.ok else []
    return render(
        request,
        "keys.html",
        status_code=status_code if answer.ok else answer.status,
        session=session,
        tenant=tenant,
        keys=items,
        created=created,
        error=error if answer.ok else answer.error,
    )


@router.post("/keys")
async def create_key(request: Request) -> Response:
    """A new key of the signed-in member: its secret is on this one response only."""
    session = await current_session(request)
    form = await checked_form(request, session)
    name = form.get("name", "").strip() or "console"
    answer = await platform(request, session).call("POST", "/api/keys", json={"name": name})
    if not answer.ok:
        return await _keys_page(request, session, error=answer.error, status_code=answer.status)
    return await _keys_page(request, session, created=answer.body, status_code=201)


@router.post("/keys/{key_id}/revoke")
async def revoke_key(key_id: str, request: Request) -> Response:
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call("DELETE", f"/api/keys/{quote(key_id, safe='')}")
    if not answer.ok:
        return await _keys_page(request, session, error=answer.error, status_code=answer.status)
    return RedirectResponse("/console/keys", status_code=303)


@router.get("/usage")
async def usage(request: Request) -> Response:
    """This month's usage of the signed-in tenant, summed by model, day and key, with
    its balance."""
    session = await current_session(request)
    api = platform(request, session)
    period = request.query_params.get("period") or datetime.now(UTC).strftime("%Y-%m")
    events: list[dict[str, Any]] = []
    cursor: str | None = None
    error = None
    status = 200
    for _ in range(USAGE_PAGES):
        answer = await api.get("/api/usage", period=period, limit="500", cursor=cursor)
        if not answer.ok:
            error, status = answer.error, answer.status
            break
        events.extend(answer.body.get("items", []))
        cursor = answer.body.get("next_cursor")
        if not cursor:
            break
    totals = spend(events)
    # Keys the session may list get their names beside their ids (others stay ids).
    listed = await api.get("/api/keys")
    key_names = (
        {str(k["id"]): str(k["name"]) for k in listed.body.get("items", [])} if listed.ok else {}
    )
    by_key = [
        (f"{key_names[key]} ({key})" if key in key_names else key, calls, micros)
        for key, calls, micros in totals.by_key
    ]
    balances: list[dict[str, Any]] = []
    cost_share: dict[str, Any] | None = None
    if session.tenant:
        tenant = quote(session.tenant, safe="")
        found, share = await asyncio.gather(
            api.get(f"/api/balances/{tenant}"),
            api.get(f"/api/tenants/{tenant}/costs", period=period),
        )
        balances = found.body.get("items", []) if found.ok else []
        if share.ok:
            cost_share = share.body
        elif share.status != 403:  # a member who may not read usage is shown none
            cost_share = {"period": period, "error": share.error}
    return render(
        request,
        "usage.html",
        status_code=status,
        session=session,
        period=period,
        spend=totals,
        by_day=bar_chart(totals.by_day),
        by_model=bar_chart(totals.by_model),
        by_key=bar_chart(by_key),
        key_names=key_names,
        recent=calls(events)[-RECENT_CALLS:][::-1],
        balances=balances,
        cost_share=cost_share,
        truncated=cursor is not None and error is None,
        error=error,
        dollars=dollars,
    )

"""A publisher's workbench index (its models, their newest versions, calls and revenue
by day and by model in a period, its statements) and one statement's page."""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.calls import PlatformAPI
from modelport.console.charts import dollars
from modelport.console.earnings import by_day, by_model, revenue_chart, total
from modelport.console.web import current_session, platform, refusal, render

router = APIRouter()

MODELS_SHOWN = "100"


async def _newest_versions(api: PlatformAPI, models: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Each model with its versions' count and its newest version (None: none yet)."""

    async def one(model: dict[str, Any]) -> dict[str, Any]:
        ref = f"{quote(model['owner'], safe='')}/{quote(model['name'], safe='')}"
        answer = await api.get(f"/api/models/{ref}/versions")
        versions = answer.body.get("items", []) if answer.ok else []
        return {**model, "versions": len(versions), "newest": versions[-1] if versions else None}

    return list(await asyncio.gather(*(one(m) for m in models)))


@router.get("/publisher")
async def publisher(request: Request) -> Response:
    session = await current_session(request)
    api = platform(request, session)
    period = request.query_params.get("period") or None
    models: list[dict[str, Any]] = []
    if session.tenant:
        found = await api.get("/api/models", owner=session.tenant, limit=MODELS_SHOWN)
        models = await _newest_versions(api, found.body.get("items", []) if found.ok else [])
    revenue, statements = await asyncio.gather(
        api.get("/api/revenue", period=period), api.get("/api/statements")
    )
    items = revenue.body.get("items", []) if revenue.ok else []
    days, per_model = by_day(items), by_model(items)
    earned = {row.label: row for row in per_model}
    errors = [a.error for a in (revenue, statements) if not a.ok]
    return render(
        request,
        "publisher.html",
        status_code=200 if revenue.ok or revenue.status == 403 else revenue.status,
        session=session,
        period=revenue.body.get("period") if revenue.ok else (period or ""),
        models=models,
        earned=earned,
        days=days,
        per_model=per_model,
        totals=total(days),
        day_chart=revenue_chart(days),
        model_chart=revenue_chart(per_model),
        statements=statements.body.get("items", []) if statements.ok else [],
        errors=errors,
        dollars=dollars,
    )


@router.get("/publisher/statements/{statement_id}")
async def statement(statement_id: str, request: Request) -> Response:
    """One statement with its lines (another tenant's is the API's 404)."""
    session = await current_session(request)
    if not (statement_id.isascii() and statement_id.isdigit()):
        return render(
            request,
            "refused.html",
            status_code=404,
            code="statement_not_found",
            message=f"statement {statement_id} not found",
            session=session,
        )
    answer = await platform(request, session).get(f"/api/statements/{int(statement_id)}")
    if not answer.ok:
        return refusal(request, session, answer)
    return render(
        request,
        "publisher_statement.html",
        session=session,
        statement=answer.body,
        dollars=dollars,
    )

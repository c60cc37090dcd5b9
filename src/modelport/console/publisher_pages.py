"""A publisher's first page: its models, and what they earned by its statements."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.charts import bar_chart, dollars
from modelport.console.web import current_session, platform, render

router = APIRouter()


@router.get("/publisher")
async def publisher(request: Request) -> Response:
    session = await current_session(request)
    api = platform(request, session)
    models: list[dict[str, Any]] = []
    if session.tenant:
        found = await api.get("/api/models", owner=session.tenant, limit="100")
        models = found.body.get("items", []) if found.ok else []
    statements = await api.get("/api/statements")
    items = statements.body.get("items", []) if statements.ok else []
    lines: list[dict[str, Any]] = []
    if items:
        newest = await api.get(f"/api/statements/{int(items[0]['id'])}")
        lines = newest.body.get("lines", []) if newest.ok else []
    by_period = [
        (s["period"], int(s["events"]), int(s["publisher_share_micros"])) for s in items[::-1]
    ]
    return render(
        request,
        "publisher.html",
        status_code=200 if statements.ok else statements.status,
        session=session,
        models=models,
        statements=items,
        lines=lines,
        chart=bar_chart(by_period),
        error=None if statements.ok else statements.error,
        dollars=dollars,
    )

"""Leaderboards: every board the viewer may see, and one board (verified evaluations
ranked, price and latency beside the score; publishers' claims apart, and endpoint
evaluations several versions served)."""

from __future__ import annotations

from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.charts import dollars
from modelport.console.web import current_session, platform, render

router = APIRouter()


@router.get("/leaderboards")
async def leaderboards(request: Request) -> Response:
    session = await current_session(request)
    answer = await platform(request, session).get("/api/leaderboards")
    boards = answer.body.get("items", []) if answer.ok else []
    return render(
        request,
        "leaderboards.html",
        session=session,
        boards=boards,
        board=None,
        error=None if answer.ok else answer.error,
    )


@router.get("/leaderboards/{task}/{owner}/{name}")
async def leaderboard(task: str, owner: str, name: str, request: Request) -> Response:
    session = await current_session(request)
    split = request.query_params.get("split", "").strip()
    path = (
        f"/api/leaderboards/{quote(task, safe='')}/{quote(owner, safe='')}/{quote(name, safe='')}"
    )
    api = platform(request, session)
    answer = await api.get(path, split=split)
    if not answer.ok:
        return render(
            request,
            "refused.html",
            status_code=answer.status,
            code=(answer.body or {}).get("code", "") if isinstance(answer.body, dict) else "",
            message=answer.error,
            session=session,
        )
    return render(
        request,
        "leaderboards.html",
        session=session,
        boards=[],
        board=answer.body,
        split=split,
        dollars=dollars,
        error=None,
    )

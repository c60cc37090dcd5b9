"""A tenant's jobs: the list (by state, pages by cursor), one job's stages, progress and
outputs, and cancelling it."""

from __future__ import annotations

from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.calls import INTERNAL_BASE
from modelport.console.sessions import ConsoleSession
from modelport.console.web import checked_form, current_session, platform, refusal, render

router = APIRouter()

STATES = ("queued", "running", "succeeded", "failed", "cancelled")
LIVE_STATES = frozenset({"queued", "running"})
PAGE_SIZE = 25
REFRESH_SECONDS = 3
"""How often a live job's page asks for its state again (console.js)."""


@router.get("/jobs")
async def jobs(request: Request) -> Response:
    session = await current_session(request)
    state = request.query_params.get("state", "")
    state = state if state in STATES else ""
    cursor = request.query_params.get("cursor")
    answer = await platform(request, session).get(
        "/api/jobs", state=state, cursor=cursor, limit=str(PAGE_SIZE)
    )
    next_cursor = answer.body.get("next_cursor") if answer.ok else None
    kept = {"state": state} if state else {}
    return render(
        request,
        "jobs.html",
        status_code=200 if answer.ok else answer.status,
        session=session,
        jobs=answer.body.get("items", []) if answer.ok else [],
        states=STATES,
        state=state,
        first_url=("/console/jobs?" + urlencode(kept)).rstrip("?") if cursor else None,
        next_url="/console/jobs?" + urlencode({**kept, "cursor": next_cursor})
        if next_cursor
        else None,
        error=None if answer.ok else answer.error,
    )


@router.get("/jobs/{job_id}")
async def job(job_id: str, request: Request) -> Response:
    session = await current_session(request)
    return await _job_page(request, session, job_id)


async def _job_page(
    request: Request,
    session: ConsoleSession,
    job_id: str,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    answer = await platform(request, session).get(f"/api/jobs/{quote(job_id, safe='')}")
    if not answer.ok:
        return refusal(request, session, answer)
    body: dict[str, Any] = answer.body
    return render(
        request,
        "job.html",
        status_code=status_code,
        session=session,
        job=body,
        target=", ".join(f"{kind} {name}" for kind, name in body.get("target", {}).items()),
        live=body.get("state") in LIVE_STATES,
        refresh_seconds=REFRESH_SECONDS,
        progress=_progress(body.get("progress")),
        output=_browser_urls(body.get("output")),
        shards=[_browser_urls(s) for s in (body.get("manifest") or {}).get("shards", [])],
        error=error,
    )


@router.post("/jobs/{job_id}/cancel")
async def cancel(job_id: str, request: Request) -> Response:
    """Ask the API to stop the job (at its next stage boundary; a queued one at once)."""
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call(
        "POST", f"/api/jobs/{quote(job_id, safe='')}:cancel"
    )
    if answer.status == 404:
        return refusal(request, session, answer)
    if not answer.ok:
        return await _job_page(
            request, session, job_id, error=answer.error, status_code=answer.status
        )
    return RedirectResponse(f"/console/jobs/{quote(job_id, safe='')}", status_code=303)


def _progress(progress: dict[str, Any] | None) -> dict[str, Any] | None:
    """A batch's progress with its percentage (None: a job of another pipeline)."""
    if progress is None:
        return None
    total = progress.get("rows_total")
    done = int(progress.get("rows_done") or 0)
    failed = int(progress.get("rows_failed") or 0)
    percent = (100 * (done + failed) // total) if total else None
    return {**progress, "rows_done": done, "rows_failed": failed, "percent": percent}


def _browser_urls(item: dict[str, Any] | None) -> dict[str, Any] | None:
    """The API's signed URLs are made for the in-process caller's base URL; the browser
    gets them as paths on this server (the signature, not the host, is the credential)."""
    if item is None:
        return None
    fixed = dict(item)
    for name in ("url", "output_url", "errors_url"):
        value = fixed.get(name)
        if isinstance(value, str) and value.startswith(INTERNAL_BASE + "/"):
            fixed[name] = value[len(INTERNAL_BASE) :]
    return fixed

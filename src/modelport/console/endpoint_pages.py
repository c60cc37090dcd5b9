"""A publisher's endpoints: each one's traffic split, its deployments, a canary's
progress and gates, a shadow's comparison, traffic per version from the prediction
log, its monitor's drift and quality per version, its SLOs with the error budget left
and the burn rates, its degradation policy under load (set or cleared by a form), and
the rollback button."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import RedirectResponse, Response

from modelport.console.calls import Answer, PlatformAPI
from modelport.console.charts import split_bar
from modelport.console.sessions import ConsoleSession
from modelport.console.web import checked_form, current_session, platform, refusal, render

router = APIRouter()

LISTED_STATES = 50
"""Endpoints whose active deployment the list page asks for (the rest show no state)."""

PRIORITIES = ("interactive", "batch", "offline")
"""The priorities the degradation form offers (the runtime's ``Priority``, kept in step by a test)."""
TIERS = ("free", "standard", "premium")
"""The tenant tiers the degradation form offers (tenancy's ``Tier``, kept in step by a test)."""

GATE_NAMES = {
    "requests": "Candidate requests this step",
    "error_rate": "Candidate error rate",
    "p99_latency_ms": "Candidate p99 latency (ms)",
}


def _path(name: str) -> str:
    return f"/api/endpoints/{quote(name, safe='')}"


def traffic_parts(traffic: list[dict[str, Any]]) -> list[tuple[str, int]]:
    """An endpoint's ``traffic`` (``GET /api/endpoints``) as split-bar parts."""
    return [(f"{t['model']}:{t['version']}", int(t["weight"])) for t in traffic]


def duration(seconds: float) -> str:
    """Seconds as people read them: ``45 s``, ``3 min 5 s``, ``2 h 10 min``."""
    whole = max(int(seconds), 0)
    hours, rest = divmod(whole, 3600)
    minutes, secs = divmod(rest, 60)
    if hours:
        return f"{hours} h {minutes} min"
    if minutes:
        return f"{minutes} min {secs} s"
    return f"{secs} s"


def canary_view(deployment: dict[str, Any], now: datetime) -> dict[str, Any] | None:
    """Where a canary deployment's rollout stands, as the page shows it; None for a
    manual one."""
    rollout = deployment.get("rollout") or {}
    if rollout.get("policy") != "canary":
        return None
    steps = [int(s) for s in rollout.get("steps", [])]
    step = int(rollout.get("step", 0))
    versions = deployment.get("versions", [])
    candidate = versions[1] if len(versions) > 1 else None
    elapsed = None
    since = rollout.get("since")
    if since:
        elapsed = (now - moment(since)).total_seconds()
    interval = float(rollout.get("interval_seconds") or 0)
    gates = [
        {**gate, "label": GATE_NAMES.get(str(gate.get("name")), str(gate.get("name")))}
        for gate in rollout.get("gates", [])
    ]
    return {
        "status": rollout.get("status"),
        "reason": rollout.get("reason") or "",
        "step_number": min(step + 1, len(steps)),
        "steps": steps,
        "share": candidate["weight"] if candidate else None,
        "candidate": f"{candidate['model']}:{candidate['version']}" if candidate else None,
        "since": since,
        "elapsed": duration(elapsed) if elapsed is not None else None,
        "interval": duration(interval),
        "remaining": duration(interval - elapsed) if elapsed is not None else None,
        "gates": gates,
        "min_requests": rollout.get("min_requests"),
    }


@router.get("/endpoints")
async def endpoints(request: Request) -> Response:
    """The signed-in tenant's endpoints, each with its traffic split and state."""
    session = await current_session(request)
    api = platform(request, session)
    found = await api.get("/api/endpoints")
    if not found.ok:
        return refusal(request, session, found)
    items = found.body.get("items", [])

    async def row(index: int, item: dict[str, Any]) -> dict[str, Any]:
        active = item.get("active_deployment")
        state, rollout = "no deployment", None
        if active is not None and index < LISTED_STATES:
            answer = await api.get(f"{_path(item['name'])}/deployments/{int(active)}")
            if answer.ok:
                state, rollout = answer.body["state"], answer.body["rollout"]
        return {"endpoint": item, "state": state, "rollout": rollout}

    # The active deployments are read at once, not one after another.
    rows = await asyncio.gather(*(row(i, item) for i, item in enumerate(items)))
    return render(request, "endpoints.html", session=session, rows=rows)


@router.get("/endpoints/{name}")
async def endpoint(name: str, request: Request) -> Response:
    session = await current_session(request)
    return await _endpoint_page(request, session, name)


async def _endpoint_page(
    request: Request,
    session: ConsoleSession,
    name: str,
    *,
    error: str | None = None,
    status_code: int = 200,
) -> Response:
    api = platform(request, session)
    found = await api.get(_path(name))
    if not found.ok:
        return refusal(request, session, found)
    body = found.body
    listed = await api.get(f"{_path(name)}/deployments")
    deployments = listed.body.get("items", []) if listed.ok else []
    active = next((d for d in deployments if d["id"] == body.get("active_deployment")), None)
    (traffic, outcomes), drift, slos, degradation = await asyncio.gather(
        _monitoring(api, name), _drift(api, name), _slos(api, name), _degradation(api, name)
    )
    rollback_open = _rollback_open(body)
    return render(
        request,
        "endpoint.html",
        status_code=status_code,
        session=session,
        endpoint=body,
        split=split_bar(traffic_parts(body.get("traffic", []))),
        deployments=deployments,
        active=active,
        canary=canary_view(active, datetime.now(UTC)) if active else None,
        shadow=(active or {}).get("shadow"),
        traffic=traffic,
        outcomes=outcomes,
        drift=drift,
        slos=slos,
        rollback_open=rollback_open,
        degradation=degradation,
        priorities=PRIORITIES,
        tiers=TIERS,
        rolled=request.query_params.get("rolled"),
        error=error or (None if listed.ok else listed.error),
    )


async def _monitoring(api: PlatformAPI, name: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The prediction log's traffic per version (last 24 hours) and the outcome report;
    an unavailable one shows as its error."""
    traffic = await api.get(f"{_path(name)}/traffic")
    outcomes = await api.get(f"{_path(name)}/outcomes")
    shown = traffic.body if traffic.ok else {"error": traffic.error, "versions": []}
    graded = outcomes.body.get("versions", []) if outcomes.ok else []
    return shown, [v for v in graded if v.get("outcomes")]


async def _drift(api: PlatformAPI, name: str) -> dict[str, Any]:
    """The monitor's report (``GET .../monitoring``), computed now; an unavailable one
    shows as its error."""
    report = await api.get(f"{_path(name)}/monitoring")
    if not report.ok:
        return {"error": report.error, "versions": []}
    body: dict[str, Any] = report.body
    return body


async def _slos(api: PlatformAPI, name: str) -> dict[str, Any]:
    """The endpoint's SLOs where they stand now (``GET .../slos/status``), with the
    burn-rate windows the table's columns name."""
    found = await api.get(f"{_path(name)}/slos/status")
    if not found.ok:
        return {"error": found.error, "items": [], "windows": []}
    items: list[dict[str, Any]] = found.body.get("items", [])
    measured = next((s for s in items if s.get("measured")), {})
    windows = [b["window"] for b in measured.get("burn_rates", [])]
    return {**found.body, "windows": windows}


async def _degradation(api: PlatformAPI, name: str) -> dict[str, Any]:
    """The endpoint's degradation policy (``policy`` None: the installation's applies);
    an unavailable one shows as its error."""
    found = await api.get(f"{_path(name)}/degradation")
    if not found.ok:
        return {"error": found.error, "policy": None}
    return {"policy": found.body.get("policy")}


def degradation_body(form: dict[str, str], ticked: list[tuple[str, str]]) -> dict[str, Any]:
    """The API's policy from the form: a blank field, or a group with nothing ticked,
    is left out (the installation's part applies); the API judges the values."""
    body: dict[str, Any] = {"enabled": form.get("enabled") == "on"}
    if wait := form.get("queue_wait_seconds", "").strip():
        body["queue_wait_seconds"] = wait
    if fallback := form.get("fallback", "").strip():
        body["fallback"] = fallback
    for group in ("priorities", "tiers"):
        chosen = [value for key, value in ticked if key == group]
        if chosen:
            body[group] = chosen
    return body


def moment(text: str) -> datetime:
    """An API time (ISO 8601); one without a zone is UTC."""
    found = datetime.fromisoformat(text)
    return found if found.tzinfo is not None else found.replace(tzinfo=UTC)


def _rollback_open(endpoint: dict[str, Any]) -> bool:
    until = endpoint.get("rollback_until")
    if endpoint.get("previous_deployment") is None or not until:
        return False
    return moment(until) > datetime.now(UTC)


@router.post("/endpoints/{name}/deployments/{deployment}/rollback")
async def rollback(name: str, deployment: int, request: Request) -> Response:
    """Restore the deployment the active one replaced (the API decides who may)."""
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call(
        "POST", f"{_path(name)}/deployments/{deployment}:rollback"
    )
    if not answer.ok:
        return await _endpoint_page(
            request, session, name, error=answer.error, status_code=answer.status
        )
    return RedirectResponse(
        f"/console/endpoints/{quote(name, safe='')}?rolled={deployment}", status_code=303
    )


@router.post("/endpoints/{name}/degradation")
async def set_degradation(name: str, request: Request) -> Response:
    """Replace the endpoint's degradation policy (the API decides who may, and which
    values it takes)."""
    session = await current_session(request)
    form = await checked_form(request, session)
    raw = await request.form()
    ticked = [(k, v) for k, v in raw.multi_items() if isinstance(v, str)]
    answer = await platform(request, session).call(
        "PUT", f"{_path(name)}/degradation", json=degradation_body(form, ticked)
    )
    return await _then_endpoint(request, session, name, answer)


@router.post("/endpoints/{name}/degradation/clear")
async def clear_degradation(name: str, request: Request) -> Response:
    """Back to the installation's policy."""
    session = await current_session(request)
    await checked_form(request, session)
    answer = await platform(request, session).call("DELETE", f"{_path(name)}/degradation")
    return await _then_endpoint(request, session, name, answer)


async def _then_endpoint(
    request: Request, session: ConsoleSession, name: str, answer: Answer
) -> Response:
    if not answer.ok:
        return await _endpoint_page(
            request, session, name, error=answer.error, status_code=answer.status
        )
    return RedirectResponse(
        f"/console/endpoints/{quote(name, safe='')}#degradation", status_code=303
    )

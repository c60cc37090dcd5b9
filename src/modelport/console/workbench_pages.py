"""A publisher's workbench for one of its models: the versions with their lifecycle
state, aliases and validation, each version's calls and revenue by day in a period,
the drift of its versions on the endpoints the publisher may read, and a version's
validation report.

Drift is shown for endpoints whose monitoring the API answers the publisher: its own
tenant's. Another tenant's endpoint serving the version is that tenant's (its
prediction log holds that tenant's callers' data), so it is not listed.

These pages are the owning tenant's (and the platform admin's): a model may be public,
but its workbench opens only for whom the API answers ``GET /api/tenants/{owner}``;
anyone else gets that answer, 404 ``tenant_not_found``.
"""

from __future__ import annotations

import asyncio
from typing import Any
from urllib.parse import quote

from fastapi import APIRouter
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.calls import Answer, PlatformAPI
from modelport.console.charts import dollars
from modelport.console.earnings import by_version, revenue_chart, total
from modelport.console.sessions import ConsoleSession
from modelport.console.web import current_session, platform, refusal, render

router = APIRouter()

NOT_VALIDATED = "validation_not_found"
DRIFT_ENDPOINTS = 10
"""Endpoints serving the model whose monitoring one workbench page asks for."""


def _ref(owner: str, name: str) -> str:
    return f"{quote(owner, safe='')}/{quote(name, safe='')}"


async def _publisher_gate(
    request: Request, session: ConsoleSession, owner: str, name: str
) -> tuple[PlatformAPI, Answer | Response]:
    """The API as the session, and the model (its JSON answer), or the page refusing a
    tenant's workbench to another tenant, or a model the API does not show."""
    api = platform(request, session)
    tenant = await api.get(f"/api/tenants/{quote(owner, safe='')}")
    if not tenant.ok:
        return api, refusal(request, session, tenant)
    model = await api.get(f"/api/models/{_ref(owner, name)}")
    if not model.ok:
        return api, refusal(request, session, model)
    return api, model


def _validation_status(answer: Answer) -> str:
    if answer.ok:
        return "passed" if answer.body.get("passed") else "failed"
    if isinstance(answer.body, dict) and answer.body.get("code") == NOT_VALIDATED:
        return "not validated"
    return "unknown"


@router.get("/publisher/models/{owner}/{name}")
async def model_workbench(owner: str, name: str, request: Request) -> Response:
    session = await current_session(request)
    api, model = await _publisher_gate(request, session, owner, name)
    if isinstance(model, Response):
        return model
    ref = _ref(owner, name)
    period = request.query_params.get("period") or None
    versions, aliases, revenue = await asyncio.gather(
        api.get(f"/api/models/{ref}/versions"),
        api.get(f"/api/models/{ref}/aliases"),
        api.get("/api/revenue", publisher=owner, model=f"{owner}/{name}", period=period),
    )
    version_items: list[dict[str, Any]] = versions.body.get("items", []) if versions.ok else []
    reports = await asyncio.gather(
        *(
            api.get(f"/api/models/{ref}/versions/{quote(v['version'], safe='')}/validation")
            for v in version_items
        )
    )
    aliases_of: dict[str, list[str]] = {}
    for alias in aliases.body.get("items", []) if aliases.ok else []:
        aliases_of.setdefault(str(alias["version"]), []).append(str(alias["alias"]))
    daily = by_version(revenue.body.get("items", []) if revenue.ok else [])
    rows = [
        {
            **v,
            "aliases": sorted(aliases_of.get(v["version"], [])),
            "validation": _validation_status(report),
            "earned": total(daily.get(v["version"], []), v["version"]),
            "days": daily.get(v["version"], []),
            "chart": revenue_chart(daily.get(v["version"], [])),
        }
        for v, report in zip(version_items, reports, strict=True)
    ]
    drift = await _drift(api, f"{owner}/{name}")
    errors = [a.error for a in (versions, revenue) if not a.ok]
    return render(
        request,
        "workbench_model.html",
        status_code=400 if revenue.status == 400 else 200,
        session=session,
        model=model.body,
        period=revenue.body.get("period") if revenue.ok else (period or ""),
        versions=rows[::-1],
        totals=total(day for days in daily.values() for day in days),
        drift=drift,
        errors=errors,
        dollars=dollars,
    )


def serves(endpoint: dict[str, Any], model: str) -> bool:
    """Whether ``endpoint`` (``GET /api/endpoints``) routes traffic or a shadow to ``model``."""
    refs = [*endpoint.get("traffic", []), endpoint.get("shadow") or {}]
    return any(ref.get("model") == model for ref in refs)


async def _drift(api: PlatformAPI, model: str) -> list[dict[str, Any]]:
    """Per endpoint the session may read that serves ``model``: its monitor's report on
    ``model``'s versions (drifted features named), or the API's error."""
    listed = await api.get("/api/endpoints")
    if not listed.ok:
        return []
    names = [e["name"] for e in listed.body.get("items", []) if serves(e, model)]
    names = names[:DRIFT_ENDPOINTS]
    reports = await asyncio.gather(
        *(api.get(f"/api/endpoints/{quote(n, safe='')}/monitoring") for n in names)
    )
    found = []
    for endpoint, report in zip(names, reports, strict=True):
        if not report.ok:
            found.append({"endpoint": endpoint, "error": report.error, "versions": []})
            continue
        versions = [
            {
                **v,
                "drifted": [d["feature"] for d in (*v["inputs"], *v["outputs"]) if d["drifted"]],
            }
            for v in report.body.get("versions", [])
            if v.get("model") == model
        ]
        found.append({"endpoint": endpoint, "versions": versions})
    return found


@router.get("/publisher/models/{owner}/{name}/versions/{version}/validation")
async def validation_report(owner: str, name: str, version: str, request: Request) -> Response:
    session = await current_session(request)
    api, model = await _publisher_gate(request, session, owner, name)
    if isinstance(model, Response):
        return model
    answer = await api.get(
        f"/api/models/{_ref(owner, name)}/versions/{quote(version, safe='')}/validation"
    )
    not_yet = isinstance(answer.body, dict) and answer.body.get("code") == NOT_VALIDATED
    if not answer.ok and not not_yet:
        return refusal(request, session, answer)
    report: dict[str, Any] = answer.body.get("report", {}) if answer.ok else {}
    return render(
        request,
        "workbench_validation.html",
        session=session,
        model=model.body,
        version=version,
        validated=answer.body if answer.ok else None,
        report=report,
        sandbox=report.get("sandbox") or {},
        timings=report.get("timings_ms") or {},
        limits=report.get("limits") or {},
    )

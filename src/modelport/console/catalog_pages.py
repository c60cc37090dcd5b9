"""The catalog, a model's page, and its playground."""

from __future__ import annotations

import asyncio
import json
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote, urlencode

from fastapi import APIRouter
from markdown_it import MarkdownIt
from markupsafe import Markup
from starlette.requests import Request
from starlette.responses import Response

from modelport.console.calls import PlatformAPI
from modelport.console.charts import dollars
from modelport.console.lineage_graph import MAX_NODES, LineageGraph, lineage_graph
from modelport.console.playground import body_rows, form_fields, request_body
from modelport.console.pricing import price_per_call_micros, rules_at, scheduled
from modelport.console.routed_calls import (
    ROUTE_PREFIX,
    route_form,
    route_preferences,
    route_task,
    served_by,
)
from modelport.console.sessions import ConsoleSession
from modelport.console.snippets import snippets
from modelport.console.web import checked_form, current_session, platform, render
from modelport.errors import InvalidInput

router = APIRouter()

FILTERS = ("q", "task", "format", "license", "owner", "tag", "price")
FACET_LABELS = (("task", "Task"), ("format", "Format"), ("license", "License"), ("price", "Price"))
PAGE_SIZE = 24

# Raw HTML off ("js-default"): a card's HTML is shown as text, and links are limited to
# safe schemes (no javascript:), so a publisher's description cannot run in a visitor's page.
_markdown = MarkdownIt("js-default")


def card_html(text: str) -> Markup:
    """A model card (markdown) as safe HTML."""
    # html off: the renderer escaped everything a publisher wrote
    return Markup(_markdown.render(text))


GENERATIVE_TASKS = frozenset(
    {
        "text-generation",
        "text2text-generation",
        "chat",
        "conversational",
        "completion",
        "completions",
    }
)
GENERATIVE_FORMATS = frozenset({"transformers", "toy-generative"})


def is_generative(task: str | None, fmt: str | None) -> bool:
    """Whether the OpenAI-compatible API (``/v1``) serves this model: a generative task
    or format. (``/v1/models`` lists every callable model, tensor ones too, and reads
    the whole catalog: too slow for a page.)"""
    return (task or "") in GENERATIVE_TASKS or (fmt or "") in GENERATIVE_FORMATS


@router.get("/")
async def home(request: Request) -> Response:
    await current_session(request)
    return Response(status_code=303, headers={"Location": "/console/models"})


@router.get("/models")
async def catalog(request: Request) -> Response:
    session = await current_session(request)
    filters = {name: request.query_params.get(name, "").strip() for name in FILTERS}
    cursor = request.query_params.get("cursor")
    answer = await platform(request, session).get(
        "/api/models", **filters, cursor=cursor, limit=str(PAGE_SIZE)
    )
    items = answer.body.get("items", []) if answer.ok else []
    next_cursor = answer.body.get("next_cursor") if answer.ok else None
    kept = {k: v for k, v in filters.items() if v}
    next_url = (
        "/console/models?" + urlencode({**kept, "cursor": next_cursor}) if next_cursor else None
    )
    found = answer.body if answer.ok and isinstance(answer.body, dict) else {}
    return render(
        request,
        "catalog.html",
        status_code=200 if answer.ok else answer.status,
        session=session,
        filters=filters,
        items=items,
        next_url=next_url,
        first_url="/console/models?" + urlencode(kept) if cursor else None,
        facets=facet_links(kept, found.get("facets") or {}),
        total=found.get("total"),
        suggestions=[
            (text, "/console/models?" + urlencode({**kept, "q": text}))
            for text in found.get("suggestions") or []
        ],
        error=None if answer.ok else answer.error,
    )


def facet_links(kept: dict[str, str], facets: dict[str, Any]) -> list[dict[str, Any]]:
    """Each facet of a search answer as links: a value narrows the search to it (the
    chosen one widens it back), with the API's count beside it."""
    out = []
    for name, label in FACET_LABELS:
        values = []
        for entry in facets.get(name) or []:
            value = str(entry.get("value", ""))
            chosen = kept.get(name) == value
            params = {k: v for k, v in kept.items() if k != name}
            if not chosen:
                params[name] = value
            values.append(
                {
                    "value": value,
                    "count": entry.get("count", 0),
                    "chosen": chosen,
                    "url": "/console/models?" + urlencode(params),
                }
            )
        if values:
            out.append({"name": name, "label": label, "values": values})
    return out


async def _model_context(
    request: Request, session: ConsoleSession, owner: str, name: str
) -> dict[str, Any] | Response:
    """Everything the model page shows, from the API; a not-found or forbidden model is
    the API's answer, shown as such."""
    api = platform(request, session)
    ref = f"{quote(owner, safe='')}/{quote(name, safe='')}"
    model = await api.get(f"/api/models/{ref}")
    if not model.ok:
        return render(
            request,
            "refused.html",
            status_code=model.status,
            code=(model.body or {}).get("code", "") if isinstance(model.body, dict) else "",
            message=model.error,
            session=session,
        )
    versions, aliases, evaluations = await asyncio.gather(
        api.get(f"/api/models/{ref}/versions"),
        api.get(f"/api/models/{ref}/aliases"),
        api.get(f"/api/models/{ref}/evaluations"),
    )
    version_items = versions.body.get("items", []) if versions.ok else []
    alias_items = aliases.body.get("items", []) if aliases.ok else []
    chosen = request.query_params.get("version") or (
        version_items[-1]["version"] if version_items else None
    )
    detail: dict[str, Any] = {}
    if chosen:
        found = await api.get(f"/api/models/{ref}/versions/{quote(chosen, safe='')}")
        detail = found.body if found.ok else {}
    manifest = detail.get("manifest") or {}
    lineage = await _lineage(api, ref, chosen, detail) if chosen else None
    examples = manifest.get("examples") or []
    example = examples[0] if examples else None
    now = datetime.now(UTC)
    prices, later = (
        await asyncio.gather(
            rules_at(api, f"{owner}/{name}", chosen, now),
            scheduled(api, f"{owner}/{name}", chosen, now),
        )
        if chosen
        else ([], [])
    )
    generative = is_generative(model.body.get("task"), detail.get("format"))
    base = str(request.base_url).rstrip("/")
    return {
        "model": model.body,
        "ref": f"{owner}/{name}",
        "url": f"/console/models/{ref}",
        "card": card_html(
            "\n\n".join(
                t for t in (model.body.get("description"), manifest.get("description")) if t
            )
        ),
        "versions": version_items,
        "aliases": _aliases_by_version(alias_items),
        "chosen": chosen,
        "manifest": manifest,
        "inputs": manifest.get("inputs", []),
        "outputs": manifest.get("outputs", []),
        "prices": prices,
        "scheduled_prices": later,
        "per_call": price_per_call_micros(prices),
        "snippets": snippets(
            base, f"{owner}/{name}", manifest.get("inputs", []), example, generative=generative
        ),
        "generative": generative,
        "fields": form_fields(manifest.get("inputs", []), example),
        "example": example,
        "dollars": dollars,
        "lineage": lineage,
        "evaluations": evaluations.body.get("items", []) if evaluations.ok else [],
        "route_task": route_task(model.body.get("task")),
        "route": route_form(None),
    }


def _lineage_path(model: str, version: str) -> str:
    owner, _, name = model.partition("/")
    ref = f"{quote(owner, safe='')}/{quote(name, safe='')}"
    return f"/api/models/{ref}/versions/{quote(version, safe='')}/lineage"


async def _lineage(
    api: PlatformAPI, ref: str, version: str, detail: dict[str, Any]
) -> LineageGraph | None:
    """The version's ancestors as the lineage API answers the viewer, with each shown
    ancestor's own direct parents (its lineage's depth 1, as the viewer sees it): the
    API names depth, not edges. None when the API refused."""
    answer = await api.get(_lineage_path(ref, version))
    if not answer.ok or not isinstance(answer.body, dict):
        return None
    ancestors = [a for a in answer.body.get("ancestors", []) if isinstance(a, dict)]
    drawn = sorted(ancestors, key=lambda a: int(a.get("depth") or 0))[:MAX_NODES]
    theirs = await asyncio.gather(
        *(api.get(_lineage_path(str(a["model"]), str(a["version"]))) for a in drawn)
    )
    parents = {f"{ref}:{version}": [a for a in ancestors if a.get("depth") == 1]}
    for ancestor, their in zip(drawn, theirs, strict=True):
        if their.ok and isinstance(their.body, dict):
            parents[f"{ancestor['model']}:{ancestor['version']}"] = [
                a for a in their.body.get("ancestors", []) if a.get("depth") == 1
            ]
    license = str((detail.get("manifest") or {}).get("license") or "")
    licences = [str(x) for x in answer.body.get("ancestor_licenses", [])]
    return lineage_graph(ref, version, license, ancestors, parents, licences)


def _aliases_by_version(items: list[dict[str, Any]]) -> dict[str, list[str]]:
    found: dict[str, list[str]] = {}
    for item in items:
        found.setdefault(item["version"], []).append(item["alias"])
    return found


@router.get("/models/{owner}/{name}")
async def model_page(owner: str, name: str, request: Request) -> Response:
    session = await current_session(request)
    context = await _model_context(request, session, owner, name)
    if isinstance(context, Response):
        return context
    return render(request, "model.html", session=session, result=None, **context)


@router.post("/models/{owner}/{name}/playground")
async def playground(owner: str, name: str, request: Request) -> Response:
    """Call the chosen version on ``/v2`` with what the form holds, as the signed-in key."""
    session = await current_session(request)
    form = await checked_form(request, session)
    api = platform(request, session)
    context = await _model_context(request, session, owner, name)
    if isinstance(context, Response):
        return context
    fields = form_fields(context["inputs"], context["example"], form)
    context["fields"] = fields
    typed = route_form(form)
    context["route"] = typed
    task = context["route_task"]
    result: dict[str, Any] = {}
    status = 200
    try:
        body = request_body(fields)
        if typed.on and task:
            body["parameters"] = {"route": route_preferences(typed)}
    except InvalidInput as error:
        result = {"error": error.message, "code": error.code}
        status = 400
    else:
        version = context["chosen"]
        if typed.on and task:
            path = f"/v2/models/{quote(ROUTE_PREFIX + task, safe='')}"
        else:
            path = f"/v2/models/{quote(owner, safe='')}/{quote(name, safe='')}"
            if version:
                path += f"/versions/{quote(version, safe='')}"
        answer = await api.call("POST", path + "/infer", json=body)
        rows = body_rows(fields, body)
        result = {
            "status": answer.status,
            "latency_ms": round(answer.seconds * 1000, 1),
            "price": price_per_call_micros(context["prices"], rows),
        }
        served = served_by(answer.body) if answer.ok and typed.on and task else None
        if served is not None:
            # The version the router chose is billed at its own price: quote that one.
            rules = await rules_at(api, served[0], served[1], datetime.now(UTC))
            result["price"] = price_per_call_micros(rules, rows)
            result["served"] = {"model": served[0], "version": served[1]}
        if answer.ok:
            result["outputs"] = json.dumps(answer.body.get("outputs", []), indent=2)
        else:
            result["error"] = answer.error
            status = answer.status if answer.status >= 400 else 502
    return render(
        request, "model.html", status_code=status, session=session, result=result, **context
    )

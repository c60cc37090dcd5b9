"""/api/assets: datasets and prompt templates in one catalog, listed and searched as the
caller may read them (``assets.search``)."""

from __future__ import annotations

from typing import Any, Literal

from fastapi import APIRouter, Query, Request

from modelport.api import deps
from modelport.api.auth import CurrentPrincipal
from modelport.assets.search import AssetEntry

router = APIRouter(tags=["assets"])


def asset_json(entry: AssetEntry) -> dict[str, Any]:
    return {
        "kind": entry.kind,
        "owner": entry.owner,
        "name": entry.name,
        "visibility": entry.visibility,
        "description": entry.description,
        "latest": None
        if entry.version is None
        else {"version": entry.version, "task": entry.task, "license": entry.license},
    }


@router.get("/assets")
def search_assets(
    assets: deps.Assets,
    request: Request,
    principal: CurrentPrincipal,
    q: str | None = Query(default=None, max_length=256),
    kind: Literal["dataset", "template"] | None = None,
    task: str | None = Query(default=None, max_length=64),
    license: str | None = Query(default=None, max_length=256),
    limit: int = 50,
    cursor: str | None = Query(default=None, max_length=32),
) -> dict[str, Any]:
    """The datasets and templates the caller may read, matching ``q`` (ranked: a name
    first) and the filters, with the total and the ``kind``, ``task`` and ``license``
    facets (each counted under every filter but its own)."""
    page = assets.search(
        principal, q=q, kind=kind, task=task, license=license, limit=limit, cursor=cursor
    )
    return {
        "items": [asset_json(e) for e in page.items],
        "next_cursor": page.next_cursor,
        "total": page.total,
        "facets": {
            facet: [{"value": v, "count": n} for v, n in counts]
            for facet, counts in page.facets.items()
        },
    }
